"""Sandwich transformers ``s^k (sf)^(n-k) f^k`` (the paper's study 4)."""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH, alphabet_of, sandwich_order

__all__ = ["SANDWICH", "sandwich", "validate_sandwich"]

SANDWICH = "sandwich"
"""The space's name and its candidates' family (the studies of Press et al. read it)."""


def validate_sandwich(n: int, ks: Sequence[int] | None = None, *, kind: str = "lm") -> None:
    """Check the arguments of :func:`sandwich`."""
    per_layer = 3 if "c" in alphabet_of(kind) else 2  # one layer: s f, or s c f
    _checks.integer("n", n, 1, MAX_LENGTH // per_layer)
    if ks is None:
        return
    if isinstance(ks, str | bytes) or not isinstance(ks, Sequence) or len(ks) == 0:
        raise SpaceError("ks", ks, "a non-empty list of integers")
    for i, k in enumerate(ks):
        _checks.integer(f"k[{i}]", k, 0, n - 1)


def sandwich(n: int, ks: Sequence[int] | None = None, *, kind: str = "lm") -> list[str]:
    """Sandwich orders with ``n`` layers for each ``k`` in ``ks`` (default 0…n−1).

    ``k = 0`` is the interleaved baseline, ``k = n−1`` is ``s^n f^n``; duplicate ks are
    dropped, keeping the first. Decoders group ``s`` and ``c`` (see
    :func:`~spaces.order.sandwich_order`).
    """
    validate_sandwich(n, ks, kind=kind)
    chosen = range(n) if ks is None else dict.fromkeys(ks)
    return [sandwich_order(n, k, kind=kind) for k in chosen]
