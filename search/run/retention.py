"""Keep each trial's last ``ray.keep_checkpoints`` checkpoints, deleting older ones
without forcing Tune to snapshot at each one.

Tune's own retention (``CheckpointConfig(num_to_keep=k)``) forces an experiment snapshot
whenever a trial has checkpointed ``k`` times since the last one, so that the snapshot
never names a checkpoint it deleted. A snapshot serialises every trial of the sweep, and
trials checkpoint at every evaluation: with ``k = 1`` a sweep of N trials writes about
N × evaluations snapshots of size N, a cost that grows with the square of the sweep (at
30 toy trials, 300 snapshots and two thirds of the driver's time).

So the sweep keeps every checkpoint as far as Tune knows (``num_to_keep=None``: snapshots
then follow Tune's own period, at most about 5 % of the driver's time), and this callback
deletes a checkpoint once it is safe: when the same trial has a newer checkpoint that was
registered at least ``settle_s`` ago, and the trial keeps ``keep`` newer ones (the newest
``keep`` stay, ``ray.keep_checkpoints``, 1 by default). Tune snapshots far more often than that (every 10 s,
or 19 times the last snapshot's duration), so the latest snapshot names that newer
checkpoint or a later one, never the deleted one: a driver killed at any moment resumes.
When the sweep ends with every trial ended, Tune has written its final snapshot, and
every checkpoint but each trial's newest ``keep`` goes.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ray.tune import Callback
from ray.tune.experiment import Trial as RayTrial

from sublayer_search.search.core.rebind import Rebound

__all__ = ["CheckpointRetention", "SETTLE_S", "default_settle_s"]

log = logging.getLogger(__name__)

SETTLE_S = 600.0
"""A checkpoint goes once its trial has a newer one at least this old (seconds), or
twice Tune's snapshot period where ``TUNE_GLOBAL_CHECKPOINT_S`` sets a longer one."""


def default_settle_s() -> float:
    """:data:`SETTLE_S`, longer where the user made Tune snapshot less often."""
    period = os.environ.get("TUNE_GLOBAL_CHECKPOINT_S", "auto")
    try:
        return max(SETTLE_S, 2 * float(period))
    except ValueError:  # "auto": every 10 s, or 19 times the last snapshot's duration
        return SETTLE_S


_ENDED = frozenset({"TERMINATED", "ERROR"})


class CheckpointRetention(Rebound, Callback):
    """Driver-side: keep each trial's newest ``keep`` checkpoints, delete the older ones
    when safe."""

    def __init__(self, *, keep: int = 1, settle_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if keep < 1:
            raise ValueError(f"keep must be at least 1 (got {keep})")
        self.keep = keep
        self.settle_s = default_settle_s() if settle_s is None else settle_s
        self.clock = clock
        self._held: dict[str, list[tuple[float, Any]]] = {}  # trial id -> (registered, ckpt)
        self._arrivals: deque[tuple[float, str]] = deque()  # (registered at, trial id)
        self.deleted = 0
        """Checkpoints deleted so far (a figure for logs and tests)."""

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles callbacks into its snapshot: a restored sweep starts with no record
        # (what a killed driver left is kept; the resumed trials' new checkpoints are pruned)
        return {**self.__dict__, "_held": {}, "_arrivals": deque()}

    def on_checkpoint(self, iteration: int, trials: list[RayTrial], trial: RayTrial, checkpoint: object,
                      **info: object) -> None:
        now = self.clock()
        self._held.setdefault(trial.trial_id, []).append((now, checkpoint))
        self._arrivals.append((now, trial.trial_id))

    def on_step_end(self, iteration: int, trials: list[RayTrial], **info: object) -> None:
        settled = self.clock() - self.settle_s
        while self._arrivals and self._arrivals[0][0] <= settled:
            _, tid = self._arrivals.popleft()
            held = self._held.get(tid, [])
            # everything older than the trial's newest settled checkpoint can go, as long
            # as the trial keeps its newest `keep`
            self._drop(tid, min(sum(1 for at, _ in held if at <= settled) - 1,
                                len(held) - self.keep))

    def on_experiment_end(self, trials: list[RayTrial], **info: object) -> None:
        if all(str(getattr(t, "status", "")) in _ENDED for t in trials):
            for tid, held in self._held.items():
                self._drop(tid, len(held) - self.keep)

    def _drop(self, tid: str, count: int) -> None:
        """Delete the ``count`` oldest checkpoints Tune registered for trial ``tid``."""
        held = self._held.get(tid, [])
        for _, checkpoint in held[:max(0, count)]:
            try:
                checkpoint.filesystem.delete_dir(checkpoint.path)
                self.deleted += 1
            except FileNotFoundError:
                pass
            except OSError as exc:  # a busy store: the files stay, the sweep goes on
                log.warning("could not delete checkpoint %s: %s", checkpoint.path, exc)
        del held[:max(0, count)]
