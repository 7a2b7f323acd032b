"""Noise-aware yardsticks: how far an order is from the best, in baseline seed sds.

"Did the search find the top 5?" asks it to tell apart orders that no single seed can:
where most orders lie within a seed sd or two of the best, the top 5 is largely luck. An
order is *ε-good* when its mean lies within ``eps`` baseline seed standard deviations of
the best order's mean: a researcher cannot tell it apart from the best without more than
``eps`` sds of evidence. The seed sd comes from the study's repeated baseline (the same
order trained with several seeds), the noise every other order is trained under.

Pure Python (no Ray, no scipy): the searcher benchmark and ``sublayer replay`` both use it.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from sublayer_search.spaces.order import interleaved

__all__ = ["SeedNoise", "eps_good", "regret_in_sds", "seed_noise"]


@dataclass(frozen=True, kw_only=True)
class SeedNoise:
    """The seed-to-seed spread of one order trained with several seeds."""

    order: str
    """The repeated order: the interleaved baseline where the study repeats it."""
    sd: float
    """Sample standard deviation of its recorded values."""
    n: int
    """How many values (seeds) it rests on."""

    def describe(self) -> str:
        return f"seed sd {self.sd:.4g} ({self.n} seeds of {self.order})"


def seed_noise(records: Iterable[tuple[str, float]]) -> SeedNoise | None:
    """The baseline's seed sd from (order, value) records, one per seed.

    The interleaved order ``(sf)^n`` of the records' length when it has two or more finite
    values; otherwise the order with the most values (ties: the first by order string).
    None when no order was recorded twice, or its values do not vary (a study without
    seed noise gives no scale).
    """
    found: dict[str, list[float]] = defaultdict(list)
    for order, value in records:
        if math.isfinite(value):
            found[order].append(float(value))
    repeated = {o: v for o, v in found.items() if len(v) >= 2}
    if not repeated:
        return None
    base = next((o for o in sorted(repeated) if _is_interleaved(o)), None)
    if base is None:
        base = max(sorted(repeated), key=lambda o: len(repeated[o]))
    sd = statistics.stdev(repeated[base])
    return SeedNoise(order=base, sd=sd, n=len(repeated[base])) if sd > 0 else None


def _is_interleaved(order: str) -> bool:
    if len(order) % 2 or not order:
        return False
    try:
        return order == interleaved(len(order) // 2)
    except ValueError:
        return False


def eps_good(values: Mapping[str, float], *, eps: float, sd: float,
             mode: str = "min") -> set[str]:
    """The keys whose value is within ``eps * sd`` of the best value (the best included)."""
    if not values:
        return set()
    if not (eps >= 0 and sd > 0):
        raise ValueError(f"eps, sd: got {eps!r}, {sd!r}, expected eps >= 0 and sd > 0")
    sign = 1.0 if mode == "min" else -1.0
    best = min(sign * v for v in values.values())
    return {k for k, v in values.items() if sign * v - best <= eps * sd + 1e-12}


def regret_in_sds(value: float, best: float, sd: float) -> float:
    """How far ``value`` lies from ``best``, in seed sds (nan without a scale)."""
    if not (sd > 0 and math.isfinite(value) and math.isfinite(best)):
        return math.nan
    return abs(value - best) / sd
