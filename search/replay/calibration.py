"""The calibration of comeback stopping (:mod:`...run.comeback_stopping`) from the
recorded curves of the studies shipped with the package, leaving out the judged one.

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

from sublayer_search.search.replay.arrival import judged_table
from sublayer_search.search.replay.engine import ReplayError
from sublayer_search.search.replay.store import RecordedSweep
from sublayer_search.search.run.comeback_stopping import Calibration, StudyCurves, calibrate
from sublayer_search.search.searchers.prior import PriorTable, same_study
from sublayer_search.spaces.records import direction

__all__ = ["CURVE_STUDIES", "calibration_for", "calibration_line", "study_curves"]

CURVE_STUDIES = ("replay40", "mini_press2020")
"""Shipped studies whose every curve was recorded whole (FIFO sweeps)."""


@functools.cache
def _shipped(name: str) -> RecordedSweep:
    from sublayer_search.search.replay.from_export import open_export, sweep_from_export

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
