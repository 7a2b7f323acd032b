"""Distribution study (Press et al. 2020, Fig. 2/3): candidate orders against baseline seeds."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    at_least_as_good,
    stopped_candidates,
    study_inputs,
)

__all__ = ["DistributionInfo", "distribution"]


@dataclass(frozen=True, kw_only=True)
class DistributionInfo:
    """Result of :func:`distribution`.

    ``models`` has one row per usable candidate trial (sorted best first) with columns
    name, order, k (the sandwich coefficient, else empty), value, at_least_average,
    at_least_best. "At least as good" means
    ``<=`` for lower-is-better metrics (``>=`` otherwise), as in the paper's "7 of 20".
    """

    metric: str
    column: str
    baseline: BaselineStats
    models: pd.DataFrame
    n_unusable: int
    stopped: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Candidates stopped early by the scheduler (name, order, value at their last step,
    steps): shown as a group of their own, never counted with the trained ones."""

    def __post_init__(self) -> None:
        if self.models.empty:
            raise AnalysisError(f"no usable non-baseline trial for metric {self.metric!r}")

    @property
    def n_models(self) -> int:
        return len(self.models)

    @property
    def count_at_least_average(self) -> int:
        return int(self.models["at_least_average"].sum())

    @property
    def count_at_least_best(self) -> int:
        return int(self.models["at_least_best"].sum())

    @property
    def best_model(self) -> pd.Series:
        return self.models.iloc[0]

    def summary(self) -> dict[str, float | int | str]:
        """Key numbers, flat, for tables and reports."""
        best = self.best_model
        return {
            "metric": self.metric,
            "n_models": self.n_models,
            "n_unusable": self.n_unusable,
            "n_baseline": self.baseline.n,
            "baseline_mean": self.baseline.mean,
            "baseline_sd": self.baseline.sd,
            "baseline_best": self.baseline.best,
            "count_at_least_average": self.count_at_least_average,
            "count_at_least_best": self.count_at_least_best,
            "best_name": str(best["name"]),
            "best_order": str(best["order"]),
            "best_value": float(best["value"]),
        }


def distribution(
    frame: pd.DataFrame, *, metric: str | None = None, column: str = "final"
) -> DistributionInfo:
    """Count candidate trials at least as good as the average and the best baseline.

    Failed, diverged, killed and unfinished trials are left out of the counts and
    reported as ``n_unusable``; trials stopped early are left out too and kept apart in
    ``stopped`` (unless the frame went through :func:`~.frame.with_stopped`).
    """
    frame, metric, base, rows = study_inputs(frame, metric, column=column, require_rows=False)
    all_candidates = frame[(frame["metric"] == metric) & ~frame["baseline"]]
    values = rows[column].to_numpy(dtype=float)
    lower = base.lower_is_better
    models = pd.DataFrame(
        {
            "run_id": rows["run_id"].to_numpy(),
            "name": rows["name"].to_numpy(),
            "order": rows["order"].to_numpy(),
            "k": rows["k"].to_numpy() if "k" in rows.columns else [None] * len(rows),
            "value": values,
            "at_least_average": at_least_as_good(values, base.mean, lower=lower),
            "at_least_best": at_least_as_good(values, base.best, lower=lower),
        }
    )
    order = np.argsort(values if lower else -values, kind="stable")
    models = models.iloc[order].reset_index(drop=True)
    halted = stopped_candidates(frame, metric, column=column)
    stopped = pd.DataFrame({"name": halted["name"].to_numpy(), "order": halted["order"].to_numpy(),
                            "value": halted[column].to_numpy(dtype=float),
                            "steps": (halted["steps"].to_numpy() if "steps" in halted
                                      else [None] * len(halted))})
    return DistributionInfo(
        metric=metric,
        column=column,
        baseline=base,
        models=models,
        n_unusable=len(all_candidates) - len(rows) - len(stopped),
        stopped=stopped,
    )
