"""Few-shot supernets: the orders split by a prefix, one supernet per group (torch-free).

A single supernet makes every order share weights with every other; orders that differ
already in their first sublayer then pull the same modules in different directions.
Splitting the orders by their first ``length`` sublayers gives each group a supernet of
its own, and :func:`share_steps` shares one step budget among the groups in proportion
to their sizes (so each order is still trained about as often as in one supernet).
Estimates of different groups come from different weights: merged, they are only as
comparable as the groups' supernets are equally trained.
"""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.models.errors import ConfigError, is_int, is_positive_int

__all__ = ["share_steps", "split_by_prefix"]


def split_by_prefix(orders: Sequence[str], length: int) -> dict[str, tuple[str, ...]]:
    """Orders grouped by their first ``length`` characters, groups in order of first
    appearance, orders in their given order; ``length`` 0 keeps one group (key ``""``)."""
    if not is_int(length) or length < 0:
        raise ConfigError("split", length, "an integer >= 0 (prefix length; 0: no split)")
    if isinstance(orders, str) or not orders:
        raise ConfigError("orders", orders, "a non-empty list of order strings")
    groups: dict[str, list[str]] = {}
    for order in dict.fromkeys(orders):
        groups.setdefault(order[:length], []).append(order)
    return {prefix: tuple(group) for prefix, group in groups.items()}


def share_steps(total: int, sizes: Sequence[int]) -> list[int]:
    """``total`` steps shared in proportion to ``sizes`` (largest remainders; every group
    gets at least one step, the shares add up to ``total``)."""
    if not is_positive_int(total):
        raise ConfigError("steps", total, "a positive integer")
    if not sizes or not all(is_positive_int(s) for s in sizes):
        raise ConfigError("sizes", list(sizes), "a non-empty list of positive group sizes")
    if total < len(sizes):
        raise ConfigError("steps", total, f"at least one step per group ({len(sizes)})")
    whole = sum(sizes)
    exact = [total * s / whole for s in sizes]
    shares = [max(1, int(x)) for x in exact]
    by_remainder = sorted(range(len(sizes)), key=lambda i: (shares[i] - exact[i], i))
    i = 0
    while sum(shares) < total:
        shares[by_remainder[i % len(sizes)]] += 1
        i += 1
    while sum(shares) > total:  # only when a max(1, .) lifted a tiny group
        j = max((g for g in range(len(sizes)) if shares[g] > 1),
                key=lambda g: (shares[g] - exact[g], -g))
        shares[j] -= 1
    return shares
