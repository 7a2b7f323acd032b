"""Replay a finished sweep's learning curves through a trial scheduler (``sublayer replay``).

The schedulers are Ray Tune's own classes (``ASHAScheduler``, ``HyperBandScheduler``,
``MedianStoppingRule``) and the sweeps' :class:`~.schedulers.CandidateASHA`, :class:`~.curve_stopping.CurveStopping` and
:class:`~.comeback_stopping.ComebackStopping`, driven here
by recorded results instead of live trials: each result reaches the scheduler at its
recorded time of arrival, through the same hooks Ray Tune's controller calls
(``on_trial_add``, ``on_trial_result``, ``on_trial_complete`` when a trial ends or is
stopped, ``on_trial_error``, ``on_trial_remove``, ``choose_trial_to_run``).

- ``STOP`` drops the trial's later results: they are never trained.
- ``PAUSE`` (HyperBand) holds the trial back; when the scheduler hands it back
  (``choose_trial_to_run``) its later results arrive shifted by the time it waited. When
  nothing else can run, the earliest paused trial is resumed (so every replay ends).
- A trial whose recording ends before the scheduler stops it ends there (a trial the
  recorded sweep stopped or that failed cannot be trained further: ``truncated``).

Exact agreement with a live sweep needs the live scheduler to have seen the results in
the recorded order: the MLflow callback stamps each result as the driver handles it, one
after another, so the order holds as long as no two trials' stamps tie (millisecond
clock). Stopping a trial in a replay does not move later trials earlier, as a freed slot
would in a live sweep with limited concurrency (``max_concurrent``); with one trial at a
time, or with a scheduler that stops no more than the recorded one did, the order is
the live one. The median rule yields time to waiting trials only when some are waiting:
in a replay none are (trials start at their recorded time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ray.tune.experiment import Trial as RayTrial
from ray.tune.schedulers import (
    ASHAScheduler,
    HyperBandScheduler,
    MedianStoppingRule,
    TrialScheduler,
)

from sublayer_search.search.recorded.curves import Curve, Point, together
from sublayer_search.search.replay.report import ReplayReport, TrialOutcome
from sublayer_search.search.replay.settings import (
    ARRIVALS,
    SCHEDULERS,
    ReplayError,
    SchedulerSettings,
)
from sublayer_search.search.stopping.comeback import ComebackStopping
from sublayer_search.search.stopping.curve import CurveStopping
from sublayer_search.search.stopping.schedulers import CandidateASHA
from sublayer_search.spaces.records import Direction

__all__ = ["ARRIVALS", "SCHEDULERS", "together", "Curve", "Point", "ReplayError", "ReplayReport", "SchedulerSettings",
           "TrialOutcome", "make_scheduler", "replay", "replay_grid"]
TIME_ATTR = "step"


def make_scheduler(settings: SchedulerSettings) -> TrialScheduler:
    """A fresh Ray Tune scheduler for ``settings``, over time attribute ``step``."""
    s = settings
    common: dict[str, Any] = {"time_attr": TIME_ATTR, "metric": s.metric, "mode": s.mode}
    if s.name in ("asha", "asha-all"):
        cls = CandidateASHA if s.name == "asha" else ASHAScheduler
        return cls(max_t=s.max_t, grace_period=s.grace_period,
                   reduction_factor=s.reduction_factor, **common)
    if s.name == "curve" and s.rule == "comeback":
        assert s.calibration is not None  # SchedulerSettings checks it
        return ComebackStopping(calibration=s.calibration, max_t=s.max_t,
                                grace_period=s.grace_period, z=s.z, top_k=s.top_k, **common)
    if s.name == "curve":
        return CurveStopping(max_t=s.max_t, grace_period=s.grace_period, z=s.z, top_k=s.top_k,
                             **common)
    if s.name == "hyperband":
        return HyperBandScheduler(max_t=s.max_t, reduction_factor=s.reduction_factor, **common)
    return MedianStoppingRule(grace_period=float(s.grace_period),
                              min_samples_required=s.min_samples, **common)


# -- the lightweight trials and controller the schedulers talk to -------------------------
@dataclass(eq=False, repr=False)
class _Trial:
    """What the schedulers read of a Ray trial: id, config, status, last result."""

    trial_id: str
    config: dict[str, Any]
    curve: Curve
    status: str = RayTrial.PENDING
    last_result: dict[str, Any] = field(default_factory=dict)
    is_saving: bool = False
    delivered: int = 0
    offset: float = 0.0
    paused_at: float = 0.0
    stopped_at: int | None = None
    seq: int = 0
    """Its place in the order of arrival (ties between events go to the earlier trial)."""

    def __repr__(self) -> str:
        return f"{self.trial_id}({self.curve.name})"

    def next_time(self) -> float:
        points = self.curve.points
        base = points[self.delivered].time if self.delivered < len(points) else self.curve.ended
        return base + self.offset


class _Controller:
    """The part of Ray Tune's controller the schedulers call back into.

    Trials that ended leave :attr:`live` (insertion-ordered), so that an event costs in
    proportion to the trials still running or paused, not to every trial replayed: the
    schedulers' "which trial runs next" only ever looks for pending and paused trials."""

    def __init__(self, scheduler: TrialScheduler, max_t: int) -> None:
        self.scheduler = scheduler
        self.max_t = max_t
        self.trials: list[_Trial] = []
        self.live: dict[str, _Trial] = {}

    def add(self, trial: _Trial) -> None:
        self.trials.append(trial)
        self.live[trial.trial_id] = trial

    def end(self, trial: _Trial, status: str) -> None:
        trial.status = status
        self.live.pop(trial.trial_id, None)

    def get_trials(self) -> list[_Trial]:
        return list(self.live.values())  # an ended trial is never chosen to run again

    def get_live_trials(self) -> list[_Trial]:
        return list(self.live.values())

    def stop_trial(self, trial: _Trial, *, by_scheduler: bool = True) -> None:
        """As Ray's: remove a waiting trial, complete a running one. A trial stopped by the
        scheduler before ``max_t`` is marked stopped (not one whose recording ended)."""
        if trial.status in (RayTrial.TERMINATED, RayTrial.ERROR):
            return
        if trial.status in (RayTrial.PENDING, RayTrial.PAUSED):
            self.scheduler.on_trial_remove(self, trial)  # type: ignore[arg-type]
        else:
            self.scheduler.on_trial_complete(self, trial, dict(trial.last_result))  # type: ignore[arg-type]
        step = int(trial.last_result.get(TIME_ATTR, 0))
        if by_scheduler and step < self.max_t:
            trial.stopped_at = step
        self.end(trial, RayTrial.TERMINATED)


def _result(settings: SchedulerSettings, point: Point, index: int) -> dict[str, Any]:
    return {TIME_ATTR: point.step, settings.metric: point.value, "training_iteration": index + 1}


def _resume(ctrl: _Controller, now: float, *, force: bool) -> None:
    """Run every paused trial the scheduler hands back; with ``force``, at least one."""
    while True:
        chosen: Any = ctrl.scheduler.choose_trial_to_run(ctrl)  # type: ignore[arg-type]
        if chosen is None or chosen.status != RayTrial.PAUSED:
            if not force:
                return
            paused = [t for t in ctrl.live.values() if t.status == RayTrial.PAUSED]
            if not paused:
                return
            chosen = min(paused, key=lambda t: t.paused_at)
        force = False
        chosen.offset += now - chosen.paused_at
        chosen.status = RayTrial.RUNNING


def _step(ctrl: _Controller, settings: SchedulerSettings, trial: _Trial) -> float:
    """Deliver the trial's next event (a result, or its end); the event's time."""
    now = trial.next_time()
    sched: Any = ctrl.scheduler
    if trial.delivered < len(trial.curve.points):
        point = trial.curve.points[trial.delivered]
        result = _result(settings, point, trial.delivered)
        decision = sched.on_trial_result(ctrl, trial, result)
        trial.last_result = result
        trial.delivered += 1
        if decision == TrialScheduler.STOP:
            ctrl.stop_trial(trial)
        elif decision == TrialScheduler.PAUSE and trial.status == RayTrial.RUNNING:
            trial.status, trial.paused_at = RayTrial.PAUSED, now
    elif trial.curve.failed:
        sched.on_trial_error(ctrl, trial)
        ctrl.end(trial, RayTrial.ERROR)
    else:
        ctrl.stop_trial(trial, by_scheduler=False)
    return now


def replay(curves: Sequence[Curve], settings: SchedulerSettings, *, k: int = 3,
           rank_mode: Direction = "min", eps: float = 1.0) -> ReplayReport:
    """Run the scheduler over the recorded curves in their order of arrival."""
    if k < 1:
        raise ReplayError("top_k", k, "a whole number >= 1")
    if not eps >= 0:
        raise ReplayError("eps", eps, "a number >= 0 (seed sds)")
    names = [c.name for c in curves]
    if len(set(names)) != len(names):
        raise ReplayError("curves", sorted(n for n in set(names) if names.count(n) > 1),
                          "distinct trial names")
    scheduler = make_scheduler(settings)
    ctrl = _Controller(scheduler, settings.max_t)
    waiting = sorted(curves, key=lambda c: c.started)  # stable: ties keep the given order
    clock = -math.inf
    for _ in range(4 * sum(len(c.points) + 2 for c in curves) + 8):  # each pass moves one event
        running = [t for t in ctrl.live.values() if t.status == RayTrial.RUNNING]
        nxt = min(running, key=lambda t: (t.next_time(), t.seq), default=None)
        if waiting and (nxt is None or waiting[0].started <= nxt.next_time()):
            curve = waiting.pop(0)
            trial = _Trial(trial_id=f"replay_{len(ctrl.trials):05d}", curve=curve,
                           config={"trial": {"name": curve.name, "baseline": curve.baseline}},
                           seq=len(ctrl.trials))
            ctrl.add(trial)
            scheduler.on_trial_add(ctrl, trial)  # type: ignore[arg-type]
            trial.status = RayTrial.RUNNING
            continue
        if nxt is None:
            if not any(t.status == RayTrial.PAUSED for t in ctrl.live.values()):
                break
            _resume(ctrl, clock, force=True)
            continue
        clock = _step(ctrl, settings, nxt)
        _resume(ctrl, clock, force=False)
    else:  # pragma: no cover - every pass delivers an event or resumes a trial
        raise RuntimeError("the replay did not end")
    outcomes = tuple(TrialOutcome(
        name=t.curve.name, order=t.curve.order, baseline=t.curve.baseline,
        steps=int(t.last_result.get(TIME_ATTR, 0)),
        full_steps=t.curve.points[-1].step if t.curve.complete else max(
            t.curve.points[-1].step, settings.max_t),
        evaluations=t.delivered, full_evaluations=len(t.curve.points),
        stopped_at=t.stopped_at, final=t.curve.final, complete=t.curve.complete and not
        t.curve.failed) for t in ctrl.trials)
    return ReplayReport(settings=settings, trials=outcomes, k=k, rank_mode=rank_mode, eps=eps)


def replay_grid(curves: Sequence[Curve], settings: SchedulerSettings, *,
                grace_periods: Sequence[int], reduction_factors: Sequence[float], k: int = 3,
                rank_mode: Direction = "min", eps: float = 1.0) -> list[dict[str, Any]]:
    """One row per setting of the grid (grace periods in steps): compute against top-k kept.

    HyperBand has no grace period, the median rule and the curve rule no reduction
    factor: their rows vary only the setting they have.
    """
    graces = list(grace_periods) if settings.name != "hyperband" else [settings.grace_period]
    factors = (list(reduction_factors) if settings.name not in ("median", "curve")
               else [settings.reduction_factor])
    rows = []
    for grace in graces:
        for factor in factors:
            report = replay(curves, replace(settings, grace_period=grace,
                                            reduction_factor=factor), k=k, rank_mode=rank_mode,
                            eps=eps)
            rows.append({"scheduler": settings.name, "grace_period": grace,
                         "reduction_factor": factor, "compute_fraction": report.compute_fraction,
                         "candidate_compute_fraction": report.candidate_compute_fraction,
                         "evaluation_fraction": report.evaluation_fraction, "k": k,
                         "top_k_kept": len(report.kept), "regret": report.regret,
                         "eps_good": len(report.eps_good),
                         "eps_good_kept": len(report.kept_eps_good),
                         "regret_sds": report.regret_sds,
                         "picked": report.picked, "stopped": len(report.stopped)})
    return rows
