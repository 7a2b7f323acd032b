"""The calibration of comeback stopping (:mod:`...stopping.comeback`) from the
recorded curves of the studies shipped with the package, leaving out the judged one:
the comeback envelope (:func:`calibrate`) and where its curves come from. No Ray, no
MLflow: a sweep's dry run prints :func:`calibration_line`.

The shipped studies with whole recorded curves are :data:`CURVE_STUDIES` (their
``analysis/data/*_curves.csv``, read by the export loaders). A replayed or swept study
that *is* one of them is left out by content, as the transferred prior leaves it out
(:func:`...searchers.prior.same_study`: the same name, or any (order, final value)
record in common), never by trust: a rule is never calibrated on the study it is judged
on.
"""

from __future__ import annotations

import functools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sublayer_search.search.recorded.arrival import judged_table
from sublayer_search.search.recorded.curves import RecordedSweep
from sublayer_search.search.recorded.errors import ReplayError
from sublayer_search.search.searchers.prior import PriorTable, same_study
from sublayer_search.spaces.records import direction

__all__ = ["ARRIVALS", "CURVE_STUDIES", "MIN_FIELD_PER_K", "SAFETY", "Calibration",
           "calibrate", "calibration_for", "calibration_line", "comeback_events", "deficit",
           "study_curves"]

CURVE_STUDIES = ("replay40", "mini_press2020")
"""Shipped studies whose every curve was recorded whole (FIFO sweeps)."""
SAFETY = 1.5
"""The margin over the largest comeback the calibration saw (fixed before any judging)."""
MIN_FIELD_PER_K = 2
"""Candidates that must have reached a step, per k, before a decision at that step."""
ARRIVALS = 50
"""Seeded random arrival orders per calibration study, besides its recorded one."""

StudyCurves = Sequence[tuple[Mapping[float, float], float]]
"""One study's candidates: (training fraction -> value, final value), lower better."""


def deficit(value: float, field: np.ndarray, k: int) -> float | None:
    """``value`` minus the k-th best of ``field`` over the field's interquartile range
    (None: fewer than k values, or no spread)."""
    if len(field) < k:
        return None
    kth = float(np.partition(field, k - 1)[k - 1])
    q1, q3 = np.percentile(field, [25, 75])
    spread = float(q3 - q1)
    return (value - kth) / spread if spread > 0 else None


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """The largest comeback of an eventual top-k candidate, from a fraction of training on."""

    k: int
    fractions: tuple[float, ...]
    """Training fractions of the calibration's evaluations, ascending."""
    comeback: tuple[float, ...]
    """At each fraction: the largest deficit from there on (non-increasing)."""
    sources: tuple[str, ...]
    events: int = 0

    def at(self, fraction: float) -> float:
        """The comeback at ``fraction`` of training (before the first calibrated fraction:
        the first one's, the largest)."""
        if not self.fractions:
            return math.inf
        i = max([j for j, f in enumerate(self.fractions) if f <= fraction + 1e-9], default=0)
        return self.comeback[i]

    def describe(self) -> str:
        """One line: what the rule is calibrated on and what it allows."""
        shown = ", ".join(f"{c:.2f} at {f:.0%}" for f, c in zip(self.fractions,
                                                                  self.comeback, strict=True))
        return (f"stopping calibrated on {', '.join(self.sources) or 'nothing'} "
                f"({self.events} deficits of eventual top-{self.k} candidates): they came back "
                f"from at most {shown or '-'} (IQRs behind the top {self.k}'s last, by fraction "
                f"of training); a candidate stops beyond {SAFETY:g}x that")


def comeback_events(study: StudyCurves, *, k: int, min_field: int, arrivals: int = ARRIVALS,
                    seed: int = 0) -> list[tuple[float, float]]:
    """(fraction, deficit) of every eventual top-k candidate of ``study`` at each of its
    evaluations before the end, seen online: the field is the candidates before it in the
    arrival order (the given one, then ``arrivals`` seeded shuffles) and itself."""
    finals = sorted(range(len(study)), key=lambda i: (study[i][1], i))
    top = set(finals[:k])
    rng = random.Random(seed)
    orders = [list(range(len(study)))]
    for _ in range(arrivals):
        order = list(range(len(study)))
        rng.shuffle(order)
        orders.append(order)
    events = []
    for order in orders:
        for pos, i in enumerate(order):
            if i not in top or pos + 1 < min_field:
                continue
            curve = study[i][0]
            for fraction in sorted(curve)[:-1]:
                field = np.array([study[j][0][fraction] for j in order[:pos + 1]
                                  if fraction in study[j][0]])
                if len(field) < min_field:
                    continue
                d = deficit(curve[fraction], field, k)
                if d is not None:
                    events.append((fraction, d))
    return events


def calibrate(studies: Mapping[str, StudyCurves], *, k: int = 3,
              arrivals: int = ARRIVALS) -> Calibration:
    """The comeback envelope over the ``studies``' eventual top-k candidates."""
    events = [e for study in studies.values() for e in comeback_events(
        study, k=k, min_field=MIN_FIELD_PER_K * k, arrivals=arrivals)]
    fractions = sorted({f for f, _ in events})
    comeback = [max(0.0, max(d for f, d in events if f >= g - 1e-9)) for g in fractions]
    return Calibration(k=k, fractions=tuple(fractions), comeback=tuple(comeback),
                       sources=tuple(studies), events=len(events))


@functools.cache
def _shipped(name: str) -> RecordedSweep:
    from sublayer_search.search.recorded.from_export import open_export, sweep_from_export

    return sweep_from_export(open_export(name, builtin=True))


def study_curves(sweep: RecordedSweep) -> StudyCurves:
    """A recorded sweep's finished candidates as the calibration reads them: training
    fraction -> value and final value, both signed so that lower is better."""
    sign = 1.0 if direction(sweep.scheduler_metric) == "min" else -1.0
    rank = 1.0 if direction(sweep.metric) == "min" else -1.0
    out = []
    for c in sweep.curves:
        if c.baseline or not c.complete or not math.isfinite(c.final):
            continue
        out.append(({round(p.step / sweep.steps, 6): sign * p.value for p in c.points},
                    rank * c.final))
    return tuple(out)


@functools.cache
def _calibration(names: tuple[str, ...], k: int) -> Calibration:
    return calibrate({n: study_curves(_shipped(n)) for n in names}, k=k)


def calibration_for(judged: PriorTable | None = None, *, k: int = 3) -> Calibration:
    """The calibration from every shipped curve study but ``judged``'s (by content);
    :class:`ReplayError` when none is left."""
    names = tuple(n for n in CURVE_STUDIES if judged is None or not same_study(
        judged_table(n, _shipped(n).curves), judged))
    if not names:
        raise ReplayError("calibration", judged.study if judged else None,
                          f"a study to calibrate on other than the judged one (shipped: "
                          f"{', '.join(CURVE_STUDIES)})")
    return _calibration(names, k)


def calibration_line(calibration: Calibration | None = None) -> str:
    """One line for a sweep's dry run: what ``scheduler: {type: curve}`` stopping is
    calibrated on (default: every shipped curve study, as a live sweep uses it)."""
    return (calibration or calibration_for()).describe()
