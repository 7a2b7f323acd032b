"""Seed study (Press et al. 2020, Fig. 6): per-order mean ± sd over seeds against the baseline.

An order is called *better than the baseline* only when both Welch's t-test
(``scipy.stats.ttest_ind(equal_var=False)``) is significant at ``alpha`` and the
bootstrap confidence interval of the mean difference (``scipy.stats.bootstrap``,
percentile method, resampling each group independently) lies entirely on the better side.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from .errors import AnalysisError
from .frame import BaselineStats, sample_sd, study_inputs

__all__ = ["SeedsInfo", "seed_comparison", "seed_comparison_from_stats"]

_SEED_SUFFIX = re.compile(r"@seed\d+$")
COLUMNS = [
    "name", "order", "n", "mean", "sd", "baseline_n", "baseline_mean", "baseline_sd",
    "difference", "welch_t", "welch_p", "ci_low", "ci_high", "ci_method", "better", "statement",
]


@dataclass(frozen=True, kw_only=True)
class SeedsInfo:
    """Result of :func:`seed_comparison`: ``table`` has one row per order (``COLUMNS``);
    ``difference`` = order mean − baseline mean; ``better`` is the significance claim."""

    metric: str
    alpha: float
    confidence: float
    lower_is_better: bool
    baseline: BaselineStats | None
    table: pd.DataFrame
    trials: pd.DataFrame

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or not 0 < self.confidence < 1:
            raise AnalysisError("alpha and confidence must lie strictly between 0 and 1")

    def row(self, name: str) -> pd.Series:
        rows = self.table[self.table["name"] == name]
        if rows.empty:
            raise AnalysisError(f"no order named {name!r}; have {', '.join(self.table['name'])}")
        return rows.iloc[0]


def strip_seed(name: str) -> str:
    """``sandwich16_6@seed2`` -> ``sandwich16_6``: the candidate a seeded trial belongs to."""
    return _SEED_SUFFIX.sub("", name)


def _sd(value: float) -> str:
    return f"{value:.2g}" if math.isfinite(value) else "n/a"


def _claim(
    *, name: str, n: int, mean: float, sd: float, base_n: int, base_mean: float, base_sd: float,
    t: float, p: float, lo: float, hi: float, method: str, alpha: float, confidence: float,
    lower: bool,
) -> tuple[bool, str]:
    head = (
        f"{name}: {mean:.4g} ± {_sd(sd)} (n={n}) vs baseline {base_mean:.4g} ± {_sd(base_sd)} "
        f"(n={base_n}); difference {mean - base_mean:+.3g}"
    )
    if not (math.isfinite(t) and math.isfinite(lo) and math.isfinite(hi)):
        return False, head + "; too few seeds for a test: no claim"
    side_ok = hi < 0 if lower else lo > 0
    better = bool(p < alpha and side_ok)
    verdict = "better than the baseline" if better else "not shown to be better than the baseline"
    return better, (
        f"{head}, {confidence:.0%} {method} CI [{lo:+.3g}, {hi:+.3g}], Welch t = {t:.3g}, "
        f"p = {p:.3g} (alpha {alpha:g}): {verdict}"
    )


def _bootstrap_ci(
    a: np.ndarray, b: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    def diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    result = stats.bootstrap(
        (a, b), diff, vectorized=True, paired=False, confidence_level=confidence,
        n_resamples=n_resamples, method="percentile", rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def seed_comparison(
    frame: pd.DataFrame,
    *,
    metric: str | None = None,
    column: str = "final",
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 4999,
    seed: int = 0,
) -> SeedsInfo:
    """Compare every candidate order (grouped by order string) with the baseline seeds.

    Orders with fewer than 2 seeds (or a baseline with fewer than 2) get no test and
    no claim; their statement says so.
    """
    frame, metric, base, rows = study_inputs(frame, metric, column=column)
    trials = pd.DataFrame({"name": rows["name"].map(strip_seed).to_numpy(),
                           "order": rows["order"].to_numpy(), "seed": rows["seed"].to_numpy(),
                           "value": rows[column].to_numpy(dtype=float)})
    table = seed_table(trials, base, by="order", alpha=alpha, confidence=confidence,
                       n_resamples=n_resamples, seed=seed)
    return SeedsInfo(metric=metric, alpha=alpha, confidence=confidence,
                     lower_is_better=base.lower_is_better, baseline=base, table=table,
                     trials=trials)


def seed_table(
    trials: pd.DataFrame,
    base: BaselineStats,
    *,
    by: str,
    alpha: float,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> pd.DataFrame:
    """The ``COLUMNS`` table: one row per group of ``trials`` (name, order, value; grouped
    by ``by``, in order of appearance) against the baseline values, best mean first.

    Welch's t (``scipy.stats.ttest_ind(equal_var=False)``) and the percentile bootstrap CI
    of the difference need ≥ 2 values on each side; else NaN and no claim."""
    b = np.asarray(base.values, dtype=float)
    records = []
    for _, group in trials.groupby(by, sort=False):
        a = group["value"].to_numpy(dtype=float)
        name, order = str(group["name"].iloc[0]), str(group["order"].iloc[0])
        t = p = lo = hi = float("nan")
        if len(a) >= 2 and len(b) >= 2:
            test = stats.ttest_ind(a, b, equal_var=False)
            t, p = float(test.statistic), float(test.pvalue)
            lo, hi = _bootstrap_ci(a, b, confidence, n_resamples, seed)
        sd = sample_sd(a)
        better, text = _claim(
            name=name, n=len(a), mean=float(a.mean()), sd=sd, base_n=base.n,
            base_mean=base.mean, base_sd=base.sd, t=t, p=p, lo=lo, hi=hi,
            method="bootstrap", alpha=alpha, confidence=confidence, lower=base.lower_is_better,
        )
        records.append({
            "name": name, "order": order, "n": len(a), "mean": float(a.mean()), "sd": sd,
            "baseline_n": base.n, "baseline_mean": base.mean, "baseline_sd": base.sd,
            "difference": float(a.mean()) - base.mean, "welch_t": t, "welch_p": p,
            "ci_low": lo, "ci_high": hi, "ci_method": "bootstrap (percentile)",
            "better": better, "statement": text,
        })
    table = pd.DataFrame(records, columns=COLUMNS)
    table = table.sort_values("mean", ascending=base.lower_is_better, kind="stable")
    return table.reset_index(drop=True)


def seed_comparison_from_stats(
    summary: pd.DataFrame,
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    lower_is_better: bool = True,
) -> SeedsInfo:
    """The same comparison from published summaries (name, order, baseline, n, mean, sd,
    metric — e.g. ``paper.sandwich_seed_summary()``): Welch's t from the statistics
    (``ttest_ind_from_stats``) and a Welch–Satterthwaite t interval, since no bootstrap
    is possible without the individual values."""
    needed = {"name", "order", "baseline", "n", "mean", "sd", "metric"}
    missing = needed - set(summary.columns)
    if missing:
        raise AnalysisError(f"summary frame is missing column(s) {', '.join(sorted(missing))}")
    base_rows = summary[summary["baseline"].astype(bool)]
    if len(base_rows) != 1:
        raise AnalysisError(f"summary needs exactly one baseline row, got {len(base_rows)}")
    base = base_rows.iloc[0]
    bn, bm, bs = int(base["n"]), float(base["mean"]), float(base["sd"])
    records = []
    for _, row in summary[~summary["baseline"].astype(bool)].iterrows():
        n, m, s = int(row["n"]), float(row["mean"]), float(row["sd"])
        test = stats.ttest_ind_from_stats(m, s, n, bm, bs, bn, equal_var=False)
        va, vb = s**2 / n, bs**2 / bn
        se = math.sqrt(va + vb)
        dof = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (bn - 1))
        half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
        lo, hi = m - bm - half, m - bm + half
        better, text = _claim(
            name=str(row["name"]), n=n, mean=m, sd=s, base_n=bn, base_mean=bm, base_sd=bs,
            t=float(test.statistic), p=float(test.pvalue), lo=lo, hi=hi,
            method="Welch t", alpha=alpha, confidence=confidence, lower=lower_is_better,
        )
        records.append({
            "name": row["name"], "order": row["order"], "n": n, "mean": m, "sd": s,
            "baseline_n": bn, "baseline_mean": bm, "baseline_sd": bs, "difference": m - bm,
            "welch_t": float(test.statistic), "welch_p": float(test.pvalue), "ci_low": lo,
            "ci_high": hi, "ci_method": "Welch t interval (summary statistics)",
            "better": better, "statement": text + " [from published mean ± sd; no bootstrap]",
        })
    return SeedsInfo(metric=str(base["metric"]), alpha=alpha, confidence=confidence,
                     lower_is_better=lower_is_better, baseline=None,
                     table=pd.DataFrame(records, columns=COLUMNS),
                     trials=pd.DataFrame(columns=["name", "order", "seed", "value"]))
