"""The contract every searcher must pass, driven in-process (no Ray cluster, no training).

The driver plays Ray Tune's part: it calls ``set_search_properties``, then
``suggest(trial_id)`` with a few trials in flight, and completes them with a synthetic,
deterministic objective computed from the order (a unit test of the searcher protocol, not
of training), sometimes as an error or NaN. ``tests/search/test_searchers.py`` holds the
cases, one or more per registered searcher, and the contract itself.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ray.tune.search import Searcher

METRIC = "val_bpc"
FINISHED = Searcher.FINISHED


def objective(order: str) -> float:
    """A synthetic 'val_bpc': position-weighted count of ``s`` in the top half (lower is better)."""
    n = len(order)
    top = sum((i + 1) / n for i, ch in enumerate(order) if ch == "s" and i >= n / 2)
    return 1.0 + top / n


@dataclass(frozen=True)
class Case:
    """A searcher factory and what the contract expects of it."""

    name: str
    make: Callable[[], Searcher]
    budget: int
    """Suggestions before FINISHED (planned trials, or baseline + num_samples)."""
    exhaustible: bool = False
    """The space may run out before the budget (evolution: every neighbour tried)."""
    baseline_first: int = 0
    """Leading suggestions that must be baseline trials."""


class Driver:
    """Plays Ray Tune: trials in flight, results, errors and NaNs, in a fixed pattern."""

    def __init__(self, searcher: Searcher, *, concurrency: int = 2) -> None:
        self.searcher = searcher
        self.concurrency = concurrency
        self.live: deque[tuple[str, dict[str, Any]]] = deque()
        self.suggested: list[dict[str, Any]] = []
        self.finished = False
        self.calls = 0
        searcher.set_search_properties(METRIC, "min", {})

    def _complete(self) -> None:
        trial_id, cfg = self.live.popleft()
        n = int(trial_id[1:])
        value = objective(cfg["trial"].order)
        if n % 7 == 3:  # a crashed trial
            self.searcher.on_trial_complete(trial_id, result=None, error=True)
        elif n % 7 == 5:  # a diverged one
            self.searcher.on_trial_result(trial_id, {METRIC: 9.0, "training_iteration": 1})
            self.searcher.on_trial_complete(trial_id, result={METRIC: math.nan})
        else:
            self.searcher.on_trial_result(trial_id, {METRIC: value + 0.5,
                                                     "training_iteration": 1})
            self.searcher.on_trial_complete(trial_id, result={METRIC: value,
                                                              "training_iteration": 2})

    def step(self) -> dict[str, Any] | None:
        """One suggestion (completing trials as needed); None once FINISHED."""
        while not self.finished:
            self.calls += 1
            assert self.calls < 1000, "the searcher never finishes"
            trial_id = f"t{self.calls:04d}"
            got = self.searcher.suggest(trial_id)
            if got == FINISHED:
                self.finished = True
                while self.live:
                    self._complete()
                return None
            if got is None:  # waiting for results
                assert self.live, "searcher waits for results but no trial is running"
                self._complete()
                continue
            assert isinstance(got, dict), got
            self.suggested.append(got)
            self.live.append((trial_id, got))
            if len(self.live) >= self.concurrency:
                self._complete()
            return got
        return None

    def run(self) -> list[dict[str, Any]]:
        while self.step() is not None:
            pass
        return self.suggested
