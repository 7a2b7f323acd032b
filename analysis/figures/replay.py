"""Figure of a replay grid: compute fraction against top-k kept (``sublayer replay --grid``).

Takes a plain frame (one row per scheduler setting), so it needs nothing from ``search``:
columns ``scheduler``, ``grace_evals``, ``reduction_factor``, ``compute_fraction``,
``top_k_kept``, ``k`` and ``regret``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

if "ipykernel" not in sys.modules:  # headless everywhere except inside a Jupyter kernel
    matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

__all__ = ["REPLAY_COLUMNS", "plot_replay_grid"]

REPLAY_COLUMNS = ("scheduler", "grace_evals", "reduction_factor", "compute_fraction",
                  "top_k_kept", "k", "regret")
_MARKERS = ("o", "s", "^", "D", "v", "P")
_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
           "tab:pink", "tab:gray", "tab:olive", "tab:cyan")


def _label(row: pd.Series) -> str:
    if row["scheduler"] == "hyperband":
        return f"hyperband η={row['reduction_factor']:g}"
    if row["scheduler"] == "median":
        return f"median, grace {row['grace_evals']}"
    return f"{row['scheduler']}, grace {row['grace_evals']}, η={row['reduction_factor']:g}"


def plot_replay_grid(frame: pd.DataFrame, path: str | Path | None = None, *,
                     target: float | None = None, title: str | None = None) -> Figure:
    """Two panels over compute fraction: top-k kept (left) and regret (right).

    One point per setting: colour = reduction factor, marker = grace period (ASHA); the
    median rule and HyperBand get their own colours. ``target`` draws a compute budget
    line (e.g. 0.35). Saved as PNG at ``path`` when given.
    """
    missing = [c for c in REPLAY_COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"replay frame: missing columns {missing}, expected {list(REPLAY_COLUMNS)}")
    k = int(frame["k"].max())
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6), layout="constrained")
    groups: dict[tuple[str, float], int] = {}
    for _, row in frame.iterrows():  # colour by scheduler+factor, marker by grace period
        key = (row["scheduler"], row["reduction_factor"] if row["scheduler"] != "median" else 0)
        groups.setdefault(key, len(groups))
    graces = sorted(frame["grace_evals"].unique())
    frame = frame.reset_index(drop=True)
    spot = frame.groupby(["compute_fraction", "top_k_kept"])
    # settings landing on the same spot are stacked around it, 0.1 apart
    offsets = 0.1 * (spot.cumcount() - (spot["k"].transform("size") - 1) / 2)
    for i, row in frame.iterrows():
        key = (row["scheduler"], row["reduction_factor"] if row["scheduler"] != "median" else 0)
        color = _COLORS[groups[key] % len(_COLORS)]
        marker = _MARKERS[graces.index(row["grace_evals"]) % len(_MARKERS)]
        x = 100 * row["compute_fraction"]
        dy = float(offsets.iloc[i])  # type: ignore[call-overload]
        left.scatter(x, row["top_k_kept"] + dy, s=70, color=color, marker=marker,
                     edgecolor="black", linewidth=0.6, zorder=3, label=_label(row))
        right.scatter(x, row["regret"], s=70, color=color, marker=marker, edgecolor="black",
                      linewidth=0.6, zorder=3)
    for ax in (left, right):
        ax.set_xlabel("compute used (% of the full sweep's trial-steps)")
        ax.set_xlim(0, 105)
        ax.grid(alpha=0.3)
        if target is not None:
            ax.axvline(100 * target, color="tab:red", linestyle="--", linewidth=1.2,
                       label=f"budget {target:.0%}" if ax is left else None)
    left.set_ylabel(f"true top-{k} trained to the end (of {k};\nequal results stacked)")
    left.set_yticks(range(k + 1))
    left.set_ylim(-0.4, k + 0.6)
    right.set_ylabel("regret of the pick (final metric − best final)")
    top = float(frame["regret"].max()) if frame["regret"].notna().any() else 0.0
    pad = 0.06 * top if top > 0 else 0.01
    right.set_ylim(-pad, top + pad)
    left.set_title(f"Top-{k} orders kept by early stopping")
    right.set_title("Regret of the order it would pick")
    if title:
        fig.suptitle(title)
    handles, labels = left.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside right center", fontsize=8, title="setting")
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig
