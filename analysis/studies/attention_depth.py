"""Where attention sits among other sequence mixers, and how much of it: the hybrid
question (Jamba, Samba, Nemotron-H) asked of a sweep.

For every finished candidate whose order mixes self-attention (``s``) with another
sequence mixer (``w``, ``r``): the attention's mean depth (the mean over its ``s``
sublayers of ``(position + 0.5) / length``: 0 = input, 1 = output) and its share of the
sequence mixers (``n_s / (n_s + n_w + n_r)``). Two Spearman correlations with the metric,
each with a 95 % bootstrap interval (``scipy.stats.bootstrap``, paired resamples, seeded)
and Holm-adjusted over the two. A negative rho for a lower-is-better metric: deeper (or
more) attention goes with better models.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import study_inputs
from sublayer_search.analysis.studies.significance import adjust_pvalues

__all__ = ["AttentionDepth", "attention_depth", "attention_depth_study", "attention_share"]

_SEQUENCE = ("w", "r")
"""The sequence mixers attention is compared with (spaces.kinds: role sequence, not s)."""


def attention_depth(order: str) -> float:
    """Mean relative position of the order's ``s`` sublayers (0 = input, 1 = output)."""
    positions = [(i + 0.5) / len(order) for i, ch in enumerate(order) if ch == "s"]
    return float(np.mean(positions)) if positions else float("nan")


def attention_share(order: str) -> float:
    """``s`` among the sequence mixers (``s``, ``w``, ``r``)."""
    mixers = sum(order.count(k) for k in ("s", *_SEQUENCE))
    return order.count("s") / mixers if mixers else float("nan")


@dataclass(frozen=True, kw_only=True)
class AttentionDepth:
    """Result of :func:`attention_depth_study`: ``models`` (name, order, value, depth,
    share) and ``tests`` (one row per measure: rho, p, p_adjusted, ci_low, ci_high, n)."""

    metric: str
    models: pd.DataFrame
    tests: pd.DataFrame


def _rho(x: np.ndarray, y: np.ndarray) -> float:
    return float(stats.spearmanr(x, y).statistic)


def attention_depth_study(frame: pd.DataFrame, *, metric: str | None = None,
                          column: str = "final", resamples: int = 2000,
                          seed: int = 0) -> AttentionDepth | None:
    """The study on a sweep's candidates; None when fewer than 4 of them mix attention
    with another sequence mixer (nothing to correlate)."""
    _, metric, _, rows = study_inputs(frame, metric, column=column)
    hybrid = rows[rows["order"].map(lambda o: "s" in o and any(k in o for k in _SEQUENCE))]
    if len(hybrid) < 4:
        return None
    models = pd.DataFrame({"name": hybrid["name"], "order": hybrid["order"],
                           "value": hybrid[column].astype(float),
                           "depth": hybrid["order"].map(attention_depth),
                           "share": hybrid["order"].map(attention_share)}).reset_index(drop=True)
    tests = []
    for measure in ("depth", "share"):
        x, y = models["value"].to_numpy(), models[measure].to_numpy()
        if np.ptp(y) == 0:
            continue
        rho = _rho(x, y)
        p = float(stats.spearmanr(x, y).pvalue)
        with warnings.catch_warnings():  # a resample of tied values has no rho: dropped
            warnings.simplefilter("ignore")
            ci = stats.bootstrap((x, y), _rho, paired=True, vectorized=False,
                                 n_resamples=resamples, method="percentile",
                                 rng=np.random.default_rng(seed))
        tests.append({"measure": measure, "rho": rho, "p": p,
                      "ci_low": float(ci.confidence_interval.low),
                      "ci_high": float(ci.confidence_interval.high), "n": len(x)})
    if not tests:
        raise AnalysisError("attention depth: every hybrid order has the same depth and share")
    table = pd.DataFrame(tests)
    table.insert(3, "p_adjusted", adjust_pvalues(table["p"].to_numpy(), "holm"))
    return AttentionDepth(metric=metric, models=models, tests=table)
