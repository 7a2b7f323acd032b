"""Parameter-budgeted random orders (the paper's study 2)."""

from __future__ import annotations

import math
import random

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH

__all__ = ["budgeted", "count_budgeted", "draw_budgeted", "validate_budgeted"]

_ENUMERATE_LIMIT = 200_000


def count_budgeted(budget_units: int) -> int:
    """Distinct orders of s (1 unit) and f (2 units) spending exactly ``budget_units``.

    These are the compositions of the budget into 1s and 2s: the Fibonacci number
    F(budget + 1) (1, 2, 3, 5, 8, … for budgets 1, 2, 3, 4, 5, …).
    """
    a, b = 1, 1  # orders for budgets 0 and 1
    for _ in range(budget_units - 1):
        a, b = b, a + b
    return b


def validate_budgeted(budget_units: int, count: int, seed: int = 0, p_s: float = 0.5) -> None:
    """Check the arguments of :func:`budgeted` without generating anything."""
    _checks.integer("budget_units", budget_units, 1, MAX_LENGTH)
    _checks.count(count)
    _checks.seed(seed)
    if isinstance(p_s, bool) or not isinstance(p_s, int | float) or not 0 < p_s < 1:
        raise SpaceError("p_s", p_s, "a probability strictly between 0 and 1")
    distinct = count_budgeted(budget_units)
    if count > distinct:
        raise SpaceError("count", count,
                         f"at most {distinct} (the number of distinct orders of "
                         f"{budget_units} units)")


def draw_budgeted(budget_units: int, rng: random.Random, p_s: float = 0.5) -> str:
    """One draw: add ``s`` with probability ``p_s``, else ``f``, until the budget is spent.

    When a single unit remains an ``f`` (2 units) does not fit, so ``s`` is added; every
    order therefore spends exactly ``budget_units`` (as every model in the paper's
    Table 2 does).
    """
    chars: list[str] = []
    remaining = budget_units
    while remaining > 0:
        if remaining == 1 or rng.random() < p_s:
            chars.append("s")
            remaining -= 1
        else:
            chars.append("f")
            remaining -= 2
    return "".join(chars)


def _all_with_log_prob(budget_units: int, p_s: float) -> list[tuple[str, float]]:
    log_s, log_f = math.log(p_s), math.log(1 - p_s)
    out: list[tuple[str, float]] = []

    def walk(prefix: str, remaining: int, logp: float) -> None:
        if remaining == 0:
            out.append((prefix, logp))
        elif remaining == 1:
            out.append((prefix + "s", logp))
        else:
            walk(prefix + "s", remaining - 1, logp + log_s)
            walk(prefix + "f", remaining - 2, logp + log_f)

    walk("", budget_units, 0.0)
    return out


def budgeted(budget_units: int, count: int, seed: int = 0, p_s: float = 0.5) -> list[str]:
    """``count`` distinct orders drawn with :func:`draw_budgeted`, in draw order.

    Deterministic for ``seed``. Each order spends exactly ``budget_units`` s-units
    (``s`` = 1, ``f`` = 2); depth ranges from ``budget/2`` (all f) to ``budget`` (all s).
    Raises :class:`SpaceError` when ``count`` exceeds the number of distinct orders
    (:func:`count_budgeted`). When ``count`` equals it, all orders are returned in
    lexicographic order. When more than half of all orders are wanted they are
    enumerated and sampled without replacement with the draw probabilities (the same
    law as drawing and skipping duplicates); otherwise draws repeat, skipping
    duplicates, for at most ``1000 + 100·count`` attempts before a SpaceError (only a
    very skewed ``p_s`` gets there).
    """
    validate_budgeted(budget_units, count, seed, p_s)
    distinct = count_budgeted(budget_units)
    if count == distinct:
        return sorted(order for order, _ in _all_with_log_prob(budget_units, p_s))
    rng = random.Random(seed)
    if distinct <= min(2 * count, _ENUMERATE_LIMIT):
        keyed = []
        for order, logp in _all_with_log_prob(budget_units, p_s):
            u = rng.random() or 1e-300
            keyed.append((logp - math.log(-math.log(u)), order))  # Gumbel top-k
        keyed.sort(key=lambda pair: pair[0], reverse=True)
        return [order for _, order in keyed[:count]]
    seen: dict[str, None] = {}
    for _ in range(1000 + 100 * count):
        seen.setdefault(draw_budgeted(budget_units, rng, p_s), None)
        if len(seen) == count:
            return list(seen)
    raise SpaceError("count", count,
                     f"a count reachable with p_s={p_s} (only {len(seen)} distinct orders "
                     f"in {1000 + 100 * count} draws; lower count or move p_s towards 0.5)")
