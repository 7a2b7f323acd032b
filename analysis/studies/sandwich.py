"""Sandwich coefficient study (Press et al. 2020, Fig. 5): metric against k.

:func:`sandwich_curve` gives the mean per k; the k with the best mean is only the *lowest
mean* (``best_k``). :func:`leaders` tests it against every other k (Welch's t over every seed: a shared seed
shares the batch order, not the initial weights, :func:`significance.decides`; p adjusted
over those comparisons, the paired t-test and Wilcoxon over shared seeds alongside,
never deciding) and returns the set of k that cannot be told apart from it: a "best
k" claim is made only when that set has one member. :func:`headline` says so in a line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    at_least_as_good,
    study_inputs,
)
from sublayer_search.analysis.studies.significance import (
    ADJUST_NAMES,
    PAIRED,
    adjust_pvalues,
    decides,
    paired,
)

__all__ = ["SandwichInfo", "headline", "leaders", "sandwich_curve"]


@dataclass(frozen=True, kw_only=True)
class SandwichInfo:
    """Result of :func:`sandwich_curve`.

    ``points``: one row per k with n (trials), mean, sd (NaN for one trial), min, max,
    beats_average, beats_best (mean at least as good as the average / best baseline).
    ``trials``: the individual trials (k, name, seed, value).
    """

    metric: str
    baseline: BaselineStats
    points: pd.DataFrame
    trials: pd.DataFrame

    def __post_init__(self) -> None:
        if self.points.empty:
            raise AnalysisError("sandwich study needs at least one trial with a k")

    @property
    def best_k(self) -> int:
        values = self.points["mean"]
        idx = values.idxmin() if self.baseline.lower_is_better else values.idxmax()
        return int(self.points.loc[idx, "k"])

    def ks_beating(self, which: str = "average") -> list[int]:
        if which not in ("average", "best"):
            raise AnalysisError(f"which must be 'average' or 'best', got {which!r}")
        col = f"beats_{which}"
        return [int(k) for k in self.points.loc[self.points[col], "k"]]


def sandwich_curve(
    frame: pd.DataFrame, *, metric: str | None = None, column: str = "final"
) -> SandwichInfo:
    """Mean (± sd over seeds) of the metric per sandwich coefficient k, with the
    average and best baseline for reference. Candidate rows need a ``k``."""
    frame, metric, base, rows = study_inputs(frame, metric, column=column, require_rows=False)
    rows = rows[rows["k"].notna()]
    if rows.empty:
        raise AnalysisError(
            f"no usable non-baseline trial with a sandwich coefficient k for metric {metric!r}"
        )
    trials = pd.DataFrame(
        {
            "k": rows["k"].astype(int).to_numpy(),
            "name": rows["name"].to_numpy(),
            "seed": rows["seed"].to_numpy(),
            "value": rows[column].to_numpy(dtype=float),
        }
    )
    grouped = trials.groupby("k")["value"]
    points = pd.DataFrame(
        {
            "n": grouped.size(),
            "mean": grouped.mean(),
            "sd": grouped.std(ddof=1),
            "min": grouped.min(),
            "max": grouped.max(),
        }
    ).reset_index()
    lower = base.lower_is_better
    points["beats_average"] = at_least_as_good(points["mean"], base.mean, lower=lower)
    points["beats_best"] = at_least_as_good(points["mean"], base.best, lower=lower)
    return SandwichInfo(metric=metric, baseline=base, points=points, trials=trials)


def leaders(info: SandwichInfo, *, alpha: float = 0.05, adjust: str = "holm") -> pd.DataFrame:
    """The k with the best mean against every other k: one row per k (best first) with
    n, mean, sd, the difference from the best k, Welch's t and p
    (``scipy.stats.ttest_ind(equal_var=False)``), the paired t-test
    (``scipy.stats.ttest_rel`` over the seeds both share) and Wilcoxon p, the Welch and
    paired p each adjusted over the comparisons (``adjust``), ``decides`` (``unpaired (...)``:
    Welch, since a shared seed does not share the initial weights),
    ``p_adjusted`` (the deciding test's) and ``told_apart`` (``p_adjusted`` below
    ``alpha``). A k with fewer than 2 trials (or a best k with fewer than 2) cannot be
    tested: ``told_apart`` False, ``tested`` False. ``attrs``: best_k, leaders (the k not
    told apart from it, best included), tested (whether any comparison was possible),
    alpha, adjust, comparisons, decides."""
    best = info.best_k
    by_k = {int(k): g for k, g in info.trials.groupby("k")}
    ref = by_k[best]
    a = ref["value"].to_numpy(dtype=float)
    rows = []
    for k, g in by_k.items():
        v = g["value"].to_numpy(dtype=float)
        t = p = math.nan
        if k != best and len(v) >= 2 and len(a) >= 2:
            res = stats.ttest_ind(v, a, equal_var=False)
            t, p = float(res.statistic), float(res.pvalue)
        pair = None if k == best else paired(_seeds(g), _seeds(ref))
        rows.append({"k": k, "n": len(v), "mean": float(v.mean()),
                     "sd": float(np.std(v, ddof=1)) if len(v) >= 2 else math.nan,
                     "difference_from_best": float(v.mean() - a.mean()), "welch_t": t,
                     "welch_p": p, "paired_n": pair.n if pair else 0,
                     "paired_p": pair.p if pair else math.nan,
                     "wilcoxon_p": pair.wilcoxon_p if pair else math.nan})
    out = pd.DataFrame(rows)
    compared = [r for r in rows if r["k"] != best and r["n"] >= 2 and len(a) >= 2]
    rule = decides([(int(r["n"]), int(r["paired_n"])) for r in compared],
                   defined=all(math.isfinite(r["paired_p"]) for r in compared))
    out["welch_p_adjusted"] = adjust_pvalues(out["welch_p"].to_numpy(dtype=float), adjust)
    out["paired_p_adjusted"] = adjust_pvalues(out["paired_p"].to_numpy(dtype=float), adjust)
    out["decides"] = rule
    deciding = "paired_p" if rule == PAIRED else "welch_p"
    out["p_adjusted"] = out[f"{deciding}_adjusted"]
    out["tested"] = out[deciding].notna()
    out["told_apart"] = out["tested"] & (out["p_adjusted"] < alpha)
    out = out.sort_values("mean", ascending=info.baseline.lower_is_better, kind="stable")
    out = out.reset_index(drop=True)
    out.attrs.update(best_k=best, leaders=[int(k) for k in out.loc[~out["told_apart"], "k"]],
                     tested=bool(out["tested"].any()), alpha=alpha, adjust=adjust,
                     comparisons=int(out["tested"].sum()), decides=rule)
    return out


def headline(lead: pd.DataFrame) -> str:
    """What :func:`leaders` supports, in two short lines (a figure title): the k with the
    lowest (best) mean and, when tested, the k that cannot be told apart from it with the
    smallest adjusted p among them, or that every other k is told apart."""
    top, attrs = lead.attrs["best_k"], lead.attrs
    if not attrs["tested"]:
        return (f"best mean at k = {top} of the {len(lead)} k with a value\n"
                "one run per k: untested, no best k claimed")
    test = "paired t" if attrs["decides"] == PAIRED else "Welch t"
    adj = attrs["adjust"]
    how = f"{test}, {ADJUST_NAMES[adj]}-adjusted" if adj != "none" else f"{test}, unadjusted"
    rest = lead[(lead["k"] != top) & lead["tested"]]
    if len(attrs["leaders"]) == 1:
        return (f"best k = {top}: told apart from every other k\n({how} "
                f"p <= {rest['p_adjusted'].max():.2g})")
    same = lead[(lead["k"] != top) & ~lead["told_apart"]]
    ks = ", ".join(map(str, sorted(same["k"])))
    ps = same["p_adjusted"].dropna()
    p_text = f" ({how} p >= {ps.min():.2g})" if len(ps) else " (untested)"
    return f"best mean at k = {top}, not told apart from k = {ks}\n{p_text.strip()}: no best k claimed"


def _seeds(group: pd.DataFrame) -> dict[int, float]:
    seeds = group["seed"]
    if seeds.isna().any() or seeds.duplicated().any():
        return {}
    return dict(zip(seeds.astype(int), group["value"].astype(float), strict=True))
