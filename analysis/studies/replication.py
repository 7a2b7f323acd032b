"""Studies a complete replication needs beyond the sweep report's sections.

* :func:`single_runs`: each random order (one seed) against the baseline seeds, as a tested
  claim. One run of an order cannot estimate its own seed noise, so the test assumes it
  equals the baseline's: ``d = x - mean(b)`` and ``d / (s_b * sqrt(1 + 1/n))`` follows
  Student's t with ``n - 1`` degrees of freedom (the prediction interval of one new run).
  p-values are adjusted over the orders (Holm by default); the verdict needs the adjusted p
  below alpha and the interval of ``d`` on one side of 0.
* :func:`noise`: how large seed noise is against the differences between orders. The spread
  of the random orders (one seed each: order effect plus seed noise) against the spread of
  the baseline seeds (seed noise alone): variance ratio, its F-test and confidence interval,
  and the share of the random orders' variance that seed noise cannot explain. With
  several seeds per sandwich coefficient also a one-way ANOVA over k (baseline = k 0) and
  its intraclass correlation.
* :func:`end_slopes`: where training stands at the end: the least-squares slope of the
  validation metric over each trial's first and last evaluations (per 1,000 steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sublayer_search.analysis.store.frame import baseline_stats, lower_is_better, usable
from sublayer_search.analysis.studies.significance import adjust_pvalues, verdict

__all__ = ["RANDOM_FAMILIES", "NoiseStudy", "end_slopes", "noise", "single_runs"]

RANDOM_FAMILIES = ("permutations", "budgeted")
"""The families of random models (the paper's Tables 1 and 2)."""


def single_runs(frame: pd.DataFrame, metric: str, *, families: tuple[str, ...] = RANDOM_FAMILIES,
                adjust: str = "holm", alpha: float = 0.05,
                confidence: float = 0.95) -> pd.DataFrame:
    """One row per finished trial of ``families``: value, difference from the baseline mean
    with its interval, p, adjusted p and verdict (better / worse / no evidence)."""
    from scipy import stats

    base = baseline_stats(frame, metric)
    rows = usable(frame, metric)
    rows = rows[rows["family"].isin(families) & ~rows["baseline"]]
    n, lower = base.n, lower_is_better(metric)
    scale = base.sd * math.sqrt(1 + 1 / n) if n >= 2 else math.nan
    crit = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) if n >= 2 else math.nan
    out = pd.DataFrame({
        "name": rows["name"].to_numpy(), "order": rows["order"].to_numpy(),
        "family": rows["family"].to_numpy(), "value": rows["final"].to_numpy(dtype=float)})
    out["difference"] = out["value"] - base.mean
    out["ci_low"] = out["difference"] - crit * scale
    out["ci_high"] = out["difference"] + crit * scale
    t = out["difference"] / scale
    out["p"] = 2 * stats.t.sf(np.abs(t.to_numpy(dtype=float)), n - 1) if n >= 2 else math.nan
    out["p_adjusted"] = adjust_pvalues(out["p"].to_numpy(dtype=float), adjust)
    out["verdict"] = [verdict(p, lo, hi, alpha=alpha, lower=lower) for p, lo, hi in
                      zip(out["p_adjusted"], out["ci_low"], out["ci_high"], strict=True)]
    out["beats_average"] = out["value"] <= base.mean if lower else out["value"] >= base.mean
    out.attrs.update(adjust=adjust, alpha=alpha, confidence=confidence, baseline_n=n,
                     baseline_mean=base.mean, baseline_sd=base.sd)
    return out.sort_values("value", ascending=lower, kind="stable").reset_index(drop=True)


@dataclass(frozen=True, kw_only=True)
class NoiseStudy:
    """Seed noise against differences between orders (see the module docstring)."""

    seed_sd: float
    """Sample sd of the baseline seeds."""
    seed_n: int
    order_sd: float
    """Sample sd of the random orders' values (one seed each)."""
    order_n: int
    variance_ratio: float
    """order variance / seed variance."""
    ratio_ci: tuple[float, float]
    ratio_p: float
    """One-sided F-test: the random orders vary more than seeds do."""
    order_share: float
    """1 - seed variance / order variance (0 when seeds vary as much): the share of the
    random orders' variance that seed noise does not explain."""
    anova_f: float
    anova_p: float
    icc: float
    """Intraclass correlation over sandwich coefficients: the share of variance between k."""
    anova_groups: int

    def rows(self) -> pd.DataFrame:
        """The study as a one-row-per-figure table."""
        return pd.DataFrame([{"quantity": k, "value": v} for k, v in (
            ("seed sd (baseline seeds)", self.seed_sd), ("baseline seeds", self.seed_n),
            ("sd over random orders", self.order_sd), ("random orders", self.order_n),
            ("variance ratio orders / seeds", self.variance_ratio),
            ("ratio CI low", self.ratio_ci[0]), ("ratio CI high", self.ratio_ci[1]),
            ("F-test p (orders vary more)", self.ratio_p),
            ("share of order variance not seed noise", self.order_share),
            ("sandwich ANOVA F", self.anova_f), ("sandwich ANOVA p", self.anova_p),
            ("sandwich ICC (between k)", self.icc), ("sandwich groups", self.anova_groups))])


def noise(frame: pd.DataFrame, metric: str, *, families: tuple[str, ...] = RANDOM_FAMILIES,
          confidence: float = 0.95) -> NoiseStudy:
    """Seed noise of the baseline against the spread of the random orders and of k."""
    from scipy import stats

    rows = usable(frame, metric)
    seeds = rows.loc[rows["baseline"], "final"].to_numpy(dtype=float)
    orders = rows.loc[rows["family"].isin(families) & ~rows["baseline"], "final"]
    orders = orders.to_numpy(dtype=float)
    s2 = float(np.var(seeds, ddof=1)) if len(seeds) >= 2 else math.nan
    o2 = float(np.var(orders, ddof=1)) if len(orders) >= 2 else math.nan
    df_o, df_s = len(orders) - 1, len(seeds) - 1
    ratio = float(o2 / s2) if s2 > 0 else math.inf if o2 > 0 else math.nan
    half = (1 - confidence) / 2
    ci = (ratio / float(stats.f.ppf(1 - half, df_o, df_s)),
          ratio / float(stats.f.ppf(half, df_o, df_s)))
    groups = [seeds] + [g["final"].to_numpy(dtype=float) for _, g in
                        rows[(rows["family"] == "sandwich") & ~rows["baseline"]].groupby("k")]
    groups = [g for g in groups if len(g) >= 2]
    f_stat = p_anova = icc = math.nan
    if len(groups) >= 2:
        res = stats.f_oneway(*groups)
        f_stat, p_anova = float(res.statistic), float(res.pvalue)
        n0 = _anova_n0([len(g) for g in groups])
        icc = max(0.0, (f_stat - 1) / (f_stat - 1 + n0)) if math.isfinite(f_stat) else math.nan
    return NoiseStudy(
        seed_sd=float(np.sqrt(s2)), seed_n=len(seeds), order_sd=float(np.sqrt(o2)),
        order_n=len(orders), variance_ratio=ratio, ratio_ci=ci,
        ratio_p=float(stats.f.sf(ratio, df_o, df_s)),
        order_share=max(0.0, 1 - float(s2 / o2)) if o2 > 0 else math.nan,
        anova_f=f_stat, anova_p=p_anova, icc=icc, anova_groups=len(groups))


def _anova_n0(sizes: list[int]) -> float:
    """The effective group size of an unbalanced one-way ANOVA (for the ICC)."""
    total = sum(sizes)
    return (total - sum(n * n for n in sizes) / total) / (len(sizes) - 1)


def end_slopes(history: pd.DataFrame, frame: pd.DataFrame, metric: str, *,
               points: int = 3) -> pd.DataFrame:
    """Per trial: the slope of ``metric`` (per 1,000 steps) over its first and its last
    ``points`` evaluations, and their ratio (how much of the early pace is left)."""
    from scipy import stats

    names = frame.set_index("run_id")["name"].to_dict() if "run_id" in frame else {}
    rows = []
    curves = history[history["key"] == metric]
    for run_id, curve in curves.groupby("run_id", sort=False):
        curve = curve.sort_values("step")
        if len(curve) < 2 * points:
            continue
        first, last = curve.head(points), curve.tail(points)
        early = stats.linregress(first["step"], first["value"]).slope * 1000
        late = stats.linregress(last["step"], last["value"]).slope * 1000
        rows.append({"run_id": run_id, "name": names.get(run_id, run_id),
                     "first_step": int(curve["step"].iloc[0]),
                     "last_step": int(curve["step"].iloc[-1]),
                     "early_slope_per_1k": float(early), "end_slope_per_1k": float(late),
                     "end_to_early": float(late / early) if early else math.nan})
    return pd.DataFrame(rows, columns=["run_id", "name", "first_step", "last_step",
                                       "early_slope_per_1k", "end_slope_per_1k",
                                       "end_to_early"])
