"""The report's Table 7 section: attention distance between trained models of a sweep.

The arrays come from the sweep's logged checkpoints (``search.tracking.attention.sweep_attention``
computes them with the models; analysis never imports torch); this module only lays out
what it is given, or says why there is nothing to show.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sublayer_search.analysis.report.writer import Writer

__all__ = ["AttentionStudy", "attention_section"]

TABLE7 = "Table 7: attention distance between models"


@dataclass(frozen=True, kw_only=True)
class AttentionStudy:
    """Pairwise distances of trained models and their Table 7 summary, or a note."""

    distances: pd.DataFrame | None = None
    """Symmetric model × model table (``attention_distance.distance_table``)."""
    groups: pd.DataFrame | None = None
    """pair, mean, sd (over pairs), n (``attention_distance.group_distances``)."""
    note: str = ""
    """What was compared, or why nothing could be (no checkpoints logged, …)."""


def attention_section(w: Writer, study: AttentionStudy) -> None:
    sec = w.section(TABLE7, study.note)
    if study.groups is None or study.distances is None:
        return
    for row in study.groups.itertuples():
        sd = "" if pd.isna(row.sd) else f" ± {row.sd:.4f}"
        sec.numbers.append((str(row.pair), f"{row.mean:.4f}{sd} (n={row.n} pairs)"))
    w.table(sec, "table7_attention_distance", study.groups)
    w.table(sec, "table7_attention_distance_pairs", study.distances, index=True)
    sec.inline.append(("Table 7", study.groups))
