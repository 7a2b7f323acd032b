"""Re-time a recorded sweep as if its trials had started in another order
(``sublayer replay --arrival prior``).

A sweep that starts its trials in the prior's order (:func:`...searchers.queue.prior_queue`:
baseline seeds first, then the candidates best-predicted first) with the recorded sweep's
own concurrency and each trial's own recorded durations:

- **concurrency**: the most trials that ran at once in the recorded sweep, from the
  trials' recorded start and end (:func:`concurrency`). The sweep's ``max_concurrent``
  is not in its MLflow record, and a sweep may have run fewer trials at once than it
  allowed (a cluster that held fewer): what it did is what its timings show.
- **durations**: each trial keeps the offsets of its evaluations (and of its end) from
  its own start; only its start moves.
- **slots**: the queue's next trial starts when the earliest running trial ends, as a
  FIFO sweep with ``max_concurrent`` slots starts them. The re-timing is done once, for
  whole trials: a replayed scheduler that stops a trial does not start the next one
  earlier (the replay engine's rule for every arrival, ``engine`` docstring).

Pure: curves in, curves out; no Ray, no MLflow.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

from sublayer_search.search.recorded.curves import Curve
from sublayer_search.search.recorded.errors import ReplayError
from sublayer_search.search.searchers.prior import OrderPrior, PriorTable
from sublayer_search.search.searchers.queue import prior_queue
from sublayer_search.spaces.order import any_order

__all__ = ["concurrency", "in_prior_order", "judged_table", "retime"]


def concurrency(curves: Sequence[Curve]) -> int:
    """The most trials that ran at once: start-end intervals, an end before a start at
    the same instant (a slot handed on is not two trials at once); 1 for one trial."""
    events = sorted([(c.started, 1) for c in curves] + [(c.ended, -1) for c in curves])
    running = most = 0
    for _, change in events:
        running += change
        most = max(most, running)
    return max(most, 1)


def retime(curves: Sequence[Curve], queue: Sequence[str], *, slots: int) -> list[Curve]:
    """``curves`` started in the order of ``queue`` (trial names, each curve once), at most
    ``slots`` at a time, each trial's durations as recorded; returned in queue order."""
    if slots < 1:
        raise ReplayError("concurrency", slots, "a whole number of trials >= 1")
    by_name = {c.name: c for c in curves}
    if sorted(queue) != sorted(by_name) or len(by_name) != len(curves):
        raise ReplayError("queue", list(queue)[:5], "every trial's name once")
    origin = min((c.started for c in curves), default=0.0)
    free = [origin] * slots  # when each slot is free again
    out = []
    for name in queue:
        curve = by_name[name]
        start = heapq.heappop(free)
        shift = start - curve.started
        end = curve.ended + shift
        out.append(replace(curve, start=start, end=end,
                           points=tuple(replace(p, time=p.time + shift) for p in curve.points)))
        heapq.heappush(free, end)
    return out


def in_prior_order(curves: Sequence[Curve], prior: OrderPrior | None, *,
                   f_units: float = 2.0) -> list[Curve]:
    """The recorded sweep re-timed so that its trials start in the prior's queue order
    (:func:`prior_queue`), with its own concurrency and durations."""
    recorded = sorted(curves, key=lambda c: c.started)  # stable: ties keep the given order
    queue = prior_queue(recorded, orders=lambda c: [c.order] if c.order else [],
                        baseline=lambda c: c.baseline, prior=prior, f_units=f_units)
    return retime(curves, [c.name for c in queue], slots=concurrency(curves))


def judged_table(study: str, curves: Sequence[Curve], *, mode: str = "min") -> PriorTable:
    """The replayed sweep as a prior table (its finished trials' order and final value):
    what :func:`...searchers.prior.same_study` compares to leave it out of a prior or a
    calibration by content."""
    records = []
    for c in curves:
        if c.complete and c.order and c.final == c.final:
            try:
                records.append((any_order(c.order), float(c.final)))
            except ValueError:
                continue  # an order the decoder grammar does not read: no record of it
    return PriorTable(study=study, table=f"{study}/replayed", records=tuple(records), mode=mode)
