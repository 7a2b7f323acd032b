"""Search algorithms over orders, as Ray Tune ``Searcher`` s.

Every searcher suggests configs of the form ``{"trial": Trial.to_config()}`` and
never suggests the same (order, seed) twice; the shared contract test in
``tests/search/test_searchers.py`` holds each of them to that.

- :class:`GridSearcher`: every planned trial, in order.
- :func:`optuna_searcher`: Ray Tune's ``OptunaSearch`` (TPE) over the candidates
  (the sandwich coefficient ``k`` as an integer when the space is one sandwich).
- :class:`EvolutionSearcher`: regularized evolution (Real et al., 2019) with
  budget-keeping mutations (``spaces.mutations``).
- :class:`WithBaseline`: runs the baseline seeds first, then defers to another searcher.
"""

from __future__ import annotations

import itertools
import math
import pickle
import random
from collections import deque
from collections.abc import Sequence
from typing import Any

from ray.tune.search import Searcher
from ray.tune.search.optuna import OptunaSearch

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.mutations import mutate

from .plan import Trial

__all__ = ["GridSearcher", "EvolutionSearcher", "WithBaseline", "OptunaTrials", "optuna_searcher",
           "make_searcher"]


class _Stateful(Searcher):
    """Pickle-based save/restore so ``sublayer sweep --resume`` restores the searcher."""

    _transient: tuple[str, ...] = ()

    def save(self, checkpoint_path: str) -> None:
        state = {k: v for k, v in self.__dict__.items() if k not in self._transient}
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(state, fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            self.__dict__.update(pickle.load(fh))


def _score(result: dict[str, Any] | None, metric: str | None, mode: str | None) -> float | None:
    if not result or metric is None or metric not in result:
        return None
    value = float(result[metric])
    if not math.isfinite(value):
        return None
    return value if mode == "min" else -value


class GridSearcher(_Stateful):
    """Suggest each planned trial once, then ``FINISHED``."""

    def __init__(self, trials: Sequence[Trial], *, metric: str | None = None,
                 mode: str | None = "min") -> None:
        super().__init__(metric=metric, mode=mode)
        self._pending = deque(t.to_config() for t in trials)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if not self._pending:
            return Searcher.FINISHED
        return {"trial": self._pending.popleft()}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass


class WithBaseline(_Stateful):
    """Run ``baseline`` trials first, then hand over to ``inner`` (which never sees them)."""

    def __init__(self, inner: Searcher, baseline: Sequence[Trial]) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner = inner
        self._baseline = deque(t.to_config() for t in baseline)
        mark = getattr(inner, "mark_taken", None)
        for t in baseline:  # the baseline order may lie in the space: never train it twice
            if mark is not None:
                mark(t.order, t.seed)
        self._mine: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        super().set_search_properties(metric, mode, config, **spec)
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self._baseline:
            self._mine.add(trial_id)
            return {"trial": self._baseline.popleft()}
        return self.inner.suggest(trial_id)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id not in self._mine:
            self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        if trial_id not in self._mine:
            self.inner.on_trial_complete(trial_id, result=result, error=error)


class EvolutionSearcher(_Stateful):
    """Regularized evolution over orders (Real et al., 2019, "aging evolution").

    The first ``population`` trials are drawn from the space's candidates (in a
    seeded random order). Afterwards each suggestion takes a tournament of
    ``sample_size`` from the ``population`` most recent finished trials, mutates the
    best with a budget-keeping mutation (swap two neighbouring different sublayers,
    or ``f`` <-> ``ss``), and retries until the child is an order never tried before.
    Trials that failed or diverged do not enter the population. Every trial trains
    with ``seed``.
    """

    def __init__(self, candidates: Sequence[Candidate], *, num_samples: int, population: int = 8,
                 sample_size: int = 3, seed: int = 0, trial_seed: int = 0,
                 metric: str | None = None, mode: str | None = "min",
                 max_attempts: int = 200) -> None:
        super().__init__(metric=metric, mode=mode)
        self.rng = random.Random(seed)
        self._initial = deque(self.rng.sample(list(candidates), len(candidates)))
        self.num_samples = num_samples
        self.population_size = population
        self.sample_size = sample_size
        self.trial_seed = trial_seed
        self.max_attempts = max_attempts
        self.tried: set[str] = set()
        self.population: deque[tuple[str, float, str]] = deque(maxlen=population)
        self.live: dict[str, dict[str, Any]] = {}
        self.suggested = 0

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (order, seed): never propose it."""
        if seed == self.trial_seed:
            self.tried.add(order)

    def _trial(self, order: str, name: str, space: str, params: dict[str, Any]) -> dict[str, Any]:
        self.tried.add(order)
        self.suggested += 1
        trial = Trial(name=f"{name}@seed{self.trial_seed}", candidate=name, order=order,
                      seed=self.trial_seed, space=space, params=params)
        return trial.to_config()

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self.suggested >= self.num_samples:
            return Searcher.FINISHED
        done = len(self.population)
        if done < self.population_size or not self.population:
            while self._initial:
                cand = self._initial.popleft()
                if cand.order not in self.tried:
                    cfg = self._trial(cand.order, cand.name, cand.space, dict(cand.params))
                    self.live[trial_id] = cfg
                    return {"trial": cfg}
            if not self.population:
                # wait for the first results; with none to come, the search is over
                return None if self.live else Searcher.FINISHED
        contenders = self.rng.sample(list(self.population), min(self.sample_size, len(self.population)))
        parent_order, _, parent_name = min(contenders, key=lambda c: c[1])
        child = parent_order
        for _ in range(self.max_attempts):
            child = mutate(child, self.rng, keep_budget=True)
            if child not in self.tried:
                name = f"evo{self.suggested:03d}"
                cfg = self._trial(child, name, "evolution", {"parent": parent_name})
                self.live[trial_id] = cfg
                return {"trial": cfg}
        return Searcher.FINISHED  # the neighbourhood is exhausted

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        cfg = self.live.pop(trial_id, None)
        score = None if error else _score(result, self.metric, self.mode)
        if cfg is not None and score is not None:
            self.population.append((cfg["order"], score, cfg["candidate"]))


def _guidance(cand: Candidate) -> str:
    """A candidate's cross-layer guidance label (``none`` unless guided)."""
    return str(cand.params.get("guidance") or "none")


def _base(cand: Candidate) -> str:
    """The candidate's name without its guidance label (``sandwich4_1+hg-kq`` → ``sandwich4_1``)."""
    label = _guidance(cand)
    return cand.name if label == "none" else cand.name.removesuffix(f"+{label}")


def _key(cand: Candidate) -> str:
    """What must not be trained twice with one seed: the order, and its guidance."""
    label = _guidance(cand)
    return cand.order if label == "none" else f"{cand.order}+{label}"


class _CandidateSpace:
    """Optuna define-by-run space (a class, so the searcher pickles for ``--resume``)."""

    def __init__(self, by_k: dict[int, Candidate] | None, names: list[str],
                 labels: list[str] | None = None) -> None:
        self.ks = sorted(by_k) if by_k is not None else None
        self.names = names
        self.labels = labels or ["none"]
        """Guidance labels (``model.guidance`` as a sweep axis): a categorical of its own."""

    def __call__(self, trial: Any) -> None:
        if len(getattr(self, "labels", ())) > 1:
            trial.suggest_categorical("guidance", self.labels)
        if self.ks is not None and self.ks == list(range(self.ks[0], self.ks[-1] + 1)):
            trial.suggest_int("k", self.ks[0], self.ks[-1])
        elif self.ks is not None:
            trial.suggest_categorical("k", self.ks)
        else:
            trial.suggest_categorical("candidate", self.names)


class OptunaTrials(_Stateful):
    """Ray Tune's ``OptunaSearch`` (TPE) choosing among the candidates.

    For one sandwich space the parameter is ``k`` (an integer, so TPE can use its
    order); otherwise a categorical over candidate names. A candidate proposed again
    is trained with the next seed of ``seeds`` (a replicate), so no (order, seed)
    pair is ever trained twice.
    """

    def __init__(self, candidates: Sequence[Candidate], *, num_samples: int, seeds: Sequence[int],
                 metric: str, mode: str = "min", seed: int = 0) -> None:
        super().__init__(metric=metric, mode=mode)
        labels = list(dict.fromkeys(_guidance(c) for c in candidates)) or ["none"]
        self.variants = {(_base(c), _guidance(c)): c for c in candidates}
        candidates = [c for c in candidates if _guidance(c) == labels[0]]  # one per order
        self.by_name = {_base(c): c for c in candidates}
        ks = [c.params.get("k") for c in candidates]
        self.by_k = ({int(c.params["k"]): c for c in candidates}
                     if {c.space for c in candidates} == {"sandwich"} and None not in ks else None)
        self.seeds = list(seeds)
        self.num_samples = num_samples
        self.taken: set[tuple[str, int]] = set()
        self.suggested = 0
        space = _CandidateSpace(self.by_k, list(self.by_name), labels)
        self.optuna = OptunaSearch(space=space, metric=metric, mode=mode, seed=seed)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return True  # metric and mode were given to OptunaSearch itself

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (order, seed): propose the order with another seed."""
        self.taken.add((order, seed))

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self.suggested >= self.num_samples:
            return Searcher.FINISHED
        raw = self.optuna.suggest(trial_id)
        if raw is None or raw == Searcher.FINISHED:
            return raw
        assert isinstance(raw, dict)
        cand = self.by_k[int(raw["k"])] if self.by_k is not None else self.by_name[raw["candidate"]]
        cand = self.variants[(_base(cand), raw.get("guidance", _guidance(cand)))]
        seed = next(s for s in itertools.chain(self.seeds, itertools.count(max(self.seeds) + 1))
                    if (_key(cand), s) not in self.taken)
        self.mark_taken(_key(cand), seed)
        self.suggested += 1
        return {"trial": Trial.of(cand, seed).to_config()}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.optuna.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        metric = self.metric
        bad = result is None or metric not in result or not math.isfinite(float(result[metric]))
        self.optuna.on_trial_complete(trial_id, result=result, error=error or bad)


def optuna_searcher(candidates: Sequence[Candidate], **kwargs: Any) -> OptunaTrials:
    return OptunaTrials(candidates, **kwargs)


def make_searcher(plan: Any) -> Searcher:
    """The searcher an experiment asks for (baseline seeds first for adaptive ones)."""
    exp = plan.experiment
    algo = exp.search.algorithm
    if algo == "grid":
        return GridSearcher(plan.trials, metric=plan.metric, mode=plan.mode)
    seeds = exp.seed_list
    if algo == "optuna":
        inner: Searcher = OptunaTrials(plan.candidates, num_samples=exp.search.num_samples,
                                       seeds=seeds, metric=plan.metric, mode=plan.mode,
                                       seed=exp.search.seed)
    else:
        inner = EvolutionSearcher(plan.candidates, num_samples=exp.search.num_samples,
                                  population=exp.search.population,
                                  sample_size=exp.search.sample_size, seed=exp.search.seed,
                                  trial_seed=seeds[0], metric=plan.metric, mode=plan.mode)
    return WithBaseline(inner, plan.trials) if plan.trials else inner
