"""The Pareto front of quality against cost (parameters or FLOPs per token) of a sweep.

:func:`pareto_front` is a pure info function over the trial frame: every usable trial
(finished, finite final metric, a known cost) is a point; a point is on the front when
no other point is at least as good on both axes and better on one. Orders trained with
several seeds are points per seed (the figure shows the spread the front rests on).
:func:`plot_pareto` draws the points, the front as a step line, and names its orders;
the report's section (or why none) is :mod:`analysis.report.pareto`.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import lower_is_better, usable

__all__ = ["COSTS", "ParetoInfo", "pareto_front", "plot_pareto"]

COSTS: dict[str, str] = {"flops_per_token": "FLOPs per token", "params": "parameters"}
"""Cost columns of the trial frame a front can trade quality against, with axis labels."""


@dataclass(frozen=True)
class ParetoInfo:
    points: pd.DataFrame
    """Every usable trial: name, order, family, cost, final, on_front (bool)."""
    front: pd.DataFrame
    """The points on the front, cheapest first."""
    metric: str
    cost: str


def _dominated(cost: np.ndarray, loss: np.ndarray) -> np.ndarray:
    """For each point: is another at most as costly and as bad, and better on one axis?"""
    le = (cost[None, :] <= cost[:, None]) & (loss[None, :] <= loss[:, None])
    lt = (cost[None, :] < cost[:, None]) | (loss[None, :] < loss[:, None])
    return np.asarray((le & lt).any(axis=1))


def pareto_front(frame: pd.DataFrame, *, metric: str, cost: str = "flops_per_token") -> ParetoInfo:
    """Points and front of ``metric`` (final values) against ``cost`` (a frame column)."""
    if cost not in COSTS:
        raise AnalysisError(f"cost must be one of {', '.join(COSTS)}, got {cost!r}")
    if cost not in frame.columns:
        raise AnalysisError(f"the trials have no {cost!r} column")
    rows = usable(frame, metric)
    rows = rows[pd.to_numeric(rows[cost], errors="coerce").notna()]
    if rows.empty:
        raise AnalysisError(f"no finished trial with a {metric} value and a known {cost}")
    points = pd.DataFrame(
        {
            "name": rows["name"].to_numpy(),
            "order": rows["order"].to_numpy(),
            "family": rows["family"].to_numpy(),
            "cost": pd.to_numeric(rows[cost]).to_numpy(dtype=float),
            "final": rows["final"].to_numpy(dtype=float),
        }
    )
    loss = points["final"].to_numpy() * (1.0 if lower_is_better(metric) else -1.0)
    points["on_front"] = ~_dominated(points["cost"].to_numpy(), loss)
    front = points[points["on_front"]].sort_values(["cost", "final"]).reset_index(drop=True)
    return ParetoInfo(points=points, front=front, metric=metric, cost=cost)


def _short(order: str, limit: int = 18) -> str:
    return order if len(order) <= limit else order[: limit - 1] + "…"


def plot_pareto(info: ParetoInfo, *, title: str) -> Figure:
    """All trials (grey), the front (a step line through its points) and its orders named."""
    fig, ax = plt.subplots(figsize=(8.0, 5.0))
    off = info.points[~info.points["on_front"]]
    ax.scatter(off["cost"], off["final"], color="0.6", s=22, label="trial (dominated)")
    front = info.front
    ax.step(front["cost"], front["final"], where="post", color="C3", lw=1.5, label="Pareto front")
    ax.scatter(
        front["cost"],
        front["final"],
        color="C3",
        s=36,
        zorder=3,
        label=f"on the front ({len(front)})",
    )
    for row in front.itertuples():
        ax.annotate(
            f"{row.name}\n{_short(str(row.order))}",
            (row.cost, row.final),
            textcoords="offset points",
            xytext=(6, 4),
            fontsize=7,
            color="C3",
        )
    better = "lower" if lower_is_better(info.metric) else "higher"
    ax.set_xlabel(f"{COSTS[info.cost]} (fewer is cheaper)")
    ax.set_ylabel(f"final {info.metric} ({better} is better)")
    ax.set_title(title)
    ax.margins(x=0.15, y=0.12)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    fig.tight_layout()
    return fig
