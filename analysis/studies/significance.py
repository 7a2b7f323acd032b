"""Multiple-comparison adjustment, verdicts and power for "X beats the baseline" claims.

* :func:`adjust_pvalues`: Holm (default; family-wise error), Benjamini–Hochberg
  (``scipy.stats.false_discovery_control``; false discovery rate) or none. NaN p-values
  (comparisons without a test) are left out of the family and stay NaN.
* :func:`verdict`: "better" / "worse" / "no evidence" from the *adjusted* p-value and the
  side of the confidence interval of the difference.
* :func:`seeds_for_power`: seeds per arm that a two-sided two-sample t-test at ``alpha``
  needs to detect the observed difference with the given power (noncentral t).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from sublayer_search.analysis.errors import AnalysisError

__all__ = ["ADJUST", "VERDICTS", "adjust_pvalues", "seeds_for_power", "verdict"]

ADJUST = ("holm", "bh", "none")
"""``--adjust`` choices: Holm–Bonferroni, Benjamini–Hochberg, no adjustment."""
ADJUST_NAMES = {"holm": "Holm", "bh": "Benjamini–Hochberg", "none": "no adjustment"}
VERDICTS = ("better", "worse", "no evidence")
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
