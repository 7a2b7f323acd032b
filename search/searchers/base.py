"""What every searcher shares: pickled state for ``--resume``, the hooks and scores.

What a searcher can do is declared apart, light enough for planning
(:mod:`~sublayer_search.search.searchers.registry`); this is how one runs under Ray Tune.
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Sequence
from typing import Any

from ray.tune.search import Searcher

from sublayer_search.search.core.observation import Observation

__all__ = ["Stateful", "score"]


class Stateful(Searcher):
    """A Ray Tune searcher whose state pickles (``sublayer sweep --resume`` restores it),
    with the hooks of an adaptive searcher (no-ops unless a searcher overrides them)."""

    _transient: tuple[str, ...] = ()

    def warm_start(self, observations: Sequence[Observation]) -> None:
        """Finished trials of earlier sweeps (``search.warm_start``), told before the first
        suggestion: never train them again."""

    def mark_taken(self, order: str, seed: int) -> None:
        """Another searcher trains (``order``, ``seed``) (the baseline): never propose it."""

    def save(self, checkpoint_path: str) -> None:
        state = {k: v for k, v in self.__dict__.items() if k not in self._transient}
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(state, fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            self.__dict__.update(self.upgraded(pickle.load(fh)))

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(self.upgraded(state))

    def upgraded(self, state: dict[str, Any]) -> dict[str, Any]:
        """A state saved by an earlier release, in today's attribute names (unchanged by
        default): a sweep interrupted before an upgrade resumes after it."""
        return state


def score(result: dict[str, Any] | None, metric: str | None, mode: str | None) -> float | None:
    """``result[metric]`` as a loss (lower is better; negated for ``max``), None if unusable."""
    if not result or metric is None or metric not in result:
        return None
    value = float(result[metric])
    if not math.isfinite(value):
        return None
    return value if mode == "min" else -value
