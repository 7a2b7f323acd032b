"""Order strings: parsing, validation and the named families.

An *order* is a string over sublayer kinds, input on the left: ``s`` self-attention,
``f`` feedforward, ``c`` cross-attention (decoders only), ``h`` a half-width
feedforward (d_ff/2, half the parameters of an ``f``: the two halves around each
attention of a Macaron block, ``hsh``). The canonical form is the
plain string (``"sssfsfff"``). :func:`parse_order` also accepts

* the paper's tokens: ``sf|ff|ss`` (``|`` and whitespace are ignored);
* the authors' ``--architecture`` style ``s.s.sf.f.f`` (``.`` marks an empty slot);
* repetition with nested groups: ``s^6 (sf)^10 f^6``, ``((sf)^2 s)^3``; an exponent
  binds to the symbol, group or family right before it (``sf^2`` is ``sff``);
* named families: ``sandwich(n,k)`` and ``interleaved(n)``.

Grammar (a small recursive-descent parser, :mod:`spaces.grammar`; separators may appear
between any tokens)::

    order    := item+
    item     := atom ( "^" INT )?
    atom     := SYMBOL | "(" item+ ")" | family
    family   := "sandwich" "(" INT "," INT ")" | "interleaved" "(" INT ")"

Errors raise :class:`~spaces.errors.OrderError` with the **0-based** character
position in the original text and what was expected there.

An order is checked once: :func:`parse_order` returns an :class:`Order`, a ``str`` whose
type says it is canonical and checked. Holders (candidates, variants, model configs,
the cost functions) take one with :meth:`Order.of`, which trusts a checked order (a
symbol test for the holder's kind, no parse) and parses anything else, as a user's text.
"""

from __future__ import annotations

from typing import Any

from sublayer_search.spaces.errors import OrderError, SpaceError
from sublayer_search.spaces.grammar import (
    FAMILIES,
    HALF,
    Parser,
    interleaved_text,
    sandwich_text,
)
from sublayer_search.spaces.kinds import CLASSIC, MODEL_KINDS, all_symbols, symbols_for

__all__ = [
    "ALPHABETS",
    "FAMILIES",
    "HALF",
    "KINDS",
    "MAX_LENGTH",
    "SYMBOLS",
    "Order",
    "any_order",
    "counts",
    "interleaved",
    "parse_order",
    "sandwich_k",
    "sandwich_order",
]

ALPHABETS: dict[str, str] = {model: symbols_for(model) for model in MODEL_KINDS}
"""Sublayer symbols allowed per model kind (:mod:`spaces.kinds`): ``lm`` ``sfhwre``,
``encoder`` ``sfh``, ``decoder`` ``scfh`` (``h`` in every one)."""
SYMBOLS = all_symbols()
"""Every built-in sublayer symbol (``scfhwre``); the grammar reads the registry itself,
so a kind registered later (:func:`spaces.kinds.register_kind`) parses too."""
KINDS = CLASSIC
"""The classic kinds (``sfch``), in the order of :func:`counts` and the cost tables;
the hybrid kinds (``w``, ``r``, ``e``) follow them where an order has some."""
MAX_LENGTH = 1024
"""Most sublayers an order may have."""



_TRUSTED = object()


class Order(str):
    """A checked order: canonical (a plain string over :data:`SYMBOLS`), non-empty, and
    valid for the kind it was parsed for (and any kind whose alphabet holds its symbols).

    Made by :func:`parse_order` (= :meth:`parse`) and by the named families
    (:func:`interleaved`, :func:`sandwich_order`), never from unchecked text:
    ``Order("sf")`` raises. It compares, hashes, prints and serialises as the plain
    string; slicing or joining gives plain strings again (unchecked)."""

    __slots__ = ()

    def __new__(cls, text: str, _token: object = None) -> Order:
        if _token is not _TRUSTED:
            raise TypeError("an Order comes from parse_order() or Order.parse(), "
                            "not from Order(text)")
        return super().__new__(cls, text)

    def __reduce__(self) -> tuple[Any, tuple[str]]:  # pickled (Ray) as the checked value
        return _trusted, (str(self),)

    @classmethod
    def parse(cls, text: str, *, kind: str = "lm", max_length: int = MAX_LENGTH) -> Order:
        """:func:`parse_order`: parse and check ``text`` (any notation)."""
        return parse_order(text, kind=kind, max_length=max_length)

    @classmethod
    def of(cls, value: str, *, kind: str = "lm", max_length: int = MAX_LENGTH) -> Order:
        """``value`` itself when it is a checked order that fits ``kind`` and
        ``max_length`` (no parse), else :func:`parse_order` of it (a user's text)."""
        if isinstance(value, Order) and value.fits(kind) and len(value) <= max_length:
            return value
        return parse_order(value, kind=kind, max_length=max_length)

    def fits(self, kind: str) -> bool:
        """Whether every sublayer is allowed for ``kind`` (``c`` only in decoders)."""
        return not self.strip(alphabet_of(kind))


def _trusted(text: str) -> Order:
    return Order(text, _TRUSTED)


def any_order(value: str) -> Order:
    """``value`` checked for some model kind: a checked order as it is; text as a
    decoder's order (the classic symbols, ``c`` included, and families as decoders spell
    them) or else as a language model's (the hybrid kinds). For holders that take an order
    of any model (candidates, costs, features); the first error is the one raised."""
    if isinstance(value, Order):
        return value
    try:
        return parse_order(value, kind="decoder")
    except OrderError as first:
        try:
            return parse_order(value, kind="lm")
        except OrderError:
            raise first from None


def alphabet_of(kind: str) -> str:
    try:
        return symbols_for(kind) if kind in MODEL_KINDS else ALPHABETS[kind]
    except (KeyError, TypeError):
        raise SpaceError("kind", kind, "one of " + ", ".join(ALPHABETS)) from None


def _check_length(max_length: int) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise SpaceError("max_length", max_length, "a positive integer")


def interleaved(n: int, *, kind: str = "lm") -> Order:
    """The interleaved baseline: ``(sf)^n``, or ``(scf)^n`` for decoders."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpaceError("n", n, "a positive integer")
    return _trusted(interleaved_text(n, alphabet_of(kind)))


def sandwich_order(n: int, k: int, *, kind: str = "lm") -> Order:
    """The sandwich transformer ``s^k (sf)^(n-k) f^k`` (2n sublayers, n of each kind).

    ``k = 0`` is the interleaved baseline and ``k = n-1`` is ``s^n f^n``. For decoders
    ``s`` and ``c`` move together as one unit, as in the paper's translation study:
    ``(sc)^k (scf)^(n-k) f^k``.
    """
    alphabet = alphabet_of(kind)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpaceError("n", n, "a positive integer")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n - 1:
        raise SpaceError("k", k, f"an integer in 0..{n - 1}")
    return _trusted(sandwich_text(n, k, alphabet))


def sandwich_k(order: str, *, kind: str = "lm") -> int | None:
    """The ``k`` for which ``order`` is :func:`sandwich_order` (n = its number of ``f``),
    else ``None``: an explicit order that is a sandwich belongs to that family too."""
    n = order.count("f")
    if n < 1:
        return None
    for k in range(n):
        if sandwich_order(n, k, kind=kind) == order:
            return k
    return None


def counts(order: str) -> dict[str, int]:
    """Number of each sublayer kind; keys ``"s"``, ``"f"``, ``"c"`` are always present,
    ``"h"`` and the hybrid kinds (``w``, ``r``, ``e``) when the order has some (read them
    with ``.get("h", 0)``)."""
    result = {sym: order.count(sym) for sym in "sfc"}
    for sym in all_symbols():
        if sym not in result and sym in order:
            result[sym] = order.count(sym)
    if sum(result.values()) != len(order) or not order:
        bad = next((i for i, ch in enumerate(order) if ch not in all_symbols()), 0)
        what = f"unknown symbol {order[bad]!r}" if order else "empty order"
        raise OrderError(order, bad, f"{what} (expected a canonical order over "
                                     f"{', '.join(all_symbols())})")
    return result


def parse_order(text: str, *, kind: str = "lm", max_length: int = MAX_LENGTH) -> Order:
    """Parse and validate ``text``; return the canonical order, checked (:class:`Order`).

    ``kind`` ("lm", "encoder" or "decoder") selects the alphabet (``c`` only for
    decoders). Raises :class:`OrderError` (0-based ``position``) on any problem,
    including a result longer than ``max_length`` sublayers.
    """
    alphabet = alphabet_of(kind)
    _check_length(max_length)
    if not isinstance(text, str):
        raise OrderError(repr(text), 0, f"not a string (expected text, got {type(text).__name__})")
    if text and len(text) <= max_length and not text.strip(alphabet):
        return text if isinstance(text, Order) else _trusted(text)  # already canonical
    return _trusted(Parser(text, kind, alphabet, max_length).parse())
