"""Order features: what an order-aware searcher sees of an order (pure Python).

An order is laid out on its parameter budget, input first, as in :func:`spaces.cost.halves`
(``s`` = 1 unit, ``f`` = ``f_units``, ``c`` = ``c_units``, ``h`` = ``f_units / 2``). Its
features, in :data:`FEATURE_NAMES` order:

* ``s_q1`` … ``s_q4``: the share of each quarter of the budget taken by ``s`` (0 to 1;
  a sublayer across a quarter boundary counts on each side by its units there);
* ``bottom_s`` … ``top_h``: sublayers of each kind in the bottom and top half
  (fractional at the cut, :func:`spaces.cost.halves`);
* ``depth``: the number of sublayers; ``cost``: the budget in ``s``-units.

Example: ``ssssffff`` (12 units) → ``s_q1`` = 1, ``s_q2`` = 1/3, ``s_q3`` = ``s_q4`` = 0.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sublayer_search.spaces.cost import halves, unit_weights
from sublayer_search.spaces.order import KINDS, any_order

__all__ = ["FEATURE_NAMES", "QUARTERS", "OrderFeatures", "feature_matrix", "order_features"]

QUARTERS = 4
"""Parts of the parameter budget whose ``s`` share is a feature."""
FEATURE_NAMES: tuple[str, ...] = (
    *(f"s_q{i + 1}" for i in range(QUARTERS)),
    *(f"{half}_{kind}" for half in ("bottom", "top") for kind in KINDS),
    "depth",
    "cost",
)
"""Names of the feature vector's entries, in order."""


@dataclass(frozen=True, kw_only=True)
class OrderFeatures:
    """The features of one order (see the module docstring)."""

    order: str
    """The canonical order."""
    values: dict[str, float] = field(default_factory=dict)
    """Feature name -> value, with every name of :data:`FEATURE_NAMES`."""

    def __post_init__(self) -> None:
        missing = [n for n in FEATURE_NAMES if n not in self.values]
        if missing:
            raise ValueError(f"OrderFeatures.values lacks {', '.join(missing)}")

    def vector(self) -> list[float]:
        """The values in :data:`FEATURE_NAMES` order."""
        return [self.values[n] for n in FEATURE_NAMES]


def _quarter_shares(order: str, weights: dict[str, float]) -> list[float]:
    total = sum(weights[ch] for ch in order)
    width = total / QUARTERS
    shares = [0.0] * QUARTERS
    start = 0.0
    for ch in order:
        end = start + weights[ch]
        if ch == "s":
            for q in range(QUARTERS):
                lo, hi = q * width, (q + 1) * width
                shares[q] += max(0.0, min(end, hi) - max(start, lo))
        start = end
    return [s / width for s in shares]


def order_features(order: str, *, f_units: float = 2.0, c_units: float = 1.0) -> OrderFeatures:
    """The features of ``order`` (any alphabet: ``s``, ``f``, ``c``, ``h``).

    ``f_units`` is the cost of one ``f`` in ``s``-units (2 at d_ff = 4d, the paper's
    setting; ``spaces.cost`` / ``f_units_for`` for other dims), ``c_units`` of one ``c``.
    """
    canonical = any_order(order)
    weights = unit_weights(f_units, c_units)
    split = halves(canonical, f_units=f_units, c_units=c_units)
    values = {f"s_q{i + 1}": share for i, share in enumerate(_quarter_shares(canonical, weights))}
    for half, part in (("bottom", split.bottom), ("top", split.top)):
        values.update({f"{half}_{kind}": float(part.get(kind, 0.0)) for kind in KINDS})
    values["depth"] = float(len(canonical))
    values["cost"] = float(sum(weights[ch] for ch in canonical))
    return OrderFeatures(order=canonical, values=values)


def feature_matrix(
    orders: Iterable[str], *, f_units: float = 2.0, c_units: float = 1.0
) -> list[list[float]]:
    """One feature vector per order (rows in the order given)."""
    return [order_features(o, f_units=f_units, c_units=c_units).vector() for o in orders]
