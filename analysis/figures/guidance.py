"""Figures of cross-layer guidance: the sweep's guidance study and the Crossformer paper's
Tables 1, 2/3 and 6 (Agg backend through :mod:`analysis.figures.plots`; no logic of their own)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from sublayer_search.analysis.figures.plots import metric_label
from sublayer_search.analysis.studies.guidance import GuidanceInfo, blocks_key

__all__ = ["plot_guidance", "plot_paper_blocks", "plot_paper_pairing", "plot_paper_params"]

_MODE_COLORS = {"none": "tab:gray", "soft": "tab:blue", "hard": "tab:orange"}
_MODE_NAMES = {"none": "unguided", "soft": "soft guidance (SG)", "hard": "hard guidance (HG)"}
_BLOCK_NAMES = {"key_query": "Key-Query", "value": "Value", "ffn": "FFN", "": "unguided"}
_MODEL_COLORS = {
    "none": "tab:gray",
    "ffn": "tab:purple",
    "value": "tab:green",
    "key_query": "tab:orange",
    "key_query+value+ffn": "tab:red",
}


def _blocks_name(blocks: str, sep: str = " + ") -> str:
    return (
        sep.join(_BLOCK_NAMES.get(b, b) for b in blocks.split("+")) if blocks else _BLOCK_NAMES[""]
    )


def _qualifiers(label: str) -> str:
    """``hg-kq.qk`` -> ``qk``: a pairing or alpha other than the paper's, else empty."""
    return label.split(".", 1)[1] if "." in label else ""


def plot_guidance(info: GuidanceInfo, *, title: str | None = None) -> Figure:
    """Difference from the baseline mean by guided blocks (x) and mode (colour), one
    panel per candidate: seeds as dots, the group mean with its Welch t interval, the
    baseline seeds' ± sd band around 0. Filled markers: a tested difference."""
    table = info.table
    cands = list(dict.fromkeys(table["candidate"]))
    fig, axes = plt.subplots(
        1,
        len(cands),
        figsize=(max(8.4, 1.6 + 3.4 * len(cands)), 5.2),
        layout="constrained",
        sharey=True,
        squeeze=False,
    )
    modes = [m for m in ("none", "soft", "hard") if (table["guidance_mode"] == m).any()]
    for ax, cand in zip(axes[0], cands, strict=True):
        _guidance_panel(ax, info, table[table["candidate"] == cand], modes, cand)
    axes[0][0].set_ylabel(f"difference from the average baseline\n{metric_label(info.metric)}")
    _guidance_legend(fig, axes[0][0], info, modes)
    fig.suptitle(
        title or f"Guidance study: {info.metric} by mode and blocks against the baseline seeds"
    )
    return fig


def _guidance_panel(ax: Axes, info: GuidanceInfo, sub: pd.DataFrame, modes: list[str],
                    cand: str) -> None:
    """One candidate's panel of :func:`plot_guidance`: its groups by blocks and mode."""
    base = info.baseline
    keys = [
        (b, _qualifiers(g))
        for b, g in zip(sub["guidance_blocks"], sub["guidance"], strict=True)
    ]
    blocks = sorted(dict.fromkeys(keys), key=lambda k: (blocks_key(k[0]), k[1]))
    if np.isfinite(base.sd):
        ax.axhspan(
            -base.sd,
            base.sd,
            color="tab:red",
            alpha=0.12,
            label=f"baseline seeds ± sd ({base.sd:.2g})",
        )
    ax.axhline(
        0.0,
        color="tab:red",
        linestyle="--",
        linewidth=1.2,
        label=f"average baseline ({base.mean:.4g}, n={base.n})",
    )
    for j, mode in enumerate(modes):
        offset = (j - (len(modes) - 1) / 2) * 0.22
        for r in sub[sub["guidance_mode"] == mode].itertuples():
            x = blocks.index((r.guidance_blocks, _qualifiers(r.guidance))) + offset
            seeds = info.trials.loc[info.trials["name"] == r.name, "value"] - base.mean
            ax.scatter(
                np.full(len(seeds), x - 0.08),
                seeds,
                s=14,
                color=_MODE_COLORS[mode],
                alpha=0.5,
                zorder=2,
            )
            tested = r.verdict != "no evidence"
            err = None
            if np.isfinite(r.ci_low) and np.isfinite(r.ci_high):
                err = [[r.difference - r.ci_low], [r.ci_high - r.difference]]
            ax.errorbar(
                [x],
                [r.difference],
                yerr=err,
                fmt="o",
                markersize=8,
                color=_MODE_COLORS[mode],
                capsize=4,
                zorder=3,
                markerfacecolor=_MODE_COLORS[mode] if tested else "white",
            )
    ax.set_xticks(
        range(len(blocks)),
        [_blocks_name(b, "\n+ ") + (f"\n({q})" if q else "") for b, q in blocks],
    )
    ax.set_xlim(-0.6, len(blocks) - 0.4)
    ax.set_title(cand, fontsize=10)
    ax.set_xlabel("guided blocks")


def _guidance_legend(fig: Figure, ax: Axes, info: GuidanceInfo, modes: list[str]) -> None:
    """The legend of :func:`plot_guidance`: the baseline, each mode, the marker styles."""
    handles, labels = ax.get_legend_handles_labels()
    for mode in modes:
        handles.append(plt.Line2D([], [], marker="o", color=_MODE_COLORS[mode], linestyle=""))
        labels.append(f"{_MODE_NAMES[mode]}: mean, {info.confidence:.0%} Welch t interval")
    handles.append(
        plt.Line2D([], [], marker="o", color="black", linestyle="", markerfacecolor="white")
    )
    labels.append("hollow: no evidence of a difference, or too few seeds to test")
    handles.append(
        plt.Line2D([], [], marker="o", color="black", linestyle="", markersize=4, alpha=0.5)
    )
    labels.append("one seed")
    fig.legend(handles, labels, fontsize=8, loc="outside lower center", ncol=2)


def plot_paper_blocks(t1: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Table 1: BLEU by guided block, soft vs hard, against the Transformer; hard-guidance
    points carry their parameter count."""
    fig, ax = plt.subplots(figsize=(7.4, 4.4), layout="constrained")
    ref = t1[t1["mode"] == "none"].iloc[0]
    ax.axhline(
        ref["bleu"],
        color="tab:red",
        linestyle="--",
        linewidth=1.2,
        label=f"Transformer ({ref['bleu']:.2f} BLEU, {ref['params_m']:.0f}M)",
    )
    blocks = ["key_query", "value", "ffn"]
    for j, mode in enumerate(("soft", "hard")):
        sub = t1[t1["mode"] == mode].set_index("blocks").reindex(blocks)
        x = np.arange(len(blocks)) + (j - 0.5) * 0.25
        ax.plot(
            x,
            sub["bleu"],
            "o" if mode == "soft" else "s",
            markersize=9,
            color=_MODE_COLORS[mode],
            label=_MODE_NAMES[mode],
        )
        for xi, r in zip(x, sub.itertuples(), strict=True):
            ax.annotate(
                f"{r.bleu:.2f}\n{r.params_m:.0f}M",
                (xi, r.bleu),
                fontsize=8,
                textcoords="offset points",
                xytext=(0, 8),
                ha="center",
            )
    ax.set_xticks(range(len(blocks)), [_BLOCK_NAMES[b] for b in blocks])
    ax.set_xlim(-0.6, len(blocks) - 0.4)
    lo, hi = float(t1["bleu"].min()), float(t1["bleu"].max())
    ax.set_ylim(lo - 0.2, hi + 0.3)
    ax.set_xlabel("guided block (pairing as the paper fixes it: Key-Query, w2-w1)")
    ax.set_ylabel("test BLEU (higher is better)")
    ax.set_title(title or "Crossformer Table 1 (IWSLT'14 De-En): BLEU by guided block")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def plot_paper_params(tables: dict[str, pd.DataFrame], *, title: str | None = None) -> Figure:
    """Tables 2 and 3: parameters against BLEU, one row of panels per table and one
    column per dataset; colour per guided block set, an arrow from the table's
    Transformer to each hard-guidance model."""
    datasets = list(dict.fromkeys(pd.concat(list(tables.values()))["dataset"]))
    fig, axes = plt.subplots(
        len(tables),
        len(datasets),
        squeeze=False,
        layout="constrained",
        figsize=(4.6 * len(datasets) + 2.6, 3.4 * len(tables)),
    )
    seen: set[str] = set()
    for row, (name, frame) in zip(axes, tables.items(), strict=True):
        for ax, dataset in zip(row, datasets, strict=True):
            sub = frame[frame["dataset"] == dataset]
            ref = sub[sub["mode"] == "none"].iloc[0]
            for r in sub.itertuples():
                label = _blocks_name(r.blocks) if r.blocks else "Transformer"
                if r.mode != "none":
                    label = f"HG {label}" + (" (16 layers)" if r.layers == "16" else "")
                    ax.annotate(
                        "",
                        (r.params_m, r.bleu),
                        (ref["params_m"], ref["bleu"]),
                        arrowprops={"arrowstyle": "->", "color": "0.6", "lw": 0.8},
                    )
                ax.scatter(
                    r.params_m,
                    r.bleu,
                    s=60,
                    zorder=3,
                    color=_MODEL_COLORS.get(r.blocks or "none", "black"),
                    label=None if label in seen else label,
                )
                seen.add(label)
                ax.annotate(
                    f"{r.bleu:.2f}",
                    (r.params_m, r.bleu),
                    fontsize=7,
                    textcoords="offset points",
                    xytext=(6, 2),
                )
            ax.set_title(f"{name} ({ref['layers']} layers), {dataset}", fontsize=9)
            ax.set_xlabel("parameters (millions)")
            ax.set_ylabel("test BLEU (higher is better)")
            ax.margins(x=0.18, y=0.18)
    handles, labels = [], []
    for ax in axes.flat:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, fontsize=8, loc="outside right upper")
    fig.suptitle(
        title
        or "Crossformer Tables 2 and 3 (WMT'14): parameters against BLEU\n"
        "(arrows: Transformer → hard guidance)",
        fontsize=11,
    )
    return fig


def plot_paper_pairing(t6: pd.DataFrame, reference: float, *, title: str | None = None) -> Figure:
    """Table 6: BLEU of each hard-guidance pairing, grouped by block, against the
    Transformer of Table 1; the pairing the paper fixes is filled."""
    fig, ax = plt.subplots(figsize=(7.4, 3.8), layout="constrained")
    rows = t6.reset_index(drop=True)
    y = np.arange(len(rows))[::-1]
    fixed = {"key_query", "w2_w1"}
    for yi, r in zip(y, rows.itertuples(), strict=True):
        chosen = r.pairing in fixed
        color = _MODEL_COLORS[r.blocks]
        ax.plot([reference, r.bleu], [yi, yi], color=color, linewidth=1.0, alpha=0.6)
        ax.plot(
            r.bleu, yi, "o", markersize=9, color=color, markerfacecolor=color if chosen else "white"
        )
        ax.annotate(
            f"{r.bleu:.2f}", (r.bleu, yi), fontsize=8, textcoords="offset points", xytext=(8, -3)
        )
    ax.axvline(
        reference,
        color="tab:red",
        linestyle="--",
        linewidth=1.2,
        label=f"Transformer, Table 1 ({reference:.2f})",
    )
    names = [f"{_BLOCK_NAMES[r.blocks]}: {r.pairing.replace('_', '–')}" for r in rows.itertuples()]
    ax.set_yticks(y, names)
    ax.set_xlabel("test BLEU (higher is better)")
    ax.set_ylabel("shared pair (hard guidance)")
    ax.margins(x=0.15)
    ax.plot([], [], "o", color="black", label="the paper's choice (filled)")
    ax.plot([], [], "o", color="black", markerfacecolor="white", label="ablated pairing")
    ax.set_title(title or "Crossformer Table 6 (IWSLT'14 De-En): which matrices to share")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
