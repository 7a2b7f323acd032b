"""Studies a complete replication needs beyond the sweep report's sections.

* :func:`single_runs`: each random order against the baseline seeds, as a tested
  claim. One run of an order cannot estimate its own seed noise, so the test assumes it
  equals the baseline's: ``d = x - mean(b)`` and ``d / (s_b * sqrt(1 + 1/n))`` follows
  Student's t with ``n - 1`` degrees of freedom (the prediction interval of one new run);
  the row states that assumption. An order with several seeds uses its own variance
  (Welch's t and its t interval). p-values are adjusted over the orders (Holm by default);
  the verdict needs the adjusted p below alpha and the interval of ``d`` on one side of 0.
* :func:`noise`: how large seed noise is against the differences between orders. The spread
  of the random orders (one seed each: order effect plus seed noise) against the spread of
  the baseline seeds (seed noise alone): variance ratio, its two-sided F-test and confidence
  interval, and the share of the random orders' variance that seed noise cannot explain
  (``1 - 1/ratio``) with the interval the ratio's interval implies (floored at 0). With
  several seeds per sandwich coefficient also a one-way ANOVA over k (baseline = k 0) and
  its intraclass correlation.
* :func:`by_family`: the variance share and the Fig. 4 pattern per family and pooled.
* :func:`scale_statement`: the scale every answer holds at (stated next to each).
* :func:`end_slopes`: where training stands at the end: the least-squares slope of the
  validation metric over each trial's first and last evaluations (per 1,000 steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sublayer_search.analysis.store.frame import baseline_stats, lower_is_better, usable
from sublayer_search.analysis.studies.halves import halves_study
from sublayer_search.analysis.studies.significance import adjust_pvalues, verdict, welch_interval
from sublayer_search.spaces.generators.sandwich import SANDWICH

__all__ = ["RANDOM_FAMILIES", "NoiseStudy", "by_family", "end_slopes", "noise",
           "scale_statement", "single_runs"]

RANDOM_FAMILIES = ("permutations", "budgeted")
"""The families of random models (the paper's Tables 1 and 2)."""


def single_runs(frame: pd.DataFrame, metric: str, *, families: tuple[str, ...] = RANDOM_FAMILIES,
                adjust: str = "holm", alpha: float = 0.05,
                confidence: float = 0.95) -> pd.DataFrame:
    """One row per order of ``families``: value (mean over its seeds), n, difference from
    the baseline mean with its interval, p, adjusted p and verdict (better / worse / no
    evidence). An order with one seed gets the prediction-interval t-test, which assumes
    its seed sd is the baseline's (column ``test`` and ``assumption`` say so); an order
    with several seeds gets Welch's t-test and Welch t interval with its own variance."""
    from scipy import stats

    base = baseline_stats(frame, metric)
    rows = usable(frame, metric)
    rows = rows[rows["family"].isin(families) & ~rows["baseline"]]
    n, lower = base.n, lower_is_better(metric)
    scale = base.sd * math.sqrt(1 + 1 / n) if n >= 2 else math.nan
    crit = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) if n >= 2 else math.nan
    records = []
    for order, group in rows.groupby("order", sort=False):
        values = group["final"].to_numpy(dtype=float)
        rec = {"name": str(group["name"].iloc[0]), "order": order,
               "family": str(group["family"].iloc[0]), "n": len(values),
               "value": float(values.mean()), "sd": float(np.std(values, ddof=1))
               if len(values) >= 2 else math.nan}
        rec["difference"] = rec["value"] - base.mean
        if len(values) >= 2 and n >= 2:
            test = stats.ttest_ind(values, base.values, equal_var=False)
            lo, hi = welch_interval(values, base.values, confidence)
            rec.update(ci_low=lo, ci_high=hi, p=float(test.pvalue),
                       test="Welch t (own seed sd)", assumption="")
        else:
            rec.update(ci_low=rec["difference"] - crit * scale,
                       ci_high=rec["difference"] + crit * scale,
                       p=float(2 * stats.t.sf(abs(rec["difference"]) / scale, n - 1))
                       if n >= 2 else math.nan,
                       test="prediction-interval t (one seed)",
                       assumption=f"its seed sd taken to be the baseline's {base.sd:.2g}")
        records.append(rec)
    out = pd.DataFrame(records, columns=["name", "order", "family", "n", "value", "sd",
                                         "difference", "ci_low", "ci_high", "p", "test",
                                         "assumption"])
    out["p_adjusted"] = adjust_pvalues(out["p"].to_numpy(dtype=float), adjust)
    out["verdict"] = [verdict(p, lo, hi, alpha=alpha, lower=lower) for p, lo, hi in
                      zip(out["p_adjusted"], out["ci_low"], out["ci_high"], strict=True)]
    out["beats_average"] = out["value"] <= base.mean if lower else out["value"] >= base.mean
    out.attrs.update(adjust=adjust, alpha=alpha, confidence=confidence, baseline_n=n,
                     baseline_mean=base.mean, baseline_sd=base.sd,
                     one_seed=int((out["n"] == 1).sum()))
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
    """Two-sided F-test of equal variances (orders against seeds)."""
    order_share: float
    """1 - seed variance / order variance (0 when seeds vary as much): the share of the
    random orders' variance that seed noise does not explain."""
    share_ci: tuple[float, float]
    """The share's interval from the ratio's: ``1 - 1/ratio`` at each end, floored at 0."""
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
            ("F-test p (two-sided)", self.ratio_p),
            ("share of order variance not seed noise", self.order_share),
            ("share CI low", self.share_ci[0]), ("share CI high", self.share_ci[1]),
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
                        rows[(rows["family"] == SANDWICH) & ~rows["baseline"]].groupby("k")]
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
        ratio_p=min(1.0, 2 * min(float(stats.f.sf(ratio, df_o, df_s)),
                                  float(stats.f.cdf(ratio, df_o, df_s)))),
        order_share=max(0.0, 1 - float(s2 / o2)) if o2 > 0 else math.nan,
        share_ci=(_share(ci[0]), _share(ci[1])),
        anova_f=f_stat, anova_p=p_anova, icc=icc, anova_groups=len(groups))


def _share(ratio: float) -> float:
    """The share of order variance beyond seed noise at a variance ratio (0 at or below 1)."""
    return max(0.0, 1 - 1 / ratio) if ratio > 0 else 0.0


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


def by_family(frame: pd.DataFrame, metric: str, *, families: tuple[str, ...] = RANDOM_FAMILIES,
              straddle: str = "fractional") -> pd.DataFrame:
    """The variance share (:func:`noise`) and the Fig. 4 pattern (:func:`halves_study`:
    Spearman of the metric with the bottom-half share of ``s``, Mann–Whitney of bottom-half
    ``s``, better vs not) for each family alone and for the families pooled (last row). The
    families differ in their s/f mix (budgeted draws), so a pooled figure can rest on one."""
    rows = usable(frame, metric)
    out = []
    for label, fams in [*((f, (f,)) for f in families), ("pooled", families)]:
        sub = rows[rows["family"].isin(fams) & ~rows["baseline"]]
        if sub.empty:
            continue
        study = noise(frame, metric, families=fams)
        halves = halves_study(rows[rows["family"].isin(fams) | rows["baseline"]],
                              metric=metric, straddle=straddle)
        rho, mw = halves.spearman, halves.mann_whitney
        out.append({"family": label, "n": study.order_n, "order_sd": study.order_sd,
                    "variance_ratio": study.variance_ratio, "ratio_ci_low": study.ratio_ci[0],
                    "ratio_ci_high": study.ratio_ci[1], "ratio_p": study.ratio_p,
                    "order_share": study.order_share, "share_ci_low": study.share_ci[0],
                    "share_ci_high": study.share_ci[1],
                    "n_better": halves.group_sizes()["better"],
                    "spearman_rho": rho.rho if rho else math.nan,
                    "spearman_p": rho.pvalue if rho else math.nan,
                    "mann_whitney_p": mw.pvalue if mw else math.nan})
    return pd.DataFrame(out)


def scale_statement(frame: pd.DataFrame, history: pd.DataFrame | None, metric: str) -> str:
    """The scale an answer holds at: parameters, training steps and, with ``history``, how
    much of the early slope is left at the end (median over trials)."""
    rows = usable(frame, metric)
    parts = []
    if "params" in rows and rows["params"].notna().any():
        parts.append(f"{float(rows['params'].median()) / 1e3:.0f}k parameters")
    if "steps" in rows and rows["steps"].notna().any():
        parts.append(f"{int(rows['steps'].max())} training steps")
    text = "at this scale only: " + (", ".join(parts) if parts else "scale not recorded")
    if history is not None and not history.empty:
        slopes = end_slopes(history, frame, metric)
        if not slopes.empty:
            text += (f"; the curves end at {slopes['end_to_early'].median():.2f} of their early "
                     "slope (median): not converged")
    return text
