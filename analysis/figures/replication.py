"""Figures of a complete replication study (:mod:`analysis.report.replication`).

``plot_overview`` is the study's main figure: every model against the baseline seeds'
band, the sandwich curve against the same band (with each k's tested verdict when given),
and the halves question for the random models, one colour and Spearman rho per family. ``plot_single_runs`` shows the tested difference of each random order.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from sublayer_search.analysis.figures.plots import metric_label
from sublayer_search.analysis.store.frame import BaselineStats
from sublayer_search.analysis.studies.halves import HalvesInfo
from sublayer_search.analysis.studies.replication import RANDOM_FAMILIES
from sublayer_search.analysis.studies.significance import ADJUST_NAMES, PAIRED
from sublayer_search.spaces.generators.sandwich import SANDWICH

__all__ = ["plot_overview", "plot_single_runs"]

_VERDICT_COLORS = {"better": "tab:blue", "worse": "tab:red", "no evidence": "0.45"}


def _band(ax: plt.Axes, base: BaselineStats, *, vertical: bool = False) -> None:
    span = ax.axvspan if vertical else ax.axhspan
    line = ax.axvline if vertical else ax.axhline
    span(base.mean - base.sd, base.mean + base.sd, color="tab:red", alpha=0.12,
         label=f"baseline mean ± sd (n={base.n})")
    line(base.mean, color="tab:red", linestyle="--", linewidth=1.1)


def plot_overview(frame: pd.DataFrame, base: BaselineStats, halves: HalvesInfo | None, *,
                  metric: str, title: str, families: pd.DataFrame | None = None,
                  verdicts: pd.DataFrame | None = None) -> Figure:
    """Three panels: models by family, the sandwich curve (left out when the sweep has no
    sandwich orders; ``verdicts``, the sandwiches' :func:`seeds.seed_comparison` table,
    puts each k's verdict against the baseline and the test that decided it in the panel's
    title), metric against bottom-half s
    (one colour per random family; ``families``, :func:`replication.by_family`'s table,
    gives each family's Spearman rho in the legend and the pooled one in the title)."""
    rows = frame[frame["status"] == "finished"]
    sand = rows[(rows["family"] == SANDWICH) & ~rows["baseline"] & rows["k"].notna()]
    panels = 3 if len(sand) else 2  # no sandwich orders: no sandwich panel
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 4.6), layout="constrained")
    _models_panel(axes[0], rows, base, metric)
    if len(sand):
        _sandwich_panel(axes[1], rows, sand, base, metric, verdicts)
    if halves is None:
        ax = axes[-1]
        ax.text(0.5, 0.5, "no random models", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
    else:
        _halves_panel(axes[-1], frame, halves, base, metric, families)
    fig.suptitle(title)
    return fig


def _models_panel(ax: Axes, rows: pd.DataFrame, base: BaselineStats, metric: str) -> None:
    """Every finished model by family (the baseline seeds first), the baseline's band."""
    groups = [("baseline seeds", rows[rows["baseline"]])]
    groups += [(fam, sel) for fam in (*RANDOM_FAMILIES, "sandwich")
               if len(sel := rows[(rows["family"] == fam) & ~rows["baseline"]])]
    rng = np.random.default_rng(0)
    for i, (_, sel) in enumerate(groups):
        x = i + rng.uniform(-0.18, 0.18, len(sel))
        ax.scatter(x, sel["final"], s=18, color="tab:red" if i == 0 else "black", alpha=0.75)
    _band(ax, base)
    ax.set_xticks(range(len(groups)), [f"{g}\n(n={len(s)})" for g, s in groups], fontsize=8)
    ax.set_ylabel(metric_label(metric))
    ax.set_title("every model (one point per trial)", fontsize=10)
    ax.legend(fontsize=8, loc="best", framealpha=0.85)


def _halves_panel(ax: Axes, frame: pd.DataFrame, halves: HalvesInfo, base: BaselineStats,
                  metric: str, families: pd.DataFrame | None) -> None:
    """The random models' metric against self-attention in the bottom half, by family."""
    models = halves.models
    family_of = frame.set_index("run_id")["family"].to_dict() if "run_id" in frame else {}
    fams = models["run_id"].map(family_of) if "run_id" in models else None
    rhos = {} if families is None else {
        r.family: f" (rho {r.spearman_rho:+.2f}, p = {r.spearman_p:.2g}, n = {r.n})"
        for r in families.itertuples()}
    colors = {"permutations": "black", "budgeted": "tab:orange"}
    if fams is None or fams.isna().all():
        ax.scatter(models["bottom_s"], models["value"], s=18, color="black", alpha=0.75,
                   label="random model (both tables)")
    else:
        for fam in RANDOM_FAMILIES:
            sel = (fams == fam).to_numpy()
            if sel.any():
                ax.scatter(models.loc[sel, "bottom_s"], models.loc[sel, "value"], s=18,
                           color=colors.get(fam, "0.3"), alpha=0.75,
                           label=f"{fam}{rhos.get(fam, '')}")
    _band(ax, base)
    rho = halves.spearman
    ax.set_xlabel("self-attention sublayers in the bottom half (count)")
    ax.set_ylabel(metric_label(metric))
    ax.set_title("random models: attention in the bottom half" + (
        "\nSpearman per family (legend); families differ in s: not pooled"
        if rhos else
        f"\npooled Spearman rho {rho.rho:+.2f}, p = {rho.pvalue:.2g}, n = {rho.n}"
        if rho is not None else ""), fontsize=10)
    ax.legend(fontsize=7, loc="best", framealpha=0.85)


def _verdict_line(sand: pd.DataFrame, verdicts: pd.DataFrame | None) -> str:
    """"vs baseline (paired t, Holm): better: k = 2; no evidence: k = 1, 3" from the
    seed table (one row per order) and the sandwich trials (order -> k)."""
    if verdicts is None or verdicts.empty:
        return ""
    k_of = sand.drop_duplicates("order").set_index("order")["k"].astype(int)
    ks = verdicts.assign(k=verdicts["order"].map(k_of)).dropna(subset=["k"])
    test = "paired t" if (ks["decides"] == PAIRED).all() else "Welch t"
    adjust = str(ks["adjust"].iloc[0]) if len(ks) else "none"
    parts = [f"{call}: k = {', '.join(str(k) for k in sorted(ks.loc[sel, 'k'].astype(int)))}"
             for call in _VERDICT_COLORS if (sel := ks["verdict"] == call).any()]
    return f"\nvs baseline ({test}, {ADJUST_NAMES.get(adjust, adjust)}): " + "; ".join(parts)


def _sandwich_panel(ax: Axes, rows: pd.DataFrame, sand: pd.DataFrame, base: BaselineStats,
                    metric: str, verdicts: pd.DataFrame | None = None) -> None:
    """The sandwich curve: each k's trials with mean and sd, the baseline seeds as k = 0;
    with ``verdicts``, each k's tested verdict in the title."""
    points = pd.concat([pd.DataFrame({"k": 0, "final": rows.loc[rows["baseline"], "final"]}),
                        sand[["k", "final"]]]).astype({"k": int})
    stats = points.groupby("k")["final"].agg(["mean", "std", "count"]).reset_index()
    ax.scatter(points["k"], points["final"], s=12, color="0.6", label="one trial (seed)")
    ax.errorbar(stats["k"], stats["mean"], yerr=stats["std"].fillna(0), marker="o",
                color="black", capsize=3, label="mean ± sd over seeds (k = 0: baseline)")
    _band(ax, base)
    ax.set_xlabel("sandwich coefficient k (count)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(metric_label(metric))
    ax.set_title("sandwich s^k (sf)^(n-k) f^k" + _verdict_line(sand, verdicts), fontsize=10)
    ax.legend(fontsize=8, loc="best", framealpha=0.85)


def plot_single_runs(runs: pd.DataFrame, *, metric: str) -> Figure:
    """Each random order's difference from the baseline mean with its prediction interval,
    coloured by the adjusted verdict."""
    fig, ax = plt.subplots(figsize=(8.4, 0.2 * len(runs) + 1.8), layout="constrained")
    y = np.arange(len(runs))
    for verdict, color in _VERDICT_COLORS.items():
        sel = runs["verdict"] == verdict
        if sel.any():
            ax.errorbar(runs.loc[sel, "difference"], y[sel.to_numpy()],
                        xerr=[runs.loc[sel, "difference"] - runs.loc[sel, "ci_low"],
                              runs.loc[sel, "ci_high"] - runs.loc[sel, "difference"]],
                        fmt="o", color=color, capsize=2, markersize=4,
                        label=f"{verdict} ({int(sel.sum())})")
    ax.axvline(0, color="tab:red", linestyle="--", linewidth=1.1, label="baseline mean")
    ax.set_yticks(y, [f"{n} {o}" for n, o in zip(runs["name"], runs["order"], strict=True)],
                  fontsize=6, family="monospace")
    ax.invert_yaxis()
    ax.set_xlabel(f"difference from the baseline mean ({metric_label(metric)})")
    conf = runs.attrs.get("confidence", 0.95)
    ax.set_title(f"Random orders against the baseline seeds: {conf:.0%} intervals, "
                 f"{runs.attrs.get('adjust', 'holm')}-adjusted verdicts\none seed: prediction "
                 "interval assuming the order's seed sd is the baseline's; several: Welch",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
