"""Seed study of a translation sweep: every candidate (IOT subset or sandwich) over seeds
against the baseline, with the rules of :mod:`analysis.studies.seeds` (BLEU: higher is better)."""

from __future__ import annotations

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import usable, validate_trials
from sublayer_search.analysis.store.iot_frame import (
    SUBSET_ONE,
    bleu_metric,
    iot_baseline,
    subset_id,
    subset_ids,
    subset_label,
)
from sublayer_search.analysis.studies.seeds import SeedsInfo, by_seed, seed_table, strip_seed

__all__ = ["translation_seeds"]


def _candidate_label(row: pd.Series) -> str:
    subset = subset_id(row.get("subset")) if "subset" in row.index else None
    if subset:
        return subset_label(subset)
    cand = row.get("candidate") if "candidate" in row.index else None
    if isinstance(cand, str) and cand:
        return cand
    return strip_seed(str(row["name"]))


def translation_seeds(
    frame: pd.DataFrame,
    *,
    metric: str | None = None,
    column: str = "final",
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 4999,
    seed: int = 0,
    adjust: str = "holm",
) -> SeedsInfo:
    """Every translation candidate (IOT subset ``iot<id>``, else its candidate name) over
    seeds against the baseline, with the rules of :mod:`analysis.studies.seeds`: better (= higher
    BLEU) only when Welch's t, its p adjusted over the candidates (``adjust``), is
    significant at ``alpha`` and the Welch t interval of the
    difference lies above 0. Grouping is by candidate, not by order string: IOT trials of
    different subsets, and encoder-side sandwiches, share their decoder order. When the
    baseline is the subset {1} trials, that subset is not compared with itself. The paired t-test over
    shared seeds is shown beside it, never deciding: a shared seed shares the batch order,
    not the initial weights (:func:`analysis.studies.significance.decides`)."""
    frame = validate_trials(frame)
    metric = bleu_metric(frame, metric)
    base, source = iot_baseline(frame, metric, column=column)
    rows = usable(frame, metric, column=column)
    ref = rows[rows["baseline"]] if source != SUBSET_ONE else rows[subset_ids(rows) == "1"]
    rows = rows[~rows["baseline"]]
    if rows.empty:
        raise AnalysisError(f"no usable non-baseline trial for metric {metric!r}")
    labels = rows.apply(_candidate_label, axis=1)
    trials = pd.DataFrame({"name": labels.to_numpy(), "order": rows["order"].to_numpy(),
                           "seed": rows["seed"].to_numpy(),
                           "value": rows[column].to_numpy(dtype=float)})
    if source == SUBSET_ONE:
        trials = trials[trials["name"] != subset_label("1")]
    table = seed_table(trials, base, by="name", alpha=alpha, confidence=confidence,
                       n_resamples=n_resamples, seed=seed, adjust=adjust,
                       baseline_seeds=by_seed(ref["seed"], ref[column]))
    return SeedsInfo(metric=metric, alpha=alpha, confidence=confidence,
                     lower_is_better=base.lower_is_better, adjust=adjust, baseline=base,
                     table=table,
                     trials=trials.reset_index(drop=True))
