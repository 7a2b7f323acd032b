"""The report's section on hybrid sweeps: where attention sits among the other sequence
mixers, and how much of it (:mod:`analysis.studies.attention_depth`), with a figure."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from sublayer_search.analysis.report.writer import Writer
from sublayer_search.analysis.studies.attention_depth import (
    AttentionDepth,
    attention_depth_study,
)

__all__ = ["attention_depth_section"]


def attention_depth_section(w: Writer, frame: pd.DataFrame, *, metric: str) -> None:
    """The section, when the sweep has orders mixing ``s`` with ``w`` or ``r``."""
    study = attention_depth_study(frame, metric=metric)
    if study is None:
        return
    sec = w.section("Attention among the other sequence mixers",
                    "Candidates whose orders mix self-attention with a recurrence or "
                    "sliding-window attention: the metric against the attention's mean depth "
                    "(0 = input, 1 = output) and against its share of the sequence mixers. "
                    "Spearman correlations with 95 % bootstrap intervals, Holm-adjusted over "
                    "the two; single runs, so a correlation, not a causal claim.")
    for row in study.tests.to_dict("records"):
        sec.numbers.append((
            f"Spearman: metric vs attention {row['measure']}",
            f"rho = {row['rho']:+.2f} (95 % CI {row['ci_low']:+.2f} to {row['ci_high']:+.2f}), "
            f"p = {row['p']:.3g}, Holm-adjusted p = {row['p_adjusted']:.3g}, n = {row['n']}"))
    w.figure(sec, "attention_depth", _plot(study))
    w.table(sec, "attention_depth_models", study.models)
    w.table(sec, "attention_depth_tests", study.tests)


def _plot(study: AttentionDepth) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), layout="constrained", sharey=True)
    for ax, measure, label in ((axes[0], "depth", "mean depth of attention (0 = input)"),
                               (axes[1], "share", "attention's share of the sequence mixers")):
        ax.scatter(study.models[measure], study.models["value"], s=18, color="tab:blue")
        row = study.tests[study.tests["measure"] == measure]
        if len(row):
            r = row.iloc[0]
            ax.set_title(f"rho {r['rho']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}], "
                         f"Holm p {r['p_adjusted']:.2g}", fontsize=9)
        ax.set_xlabel(label)
    axes[0].set_ylabel(study.metric)
    fig.suptitle("Hybrid orders: the metric against where attention sits and how much "
                 "(single runs)", fontsize=10)
    return fig
