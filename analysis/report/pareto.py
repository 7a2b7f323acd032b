"""The report's Pareto section: the front of quality against each cost that varies, or why not.

A front is drawn against a cost (parameters, FLOPs per token) when the usable trials
(finished, a finite final metric, a known cost) differ both in the metric and in that
cost: two objectives that vary. Otherwise the section says what is missing (fewer than
two usable trials, a cost every trial shares, a metric every trial shares), so a report
never leaves the front out without a word.
"""

from __future__ import annotations

import pandas as pd

from sublayer_search.analysis.report.writer import Writer
from sublayer_search.analysis.store.frame import usable
from sublayer_search.analysis.studies.pareto import COSTS, pareto_front, plot_pareto

__all__ = ["pareto_reasons", "pareto_section"]


def pareto_reasons(frame: pd.DataFrame, *, metric: str) -> dict[str, str | None]:
    """For each cost of :data:`COSTS`: None when a front against it can be drawn, else why not."""
    rows = usable(frame, metric)
    out: dict[str, str | None] = {}
    for cost, label in COSTS.items():
        known = (pd.to_numeric(rows[cost], errors="coerce").dropna()
                 if cost in rows.columns else pd.Series(dtype=float))
        with_cost = rows.loc[known.index]
        if known.empty:
            out[cost] = f"no finished trial with a final {metric} has a known {cost}"
        elif len(known) < 2:
            out[cost] = (f"one finished trial with a final {metric} and a known {cost}: "
                         "a front needs two")
        elif known.nunique() < 2:
            out[cost] = (f"all {len(known)} usable trials have the same {label} "
                         f"({known.iloc[0]:,.0f}): no trade-off against it")
        elif with_cost["final"].nunique() < 2:
            out[cost] = (f"all {len(known)} usable trials have the same final {metric} "
                         f"({with_cost['final'].iloc[0]:.4g}): nothing to trade")
        else:
            out[cost] = None
    return out


def pareto_section(w: Writer, frame: pd.DataFrame, *, metric: str) -> None:
    """One section per cost a front can be drawn against; one section saying why when none."""
    reasons = pareto_reasons(frame, metric=metric)
    drawn = [cost for cost, why in reasons.items() if why is None]
    if not drawn:
        sec = w.section(f"Pareto front: not drawn ({metric} against cost)",
                        "A front needs two objectives that vary over the usable trials "
                        f"(finished, a final {metric}, a known cost): {metric} and a cost.")
        sec.numbers += [(f"against {COSTS[cost]}", str(why)) for cost, why in reasons.items()]
        return
    for cost in drawn:
        label = COSTS[cost]
        info = pareto_front(frame, metric=metric, cost=cost)
        sec = w.section(
            f"Pareto front: {metric} against {label}",
            "Every finished trial (seeds apart); on the front: no other trial is "
            f"at least as good on {metric} and as cheap, and better on one of them.",
        )
        sec.numbers += [
            (
                f"on the front ({label})",
                ", ".join(
                    f"{r.name} ({r.order}: {r.final:.4g} at {r.cost:.4g})"
                    for r in info.front.itertuples()
                ),
            ),
            ("trials drawn", f"{len(info.points)} ({info.points['cost'].nunique()} distinct "
                             f"{label} values)"),
        ]
        sec.numbers += [(f"no front against {COSTS[other]}", str(why))
                        for other, why in reasons.items() if why is not None]
        w.figure(sec, f"pareto_{cost}",
                 plot_pareto(info, title=f"Pareto front: final {metric} against {label}"))
        w.table(sec, f"pareto_{cost}", info.points)
