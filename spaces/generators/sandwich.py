"""Sandwich transformers ``s^k (sf)^(n-k) f^k`` (the paper's study 4), and the family
over any two kinds, ``a^k (ab)^(n-k) b^k`` (``mixer`` a, ``channel`` b: ``r^k (rf)^(n-k)
f^k``)."""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH, alphabet_of, sandwich_order

__all__ = ["SANDWICH", "sandwich", "validate_sandwich"]

SANDWICH = "sandwich"
"""The space's name and its candidates' family (the studies of Press et al. read it)."""


def validate_sandwich(n: int, ks: Sequence[int] | None = None, *, kind: str = "lm",
                      mixer: str = "s", channel: str = "f") -> None:
    """Check the arguments of :func:`sandwich`."""
    alphabet = alphabet_of(kind)
    for field, symbol in (("mixer", mixer), ("channel", channel)):
        if not (isinstance(symbol, str) and len(symbol) == 1 and symbol in alphabet):
            raise SpaceError(field, symbol, f"a {kind} sublayer symbol, one of "
                                            f"{', '.join(alphabet)}")
    if mixer == channel:
        raise SpaceError("channel", channel, f"a symbol other than the mixer's ({mixer!r})")
    if "c" in alphabet and (mixer, channel) != ("s", "f"):
        raise SpaceError("mixer", mixer, "s with channel f for decoders (s and c move "
                                         "together)")
    per_layer = 3 if "c" in alphabet else 2  # one layer: s f, or s c f
    _checks.integer("n", n, 1, MAX_LENGTH // per_layer)
    if ks is None:
        return
    if isinstance(ks, str | bytes) or not isinstance(ks, Sequence) or len(ks) == 0:
        raise SpaceError("ks", ks, "a non-empty list of integers")
    for i, k in enumerate(ks):
        _checks.integer(f"k[{i}]", k, 0, n - 1)


def sandwich(n: int, ks: Sequence[int] | None = None, *, kind: str = "lm", mixer: str = "s",
             channel: str = "f") -> list[str]:
    """Sandwich orders with ``n`` layers for each ``k`` in ``ks`` (default 0…n−1).

    ``k = 0`` is the interleaved baseline, ``k = n−1`` is ``s^n f^n``; duplicate ks are
    dropped, keeping the first. Decoders group ``s`` and ``c`` (see
    :func:`~spaces.order.sandwich_order`). ``mixer``/``channel`` replace ``s``/``f``
    (language models and encoders): ``mixer^k (mixer channel)^(n-k) channel^k``.
    """
    validate_sandwich(n, ks, kind=kind, mixer=mixer, channel=channel)
    chosen = range(n) if ks is None else dict.fromkeys(ks)
    if (mixer, channel) == ("s", "f"):
        return [sandwich_order(n, k, kind=kind) for k in chosen]
    return [mixer * k + (mixer + channel) * (n - k) + channel * k for k in chosen]
