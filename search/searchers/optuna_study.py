"""Optuna searchers: a study (ask/tell) over the candidates, one or several objectives."""

from __future__ import annotations

import itertools
import math
import random
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any

import optuna
from ray.tune.search import Searcher

from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import (
    Identity,
    VariantCandidate,
    plain_identity,
    variant_key,
    variant_of,
)
from sublayer_search.search.searchers.base import Stateful
from sublayer_search.search.searchers.settings import STATIC_OBJECTIVES
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.records import direction
from sublayer_search.spaces.registry import integer_axis

__all__ = ["MAX_ASKS", "OptunaTrials", "objective_mode"]

MAX_ASKS = 25
"""Asks of the study per suggestion before an allowed candidate is enqueued for it."""


def _guidance(cand: Candidate) -> str:
    """A candidate's cross-layer guidance label (``none`` unless guided): a choice's name."""
    return variant_of(cand).label


def _base(cand: Candidate) -> str:
    """The candidate's name before the guidance axis (``sandwich4_1`` for ``sandwich4_1+hg-kq``)."""
    return cand.stem if isinstance(cand, VariantCandidate) else cand.name


class PicklableNSGAII(optuna.samplers.NSGAIISampler):
    """Optuna's NSGA-II, picklable on every Optuna release: Tune saves a searcher with
    pickle and Ray sends it to the trial runner with cloudpickle, and since Optuna 5.1 the
    GA samplers hold a thread lock. A lock is not state: it is left out and made anew."""

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if "_thread_lock" in state:
            state["_thread_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if "_thread_lock" in state:
            self._thread_lock = threading.Lock()

class _CandidateSpace:
    """Optuna define-by-run space (a class, so the searcher pickles for ``--resume``)."""

    def __init__(self, by_value: dict[int, Candidate] | None, names: list[str],
                 labels: list[str] | None = None, *, axis: str | None = None) -> None:
        self.ks = sorted(by_value) if by_value is not None else None
        """The values of the integer axis (``None``: a categorical of candidate names)."""
        self.axis = axis
        self.names = names
        self.labels = labels or ["none"]
        """Guidance labels (``model.guidance`` as a sweep axis): a categorical of its own."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("axis", "k" if state.get("ks") is not None else None)  # saved before
        self.__dict__.update(state)

    def distribution(self) -> tuple[str, optuna.distributions.BaseDistribution]:
        """The one parameter: the axis (an integer range, or a categorical of its values)
        or ``candidate``."""
        if self.ks is not None and self.axis is not None:
            if self.ks == list(range(self.ks[0], self.ks[-1] + 1)):
                return self.axis, optuna.distributions.IntDistribution(self.ks[0], self.ks[-1])
            return self.axis, optuna.distributions.CategoricalDistribution(self.ks)
        return "candidate", optuna.distributions.CategoricalDistribution(self.names)

    def __call__(self, trial: optuna.Trial) -> Any:
        name, dist = self.distribution()
        if len(self.labels) > 1:  # guidance: the study's trial.params has it
            trial.suggest_categorical("guidance", self.labels)
        if isinstance(dist, optuna.distributions.IntDistribution):
            return trial.suggest_int(name, dist.low, dist.high)
        assert isinstance(dist, optuna.distributions.CategoricalDistribution)
        return trial.suggest_categorical(name, list(dist.choices))


def objective_mode(name: str) -> str:
    """``min`` for parameters and FLOPs per token, else the metric's direction."""
    return "min" if name in STATIC_OBJECTIVES else direction(name)


class OptunaTrials(Stateful):
    """An Optuna study (ask/tell) choosing among the candidates.

    For one sandwich space the parameter is ``k`` (an integer, so TPE can use its
    order); otherwise a categorical over candidate names. A candidate proposed again
    is trained with the next seed of ``seeds`` (a replicate), so no (order, seed)
    pair is ever trained twice; ``replicates`` caps the seeds of one candidate (default:
    no cap with one objective, 1 with several). With several ``objectives`` (the metric
    first; a trial's ``params`` / ``flops_per_token`` come from ``statics``, keyed by
    :func:`~.variant.variant_key`: a hard-guided variant has fewer parameters than its
    order unguided) the study is
    multi-objective: ``sampler`` ``tpe`` (multi-objective TPE) or ``nsga2`` (NSGA-II).

    A multi-objective study spends its samples on new points of the front: candidates
    are grouped by their static objective vector (``statics``, known before training),
    and while a group has no trained or running member, a candidate of a group already
    measured is not a new point. A suggestion the rules refuse (a candidate at its
    ``replicates``, or of a measured group) is told to the study as pruned (Optuna's
    way to skip a duplicate) and the study is asked again; after :data:`MAX_ASKS` asks
    an allowed candidate (seeded choice) is enqueued. When no candidate is allowed the
    searcher is finished, whatever is left of ``num_samples``.
    """

    def __init__(
        self,
        candidates: Sequence[Candidate],
        *,
        num_samples: int,
        seeds: Sequence[int],
        metric: str,
        mode: str = "min",
        seed: int = 0,
        objectives: Sequence[str] | None = None,
        statics: dict[str, dict[str, float]] | None = None,
        sampler: str = "tpe",
        identity: Identity = plain_identity,
        replicates: int | None = None,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self.identity = identity
        """The task's identity of a candidate: with its order, what one seed trains once."""
        labels = list(dict.fromkeys(_guidance(c) for c in candidates)) or ["none"]
        self.variants = {(_base(c), _guidance(c)): c for c in candidates}
        self.by_key = {self._key(c): c for c in reversed(list(candidates))}
        candidates = [c for c in candidates if _guidance(c) == labels[0]]  # one per order
        self.by_name = {_base(c): c for c in candidates}
        self.axis = integer_axis(candidates)
        """A column of the space searched as one integer (the sandwich's ``k``), or None."""
        self.by_value = ({int(c.params[self.axis]): c for c in candidates}
                         if self.axis is not None else None)
        self.seeds = list(seeds)
        self.num_samples = num_samples
        self.taken: set[tuple[str, int]] = set()
        self.suggested = 0
        self.objectives = list(objectives) if objectives else [metric]
        self.statics = dict(statics or {})
        self.space = _CandidateSpace(self.by_value, list(self.by_name), labels, axis=self.axis)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        chosen = (
            PicklableNSGAII(seed=seed)
            if sampler == "nsga2"
            else optuna.samplers.TPESampler(seed=seed)
        )
        modes = [objective_mode(o) for o in objectives] if objectives else [mode]
        self.study = optuna.create_study(
            directions=["minimize" if m == "min" else "maximize" for m in modes], sampler=chosen
        )
        self.live: dict[str, tuple[int, str]] = {}
        self.replicates = replicates or (1 if len(self.objectives) > 1 else None)
        """Most seeds one candidate trains (``None``: no limit)."""
        self.rng = random.Random(seed)
        self.pruned = 0
        """Suggestions of the study refused as no new point (told as pruned)."""

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: object
    ) -> bool:
        return True  # metric and mode were given to the study itself

    def _key(self, cand: Candidate) -> str:
        """What must not be trained twice with one seed (:func:`~.variant.variant_key`)."""
        return variant_key(cand.order, self.identity(variant_of(cand)))

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (order, seed): propose the order with another seed (or
        not at all once it has trained its ``replicates``)."""
        self.taken.add((order, seed))

    def _values(self, key: str, result: dict[str, Any] | None) -> list[float] | None:
        """The objectives' values of the variant ``key`` (:func:`_key`) given its result."""
        merged = {**self.statics.get(key, {}), **(result or {})}
        values = [merged.get(name) for name in self.objectives]
        if any(v is None or not math.isfinite(float(v)) for v in values):
            return None
        return [float(v) for v in values if v is not None]

    def _group(self, key: str) -> tuple[tuple[str, float], ...] | None:
        """A candidate's static objective vector (several objectives only; else None)."""
        if len(self.objectives) < 2 or key not in self.statics:
            return None
        return tuple(sorted(self.statics[key].items()))

    def _allowed(self) -> set[str]:
        """Keys of the candidates that would be a new point (see the class)."""
        seeds = Counter(key for key, _ in self.taken)
        keys = [k for k in self.by_key if self.replicates is None or seeds[k] < self.replicates]
        measured = {self._group(k) for k in seeds}
        fresh = {k for k in keys if self._group(k) is not None and self._group(k) not in measured}
        return fresh or set(keys)

    def _params(self, key: str) -> dict[str, Any]:
        """The study's parameters that pick the candidate ``key``."""
        cand = self.by_key[key]
        name, _ = self.space.distribution()
        params: dict[str, Any] = {name: self._value(cand, name)}
        if len(self.space.labels) > 1:
            params["guidance"] = _guidance(cand)
        return params

    def _value(self, cand: Candidate, name: str) -> Any:
        """The study's value of ``cand`` for parameter ``name`` (the axis, or its name)."""
        return int(cand.params[name]) if name == self.axis else _base(cand)

    def upgraded(self, state: dict[str, Any]) -> dict[str, Any]:
        if "by_k" in state:  # saved before the axis was the space's declared column
            state = {**state, "axis": "k" if state["by_k"] is not None else None}
            state["by_value"] = state.pop("by_k")
        return state

    def _pick(self, trial: optuna.Trial) -> Candidate:
        picked = self.space(trial)
        cand = self.by_value[int(picked)] if self.by_value is not None else self.by_name[picked]
        return self.variants[(_base(cand), trial.params.get("guidance", _guidance(cand)))]

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Earlier results of orders in the pool become finished trials of the study."""
        name, dist = self.space.distribution()
        for obs in observations:
            key = variant_key(obs.order, obs.identity)
            self.mark_taken(key, obs.seed)
            cand = self.by_key.get(key)
            values = self._values(key, {self.metric: obs.value, **obs.extra})
            if cand is None or values is None:
                continue  # a flat categorical cannot place a model outside the pool
            params: dict[str, Any] = {name: self._value(cand, name)}
            dists: dict[str, Any] = {name: dist}
            if len(self.space.labels) > 1:  # the earlier run's guidance is its choice
                params["guidance"] = _guidance(cand)
                dists["guidance"] = optuna.distributions.CategoricalDistribution(self.space.labels)
            self.study.add_trial(
                optuna.trial.create_trial(params=params, distributions=dists, values=values)
            )

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self.suggested >= self.num_samples:
            return Searcher.FINISHED
        allowed = self._allowed()
        if not allowed:
            return Searcher.FINISHED  # every candidate trained its replicates
        for _ in range(MAX_ASKS):
            trial = self.study.ask()
            cand = self._pick(trial)
            if self._key(cand) in allowed:
                break
            self.study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
            self.pruned += 1
        else:  # the sampler keeps to measured points: enqueue a new one (seeded choice)
            self.study.enqueue_trial(self._params(self.rng.choice(sorted(allowed))))
            trial = self.study.ask()
            cand = self._pick(trial)
        key = self._key(cand)
        seed = next(
            s
            for s in itertools.chain(self.seeds, itertools.count(max(self.seeds) + 1))
            if (key, s) not in self.taken
        )
        self.mark_taken(key, seed)
        self.suggested += 1
        self.live[trial_id] = (trial.number, key)
        return {"trial": Trial.of(cand, seed)}

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        got = self.live.pop(trial_id, None)
        if got is None:
            return
        number, key = got
        values = None if error else self._values(key, result)
        if values is None:
            self.study.tell(number, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(number, values)
