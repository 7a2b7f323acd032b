"""The baseline seeds first, then an adaptive searcher: :class:`WithBaseline` wraps every
adaptive searcher of a sweep (:func:`baseline_first`) and gives each of its trials the
planned spec."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sublayer_search.search.core.trial import SpecSource, Trial, reseeded
from sublayer_search.search.core.variant import Identity, plain_identity, variant_key
from sublayer_search.search.searchers.base import Stateful
from sublayer_search.search.searchers.search_input import SearchInput

__all__ = ["WithBaseline", "baseline_first"]


class WithBaseline(Stateful):
    """Run ``baseline`` trials first, then hand over to ``inner`` (which never sees them);
    with ``specs``, each of ``inner``'s trials gets its planned spec."""

    _transient = ("_specs",)  # the plan's: a restored searcher keeps the live plan's

    def __init__(self, inner: Stateful, baseline: Sequence[Trial], *,
                 identity: Identity = plain_identity, specs: SpecSource | None = None) -> None:
        super().__init__(metric=inner.metric, mode=inner.mode)
        self.inner = inner
        self._specs = specs
        self._baseline = deque(baseline)
        for t in baseline:  # the baseline model may lie in the space: never train it twice
            inner.mark_taken(variant_key(t.order, identity(t.variant)), t.seed)
        self._mine: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: object) -> bool:
        super().set_search_properties(metric, mode, config, **spec)
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if self._baseline:
            self._mine.add(trial_id)
            return {"trial": self._baseline.popleft()}
        got = self.inner.suggest(trial_id)
        if not isinstance(got, dict) or self._specs is None:
            return got
        trial: Trial = got["trial"]
        spec = reseeded(self._specs(trial.candidate, trial.variant), trial.seed)
        return {**got, "trial": replace(trial, spec=spec)}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id not in self._mine:
            self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        if trial_id not in self._mine:
            self.inner.on_trial_complete(trial_id, result=result, error=error)


def baseline_first(plan: SearchInput, inner: Stateful) -> WithBaseline:
    """An adaptive searcher of ``plan``: warm-started with ``plan.warm`` (finished trials of
    earlier sweeps), the baseline trials first, each trial with its planned spec."""
    if plan.warm:
        inner.warm_start(plan.warm)
    return WithBaseline(inner, plan.trials, identity=plan.task.identity, specs=plan.spec_source)
