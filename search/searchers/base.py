"""What every searcher shares: pickled state for ``--resume`` and scores."""

from __future__ import annotations

import math
import pickle
from typing import Any

from ray.tune.search import Searcher

__all__ = ["Stateful", "score"]


class Stateful(Searcher):
    """Pickle-based save/restore so ``sublayer sweep --resume`` restores the searcher."""

    _transient: tuple[str, ...] = ()

    def save(self, checkpoint_path: str) -> None:
        state = {k: v for k, v in self.__dict__.items() if k not in self._transient}
        with open(checkpoint_path, "wb") as fh:
            pickle.dump(state, fh)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as fh:
            self.__dict__.update(pickle.load(fh))


def score(result: dict[str, Any] | None, metric: str | None, mode: str | None) -> float | None:
    """``result[metric]`` as a loss (lower is better; negated for ``max``), None if unusable."""
    if not result or metric is None or metric not in result:
        return None
    value = float(result[metric])
    if not math.isfinite(value):
        return None
    return value if mode == "min" else -value
