"""Matplotlib figures built from the study results (Agg backend; no logic of their own).

Agg backend, except inside a Jupyter kernel (where the inline backend shows figures).
Every figure has a title, labelled axes with units, a legend, and named baseline lines.
"""

from __future__ import annotations

import sys

import matplotlib

if "ipykernel" not in sys.modules:  # headless everywhere except inside a Jupyter kernel
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from sublayer_search.analysis.studies.distribution import DistributionInfo  # noqa: E402
from sublayer_search.analysis.studies.halves import GROUPS, HalvesInfo  # noqa: E402
from sublayer_search.analysis.studies.iot_routing import RoutingMatrixInfo, RoutingSharesInfo  # noqa: E402
from sublayer_search.analysis.studies.iot_subsets import SubsetsInfo  # noqa: E402
from sublayer_search.analysis.studies.sandwich import SandwichInfo, headline, leaders  # noqa: E402
from sublayer_search.analysis.studies.seeds import SeedsInfo  # noqa: E402

__all__ = [
    "metric_label",
    "plot_attention_distances",
    "plot_distribution",
    "plot_halves",
    "plot_history",
    "plot_iot_sizes",
    "plot_iot_subsets",
    "plot_route_shares",
    "plot_routing_matrix",
    "plot_position_map",
    "plot_sandwich",
    "plot_seeds",
]

_UNITS = {"ppl": "perplexity", "bpc": "bits per character", "loss": "nats per token",
          "bleu": "BLEU"}
_COLORS = {"better": "tab:green", "not better": "tab:gray", "s": "tab:green", "f": "tab:purple",
           "c": "tab:orange"}


def metric_label(metric: str) -> str:
    """Axis label with unit, e.g. ``val_ppl (perplexity, lower is better)``."""
    suffix = metric.rsplit("_", 1)[-1].lower()
    unit = _UNITS.get(suffix, "value")
    direction = "higher" if suffix in ("bleu", "acc") else "lower"
    return f"{metric} ({unit}, {direction} is better)"


def _baseline_lines(ax: plt.Axes, mean: float, best: float, n: int, *, vertical=False) -> None:
    line = ax.axvline if vertical else ax.axhline
    line(mean, color="tab:red", linestyle="--", linewidth=1.2,
         label=f"average baseline ({mean:.4g}, n={n})")
    line(best, color="tab:blue", linestyle=":", linewidth=1.2, label=f"best baseline ({best:.4g})")


def plot_distribution(info: DistributionInfo, *, title: str | None = None) -> Figure:
    """Strip + box plot of candidate trials vs baseline seeds (Fig. 2/3)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    rng = np.random.default_rng(0)
    groups = [("baseline seeds", np.asarray(info.baseline.values)),
              ("candidate orders", info.models["value"].to_numpy(dtype=float))]
    if not info.stopped.empty:  # their values are from fewer steps: a group apart
        groups.append(("stopped early\n(last value)", info.stopped["value"].to_numpy(dtype=float)))
    ax.boxplot([g for _, g in groups], positions=list(range(len(groups))), widths=0.5,
               showfliers=False, medianprops={"color": "black"})
    colors = ("tab:red", "tab:green", "tab:gray")
    for i, (label, values) in enumerate(groups):
        x = i + rng.uniform(-0.15, 0.15, size=len(values))
        ax.scatter(x, values, s=22, alpha=0.8, zorder=3, color=colors[i],
                   label=f"{label.replace(chr(10), ' ')} (n={len(values)})")
        if i == 1:  # the candidates: named, so the sandwich orders can be found
            for row, text in distribution_labels(info):
                ax.annotate(text, (x[row], values[row]), xytext=(4, 0),
                            textcoords="offset points", fontsize=6, va="center")
    _baseline_lines(ax, info.baseline.mean, info.baseline.best, info.baseline.n)
    ax.set_xticks(list(range(len(groups))), [g for g, _ in groups])
    ax.set_xlabel("group")
    ax.set_ylabel(metric_label(info.metric))
    ax.set_title(title or (
        f"{info.count_at_least_average} of {info.n_models} candidates at least as good as "
        "the average baseline"))
    ax.legend(fontsize=8, loc="best")
    return fig


_GROUP_LABELS = {GROUPS[0]: "at least as good as the baseline mean, untested",
                 GROUPS[1]: "not as good as the baseline mean, untested"}
"""Legend of the halves groups: a split of single values at the baseline mean, not a test."""


def plot_halves(info: HalvesInfo, *, title: str | None = None) -> Figure:
    """Grouped bars: mean count of each sublayer kind per half, per group (Fig. 4)."""
    kinds = [k for k in dict.fromkeys(info.means["kind"])
             if info.means.loc[info.means["kind"] == k, "mean"].sum() > 0]
    cats = [(half, k) for half in ("bottom", "top") for k in kinds]
    fig, ax = plt.subplots(figsize=(8.4, 4.2), layout="constrained")
    x = np.arange(len(cats))
    sizes = info.group_sizes()
    present = [g for g in GROUPS if sizes[g] > 0]
    width = 0.8 / max(len(present), 1)
    for i, group in enumerate(present):
        heights = [info.mean(group, half, k) for half, k in cats]
        bars = ax.bar(x + (i - (len(present) - 1) / 2) * width, heights, width,
                      color=_COLORS[group],
                      label=f"{_GROUP_LABELS[group]} (n={sizes[group]})")
        ax.bar_label(bars, fmt="%.2f", fontsize=8)
    ax.set_xticks(x, [f"{h}\n{k}" if len(cats) > 4 else f"{h} half: {k}" for h, k in cats])
    ax.set_xlabel(f"half of the model by parameter count (straddle: {info.straddle})")
    ax.set_ylabel("mean number of sublayers (count)")
    ax.set_title(title or "Sublayers per half: at least as good as the baseline mean vs not "
                          "(untested grouping)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_position_map(info: HalvesInfo, *, title: str | None = None) -> Figure:
    """P(s) against depth (parameter fraction) for better vs not better models."""
    fig, ax = plt.subplots(figsize=(8.4, 4.2), layout="constrained")
    for group in GROUPS:
        rows = info.position[info.position["group"] == group]
        if rows.empty:
            continue
        mid = (rows["lo"] + rows["hi"]) / 2
        ax.plot(mid, rows["p_s"], marker="o", color=_COLORS[group],
                label=f"{_GROUP_LABELS[group]} (n={int(rows['n'].iloc[0])})")
    share = 1.0 / (1.0 + info.f_units)
    ax.axhline(share, color="black", linestyle=":", linewidth=1,
               label=f"interleaved baseline ({share:.2f} of parameters in s)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("depth (fraction of parameters from the input)")
    ax.set_ylabel("P(s): share of parameters in s sublayers")
    ax.set_title(title or "Where the self-attention sits")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def statement_rows(statements: pd.DataFrame) -> list[tuple[str, list[int], str]]:
    """The rows of Fig. 5's strip: (label, the ks in it, colour). k = 0 is the baseline
    order itself (s^0 (sf)^n f^0): it has a row of its own, never "beats the baseline"."""
    k = statements["k"]
    own = k == 0
    rows = [
        ("beats the best baseline", statements["beats_best"] & ~own, "tab:blue"),
        ("beats the average\nbaseline only",
         statements["beats_average"] & ~statements["beats_best"] & ~own, "tab:red"),
        ("does not beat the\naverage baseline", ~statements["beats_average"] & ~own, "tab:gray"),
    ]
    if own.any():
        rows.append(("k = 0: the baseline\norder itself", own, "black"))
    return [(label, [int(x) for x in k[flag]], color) for label, flag, color in rows]


def distribution_labels(info: DistributionInfo, most: int = 25) -> list[tuple[int, str]]:
    """(row of ``info.models``, label) of the candidate points Fig. 2/3 names: every one
    up to ``most`` candidates (sandwich ones as ``k=…``), else the sandwich ones and the
    three best, so a sandwich order can be found without the CSV."""
    models = info.models.reset_index(drop=True)
    ks = models["k"] if "k" in models.columns else pd.Series([None] * len(models))
    out = []
    for i, name in enumerate(models["name"].astype(str)):
        k = ks.iloc[i]
        sandwich = k is not None and not pd.isna(k)
        if sandwich or len(models) <= most or i < 3:  # sorted best first
            out.append((i, f"k={int(k)}" if sandwich else name.split("@")[0]))
    return out


def plot_sandwich(
    info: SandwichInfo, *, statements: pd.DataFrame | None = None, title: str | None = None
) -> Figure:
    """Metric vs sandwich coefficient k with average and best baseline (Fig. 5).

    ``statements`` (k, beats_average, beats_best) adds the paper's verbal claims in a strip
    of their own under the plot, one row per claim: they carry no value, so they stay off
    the value axis. The default title says what :func:`sandwich.leaders` supports."""
    strip = statements is not None and not statements.empty
    fig, axes = plt.subplots(
        2 if strip else 1, 1, sharex=True, squeeze=False, layout="constrained",
        figsize=(7.4, 5.4 if strip else 4.2),
        gridspec_kw={"height_ratios": [3.2, 1.0]} if strip else None)
    ax = axes[0, 0]
    pts = info.points
    ks = pts["k"].to_numpy()
    dense = len(ks) > 2 and bool(np.all(np.diff(ks) == 1))
    several = bool((pts["n"] > 1).any())
    ax.errorbar(ks, pts["mean"], yerr=pts["sd"].fillna(0.0), marker="o", color="black",
                capsize=3, linestyle="-" if dense else "none",
                label="sandwich (mean ± sd over seeds)" if several else "sandwich (one run per k)")
    _baseline_lines(ax, info.baseline.mean, info.baseline.best, info.baseline.n)
    if strip:
        assert statements is not None
        low = axes[1, 0]
        rows = statement_rows(statements)
        for i, (_, sel, color) in enumerate(rows):
            low.scatter(sel, np.full(len(sel), i), marker="s", s=40, color=color, zorder=3)
        low.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=8)
        low.set_ylim(len(rows) - 0.5, -0.5)
        low.grid(axis="x", color="0.9")
        low.set_xlabel("sandwich coefficient k (count)")
        low.set_title("the paper's statement for every k (no value stated)", fontsize=9)
        low.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlim(min(statements["k"].min(), ks.min()) - 0.5,
                    max(statements["k"].max(), ks.max()) + 0.5)
    else:
        ax.set_xlabel("sandwich coefficient k (count)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel(metric_label(info.metric))
    ax.set_title(title or f"Sandwich: {info.metric} against k\n{headline(leaders(info))}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_seeds(info: SeedsInfo, *, title: str | None = None) -> Figure:
    """Per-order mean ± sd over seeds vs the baseline mean ± sd (Fig. 6)."""
    table = info.table
    fig, ax = plt.subplots(figsize=(8.4, 1.2 + 0.45 * max(len(table), 2)), layout="constrained")
    y = np.arange(len(table))
    ax.errorbar(table["mean"], y, xerr=table["sd"].fillna(0.0), fmt="none", ecolor="black",
                capsize=3, label="order mean ± sd over seeds")
    calls = table["verdict"].to_numpy(dtype=object)
    test = "paired t" if len(table) and (table["decides"] == "paired").all() else "Welch"
    for call, color in (("better", "tab:green"), ("worse", "tab:orange"), ("no evidence", "0.5")):
        sel = calls == call
        if sel.any():
            ax.scatter(table["mean"][sel], y[sel], color=color, zorder=3, label=(
                f"{call} (adjusted {test} p < {info.alpha:g}, CI excludes 0)"
                if call != "no evidence" else "no evidence of a difference"))
    if len(table):
        bm, bs = float(table["baseline_mean"].iloc[0]), float(table["baseline_sd"].iloc[0])
        ax.axvline(bm, color="tab:red", linestyle="--", label=f"average baseline ({bm:.4g})")
        if np.isfinite(bs):
            ax.axvspan(bm - bs, bm + bs, color="tab:red", alpha=0.12, label="baseline ± sd")
    ax.set_yticks(y, [f"{n} (n={k})" for n, k in zip(table["name"], table["n"], strict=True)])
    ax.set_xlabel(metric_label(info.metric))
    ax.set_ylabel("order (seeds)")
    ax.set_title(title or "Each order over seeds against the baseline")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_attention_distances(table: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Heatmap of a pairwise attention distance table."""
    fig, ax = plt.subplots(figsize=(5.4, 4.6), layout="constrained")
    image = ax.imshow(table.to_numpy(dtype=float), cmap="viridis")
    names = [str(n) for n in table.index]
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("model B")
    ax.set_ylabel("model A")
    fig.colorbar(image, ax=ax, label="mean matched-head EMD (key positions)")
    ax.set_title(title or "Attention distance between models")
    return fig


def plot_history(
    history: pd.DataFrame, trials: pd.DataFrame, *, metric: str, title: str | None = None
) -> Figure:
    """Validation metric against training step, one line per trial (baselines dashed); one
    ``LineCollection`` each for candidates and baselines (an artist per trial is slow)."""
    from matplotlib.collections import LineCollection

    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    rows = history[history["key"] == metric]
    base_ids = set(trials.loc[trials["baseline"], "run_id"])
    curves: dict[bool, list[np.ndarray]] = {True: [], False: []}
    for run_id, curve in rows.groupby("run_id"):
        curves[run_id in base_ids].append(np.column_stack([curve["step"], curve["value"]]))
    for is_base, lines in ((b, lines) for b, lines in sorted(curves.items()) if lines):
        ax.add_collection(LineCollection(
            lines, linestyles="--" if is_base else "-", alpha=0.7, colors="tab:red" if is_base
            else "tab:green", label=f"{'baseline' if is_base else 'candidate'} trials"))
    ax.autoscale_view()
    ax.set_xlabel("training step (count)")
    ax.set_ylabel(metric_label(metric))
    ax.set_title(title or f"Learning curves: {metric}")
    if curves[True] or curves[False]:
        ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_iot_sizes(
    info: SubsetsInfo, *, paper: pd.DataFrame | None = None, title: str | None = None
) -> Figure:
    """BLEU against the number of orders in the subset: mean ± sd over seeds and subsets
    of each size, each subset's mean as a dot, the baseline lines. ``paper`` (columns
    size, value, e.g. ``iot_paper.table3()``) adds the published curve on a second axis."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2), layout="constrained")
    for stack, sizes in info.sizes.groupby("stack", sort=True):
        label = f"{stack} orders: mean ± sd over seeds and subsets"
        ax.errorbar(sizes["size"], sizes["mean"], yerr=sizes["sd"].fillna(0.0), marker="o",
                    color="black" if stack == "decoder" else "tab:brown", capsize=3,
                    linestyle="-" if len(sizes) > 1 else "none", label=label)
    subs = info.subsets
    ax.scatter(subs["size"], subs["mean"], s=18, color="tab:green", alpha=0.7, zorder=3,
               label=f"one subset (mean over seeds; n={len(subs)})")
    base = info.baseline
    ax.axhline(base.mean, color="tab:red", linestyle="--", linewidth=1.2,
               label=f"average baseline ({base.mean:.4g}, n={base.n}, {info.baseline_source})")
    ax.axhline(base.best, color="tab:blue", linestyle=":", linewidth=1.2,
               label=f"best baseline ({base.best:.4g})")
    if paper is not None and not paper.empty:
        twin = ax.twinx()
        twin.plot(paper["size"], paper["value"], marker="s", color="tab:orange",
                  linestyle="--", label="Zhu et al. (2021) Table 3 (IWSLT14 De→En)")
        twin.set_ylabel("published BLEU (IWSLT14 De→En, higher is better)")
        handles, labels = ax.get_legend_handles_labels()
        h2, l2 = twin.get_legend_handles_labels()
        ax.legend(handles + h2, labels + l2, fontsize=7, loc="lower right")
    else:
        ax.legend(fontsize=8, loc="best")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("orders in the subset N (count)")
    ax.set_ylabel(metric_label(info.metric))
    ax.set_title(title or f"BLEU vs number of orders: best N = {info.best_size}")
    return fig


def plot_iot_subsets(info: SubsetsInfo, *, title: str | None = None) -> Figure:
    """Per subset: mean BLEU ± sd over seeds (horizontal), coloured by size, baseline lines."""
    subs = info.subsets.sort_values("mean", kind="stable").reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(7.4, 2.4 + 0.35 * len(subs)), layout="constrained")
    y = np.arange(len(subs))
    cmap = plt.get_cmap("viridis")
    top = max(int(subs["size"].max()), 2)
    for size, group in subs.groupby("size", sort=True):
        ax.errorbar(group["mean"], group.index, xerr=group["sd"].fillna(0.0), fmt="o",
                    color=cmap((int(size) - 1) / (top - 1)), capsize=3,
                    label=f"N = {int(size)} (mean ± sd over seeds)")
    base = info.baseline
    _baseline_lines(ax, base.mean, base.best, base.n, vertical=True)
    labels = [f"{{{r.codes}}}{' *' if r.paper_subset else ''} (n={r.n})"
              for r in subs.itertuples()]
    ax.set_yticks(y, labels)
    ax.set_xlabel(metric_label(info.metric))
    ax.set_ylabel("subset (* = the paper's for its N)")
    ax.set_title(title or f"BLEU per subset: best {{{','.join(info.best_subset)}}}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_route_shares(info: RoutingSharesInfo, *, title: str | None = None) -> Figure:
    """Stacked bars: share of validation sentences routed to each order, per subset."""
    table = info.matrix().fillna(0.0)
    blocks = dict(zip(info.shares["code"], info.shares["block"], strict=False))
    fig, ax = plt.subplots(figsize=(7.4, 1.4 + 0.4 * max(len(table), 2)), layout="constrained")
    left = np.zeros(len(table))
    cmap = plt.get_cmap("tab10")
    for code in table.columns:
        widths = table[code].to_numpy(dtype=float)
        ax.barh(np.arange(len(table)), widths, left=left, color=cmap((int(code) - 1) % 10),
                label=f"order {code} ({blocks.get(code, '?')})")
        left += widths
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(np.arange(len(table)), [f"{{{','.join(s)}}}" for s in table.index])
    ax.set_xlim(0, 1.02)
    ax.set_xlabel("share of validation sentences routed to the order (fraction, mean over seeds)")
    ax.set_ylabel("subset of orders")
    ax.set_title(title or "Routing shares per order (final predictor, argmax)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_routing_matrix(
    info: RoutingMatrixInfo, *, subsets: list[str] | None = None, title: str | None = None
) -> Figure:
    """Heatmaps (one per subset): BLEU of the sentences routed to each order (rows) when
    decoded with each order forced (columns); the diagonal is the routed order."""
    names = subsets or info.subsets[:6]
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names) + 1.0, 3.8),
                             layout="constrained", squeeze=False)
    image = None
    for ax, subset in zip(axes[0], names, strict=True):
        m = info.matrix(subset)
        image = ax.imshow(m.to_numpy(dtype=float), cmap="viridis")
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                value = m.iat[i, j]
                if np.isfinite(value):
                    bold = m.index[i] == m.columns[j]
                    ax.text(j, i, f"{value:.1f}", ha="center", va="center", fontsize=7,
                            color="white", fontweight="bold" if bold else "normal")
        ax.set_xticks(range(m.shape[1]), [str(c) for c in m.columns])
        ax.set_yticks(range(m.shape[0]), [str(c) for c in m.index])
        ax.set_xlabel("order forced when decoding (code)")
        ax.set_ylabel("split routed to order (code)")
        ax.set_title(f"subset {{{','.join(subset)}}}", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=list(axes[0]), label="BLEU (higher is better)")
    fig.suptitle(title or "Per-split × per-order BLEU (diagonal: the predictor's choice)")
    return fig
