"""Small moves between orders, for evolutionary search.

Budget-keeping moves (with ``f`` = 2 s-units, ``c`` = 1):

* a swap of two neighbouring, different sublayers;
* ``f`` → ``ss`` (one feedforward becomes two adjacent attention sublayers) and
  ``ss`` → ``f``.

With ``keep_budget=False`` :func:`mutate` may also flip one ``s`` ↔ ``f``.
"""

from __future__ import annotations

import random

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.order import MAX_LENGTH, Order, any_order

__all__ = ["f_ss_moves", "moves", "mutate", "neighbour_swaps", "point_flips"]


def _canonical(order: str) -> Order:
    return any_order(order)


def neighbour_swaps(order: str) -> list[str]:
    """Orders made by swapping one pair of neighbouring, different sublayers."""
    order = _canonical(order)
    out: dict[str, None] = {}
    for i in range(len(order) - 1):
        a, b = order[i], order[i + 1]
        if a != b:
            out.setdefault(order[:i] + b + a + order[i + 2:], None)
    return list(out)


def f_ss_moves(order: str) -> list[str]:
    """Orders made by replacing one ``f`` with ``ss`` or one adjacent ``ss`` with ``f``.

    ``f`` → ``ss`` is skipped when the order already has :data:`MAX_LENGTH` sublayers.
    """
    order = _canonical(order)
    out: dict[str, None] = {}
    for i, ch in enumerate(order):
        if ch == "f" and len(order) < MAX_LENGTH:
            out.setdefault(order[:i] + "ss" + order[i + 1:], None)
        if order.startswith("ss", i):
            out.setdefault(order[:i] + "f" + order[i + 2:], None)
    return list(out)


def point_flips(order: str) -> list[str]:
    """Orders made by flipping one ``s`` ↔ ``f`` (changes the budget)."""
    order = _canonical(order)
    flip = {"s": "f", "f": "s"}
    out: dict[str, None] = {}
    for i, ch in enumerate(order):
        if ch in flip:
            out.setdefault(order[:i] + flip[ch] + order[i + 1:], None)
    return list(out)


def moves(order: str, *, keep_budget: bool = True) -> list[str]:
    """All distinct orders one move away (never ``order`` itself)."""
    candidates = neighbour_swaps(order) + f_ss_moves(order)
    if not keep_budget:
        candidates += point_flips(order)
    canonical = _canonical(order)
    return [o for o in dict.fromkeys(candidates) if o != canonical]


def mutate(order: str, rng: random.Random, *, keep_budget: bool = True) -> str:
    """One random move, chosen uniformly among the distinct resulting orders.

    Deterministic for a seeded ``rng``; never returns ``order`` itself. Raises
    :class:`SpaceError` when no move exists (e.g. ``"s"`` with ``keep_budget``).
    """
    options = moves(order, keep_budget=keep_budget)
    if not options:
        raise SpaceError("order", order, "an order with at least one possible move")
    return rng.choice(options)
