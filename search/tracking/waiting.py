"""Which started trials are only waiting for resources, not training.

A trial of several workers (``resources.workers`` > 1) holds next to nothing itself
(:data:`~sublayer_search.search.run.workers.TRIAL_RESOURCES`): Tune starts it, and calls it
RUNNING, as soon as it is scheduled, while its workers may wait for GPUs the cluster no
longer has (a sweep resumed on fewer GPUs restarts every trial it had running). Such a
trial, restored with progress, reports again the evaluation its checkpoint holds as soon
as its workers are up (``search/run/workers.py``). Until that report it is *waiting*:
pending in the progress line and the closing table, and in MLflow status ``SCHEDULED``
with tag ``sublayer.status = waiting`` (``RUNNING`` / ``running`` again once it reports).

A one-worker trial holds its own CPUs and GPUs: Tune starts it only once they are free,
so a started one trains.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ray.tune.experiment import Trial as RayTrial

__all__ = ["Waiting"]


class Waiting:
    """The trial ids that started (or restarted) with progress behind them and have not
    reported since; only for sweeps whose trials have several workers."""

    def __init__(self, several_workers: bool) -> None:
        self.several_workers = several_workers
        self.ids: set[str] = set()

    def started(self, trial: RayTrial) -> bool:
        """Tune started ``trial``; True when it now waits for its workers' resources."""
        reached = (getattr(trial, "last_result", None) or {}).get("step") or 0
        if self.several_workers and isinstance(reached, int | float) and reached > 0:
            self.ids.add(trial.trial_id)
            return True
        return False

    def reported(self, trial: RayTrial) -> bool:
        """``trial`` reported; True when it was waiting until now."""
        tid = getattr(trial, "trial_id", None)
        if tid in self.ids:
            self.ids.discard(tid)
            return True
        return False

    def ended(self, trial: RayTrial) -> None:
        self.ids.discard(getattr(trial, "trial_id", None))
