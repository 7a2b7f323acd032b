"""Errors raised by the ``spaces`` package.

Both subclass :class:`ValueError` (``SpaceError`` is a
:class:`~sublayer_search.spaces.problems.ProblemError`) (the CLI maps them to exit status 2) and keep their
constructor arguments in ``args``, so they survive pickling (Ray ships them between
processes).
"""

from __future__ import annotations

from typing import Any

from sublayer_search.spaces.problems import Problem, ProblemError

__all__ = ["OrderError", "SpaceError"]


class OrderError(ValueError):
    """An order string that cannot be parsed.

    ``position`` is the **0-based** character offset into ``text`` where the problem
    was found (``len(text)`` when the text ended too early); ``problem`` says what is
    wrong and what was expected.

    >>> str(OrderError("sfx", 2, "unknown symbol 'x' (expected one of s, f)"))
    "invalid order 'sfx': position 2: unknown symbol 'x' (expected one of s, f)"
    """

    def __init__(self, text: str, position: int, problem: str) -> None:
        super().__init__(text, position, problem)
        self.text = text
        self.position = position
        self.problem = problem

    def __str__(self) -> str:
        return f"invalid order {self.text!r}: position {self.position}: {self.problem}"


class SpaceError(ProblemError):
    """A bad argument to a space.

    ``field`` is a dotted path relative to the space (``"k[3]"``, ``"budget_units"``);
    callers that embed the space in a larger config add their prefix with
    :meth:`prefixed`.

    >>> str(SpaceError("k[3]", 16, "an integer in 0..15"))
    'k[3]: got 16, expected an integer in 0..15'
    """

    def __init__(self, field: str, value: Any, expected: str) -> None:
        super().__init__([Problem(field, value, expected)])
        self.args = (field, value, expected)

    def __str__(self) -> str:
        return self.problems[0].plain()

    def prefixed(self, prefix: str) -> SpaceError:
        """The same error with ``prefix`` (e.g. ``"space"``) put before the field."""
        err = SpaceError(f"{prefix}.{self.field}" if prefix else self.field, self.value,
                         self.expected)
        err.__cause__ = self.__cause__
        return err
