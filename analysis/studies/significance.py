"""Multiple-comparison adjustment, verdicts and power for "X beats the baseline" claims.

* :func:`adjust_pvalues`: Holm (default; family-wise error), Benjamini–Hochberg
  (``scipy.stats.false_discovery_control``; false discovery rate) or none. NaN p-values
  (comparisons without a test) are left out of the family and stay NaN.
* :func:`verdict`: "better" / "worse" / "no evidence" from the *adjusted* p-value and the
  side of the confidence interval of the difference.
* :func:`seeds_for_power`: seeds per arm that a two-sided two-sample t-test at ``alpha``
  needs to detect the observed difference with the given power (noncentral t). This is
  *post hoc* power (from the observed effect) and is labelled so wherever it is shown;
  :func:`design_power` is the power of a design for a stated effect of interest.
* :func:`welch_interval`: the Welch–Satterthwaite t interval of a difference of means (the
  seeds study's interval: a percentile bootstrap is too narrow with few seeds).
* :func:`paired`: paired t and Wilcoxon signed-rank over the seeds two arms share.
* :func:`decides`: which test decides a family of verdicts, chosen by what a shared seed
  shares. In this product a seed fixes the batch order only: different orders draw their
  modules' initial weights from the global RNG in different sequences, so two orders'
  trials with one seed do not start from the same weights and the pairing is not real.
  So Welch's t over every seed decides (``shares_weights=False``, every caller today),
  and the paired t over the shared seeds is shown beside it, never deciding. The
  paired t-test (``scipy.stats.ttest_rel``) decides only where a caller states that
  shared seeds share the initial weights too (``shares_weights=True``) and every arm's
  seeds are matched by the reference with paired differences that vary; one family
  never mixes the two tests under one adjustment. The Wilcoxon signed-rank test is
  shown, never decides: with n pairs its exact two-sided p cannot go below 2 / 2^n
  (0.25 for 3 seeds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from sublayer_search.analysis.errors import AnalysisError

__all__ = ["ADJUST", "BATCHES_ONLY", "PAIRED", "VERDICTS", "Paired", "adjust_pvalues", "decides",
           "design_power", "paired", "seeds_for_power", "verdict", "welch_interval"]

ADJUST = ("holm", "bh", "none")
"""``--adjust`` choices: Holm–Bonferroni, Benjamini–Hochberg, no adjustment."""
ADJUST_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no adjustment"}
VERDICTS = ("better", "worse", "no evidence")
PAIRED = "paired"
"""``decides`` when the paired t-test gives the verdicts (else an "unpaired (...)" reason)."""
MAX_SEEDS = 10_000


def _holm(p: np.ndarray) -> np.ndarray:
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate((m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.minimum(stepped, 1.0)
    return out


def adjust_pvalues(pvalues: Sequence[float] | np.ndarray, method: str = "holm") -> np.ndarray:
    """The p-values adjusted for the number of comparisons (the finite ones)."""
    if method not in ADJUST:
        raise AnalysisError(f"unknown adjustment {method!r}; expected one of {', '.join(ADJUST)}")
    p = np.asarray(pvalues, dtype=float)
    out = p.copy()
    keep = np.isfinite(p)
    if method == "none" or not keep.any():
        return out
    if method == "holm":
        out[keep] = _holm(p[keep])
    else:
        from scipy import stats  # here, not at the top: ``sublayer`` builds its parser from ADJUST

        out[keep] = stats.false_discovery_control(p[keep], method="bh")
    return out


def verdict(p_adjusted: float, lo: float, hi: float, *, alpha: float, lower: bool) -> str:
    """"better" when the adjusted p is below ``alpha`` and the CI of the difference lies on
    the better side of 0, "worse" when on the worse side, else "no evidence"."""
    if not (math.isfinite(p_adjusted) and math.isfinite(lo) and math.isfinite(hi)):
        return VERDICTS[2]
    if p_adjusted >= alpha or lo <= 0 <= hi:
        return VERDICTS[2]
    below = hi < 0
    return VERDICTS[0] if below == lower else VERDICTS[1]


def power(n: int, effect: float, *, alpha: float = 0.05) -> float:
    """Power of the two-sided two-sample t-test with ``n`` per arm at standardised
    ``effect`` (Cohen's d): P(|T| > t_crit) with T ~ noncentral t(2n − 2, d·sqrt(n/2))."""
    from scipy import stats

    dof = 2 * n - 2
    crit = float(stats.t.ppf(1 - alpha / 2, dof))
    nc = abs(effect) * math.sqrt(n / 2)
    return float(stats.nct.sf(crit, dof, nc) + stats.nct.cdf(-crit, dof, nc))


def seeds_for_power(
    difference: float, sd_a: float, sd_b: float, *, alpha: float = 0.05, target: float = 0.8
) -> float:
    """Smallest number of seeds per arm (≥ 2) at which a two-sided two-sample t-test at
    ``alpha`` detects ``difference`` with power ``target``, taking the sd as the root mean
    square of the two arms' sds (one arm's sd when the other is unknown). NaN when the
    difference or both sds are unknown, or the difference is 0; ``inf`` beyond
    ``MAX_SEEDS``."""
    sds = [s for s in (sd_a, sd_b) if math.isfinite(s)]
    if not math.isfinite(difference) or difference == 0 or not sds:
        return float("nan")
    sd = math.sqrt(sum(s * s for s in sds) / len(sds))
    if sd == 0:
        return 2.0
    effect = abs(difference) / sd
    lo, hi = 2, 2
    while power(hi, effect, alpha=alpha) < target:
        if hi >= MAX_SEEDS:
            return float("inf")
        lo, hi = hi, min(hi * 2, MAX_SEEDS)
    while lo < hi:  # smallest n in [lo, hi] with enough power
        mid = (lo + hi) // 2
        if power(mid, effect, alpha=alpha) >= target:
            hi = mid
        else:
            lo = mid + 1
    return float(hi)


def welch_interval(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray,
                   confidence: float = 0.95) -> tuple[float, float]:
    """Welch–Satterthwaite t interval of ``mean(a) − mean(b)`` (the interval that goes with
    Welch's t-test); NaN with fewer than 2 values on a side. With few seeds a percentile
    bootstrap is too narrow (it ignores that the sd itself is estimated), so this is the
    seeds study's interval."""
    from scipy import stats

    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) < 2 or len(y) < 2:
        return math.nan, math.nan
    va, vb = float(np.var(x, ddof=1)) / len(x), float(np.var(y, ddof=1)) / len(y)
    diff = float(x.mean() - y.mean())
    if va + vb == 0:
        return diff, diff
    dof = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, dof)) * math.sqrt(va + vb)
    return diff - half, diff + half


@dataclass(frozen=True, kw_only=True)
class Paired:
    """Paired tests of ``a − b`` over the seeds both arms trained (same data order and
    initial draws): paired t (``scipy.stats.ttest_rel``) with its t interval, and the
    Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, exact for small n; NaN when every
    difference is 0). ``seeds``: the shared seeds, ascending."""

    seeds: tuple[int, ...]
    difference: float
    t: float
    p: float
    ci_low: float
    ci_high: float
    wilcoxon_p: float

    @property
    def n(self) -> int:
        return len(self.seeds)


def paired(a: Mapping[int, float], b: Mapping[int, float], *,
           confidence: float = 0.95) -> Paired | None:
    """Paired t and Wilcoxon over the seeds in both ``a`` and ``b`` (seed -> value);
    None with fewer than 2 shared seeds."""
    from scipy import stats

    seeds = tuple(sorted(set(a) & set(b)))
    if len(seeds) < 2:
        return None
    d = np.array([a[s] - b[s] for s in seeds], dtype=float)
    mean, n = float(d.mean()), len(d)
    sd = float(np.std(d, ddof=1))
    if sd == 0:
        t = p = math.nan
        lo = hi = mean
    else:
        res = stats.ttest_rel([a[s] for s in seeds], [b[s] for s in seeds])
        t, p = float(res.statistic), float(res.pvalue)
        half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
        lo, hi = mean - half, mean + half
    w = math.nan
    if np.any(d != 0):
        w = float(stats.wilcoxon(d).pvalue)
    return Paired(seeds=seeds, difference=mean, t=t, p=p, ci_low=lo, ci_high=hi, wilcoxon_p=w)


BATCHES_ONLY = "unpaired (shared seeds share the batch order, not the initial weights)"
"""``decides`` where arms share seeds with the reference but not their initial weights."""


def decides(arms: Sequence[tuple[int, int]], *, defined: bool = True,
            shares_weights: bool = False) -> str:
    """Which test decides a family of comparisons with one reference: ``arms`` holds, per
    compared arm (one with at least 2 values), its number of values and how many of them
    are matched by seed in the reference. :data:`PAIRED` only when a shared seed shares
    the initial weights as well as the batches (``shares_weights``), every arm is matched
    in full (at least 2 pairs) and ``defined`` (every paired t-test has a p-value: its
    differences vary); else the reason Welch's t decides (:data:`BATCHES_ONLY` where
    seeds are shared but the weights are not)."""
    if not any(shared for _, shared in arms):
        return "unpaired (no shared seeds)"
    if not shares_weights:
        return BATCHES_ONLY
    if arms and all(n >= 2 and shared == n for n, shared in arms):
        return PAIRED if defined else "unpaired (paired differences that do not vary)"
    return "unpaired (not every arm's seeds all matched in the reference)"


def design_power(n_a: int, n_b: int, difference: float, sd: float, *,
                 alpha: float = 0.05) -> float:
    """Power of a two-sided two-sample t-test (``n_a`` and ``n_b`` values, common ``sd``)
    to detect a *stated* ``difference``: P(|T| > t_crit), T ~ noncentral t with
    n_a + n_b − 2 degrees of freedom and noncentrality difference / (sd·sqrt(1/n_a + 1/n_b)).
    Planned power for an effect of interest, unlike :func:`seeds_for_power`, which is
    post hoc (from the observed difference). NaN when it cannot be computed."""
    from scipy import stats

    if n_a < 2 or n_b < 2 or not (math.isfinite(difference) and math.isfinite(sd)) or sd <= 0:
        return math.nan
    dof = n_a + n_b - 2
    crit = float(stats.t.ppf(1 - alpha / 2, dof))
    nc = abs(difference) / (sd * math.sqrt(1 / n_a + 1 / n_b))
    return float(stats.nct.sf(crit, dof, nc) + stats.nct.cdf(-crit, dof, nc))
