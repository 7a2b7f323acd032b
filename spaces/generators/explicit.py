"""A space given as an explicit list of orders."""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.spaces.errors import OrderError, SpaceError
from sublayer_search.spaces.order import alphabet_of, parse_order

__all__ = ["explicit"]


def explicit(orders: Sequence[str], kind: str = "lm") -> list[str]:
    """Parse each order (any notation of :func:`~spaces.order.parse_order`) for ``kind``.

    Returns canonical orders, duplicates removed keeping the first occurrence. A bad
    order raises :class:`SpaceError` on field ``orders[i]`` whose cause is the
    :class:`OrderError`.
    """
    alphabet_of(kind)
    if isinstance(orders, str | bytes) or not isinstance(orders, Sequence) or not orders:
        raise SpaceError("orders", orders, "a non-empty list of order strings")
    result: dict[str, None] = {}
    for i, text in enumerate(orders):
        try:
            result.setdefault(parse_order(text, kind=kind), None)
        except OrderError as err:
            raise SpaceError(f"orders[{i}]", text,
                             f"a valid {kind} order (position {err.position}: {err.problem})"
                             ) from err
    return list(result)
