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

Grammar (a small recursive-descent parser; separators may appear between any tokens)::

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

import re
from typing import Any

from sublayer_search.spaces.errors import OrderError, SpaceError

__all__ = [
    "ALPHABETS",
    "FAMILIES",
    "HALF",
    "KINDS",
    "MAX_LENGTH",
    "SYMBOLS",
    "Order",
    "counts",
    "interleaved",
    "parse_order",
    "sandwich_k",
    "sandwich_order",
]

HALF = "h"
"""The half-width feedforward: ``FeedForward(d, d_ff/2)``, half the cost of an ``f``."""
ALPHABETS: dict[str, str] = {"lm": "sfh", "encoder": "sfh", "decoder": "scfh"}
"""Sublayer symbols allowed per model kind (``h`` in every one)."""
SYMBOLS = "scfh"
"""Every sublayer symbol of any kind."""
KINDS = "sfch"
"""Every sublayer kind, in the order of :func:`counts` and the cost tables."""
MAX_LENGTH = 1024
"""Most sublayers an order may have."""
FAMILIES = ("sandwich(n,k)", "interleaved(n)")
"""Named families accepted by :func:`parse_order`."""

_SEPARATORS = frozenset(" \t\r\n|.")
_MAX_NESTING = 64
_WORD = re.compile(r"[A-Za-z_]+")
_FAMILY_ARGS = {"sandwich": ("n", "k"), "interleaved": ("n",)}


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


def alphabet_of(kind: str) -> str:
    try:
        return ALPHABETS[kind]
    except (KeyError, TypeError):
        raise SpaceError("kind", kind, "one of " + ", ".join(ALPHABETS)) from None


def _expected(alphabet: str) -> str:
    # the classic kinds only: messages stay as they were before h joined every alphabet
    return "one of " + ", ".join(ch for ch in alphabet if ch != HALF)


def _has_cross(kind: str) -> bool:
    return "c" in alphabet_of(kind)


def _check_length(max_length: int) -> None:
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise SpaceError("max_length", max_length, "a positive integer")


def interleaved(n: int, *, kind: str = "lm") -> Order:
    """The interleaved baseline: ``(sf)^n``, or ``(scf)^n`` for decoders."""
    block = "scf" if _has_cross(kind) else "sf"
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpaceError("n", n, "a positive integer")
    return _trusted(block * n)


def sandwich_order(n: int, k: int, *, kind: str = "lm") -> Order:
    """The sandwich transformer ``s^k (sf)^(n-k) f^k`` (2n sublayers, n of each kind).

    ``k = 0`` is the interleaved baseline and ``k = n-1`` is ``s^n f^n``. For decoders
    ``s`` and ``c`` move together as one unit, as in the paper's translation study:
    ``(sc)^k (scf)^(n-k) f^k``.
    """
    head = "sc" if _has_cross(kind) else "s"
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpaceError("n", n, "a positive integer")
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n - 1:
        raise SpaceError("k", k, f"an integer in 0..{n - 1}")
    return _trusted(head * k + (head + "f") * (n - k) + "f" * k)


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
    ``"h"`` when the order has half-width feedforwards (read it with ``.get("h", 0)``)."""
    result = {sym: order.count(sym) for sym in "sfc"}
    if HALF in order:
        result[HALF] = order.count(HALF)
    if sum(result.values()) != len(order) or not order:
        bad = next((i for i, ch in enumerate(order) if ch not in SYMBOLS), 0)
        what = f"unknown symbol {order[bad]!r}" if order else "empty order"
        raise OrderError(order, bad, f"{what} (expected a canonical order over s, c, f, h)")
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
    return _trusted(_Parser(text, kind, alphabet, max_length).parse())


class _Parser:
    def __init__(self, text: str, kind: str, alphabet: str, max_length: int) -> None:
        self.text = text
        self.kind = kind
        self.alphabet = alphabet
        self.max_length = max_length
        self.pos = 0
        self.depth = 0

    # -- helpers -----------------------------------------------------------------
    def error(self, position: int, problem: str) -> OrderError:
        return OrderError(self.text, position, problem)

    def too_long(self, position: int) -> OrderError:
        m = self.max_length
        return self.error(position, f"order is longer than {m} sublayers (expected at most {m})")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _SEPARATORS:
            self.pos += 1

    def skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    # -- grammar -----------------------------------------------------------------
    def parse(self) -> str:
        self.skip()
        if self.pos == len(self.text):
            return self._raise_empty()
        result = self.sequence()
        if self.pos < len(self.text):  # sequence() only stops early at a ')'
            raise self.error(self.pos, "unbalanced parenthesis: ')' without a matching '(' "
                                       "(expected a sublayer, '(' or the end)")
        return result

    def _raise_empty(self) -> str:
        raise self.error(0, f"empty order (expected at least one sublayer, "
                            f"{_expected(self.alphabet)})")

    def sequence(self) -> str:
        parts: list[str] = []
        length = 0
        while True:
            self.skip()
            if self.pos == len(self.text) or self.text[self.pos] == ")":
                return "".join(parts)
            start = self.pos
            item = self.item()
            length += len(item)
            if length > self.max_length:
                raise self.too_long(start)
            parts.append(item)

    def item(self) -> str:
        start = self.pos
        atom = self.atom()
        self.skip()
        if self.peek() == "^":
            self.pos += 1
            exponent = self.exponent()
            if len(atom) * exponent > self.max_length:
                raise self.too_long(start)
            atom *= exponent
        return atom

    def exponent(self) -> int:
        self.skip_spaces()
        start = self.pos
        sign = self.peek()
        if sign and sign in "+-":
            self.pos += 1
        digits = self.digits()
        if not digits:
            self.pos = start
            raise self.error(start, "missing exponent after '^' (expected a positive integer)")
        if sign == "-":
            raise self.error(start, f"negative exponent -{digits} (expected a positive integer)")
        if int(digits) == 0:
            raise self.error(start, "exponent 0 (expected a positive integer)")
        return int(digits) if len(digits) <= 9 else 10**10  # item() reports it as too long

    def digits(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in "0123456789":
            self.pos += 1
        return self.text[start:self.pos]

    def atom(self) -> str:
        ch = self.text[self.pos]
        if ch == "(":
            return self.group()
        if ch.isalpha() or ch == "_":
            match = _WORD.match(self.text, self.pos)
            assert match is not None
            word = match.group()
            after = match.end()
            while after < len(self.text) and self.text[after].isspace():
                after += 1
            followed_by_paren = after < len(self.text) and self.text[after] == "("
            if word.lower() in _FAMILY_ARGS:
                return self.family(word.lower(), after, followed_by_paren)
            if len(word) > 1 and followed_by_paren and set(word) - set(SYMBOLS):
                raise self.error(self.pos, f"unknown family {word!r} (expected one of "
                                           + ", ".join(FAMILIES) + ")")
            return self.symbol()
        if ch in "0123456789":
            raise self.error(self.pos, f"unexpected digit {ch!r} (expected a sublayer symbol; "
                                       "write repeats as s^6)")
        if ch == "^":
            raise self.error(self.pos, "'^' with nothing to repeat (expected a sublayer symbol "
                                       "or a group before it)")
        return self.symbol()

    def symbol(self) -> str:
        ch = self.text[self.pos]
        if ch in self.alphabet:
            self.pos += 1
            return ch
        expected = _expected(self.alphabet)
        if ch in SYMBOLS:
            raise self.error(self.pos, f"{ch!r} is not allowed in an order for kind "
                                       f"{self.kind!r} (expected {expected})")
        raise self.error(self.pos, f"unknown symbol {ch!r} (expected {expected})")

    def group(self) -> str:
        open_at = self.pos
        self.depth += 1
        if self.depth > _MAX_NESTING:
            raise self.error(open_at, f"groups nested too deeply (expected at most "
                                      f"{_MAX_NESTING} levels)")
        self.pos += 1
        inner = self.sequence()
        if self.pos == len(self.text):
            raise self.error(open_at, "unbalanced parenthesis: '(' is never closed "
                                      "(expected ')')")
        if not inner:
            raise self.error(open_at, "empty group '()' (expected at least one sublayer "
                                      "inside the parentheses)")
        self.pos += 1  # the ')'
        self.depth -= 1
        return inner

    def family(self, name: str, paren: int, has_paren: bool) -> str:
        start = self.pos
        names = _FAMILY_ARGS[name]
        usage = f"{name}({','.join(names)})"
        if not has_paren:
            raise self.error(start, f"family {name!r} without arguments (expected {usage})")
        self.pos = paren + 1
        values: list[tuple[int, int]] = []  # (value, position)
        while True:
            self.skip_spaces()
            at = self.pos
            negative = self.peek() == "-"
            if negative:
                self.pos += 1
            digits = self.digits()
            if not digits:
                raise self.error(at, f"expected an integer argument for {usage}")
            if len(digits) > 9:
                raise self.too_long(start)
            values.append((-int(digits) if negative else int(digits), at))
            self.skip_spaces()
            nxt = self.peek()
            if nxt == ",":
                self.pos += 1
                continue
            if nxt == ")":
                self.pos += 1
                break
            if not nxt:
                raise self.error(paren, "unbalanced parenthesis: '(' is never closed "
                                        "(expected ')')")
            raise self.error(self.pos, f"unexpected {nxt!r} in {name}(...) (expected ',' or ')')")
        if len(values) != len(names):
            raise self.error(start, f"{name} takes {len(names)} argument(s), got {len(values)} "
                                    f"(expected {usage})")
        n, n_at = values[0]
        if n < 1:
            raise self.error(n_at, f"n = {n} in {name} (expected a positive integer)")
        per_layer = 3 if "c" in self.alphabet else 2
        if n * per_layer > self.max_length:
            raise self.too_long(start)
        if name == "interleaved":
            return interleaved(n, kind=self.kind)
        k, k_at = values[1]
        if not 0 <= k <= n - 1:
            raise self.error(k_at, f"k = {k} in sandwich (expected an integer in 0..{n - 1})")
        return sandwich_order(n, k, kind=self.kind)
