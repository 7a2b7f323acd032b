"""Live sweep progress on the terminal: a Ray Tune callback in the driver.

One line: trials finished / stopped (early, by the scheduler) / killed (by an interrupt) /
running / pending / failed of the total, the best result so far with its trial name and order, the wall time since the
sweep command started and an ETA. On a TTY the line fits the terminal's width (the counts,
the best value, elapsed and ETA first; the rest only if there is room) and is redrawn in place (at most every ``tty_every`` seconds); otherwise (a log file, CI) a
line is printed when a trial ends (at most every ``end_every`` seconds: a sweep of
thousands of short trials gets a line every few seconds, not one per trial) and at most
every ``line_every`` seconds in between. A failed trial and the end always print.
:func:`render` is the pure part: a :class:`Snapshot` in, the text out.

The ETA counts training steps, not ended trials: the steps left (running trials' rest,
pending trials whole) over the steps per second trained so far. With trials running two
at a time, an estimate from ended trials alone says nothing until the first one ends and
then doubles the truth; steps move with every report. The rate is read when the steps
done last changed, and the estimate counts down between reports, so it does not climb
while the trials train between evaluations.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from ray.tune import Callback
from ray.tune.experiment import Trial as RayTrial

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.tracking.waiting import Waiting
from sublayer_search.spaces.records import FAILED_STATUSES, TrialStatus, ended_status

__all__ = ["Snapshot", "render", "snapshot", "SweepProgress", "format_duration",
           "starting_line", "line_width"]


DEFAULT_COLUMNS = 80
"""The width assumed on a terminal that does not report its own (0 columns)."""

_STARTED: list[float] = []
"""When the sweep command printed its :func:`starting_line` (monotonic): elapsed is counted
from there, the wall time a user sees, Ray's and MLflow's start included."""


def starting_line(total: int, metric: str, width: int | None = None) -> str:
    """The line a sweep prints before Ray and MLflow start (they take seconds), fitted to
    ``width``; the progress line's elapsed time counts from here."""
    _STARTED[:] = [time.monotonic()]
    line = render(Snapshot(total=total, metric=metric))
    starting = f"{line} | starting Ray and MLflow"
    return starting if width is None or len(starting) <= width else render(
        Snapshot(total=total, metric=metric), width)


def line_width(stream: TextIO) -> int | None:
    """The characters a line may take on ``stream``: its terminal's columns less one (80
    when a terminal reports 0 columns); None when it is not a terminal (a log file, CI)."""
    try:
        if not stream.isatty():
            return None
        columns = os.get_terminal_size(stream.fileno()).columns
    except (OSError, ValueError, AttributeError):
        columns = 0
    return (columns if columns > 0 else DEFAULT_COLUMNS) - 1



@dataclass(frozen=True)
class Snapshot:
    """What the progress line shows, at one moment."""

    total: int
    finished: int = 0
    stopped: int = 0
    """Ended short of their steps by the scheduler (early stopping)."""
    killed: int = 0
    """Ended before their last step by an interrupted sweep (Ctrl-C, a Slurm time limit, an
    MLflow outage): ``--resume`` trains them."""
    running: int = 0
    failed: int = 0
    waiting: int = 0
    """Of the pending: started by Tune, but waiting for their workers' resources."""
    elapsed: float = 0.0
    metric: str = "val_loss"
    best_value: float | None = None
    best_name: str | None = None
    best_order: str | None = None
    steps_done: float = 0.0
    """Training steps done by every trial so far (needs the planned steps per trial)."""
    steps_left: float = 0.0
    """Steps still to train: the running trials' rest and every pending trial's."""
    rate_time: float = 0.0
    """Seconds of the sweep's training that ``steps_done`` took (0: no steps yet)."""
    since: float = 0.0
    """Seconds since ``steps_done`` last changed."""

    @property
    def ended(self) -> int:
        return self.finished + self.stopped + self.failed

    @property
    def pending(self) -> int:
        return max(0, self.total - self.ended - self.running - self.killed)

    @property
    def eta(self) -> float | None:
        """Seconds left: the steps left at the steps' rate so far, less the time since that
        rate was read; without step counts, the mean time per ended trial (None before
        anything is known)."""
        if self.ended >= self.total:
            return 0.0
        if self.steps_done > 0 and self.rate_time > 0:
            return max(0.0, self.steps_left * self.rate_time / self.steps_done - self.since)
        if self.ended == 0:
            return None
        return self.elapsed / self.ended * (self.total - self.ended)


def format_duration(seconds: float | None) -> str:
    """``1:05`` / ``1:02:05``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(max(0.0, seconds)))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def render(snap: Snapshot, width: int | None = None) -> str:
    """The progress line, fitted to ``width`` characters when given: the counts, the best
    value, elapsed and ETA come first; the best trial's name and order only if they fit,
    then shorter counts; a line that still does not fit is cut with ``…``."""
    counts = (f"sweep {snap.ended}/{snap.total} done: {snap.finished} finished, "
              + (f"{snap.stopped} stopped, " if snap.stopped else "")
              + (f"{snap.killed} killed, " if snap.killed else "")
              + f"{snap.running} running, {snap.pending} pending"
              + (f" ({snap.waiting} waiting for resources)" if snap.waiting else "")
              + f", {snap.failed} failed")
    short = f"{snap.ended}/{snap.total} done, {snap.running} running, {snap.failed} failed"
    value = "-" if snap.best_value is None else f"{snap.best_value:.4g}"
    best = f"best {snap.metric} {value}"
    times = f"elapsed {format_duration(snap.elapsed)} | ETA {format_duration(snap.eta)}"
    who = [] if snap.best_value is None else [f" {snap.best_name} ({snap.best_order})",
                                              f" {snap.best_name}"]
    lines = ([f"{counts} | {best}{w} | {times}" for w in who]
             + [f"{c} | {best} | {times}" for c in (counts, short)]
             + [f"{snap.ended}/{snap.total} | {value} | {format_duration(snap.elapsed)} | "
                f"ETA {format_duration(snap.eta)}"])
    if width is None:
        return lines[0]
    line = next((text for text in lines if len(text) <= width), lines[-1])
    return line if len(line) <= width else line[: max(0, width - 1)] + "…"


def _value(result: dict[str, Any] | None, metric: str) -> float | None:
    v = (result or {}).get(metric)
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def snapshot(trials: Sequence[Any], *, total: int, metric: str, mode: str,
             elapsed: float, steps: int | None = None,
             waiting: frozenset[str] | set[str] = frozenset()) -> Snapshot:
    """A :class:`Snapshot` of Ray Tune trials (``status``, ``config``, ``last_result``);
    with the planned ``steps``, an ended trial that last reported short of them is stopped.
    Trials of ``waiting`` (ids) that Tune calls running wait for resources: pending."""
    finished = stopped = killed = running = failed = held = 0
    done = running_left = 0.0
    best: tuple[float, str | None, str | None] | None = None
    for t in trials:
        result = getattr(t, "last_result", None) or {}
        status = getattr(t, "status", "")
        reached = result.get("step")
        if steps is not None and isinstance(reached, int | float) and reached > 0:
            done += min(float(reached), steps)
            if status in ("RUNNING", "PAUSED"):
                running_left += max(0.0, steps - float(reached))
        elif steps is not None and status in ("RUNNING", "PAUSED"):
            running_left += steps
        if status == "ERROR" or (status == "TERMINATED" and result.get("status") in
                                 FAILED_STATUSES):
            failed += 1
        elif status == "TERMINATED" and result.get("done") is False:  # an interrupt ended it
            killed += 1
        elif status == "TERMINATED":
            if steps is not None and ended_status(result, steps) == TrialStatus.STOPPED:
                stopped += 1
            else:
                finished += 1
        elif status in ("RUNNING", "PAUSED"):
            if getattr(t, "trial_id", None) in waiting:
                held += 1  # pending: not training
            else:
                running += 1
        if result.get("status") in FAILED_STATUSES:
            continue
        v = _value(result, metric)
        if v is None:
            continue
        planned: Trial[Any] | None = (getattr(t, "config", None) or {}).get("trial")
        if planned is not None and (best is None or (v < best[0] if mode == "min"
                                                     else v > best[0])):
            best = (v, planned.name, planned.order)
    snap_total = max(total, len(trials))
    pending = max(0, snap_total - finished - stopped - killed - failed - running)
    return Snapshot(total=snap_total, finished=finished, stopped=stopped, killed=killed,
                    running=running, failed=failed, waiting=held, elapsed=elapsed, metric=metric,
                    steps_done=done,
                    steps_left=running_left + pending * steps if steps is not None else 0.0,
                    best_value=None if best is None else best[0],
                    best_name=None if best is None else best[1],
                    best_order=None if best is None else best[2])


class SweepProgress(Callback):
    """Ray Tune callback printing :func:`render` lines to ``stream`` (stderr)."""

    def __init__(self, *, total: int, metric: str, mode: str = "min", steps: int | None = None,
                 stream: TextIO | None = None, tty: bool | None = None,
                 tty_every: float = 0.5, line_every: float = 30.0,
                 end_every: float = 5.0, clock: Callable[[], float] = time.monotonic,
                 several_workers: bool = False) -> None:
        self.total, self.metric, self.mode, self.steps = total, metric, mode, steps
        self.waiting = Waiting(several_workers)
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.every = tty_every if self.tty else line_every
        self.end_every = tty_every if self.tty else end_every
        self.clock = clock
        self.start = _STARTED[0] if _STARTED else clock()
        self.tune_start = clock()
        self.work: tuple[float, float] = (0.0, self.tune_start)  # (steps done, when seen)
        self.last = -math.inf
        self.last_text = ""
        self.drawn = False

    def __getstate__(self) -> dict[str, Any]:
        """Tune pickles its callbacks with the experiment state: a stream cannot be (under
        pytest it is a capture object), so it is dropped and is stderr again when loaded."""
        return {**self.__dict__, "stream": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.stream is None:
            self.stream = sys.stderr
        waiting = state.get("waiting")  # none saved by an older version; none waits yet
        self.waiting = Waiting(bool(waiting and waiting.several_workers))

    def _width(self) -> int | None:
        if not self.tty:
            return None
        return line_width(self.stream) or DEFAULT_COLUMNS - 1

    def show(self, trials: Sequence[Any], *, force: bool = False, final: bool = False,
             every: float | None = None) -> None:
        """Draw the line, unless one was drawn less than ``every`` s ago (default: the
        periodic interval) and not ``force``. Each draw reads every trial, so a draw per
        ended trial would cost the driver time growing with the square of the trials."""
        now = self.clock()
        if not force and now - self.last < (self.every if every is None else every):
            return
        snap = snapshot(trials, total=self.total, metric=self.metric, mode=self.mode,
                        elapsed=now - self.start, steps=self.steps, waiting=self.waiting.ids)
        if snap.steps_done != self.work[0]:
            self.work = (snap.steps_done, now)
        snap = replace(snap, rate_time=self.work[1] - self.tune_start, since=now - self.work[1])
        text = render(snap, self._width())
        if not self.tty and text == self.last_text and not final:
            return
        self.last, self.last_text = now, text
        try:
            if self.tty:
                self.stream.write("\r\x1b[K" + text + ("\n" if final else ""))
                self.drawn = not final
            else:
                self.stream.write(text + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # a closed terminal must not stop the sweep
            pass

    def setup(self, stop: object = None, num_samples: int | None = None,
              total_num_samples: int | None = None, **info: object) -> None:
        self.tune_start = self.clock()
        self.work = (0.0, self.tune_start)
        self.show([], force=True)  # at once: the first trial may take a while to report

    def on_step_end(self, iteration: int, trials: list[RayTrial], **info: object) -> None:
        self.show(trials)

    def on_trial_start(self, iteration: int, trials: list[RayTrial], trial: RayTrial, **info: object) -> None:
        self.waiting.started(trial)

    def on_trial_result(self, iteration: int, trials: list[RayTrial], trial: RayTrial, result: dict,
                        **info: object) -> None:
        self.waiting.reported(trial)

    def on_trial_complete(self, iteration: int, trials: list[RayTrial], trial: RayTrial,
                          **info: object) -> None:
        self.waiting.ended(trial)
        self.show(trials, every=self.end_every)

    def on_trial_error(self, iteration: int, trials: list[RayTrial], trial: RayTrial,
                       **info: object) -> None:
        self.waiting.ended(trial)
        self.show(trials, force=True)

    def on_experiment_end(self, trials: list[RayTrial], **info: object) -> None:
        self.show(trials, force=True, final=True)
