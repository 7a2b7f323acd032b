"""Cost of an order: parameters, s-units, and the bottom/top split by parameter count."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.kinds import (
    Dims,
    KindSettings,
    all_symbols,
    hybrid_kinds,
    kind_of,
    registered_kinds,
)
from sublayer_search.spaces.order import Order, any_order, interleaved

__all__ = ["GUIDED_BLOCKS", "STRADDLE", "Halves", "deepest_interleaved", "f_units_for",
           "guided_units", "half_width", "halves", "kind_units_of", "order_params",
           "parse_kind_units", "sublayer_costs", "unit_costs", "units"]

STRADDLE = ("fractional", "bottom", "top", "drop")
"""Ways to count the sublayer that straddles the middle in :func:`halves`."""


def _canonical(order: str) -> Order:
    return any_order(order)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpaceError(name, value, "a positive integer")
    return value


def _positive_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SpaceError(name, value, "a positive number")
    return float(value)


def unit_costs(*, d_model: int, d_ff: int, exact: bool = False) -> dict[str, int]:
    """Parameters of one sublayer of each classic kind (``s``, ``f``, ``c``; see
    :func:`sublayer_costs` for every kind, the half-width ``h`` included).

    Weights only: ``s`` = ``c`` = 4d² (q, k, v, out projections), ``f`` = 2·d·d_ff.
    With ``exact`` also the biases and the sublayer's LayerNorm (weight + bias):
    ``s``/``c`` add 4d + 2d, ``f`` adds d_ff + d + 2d — the same count as ``models/``.
    """
    dims = Dims(d_model=_positive_int("d_model", d_model), d_ff=_positive_int("d_ff", d_ff))
    return {k: kind_of(k).params(dims, exact=exact) for k in "sfc"}


def half_width(d_ff: int) -> int:
    """Hidden width of a half-width feedforward ``h``: ``d_ff // 2`` (model configs
    with an ``h`` require an even d_ff, so that an ``h`` is exactly half an ``f``)."""
    return _positive_int("d_ff", d_ff) // 2


def sublayer_costs(*, d_model: int, d_ff: int, exact: bool = False, n_heads: int = 1,
                   settings: KindSettings | None = None) -> dict[str, int]:
    """Parameters of one sublayer of every kind (:mod:`spaces.kinds`): :func:`unit_costs`
    plus ``h`` and the hybrid kinds (``r`` reads ``n_heads``, ``e`` the ``settings``).

    ``h`` is a feedforward of width ``d_ff/2``: d·d_ff weights (half an ``f``); with
    ``exact`` also d_ff/2 + d biases and its LayerNorm's 2d, as ``models/`` builds it.
    """
    dims = Dims(d_model=_positive_int("d_model", d_model), d_ff=_positive_int("d_ff", d_ff),
                n_heads=_positive_int("n_heads", n_heads), settings=settings or KindSettings())
    costs = unit_costs(d_model=d_model, d_ff=d_ff, exact=exact)
    costs.update({k.symbol: k.params(dims, exact=exact) for k in registered_kinds()
                  if k.symbol not in costs})
    return costs


def order_params(order: str, *, d_model: int, d_ff: int, exact: bool = False,
                 n_heads: int = 1, settings: KindSettings | None = None) -> int:
    """Total sublayer parameters of ``order`` (embeddings and output layers excluded)."""
    costs = sublayer_costs(d_model=d_model, d_ff=d_ff, exact=exact, n_heads=n_heads,
                           settings=settings)
    return sum(costs[ch] for ch in _canonical(order))


def unit_weights(f_units: float, c_units: float, dims: Dims | None = None,
                 order: str = "", kind_units: Mapping[str, float] | None = None,
                 ) -> dict[str, float]:
    """Cost of one sublayer of each kind in s-units; a hybrid kind of ``order`` (``w``,
    ``r``, ``e``) weighs its weights over 4d², so it needs the model's ``dims`` (or its
    weight, as :func:`kind_units_of` records it, in ``kind_units``)."""
    f = _positive_float("f_units", f_units)
    weights = {"s": 1.0, "f": f, "c": _positive_float("c_units", c_units), "h": f / 2}
    hybrid = hybrid_kinds(order)
    for sym in hybrid:
        if dims is not None:
            weights[sym] = kind_of(sym).weights(dims) / (4 * dims.d_model**2)
        elif kind_units is not None and sym in kind_units:
            weights[sym] = _positive_float(f"kind_units.{sym}", kind_units[sym])
        else:
            raise SpaceError("dims", None, "the model's d_model, d_ff, n_heads and sublayer "
                             f"settings: the kinds {', '.join(hybrid)} weigh by them")
    return weights


def kind_units_of(order: str, dims: Dims) -> str | None:
    """``"r=1.015625,e=4.015625"``: the s-units of each hybrid kind of ``order`` at
    ``dims`` (what a trial records for the halves study); None for an order without one."""
    hybrid = hybrid_kinds(_canonical(order))
    weights = unit_weights(2.0, 1.0, dims, "".join(hybrid))
    return ",".join(f"{k}={weights[k]!r}" for k in hybrid) or None


def parse_kind_units(text: str | None) -> dict[str, float]:
    """The mapping :func:`kind_units_of` wrote (empty for None)."""
    out: dict[str, float] = {}
    for part in (text or "").split(","):
        if part.strip():
            key, _, value = part.partition("=")
            out[key.strip()] = float(value)
    return out


def f_units_for(d_model: int, d_ff: int) -> float:
    """Cost of one ``f`` in units of one ``s`` for these dims: 2·d·d_ff / 4d² (2 at d_ff = 4d)."""
    return (2 * d_model * d_ff) / (4 * d_model**2)


def units(order: str, *, f_units: float = 2.0, c_units: float = 1.0,
          dims: Dims | None = None) -> float:
    """Cost of ``order`` in s-units: one ``s`` = 1, ``f`` = ``f_units``, ``c`` = ``c_units``,
    ``h`` = ``f_units / 2``; a hybrid kind its weights over 4d² (``dims`` required then:
    ``w`` = 1, ``r`` = 1 + H/4d, ``e`` = E·2·d·d_e/4d² + E/4d).

    With d_ff = 4d (the paper's setting) an ``f`` costs two ``s``, hence the default.
    """
    canonical = _canonical(order)
    weights = unit_weights(f_units, c_units, dims, canonical)
    return float(sum(weights[ch] for ch in canonical))


GUIDED_BLOCKS = ("key_query", "value", "ffn")
"""Blocks of hard cross-layer guidance (Crossformer; ``models.guidance.config``)."""


def guided_units(order: str, *, blocks: tuple[str, ...] | list[str] = (), f_units: float = 2.0,
                 c_units: float = 1.0) -> float:
    """:func:`units` of ``order`` when hard guidance shares one matrix per pair of
    neighbouring sublayers of a kind (weights only, as :func:`units`): per pair of ``s``
    ``key_query`` and ``value`` each save a quarter unit (d² of 4d²), ``ffn`` half an
    ``f`` per pair of ``f`` (and of ``h``). ``c`` is never shared."""
    for block in blocks:
        if block not in GUIDED_BLOCKS:
            raise SpaceError("blocks", block, "one of " + ", ".join(GUIDED_BLOCKS))
    canonical = _canonical(order)
    pairs = {k: max(canonical.count(k) - 1, 0) for k in "sfh"}
    weights = unit_weights(f_units, c_units)
    saved = sum(0.25 * pairs["s"] for b in ("key_query", "value") if b in blocks)
    if "ffn" in blocks:
        saved += pairs["f"] * weights["f"] / 2 + pairs["h"] * weights["h"] / 2
    return units(canonical, f_units=f_units, c_units=c_units) - saved


def deepest_interleaved(budget: float, *, blocks: tuple[str, ...] | list[str] = (),
                        f_units: float = 2.0, c_units: float = 1.0, kind: str = "lm") -> int:
    """The most layers ``n`` of ``(sf)^n`` (``(scf)^n`` for decoders) whose
    :func:`guided_units` fit ``budget``: how deep hard guidance lets a model grow at a
    fixed parameter budget (the Crossformer paper's "HG-All, 16 layers")."""
    _positive_float("budget", budget)
    n = 0
    while guided_units(interleaved(n + 1, kind=kind), blocks=blocks, f_units=f_units,
                       c_units=c_units) <= budget + 1e-9:
        n += 1
    if n == 0:
        raise SpaceError("budget", budget, "at least one layer's units")
    return n


@dataclass(frozen=True, kw_only=True)
class Halves:
    """Sublayer counts in the bottom (input side) and top half of an order.

    Both dicts have the keys ``"s"``, ``"f"`` and ``"c"``, and ``"h"`` or a hybrid kind
    (``w``, ``r``, ``e``) when either half counts some; counts are floats because a
    straddling sublayer may be split.
    """

    bottom: dict[str, float] = field(default_factory=dict)
    top: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("bottom", "top"):
            part = getattr(self, name)
            if set(part) - set(all_symbols()):
                raise SpaceError(name, part, "a dict with keys among " + ", ".join(all_symbols()))
        kinds = _kinds_of(set(self.bottom) | set(self.top))
        for name in ("bottom", "top"):
            part = getattr(self, name)
            object.__setattr__(self, name, {k: float(part.get(k, 0.0)) for k in kinds})


def _kinds_of(present: set[str] | str) -> str:
    """``sfc``, then ``h`` and the hybrid kinds among ``present``, in registration order."""
    return "sfc" + "".join(k for k in all_symbols() if k not in "sfc" and k in present)


def halves(
    order: str,
    *,
    straddle: str = "fractional",
    f_units: float = 2.0,
    c_units: float = 1.0,
    dims: Dims | None = None,
    kind_units: Mapping[str, float] | None = None,
) -> Halves:
    """Split ``order`` in half by parameter count and count each kind per half.

    Sublayers are laid out on ``[0, units(order))`` input first; the cut is at half the
    total. A sublayer that crosses the cut ("straddles") is counted by ``straddle``:

    * ``"fractional"`` (default): the share of its units on each side
      (``sfs``: s[0,1) f[1,3) s[3,4), cut 2 → bottom s 1, f 0.5; top f 0.5, s 1);
    * ``"bottom"`` / ``"top"``: wholly in that half;
    * ``"drop"``: in neither.

    Example: ``ssssff`` (8 units, cut at 4) → bottom ``{s: 4}``, top ``{f: 2}``. A
    half-width ``h`` weighs ``f_units / 2``: ``hshhsh`` (6 units) → ``{s: 1, h: 2}`` each.
    A hybrid kind weighs by the model's ``dims`` (:func:`units`) or by its recorded
    weight in ``kind_units`` (:func:`kind_units_of`).
    """
    if straddle not in STRADDLE:
        raise SpaceError("straddle", straddle, "one of " + ", ".join(STRADDLE))
    canonical = _canonical(order)
    weights = unit_weights(f_units, c_units, dims, canonical, kind_units)
    total = sum(weights[ch] for ch in canonical)
    cut = total / 2
    eps = 1e-9 * total
    kinds = _kinds_of(canonical)
    bottom = dict.fromkeys(kinds, 0.0)
    top = dict.fromkeys(kinds, 0.0)
    start = 0.0
    for ch in canonical:
        width = weights[ch]
        end = start + width
        if end <= cut + eps:
            bottom[ch] += 1
        elif start >= cut - eps:
            top[ch] += 1
        elif straddle == "fractional":
            bottom[ch] += (cut - start) / width
            top[ch] += (end - cut) / width
        elif straddle == "bottom":
            bottom[ch] += 1
        elif straddle == "top":
            top[ch] += 1
        start = end
    return Halves(bottom=bottom, top=top)
