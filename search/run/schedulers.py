"""Trial schedulers: FIFO, and ASHA over the candidates, never over the baseline seeds.

Each picks the next trial to run from the trials not yet ended (:class:`WaitingFirst`),
not by walking every trial of the sweep as Ray's FIFO choice does at every step of Tune's
loop (at 2,700 trials that walk was a fifth of the driver's time)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ray.tune.experiment import Trial as RayTrial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

__all__ = ["CandidateASHA", "CurveResults", "Fifo", "WaitingFirst", "is_baseline"]


def is_baseline(trial: Any) -> bool:
    """Whether a Ray trial trains one of the sweep's baseline seeds."""
    planned = (getattr(trial, "config", None) or {}).get("trial")
    if isinstance(planned, Mapping):  # a recorded curve replayed (``sublayer replay``)
        return bool(planned.get("baseline"))
    return planned is not None and bool(planned.baseline)  # a sweep's Trial


class WaitingFirst:
    """Ray's FIFO choice (the first pending trial, else the first paused one, in the order
    the trials were added) over the trials this scheduler saw added and not yet ended.

    A trial leaves once it is TERMINATED (ended for good; a restored sweep adds its
    trials again). An ERROR trial stays: Tune may retry it as PENDING."""

    def on_trial_add(self, tune_controller: Any, trial: Any) -> None:
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]
        self._waiting_trials()[trial.trial_id] = trial

    def _waiting_trials(self) -> dict[str, Any]:
        waiting = self.__dict__.get("_waiting")
        if waiting is None:
            waiting = self.__dict__["_waiting"] = {}
        return waiting

    def choose_trial_to_run(self, tune_controller: Any) -> Any:
        waiting = self._waiting_trials()
        paused = None
        for tid in [t for t, trial in waiting.items() if trial.status == RayTrial.TERMINATED]:
            del waiting[tid]
        for trial in waiting.values():
            if trial.status == RayTrial.PENDING:
                return trial
            if paused is None and trial.status == RayTrial.PAUSED:
                paused = trial
        return paused

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the scheduler with its snapshot; the restored sweep adds its trials
        return {k: v for k, v in self.__dict__.items() if k != "_waiting"}


class Fifo(WaitingFirst, FIFOScheduler):
    """Every trial trains to its end, in the order Tune adds them."""


class CandidateASHA(WaitingFirst, ASHAScheduler):
    """ASHA that stops candidates early but lets every baseline seed train to the end.

    Each candidate is compared with fully trained baselines (Narang et al. 2021: several
    baseline seeds at equal compute), so the baseline never enters ASHA's rungs: it is
    neither stopped nor used to set a rung's cutoff.
    """

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        if is_baseline(trial):
            return str(TrialScheduler.CONTINUE)
        return str(super().on_trial_result(tune_controller, trial, result))

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        if is_baseline(trial):
            self._trial_info.pop(trial.trial_id, None)
            return
        super().on_trial_complete(tune_controller, trial, result)


class CurveResults:
    """What the curve-reading rules share: the metric and mode Tune hands them, and each
    result read as (step, value) with lower better (``None``: not a finite value of the
    metric at a step)."""

    _time_attr: str
    _metric: str | None
    _mode: str | None

    def set_search_properties(self, metric: str | None, mode: str | None,
                              **spec: Any) -> bool:
        if self._metric and metric and self._metric != metric:
            return False
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def step_value(self, result: dict[str, Any]) -> tuple[int, float] | None:
        """The result's step and metric value, sign-adjusted so that lower is better."""
        if self._metric not in result or self._time_attr not in result:
            return None
        step, value = int(result[self._time_attr]), float(result[self._metric])
        if not math.isfinite(value):
            return None
        return step, (-value if self._mode == "max" else value)
