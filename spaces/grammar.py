"""The order grammar: a small recursive-descent parser (:func:`spaces.order.parse_order`
is its entry point; the grammar is in :mod:`spaces.order`'s docstring).

Errors raise :class:`~spaces.errors.OrderError` with the **0-based** character position
in the original text and what was expected there.
"""

from __future__ import annotations

import re

from sublayer_search.spaces.errors import OrderError
from sublayer_search.spaces.kinds import all_symbols

__all__ = ["FAMILIES", "HALF", "Parser", "expected", "interleaved_text", "sandwich_text"]

HALF = "h"
"""The half-width feedforward: ``FeedForward(d, d_ff/2)``, half the cost of an ``f``."""
FAMILIES = ("sandwich(n,k)", "interleaved(n)")
"""Named families the grammar accepts."""

_SEPARATORS = frozenset(" \t\r\n|.")
_MAX_NESTING = 64
_WORD = re.compile(r"[A-Za-z_]+")
_FAMILY_ARGS = {"sandwich": ("n", "k"), "interleaved": ("n",)}


def expected(alphabet: str) -> str:
    """What an error says an order may hold: ``one of s, f, w, r, e`` (without ``h``, as
    messages read before the half-width feedforward joined every alphabet)."""
    return "one of " + ", ".join(ch for ch in alphabet if ch != HALF)


def interleaved_text(n: int, alphabet: str) -> str:
    """``(sf)^n``, or ``(scf)^n`` where the alphabet has cross-attention (decoders)."""
    return ("scf" if "c" in alphabet else "sf") * n


def sandwich_text(n: int, k: int, alphabet: str) -> str:
    """``s^k (sf)^(n-k) f^k``; with cross-attention ``s`` and ``c`` move together."""
    head = "sc" if "c" in alphabet else "s"
    return head * k + (head + "f") * (n - k) + "f" * k


class Parser:
    """One parse of ``text`` for model kind ``kind`` (its ``alphabet``)."""

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
                            f"{expected(self.alphabet)})")

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
            if len(word) > 1 and followed_by_paren and set(word) - set(all_symbols()):
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
        allowed = expected(self.alphabet)
        if ch in all_symbols():
            raise self.error(self.pos, f"{ch!r} is not allowed in an order for kind "
                                       f"{self.kind!r} (expected {allowed})")
        raise self.error(self.pos, f"unknown symbol {ch!r} (expected {allowed})")

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
            return interleaved_text(n, self.alphabet)
        k, k_at = values[1]
        if not 0 <= k <= n - 1:
            raise self.error(k_at, f"k = {k} in sandwich (expected an integer in 0..{n - 1})")
        return sandwich_text(n, k, self.alphabet)
