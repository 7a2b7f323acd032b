"""``search.algorithm: grid`` as a Ray Tune searcher: every planned trial once, in order."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from ray.tune.search import Searcher

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.searchers.base import Stateful

__all__ = ["GridSearcher"]


class GridSearcher(Stateful):
    """Suggest each planned trial once, then ``FINISHED``."""

    def __init__(self, trials: Sequence[Trial], *, metric: str | None = None,
                 mode: str | None = "min") -> None:
        super().__init__(metric=metric, mode=mode)
        self._pending = deque(trials)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:  # type: ignore[override]  # Ray returns Searcher.FINISHED, a str
        if not self._pending:
            return Searcher.FINISHED
        return {"trial": self._pending.popleft()}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        pass
