"""``search.algorithm: evolution`` as a Ray Tune searcher: regularized evolution over orders
with budget-keeping mutations (``spaces.mutations``), for any task and several spaces."""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import (
    Variant,
    variant_of,
)
from sublayer_search.search.searchers.base import Stateful, score
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.cost import units
from sublayer_search.spaces.features import feature_matrix
from sublayer_search.spaces.mutations import moves

__all__ = ["EvolutionSearcher"]


class EvolutionSearcher(Stateful):
    """Regularized evolution over orders (Real et al., 2019, "aging evolution").

    The first ``population`` trials are drawn from the space's candidates (in a
    seeded random order). Afterwards each suggestion takes a tournament of
    ``sample_size`` from the ``population`` most recent finished trials, mutates the
    best with a budget-keeping mutation (swap two neighbouring different sublayers, or
    ``f`` <-> ``ss`` where an ``f`` costs two ``s``: ``f_units``), and retries until the
    child is an order never tried before. A child is its parent's variant with another
    order (it keeps the ``side``, encoder or decoder of a translation model); parents of
    several spaces keep their own budget.
    Trials that failed or diverged do not enter the population. Every trial trains with
    ``seed``.

    With ``domain`` (the orders of a recorded table, :mod:`search.recorded.oracle`) a
    mutation is the untried domain order nearest the parent in standardised order
    features (ties at random): a sparse table holds almost no true neighbours. With a
    ``prior`` (``search.prior``, :mod:`.prior`) the first population is drawn best prior
    first (ties in the seeded random order).
    """

    def __init__(self, candidates: Sequence[Candidate], *, num_samples: int, population: int = 8,
                 sample_size: int = 3, seed: int = 0, trial_seed: int = 0,
                 metric: str | None = None, mode: str | None = "min",
                 max_attempts: int = 200, f_units: float = 2.0, c_units: float = 1.0,
                 domain: Sequence[str] | None = None, prior: OrderPrior | None = None) -> None:
        super().__init__(metric=metric, mode=mode)
        self.rng = random.Random(seed)
        drawn = self.rng.sample(list(candidates), len(candidates))
        if prior is not None and prior.weight > 0 and drawn:
            at = prior.predict([c.order for c in drawn], f_units=f_units, c_units=c_units)
            drawn = [drawn[i] for i in sorted(range(len(drawn)), key=lambda i: at[i])]
        self._initial = deque(drawn)
        self.num_samples = num_samples
        self.population_size = population
        self.sample_size = sample_size
        self.trial_seed = trial_seed
        self.max_attempts = max_attempts
        self.units = (f_units, c_units)
        self.tried: set[str] = set()
        self.population: deque[tuple[str, float, str, Variant]] = deque(maxlen=population)
        self.live: dict[str, Trial] = {}
        self.suggested = 0
        self.domain = list(dict.fromkeys(domain)) if domain is not None else None
        if self.domain:
            raw = np.array(feature_matrix(self.domain, f_units=f_units, c_units=c_units))
            self._scale = (raw.mean(axis=0), np.where(raw.std(axis=0) > 0, raw.std(axis=0), 1.0))
            self._domain_x = (raw - self._scale[0]) / self._scale[1]

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (order, seed): never propose it."""
        if seed == self.trial_seed:
            self.tried.add(order)

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Earlier results: never retrained; the best ``population`` of them are the first
        population (oldest first, so aging removes the worst first)."""
        scored = []
        for obs in observations:
            self.tried.add(obs.order)
            loss = score({"v": obs.value}, "v", self.mode)
            if loss is not None:
                variant = obs.variant or Variant(order=obs.order)
                scored.append((obs.order, loss, obs.name, variant))
        for entry in sorted(scored, key=lambda e: -e[1])[-self.population_size:]:
            self.population.append(entry)

    def _trial(self, variant: Variant, name: str, space: str,
               params: dict[str, Any]) -> Trial:
        self.tried.add(variant.order)
        self.suggested += 1
        return Trial(name=f"{name}@seed{self.trial_seed}", candidate=name, variant=variant,
                     seed=self.trial_seed, space=space, params=params)

    def _nearest(self, parent: str) -> str | None:
        assert self.domain is not None
        free = [i for i, o in enumerate(self.domain) if o not in self.tried]
        if not free:
            return None
        x = (np.array(feature_matrix([parent], f_units=self.units[0], c_units=self.units[1])[0])
             - self._scale[0]) / self._scale[1]
        dist = np.linalg.norm(self._domain_x[free] - x, axis=1)
        return self.domain[self.rng.choice([i for i, d in zip(free, dist, strict=True)
                                            if d <= dist.min() + 1e-9])]

    def _mutant(self, parent: str) -> str | None:
        if self.domain is not None:
            return self._nearest(parent)
        f_units, c_units = self.units
        budget = units(parent, f_units=f_units, c_units=c_units)
        child = parent
        for _ in range(self.max_attempts):
            options = [o for o in moves(child)
                       if math.isclose(units(o, f_units=f_units, c_units=c_units), budget)]
            if not options:
                return None
            child = self.rng.choice(options)
            if child not in self.tried:
                return child
        return None  # the neighbourhood is exhausted

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self.suggested >= self.num_samples:
            return Searcher.FINISHED
        done = len(self.population)
        if done < self.population_size or not self.population:
            while self._initial:
                cand = self._initial.popleft()
                if cand.order not in self.tried:
                    cfg = self._trial(variant_of(cand), cand.name, cand.space,
                                      dict(cand.params))
                    self.live[trial_id] = cfg
                    return {"trial": cfg}
            if not self.population:
                # wait for the first results; with none to come, the search is over
                return None if self.live else Searcher.FINISHED
        contenders = self.rng.sample(list(self.population), min(self.sample_size, len(self.population)))
        winner = min(contenders, key=lambda c: c[1])
        # a parent whose neighbourhood is exhausted gives way to the next best of the population
        for parent_order, _, parent_name, parent in [winner, *sorted(
                (p for p in self.population if p is not winner), key=lambda c: c[1])]:
            child = self._mutant(parent_order)
            if child is not None:
                cfg = self._trial(parent.with_order(child), f"evo{self.suggested:03d}",
                                  "evolution", {"parent": parent_name})
                self.live[trial_id] = cfg
                return {"trial": cfg}
        return Searcher.FINISHED  # every parent's neighbourhood is exhausted

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        trial = self.live.pop(trial_id, None)
        loss = None if error else score(result, self.metric, self.mode)
        if trial is not None and loss is not None:
            self.population.append((trial.order, loss, trial.candidate, trial.variant))
