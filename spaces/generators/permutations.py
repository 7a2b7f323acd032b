"""Random permutations of a fixed multiset of sublayers (the paper's study 1)."""

from __future__ import annotations

import itertools
import math
import random

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH

__all__ = ["count_permutations", "permutations", "validate_permutations"]


def count_permutations(n_s: int, n_f: int) -> int:
    """Number of distinct orders with ``n_s`` s and ``n_f`` f: C(n_s + n_f, n_s)."""
    return math.comb(n_s + n_f, n_s)


def validate_permutations(n_s: int, n_f: int, count: int, seed: int = 0) -> None:
    """Check the arguments of :func:`permutations` without generating anything."""
    _checks.integer("n_s", n_s, 0, MAX_LENGTH)
    _checks.integer("n_f", n_f, 0, MAX_LENGTH)
    if n_s + n_f < 1 or n_s + n_f > MAX_LENGTH:
        raise SpaceError("n_f", n_f, f"n_s + n_f in 1..{MAX_LENGTH} (n_s is {n_s})")
    _checks.count(count)
    _checks.seed(seed)


def _all_orders(n_s: int, n_f: int) -> list[str]:
    n = n_s + n_f
    orders = []
    for positions in itertools.combinations(range(n), n_s):
        chars = ["f"] * n
        for p in positions:
            chars[p] = "s"
        orders.append("".join(chars))
    return sorted(orders)


def permutations(n_s: int, n_f: int, count: int, seed: int = 0) -> list[str]:
    """``count`` distinct uniformly random orders of ``n_s`` s and ``n_f`` f sublayers.

    Deterministic for ``seed``. When ``count`` is at least the number of distinct
    permutations, all of them are returned in lexicographic order. Otherwise orders are
    returned in draw order: uniform shuffles with duplicates skipped, or, when more than
    half of all permutations are wanted, a uniform sample without replacement of them.
    """
    validate_permutations(n_s, n_f, count, seed)
    total = count_permutations(n_s, n_f)
    if count >= total:
        return _all_orders(n_s, n_f)
    rng = random.Random(seed)
    if total <= 2 * count:
        return rng.sample(_all_orders(n_s, n_f), count)
    base = ["s"] * n_s + ["f"] * n_f
    seen: dict[str, None] = {}
    while len(seen) < count:
        rng.shuffle(base)
        seen.setdefault("".join(base), None)
    return list(seen)
