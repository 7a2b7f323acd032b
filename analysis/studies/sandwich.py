"""Sandwich coefficient study (Press et al. 2020, Fig. 5): metric against k."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    at_least_as_good,
    study_inputs,
)

__all__ = ["SandwichInfo", "sandwich_curve"]


@dataclass(frozen=True, kw_only=True)
class SandwichInfo:
    """Result of :func:`sandwich_curve`.

    ``points``: one row per k with n (trials), mean, sd (NaN for one trial), min, max,
    beats_average, beats_best (mean at least as good as the average / best baseline).
    ``trials``: the individual trials (k, name, seed, value).
    """

    metric: str
    baseline: BaselineStats
    points: pd.DataFrame
    trials: pd.DataFrame

    def __post_init__(self) -> None:
        if self.points.empty:
            raise AnalysisError("sandwich study needs at least one trial with a k")

    @property
    def best_k(self) -> int:
        values = self.points["mean"]
        idx = values.idxmin() if self.baseline.lower_is_better else values.idxmax()
        return int(self.points.loc[idx, "k"])

    def ks_beating(self, which: str = "average") -> list[int]:
        if which not in ("average", "best"):
            raise AnalysisError(f"which must be 'average' or 'best', got {which!r}")
        col = f"beats_{which}"
        return [int(k) for k in self.points.loc[self.points[col], "k"]]


def sandwich_curve(
    frame: pd.DataFrame, *, metric: str | None = None, column: str = "final"
) -> SandwichInfo:
    """Mean (± sd over seeds) of the metric per sandwich coefficient k, with the
    average and best baseline for reference. Candidate rows need a ``k``."""
    frame, metric, base, rows = study_inputs(frame, metric, column=column, require_rows=False)
    rows = rows[rows["k"].notna()]
    if rows.empty:
        raise AnalysisError(
            f"no usable non-baseline trial with a sandwich coefficient k for metric {metric!r}"
        )
    trials = pd.DataFrame(
        {
            "k": rows["k"].astype(int).to_numpy(),
            "name": rows["name"].to_numpy(),
            "seed": rows["seed"].to_numpy(),
            "value": rows[column].to_numpy(dtype=float),
        }
    )
    grouped = trials.groupby("k")["value"]
    points = pd.DataFrame(
        {
            "n": grouped.size(),
            "mean": grouped.mean(),
            "sd": grouped.std(ddof=1),
            "min": grouped.min(),
            "max": grouped.max(),
        }
    ).reset_index()
    lower = base.lower_is_better
    points["beats_average"] = at_least_as_good(points["mean"], base.mean, lower=lower)
    points["beats_best"] = at_least_as_good(points["mean"], base.best, lower=lower)
    return SandwichInfo(metric=metric, baseline=base, points=points, trials=trials)
