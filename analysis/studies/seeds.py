"""Seed study (Press et al. 2020, Fig. 6): per-order mean ± sd over seeds against the baseline.

An order is called *better than the baseline* only when Welch's t-test
(``scipy.stats.ttest_ind(equal_var=False)``), its p-value adjusted for the number of
orders compared (Holm by default, Benjamini–Hochberg or none; :mod:`analysis.studies.significance`),
is significant at ``alpha`` and the confidence interval of the mean difference lies
entirely on the better side; *worse* likewise on the worse side; else *no evidence*.

The interval is the Welch–Satterthwaite t interval (``interval="t"``, the default): with
3 or 8 seeds a percentile bootstrap is too narrow (the shipped study's k = 5: bootstrap
[−0.194, −0.098] against t [−0.257, −0.041]). ``interval="bootstrap"`` (percentile,
each group resampled independently) is used only where both arms have at least
``BOOTSTRAP_MIN_N`` values; below that the row falls back to the t interval and its
``ci_method`` says so.

Where the order and the baseline trained some of the same seeds, each row adds the paired
analysis over the shared seeds: paired t with its interval and the Wilcoxon signed-rank
test (:func:`analysis.studies.significance.paired`). Both the Welch and the paired
p-values are adjusted, each over its family. Which one gives the verdicts (column
``decides``) is one rule for the whole family, chosen by what a shared seed shares
(:func:`analysis.studies.significance.decides`): here a seed fixes the batch order but
not the initial weights (different orders draw their modules from the global RNG in
different sequences), so Welch's t over every baseline seed decides and the paired
t-test is shown beside it, never deciding (the shipped sandwiches: seeds 0–2 against
baseline seeds 0–7, all 8 baseline seeds in the verdict). The table keeps both side by side (``welch_p_adjusted``, ``welch_verdict``,
``paired_p_adjusted``, ``paired_verdict``); ``p_adjusted`` and ``verdict`` are the
deciding test's. Every number in the statement names its test.

Power: ``seeds_for_80_power`` is *post hoc* (computed from the observed difference) and is
labelled so; ``design_power`` is the power of this design (n vs the baseline's n, the
baseline's seed sd) for a stated difference of interest (``effect``; default one baseline
seed sd).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import BaselineStats, sample_sd, study_inputs, usable
from sublayer_search.analysis.studies.significance import (
    ADJUST_NAMES,
    PAIRED,
    VERDICTS,
    Paired,
    adjust_pvalues,
    decides,
    design_power,
    paired,
    seeds_for_power,
    verdict,
    welch_interval,
)

__all__ = ["BOOTSTRAP_MIN_N", "COLUMNS", "SeedsInfo", "by_seed", "finish",
           "seed_comparison", "seed_comparison_from_stats", "seed_table"]

BOOTSTRAP_MIN_N = 10
"""Fewest values per arm for which ``interval="bootstrap"`` uses the percentile bootstrap."""

_SEED_SUFFIX = re.compile(r"@seed\d+$")
COLUMNS = [
    "name", "order", "n", "mean", "sd", "baseline_n", "baseline_mean", "baseline_sd",
    "difference", "welch_t", "welch_p", "welch_p_adjusted", "welch_verdict", "p_adjusted",
    "adjust", "comparisons", "ci_low", "ci_high", "ci_method", "seeds_for_80_power",
    "verdict", "decides", "better", "statement", "paired_n", "paired_seeds",
    "paired_difference", "paired_t", "paired_p", "paired_p_adjusted", "paired_verdict",
    "paired_ci_low", "paired_ci_high", "wilcoxon_p", "effect", "design_power",
]
_PHRASE = {VERDICTS[0]: "better than the baseline", VERDICTS[1]: "worse than the baseline",
           VERDICTS[2]: "no evidence of a difference from the baseline"}


@dataclass(frozen=True, kw_only=True)
class SeedsInfo:
    """Result of :func:`seed_comparison`: ``table`` has one row per order (``COLUMNS``);
    ``difference`` = order mean − baseline mean; ``verdict`` (better / worse / no evidence)
    uses ``p_adjusted`` (``adjust``: holm, bh or none) of the test named in ``decides``
    (``paired`` or ``unpaired (reason)``: Welch); ``better`` = verdict "better"."""

    metric: str
    alpha: float
    confidence: float
    lower_is_better: bool
    adjust: str = "holm"
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


def _power_text(n: float) -> str:
    if math.isnan(n):
        return "post-hoc power: n/a"
    if math.isinf(n):
        return ("post hoc (from the observed difference): more than 10,000 seeds per arm "
                "would be needed for 80% power")
    return (f"post hoc (from the observed difference): {int(n)} seeds per arm would detect "
            "it at 80% power")


def _how(p_a: float, adjust: str, family: int) -> str:
    if adjust == "none":
        return "unadjusted"
    return (f"{ADJUST_NAMES[adjust]}-adjusted over {family} comparison"
            f"{'s' if family != 1 else ''} p = {p_a:.3g}")


def _welch_text(rec: dict[str, Any], confidence: float) -> str:
    return (f"{confidence:.0%} {rec['ci_method']} [{rec['ci_low']:+.3g}, "
            f"{rec['ci_high']:+.3g}]; Welch t-test t = {rec['welch_t']:.3g}, "
            f"p = {rec['welch_p']:.3g}")


def _paired_text(rec: dict[str, Any], confidence: float) -> str:
    return (f"paired t over the {rec['paired_n']} shared seeds ({rec['paired_seeds']}): mean "
            f"difference {rec['paired_difference']:+.3g}, {confidence:.0%} paired t interval "
            f"[{rec['paired_ci_low']:+.3g}, {rec['paired_ci_high']:+.3g}], paired t-test "
            f"p = {rec['paired_p']:.3g}")


def _design_text(rec: dict[str, Any], alpha: float) -> str:
    power = rec.get("design_power", math.nan)
    if not math.isfinite(power):
        return ""
    return (f"; planned power of this design (n={rec['n']} vs {rec['baseline_n']}, "
            f"two-sided t at alpha {alpha:g}, sd = baseline seed sd) for a stated difference "
            f"of {rec['effect']:.2g}: {power:.2f}")


def finish(records: list[dict[str, Any]], *, alpha: float, confidence: float,
           adjust: str, lower: bool) -> pd.DataFrame:
    """Adjust the rows' Welch and paired p-values, each over its family of tested rows;
    give each row both verdicts, the deciding one (:func:`significance.decides` over the
    rows with at least 2 values), seeds for 80 % power and statement: the ``COLUMNS``
    table."""
    welch_ps = np.array([float(rec["welch_p"]) for rec in records], dtype=float)
    pair_ps = np.array([float(rec["paired_p"]) for rec in records], dtype=float)
    w_adj, p_adj = adjust_pvalues(welch_ps, adjust), adjust_pvalues(pair_ps, adjust)
    w_family, p_family = int(np.isfinite(welch_ps).sum()), int(np.isfinite(pair_ps).sum())
    compared = [rec for rec in records if int(rec["n"]) >= 2]
    rule = decides([(int(rec["n"]), int(rec["paired_n"])) for rec in compared],
                   defined=all(math.isfinite(float(rec["paired_p"])) for rec in compared))
    rows = []
    for rec, w_a, p_a in zip(records, w_adj, p_adj, strict=True):
        diff, sd, base_sd = float(rec["difference"]), float(rec["sd"]), float(rec["baseline_sd"])
        w_call = verdict(float(w_a), float(rec["ci_low"]), float(rec["ci_high"]),
                         alpha=alpha, lower=lower)
        p_call = verdict(float(p_a), float(rec["paired_ci_low"]), float(rec["paired_ci_high"]),
                         alpha=alpha, lower=lower)
        paired_rule = rule == PAIRED
        call = p_call if paired_rule else w_call
        n_power = seeds_for_power(diff, sd, base_sd, alpha=0.05)
        text = (f"{rec['name']}: {rec['mean']:.4g} ± {_sd(sd)} (n={rec['n']}) vs baseline "
                f"{rec['baseline_mean']:.4g} ± {_sd(base_sd)} (baseline seed sd, "
                f"n={rec['baseline_n']}); difference {diff:+.3g}")
        welch_ok = all(math.isfinite(float(rec[c])) for c in ("welch_p", "ci_low", "ci_high"))
        paired_ok = math.isfinite(float(rec["paired_p"]))
        welch = (f"{_welch_text(rec, confidence)}, {_how(float(w_a), adjust, w_family)}"
                 if welch_ok else "")
        paired_txt = (f"{_paired_text(rec, confidence)}, "
                      f"{_how(float(p_a), adjust, p_family)}" if paired_ok else "")
        if int(rec["n"]) < 2 or not (welch_ok or paired_ok):
            text += "; too few seeds for a test: no claim"
        elif paired_rule:
            text += (f"; decides: {paired_txt} (alpha {alpha:g}): {_PHRASE[call]}; unpaired "
                     f"alongside (does not decide): {welch}, Welch's verdict {w_call}")
        else:
            text += f", {welch} (alpha {alpha:g}): {_PHRASE[call]}; decides: {rule}"
            if paired_ok:
                text += (f"; paired alongside (does not decide): {paired_txt}, paired "
                         f"verdict {p_call}")
        if rec.get("paired_n"):
            text += (f"; Wilcoxon signed-rank p = {rec['wilcoxon_p']:.3g} (unadjusted, shown "
                     "only: it never decides)")
        text += f"; {_power_text(n_power)}{_design_text(rec, 0.05)}{rec.pop('note', '')}"
        rows.append({**rec, "welch_p_adjusted": float(w_a), "welch_verdict": w_call,
                     "paired_p_adjusted": float(p_a), "paired_verdict": p_call,
                     "p_adjusted": float(p_a if paired_rule else w_a), "adjust": adjust,
                     "comparisons": p_family if paired_rule else w_family,
                     "seeds_for_80_power": n_power, "verdict": call, "decides": rule,
                     "better": call == VERDICTS[0], "statement": text})
    return pd.DataFrame(rows, columns=COLUMNS)


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
    adjust: str = "holm",
    interval: str = "t",
    effect: float | None = None,
) -> SeedsInfo:
    """Compare every candidate order (grouped by order string) with the baseline seeds,
    p-values adjusted over the orders tested (``adjust``: holm, bh or none); ``interval``
    and ``effect`` as in :func:`seed_table`. The baseline's seeds are given by seed, so
    orders that share seeds with it get the paired analysis too.

    Orders with fewer than 2 seeds (or a baseline with fewer than 2) get no test and
    no claim; their statement says so.
    """
    frame, metric, base, rows = study_inputs(frame, metric, column=column)
    trials = pd.DataFrame({"name": rows["name"].map(strip_seed).to_numpy(),
                           "order": rows["order"].to_numpy(), "seed": rows["seed"].to_numpy(),
                           "value": rows[column].to_numpy(dtype=float)})
    b_rows = usable(frame, metric, column=column)
    b_rows = b_rows[b_rows["baseline"]]
    table = seed_table(trials, base, by="order", alpha=alpha, confidence=confidence,
                       n_resamples=n_resamples, seed=seed, adjust=adjust, interval=interval,
                       effect=effect, baseline_seeds=by_seed(b_rows["seed"], b_rows[column]))
    return SeedsInfo(metric=metric, alpha=alpha, confidence=confidence,
                     lower_is_better=base.lower_is_better, adjust=adjust, baseline=base,
                     table=table, trials=trials)


def seed_table(
    trials: pd.DataFrame,
    base: BaselineStats,
    *,
    by: str,
    alpha: float,
    confidence: float,
    n_resamples: int,
    seed: int,
    adjust: str = "holm",
    interval: str = "t",
    effect: float | None = None,
    baseline_seeds: dict[int, float] | None = None,
) -> pd.DataFrame:
    """The ``COLUMNS`` table: one row per group of ``trials`` (name, order, seed, value;
    grouped by ``by``, in order of appearance) against the baseline values, best mean first.

    Welch's t (``scipy.stats.ttest_ind(equal_var=False)``) and the interval of the
    difference (``interval``: "t", the Welch–Satterthwaite t interval, or "bootstrap",
    percentile, only where both arms have ``BOOTSTRAP_MIN_N`` values, else t) need ≥ 2
    values on each side; else NaN and no claim. With ``baseline_seeds`` (seed -> value)
    the paired t and Wilcoxon over the seeds a group shares with the baseline. ``effect``:
    the stated difference for ``design_power`` (default: the baseline's seed sd). The
    p-values are adjusted over the groups tested (:func:`finish`)."""
    if interval not in ("t", "bootstrap"):
        raise AnalysisError(f"interval must be 't' or 'bootstrap', got {interval!r}")
    b = np.asarray(base.values, dtype=float)
    stated = base.sd if effect is None else float(effect)
    records: list[dict[str, Any]] = []
    for _, group in trials.groupby(by, sort=False):
        a = group["value"].to_numpy(dtype=float)
        name, order = str(group["name"].iloc[0]), str(group["order"].iloc[0])
        t, p, lo, hi, method = _welch(a, b, interval, confidence, n_resamples, seed)
        pair = None
        if baseline_seeds is not None and "seed" in group:
            pair = paired(by_seed(group["seed"], group["value"]), baseline_seeds,
                          confidence=confidence)
        sd = sample_sd(a)
        records.append({
            "name": name, "order": order, "n": len(a), "mean": float(a.mean()), "sd": sd,
            "baseline_n": base.n, "baseline_mean": base.mean, "baseline_sd": base.sd,
            "difference": float(a.mean()) - base.mean, "welch_t": t, "welch_p": p,
            "ci_low": lo, "ci_high": hi, "ci_method": method,
            **_paired_columns(pair), "effect": stated,
            "design_power": design_power(len(a), len(b), stated, base.sd),
        })
    table = finish(records, alpha=alpha, confidence=confidence, adjust=adjust,
                   lower=base.lower_is_better)
    table = table.sort_values("mean", ascending=base.lower_is_better, kind="stable")
    return table.reset_index(drop=True)


def _welch(a: np.ndarray, b: np.ndarray, interval: str, confidence: float, n_resamples: int,
           seed: int) -> tuple[float, float, float, float, str]:
    """Welch's t, its p and the interval of the difference (with how it was made); NaN
    unless both arms have two values."""
    if len(a) < 2 or len(b) < 2:
        nan = float("nan")
        return nan, nan, nan, nan, "Welch t interval"
    test = stats.ttest_ind(a, b, equal_var=False)
    t, p = float(test.statistic), float(test.pvalue)
    if interval == "bootstrap" and min(len(a), len(b)) >= BOOTSTRAP_MIN_N:
        return (t, p, *_bootstrap_ci(a, b, confidence, n_resamples, seed),
                "percentile bootstrap interval")
    lo, hi = welch_interval(a, b, confidence)
    note = f" (fewer than {BOOTSTRAP_MIN_N} values per arm: no bootstrap)"
    return t, p, lo, hi, "Welch t interval" + (note if interval == "bootstrap" else "")


def by_seed(seeds: pd.Series, values: pd.Series) -> dict[int, float]:
    """seed -> value; empty where a seed is missing or repeats (no pairing then)."""
    keep = seeds.notna().to_numpy()
    ids = [int(x) for x in seeds[keep]]
    if len(set(ids)) != len(ids):
        return {}
    return dict(zip(ids, values[keep].to_numpy(dtype=float).tolist(), strict=True))


def _paired_columns(pair: Paired | None) -> dict[str, Any]:
    if pair is None:
        return {"paired_n": 0, "paired_seeds": "", "paired_difference": math.nan,
                "paired_t": math.nan, "paired_p": math.nan, "paired_ci_low": math.nan,
                "paired_ci_high": math.nan, "wilcoxon_p": math.nan}
    return {"paired_n": pair.n, "paired_seeds": ", ".join(map(str, pair.seeds)),
            "paired_difference": pair.difference, "paired_t": pair.t, "paired_p": pair.p,
            "paired_ci_low": pair.ci_low, "paired_ci_high": pair.ci_high,
            "wilcoxon_p": pair.wilcoxon_p}


def seed_comparison_from_stats(
    summary: pd.DataFrame,
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    lower_is_better: bool = True,
    adjust: str = "holm",
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
    records: list[dict[str, Any]] = []
    for _, row in summary[~summary["baseline"].astype(bool)].iterrows():
        n, m, s = int(row["n"]), float(row["mean"]), float(row["sd"])
        test = stats.ttest_ind_from_stats(m, s, n, bm, bs, bn, equal_var=False)
        va, vb = s**2 / n, bs**2 / bn
        se = math.sqrt(va + vb)
        dof = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (bn - 1))
        half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * se
        lo, hi = m - bm - half, m - bm + half
        records.append({
            "name": row["name"], "order": row["order"], "n": n, "mean": m, "sd": s,
            "baseline_n": bn, "baseline_mean": bm, "baseline_sd": bs, "difference": m - bm,
            "welch_t": float(test.statistic), "welch_p": float(test.pvalue), "ci_low": lo,
            "ci_high": hi, "ci_method": "Welch t interval (summary statistics)",
            "note": " [from published mean ± sd; no bootstrap, no pairing]",
            **_paired_columns(None), "effect": bs, "design_power": design_power(n, bn, bs, bs),
        })
    return SeedsInfo(metric=str(base["metric"]), alpha=alpha, confidence=confidence,
                     lower_is_better=lower_is_better, adjust=adjust, baseline=None,
                     table=finish(records, alpha=alpha, confidence=confidence, adjust=adjust,
                                  lower=lower_is_better),
                     trials=pd.DataFrame(columns=["name", "order", "seed", "value"]))
