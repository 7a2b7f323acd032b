"""Trial schedulers: FIFO, and ASHA over the candidates, never over the baseline seeds.

Each picks the next trial to run from the trials not yet ended (:class:`WaitingFirst`),
not by walking every trial of the sweep as Ray's FIFO choice does at every step of Tune's
loop (at 2,700 trials that walk was a fifth of the driver's time)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Protocol

from ray.tune.execution.tune_controller import TuneController
from ray.tune.experiment import Trial as RayTrial
from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, TrialScheduler

__all__ = ["CandidateASHA", "CurveReader", "Fifo", "TrialLike", "WaitingFirst", "is_baseline"]


class TrialLike(Protocol):
    """What the schedulers read of a trial: a Ray trial, or a recorded one being replayed
    (:mod:`~sublayer_search.search.replay.engine`)."""

    trial_id: str
    config: dict[str, Any]
    status: str


def is_baseline(trial: TrialLike) -> bool:
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

    def on_trial_add(self, tune_controller: TuneController, trial: TrialLike) -> None:
        super().on_trial_add(tune_controller, trial)  # type: ignore[misc]
        self._waiting_trials()[trial.trial_id] = trial

    def _waiting_trials(self) -> dict[str, Any]:
        waiting = self.__dict__.get("_waiting")
        if waiting is None:
            waiting = self.__dict__["_waiting"] = {}
        return waiting

    def choose_trial_to_run(self, tune_controller: TuneController) -> RayTrial | None:
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

    def on_trial_result(self, tune_controller: TuneController, trial: RayTrial,
                        result: dict[str, Any]) -> str:
        if is_baseline(trial):
            return str(TrialScheduler.CONTINUE)
        return str(super().on_trial_result(tune_controller, trial, result))

    def on_trial_complete(self, tune_controller: TuneController, trial: RayTrial,
                          result: dict[str, Any]) -> None:
        if is_baseline(trial):
            self._trial_info.pop(trial.trial_id, None)
            return
        super().on_trial_complete(tune_controller, trial, result)


class CurveReader(WaitingFirst, FIFOScheduler):
    """What the curve-reading rules share (:mod:`.curve`, :mod:`.comeback`): the metric
    and mode Tune hands them, each trial's curve read as (step, value) with lower better,
    which trials are baseline seeds (never stopped), which trained to the end and which
    were stopped. From the grace period on, a candidate is stopped where
    :meth:`beyond_reach` says so."""

    def __init__(self, *, time_attr: str, metric: str | None, mode: str | None, max_t: int,
                 grace_period: int, top_k: int, z: float) -> None:
        super().__init__()
        self._time_attr, self._metric, self._mode = time_attr, metric, mode
        self.max_t, self.grace_period, self.top_k, self.z = max_t, grace_period, top_k, z
        self._curves: dict[str, dict[int, float]] = {}
        """Trial id -> step -> value, sign-adjusted so that lower is better."""
        self._baseline: dict[str, bool] = {}
        self._finished: list[str] = []
        """Ids of trials that trained to ``max_t`` (not stopped), in order of completion."""
        self.stopped: dict[str, int] = {}
        """Trial id -> the step it was stopped at."""

    def set_search_properties(self, metric: str | None, mode: str | None,
                              **spec: object) -> bool:
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

    # -- the bookkeeping -----------------------------------------------------------------
    def _record(self, trial: TrialLike, result: dict[str, Any]) -> int | None:
        read = self.step_value(result)
        if read is None:
            return None
        step, value = read
        base = self._baseline.setdefault(trial.trial_id, is_baseline(trial))
        self._curves.setdefault(trial.trial_id, {})[step] = value
        self.recorded(trial.trial_id, step, value, baseline=base)
        return step

    def recorded(self, trial_id: str, step: int, value: float, *, baseline: bool) -> None:
        """A rule's own record of a result (none by default)."""

    def trained_to_the_end(self, trial_id: str) -> None:
        """A rule's own use of a trial that just trained to ``max_t`` (none by default)."""

    def on_trial_result(self, tune_controller: TuneController, trial: TrialLike,
                        result: dict[str, Any]) -> str:
        step = self._record(trial, result)
        if step is None or self._baseline.get(trial.trial_id) or not (
                self.grace_period <= step < self.max_t):
            return str(TrialScheduler.CONTINUE)
        if self.beyond_reach(trial.trial_id, step):
            self.stopped[trial.trial_id] = step
            return str(TrialScheduler.STOP)
        return str(TrialScheduler.CONTINUE)

    def on_trial_complete(self, tune_controller: TuneController, trial: TrialLike,
                          result: dict[str, Any]) -> None:
        if result:
            self._record(trial, result)
        tid = trial.trial_id
        curve = self._curves.get(tid, {})
        if not curve or max(curve) < self.max_t or tid in self.stopped or tid in self._finished:
            return
        self._finished.append(tid)
        self.trained_to_the_end(tid)

    # -- the rule ------------------------------------------------------------------------
    def beyond_reach(self, trial_id: str, step: int) -> bool:
        """Whether the candidate can no longer plausibly reach the top k at ``step``."""
        raise NotImplementedError
