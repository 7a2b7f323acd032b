"""A weight-sharing supernet: one pool of sublayers that serves every order of a space.

``Supernet(model, orders, sharing=...)`` holds a pool of residual sublayers (the
:func:`~models.blocks.build_sublayer` modules of an :class:`~models.lm.OrderedLM`) and one
embedding, final norm and head. ``forward(idx, targets, order=o)`` runs the pool's
sublayers along order ``o``; which module serves a character of ``o`` is the scheme:

* ``ordinal``: the i-th ``s`` of any order is the pool's ``s`` number i (and so on per
  kind): the pool holds, per kind, as many sublayers as the largest count of that kind
  among the orders (``sssfff`` and ``sfsfsf`` run the very same six modules);
* ``slot``: position p of any order is served by the pool's (kind, p) sublayer: the pool
  holds one per (kind, position) that some order has (orders agreeing at a position
  share it, however many of that kind came before).

The pool itself is an ``OrderedLM`` whose ``cfg.order`` lists the pool's sublayers (kinds
in ``sfh`` order for ``ordinal``; by position for ``slot``), so embeddings, tying, the
fused loss and the adaptive head are the ordered LM's own. Output projections get the
residual init of the deepest order (0.02/√depth), not of the pool's size, so that both
schemes start from the stand-alone scale.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from torch import Tensor, nn

from sublayer_search.models.blocks import output_projections
from sublayer_search.models.config import ModelConfig
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import LMOutput, OrderedLM
from sublayer_search.models.supernet.config import SHARING
from sublayer_search.spaces.kinds import all_symbols
from sublayer_search.spaces.order import KINDS, Order, parse_order

__all__ = ["PoolKey", "Supernet", "canonical_orders", "path_keys", "pool_keys"]

PoolKey = tuple[str, int]
"""(kind, index) of a pool sublayer: index is the ordinal (``ordinal``) or position (``slot``)."""


def _rank(kind: str) -> int:
    """Kinds in pool order: the classic ``sfch``, then the others as registered."""
    return (KINDS + "".join(k for k in all_symbols() if k not in KINDS)).index(kind)


def path_keys(order: str, sharing: str) -> list[PoolKey]:
    """The pool keys an order runs through, input first."""
    if sharing == "slot":
        return [(kind, pos) for pos, kind in enumerate(order)]
    if sharing != "ordinal":
        raise ConfigError("supernet.sharing", sharing, "one of " + ", ".join(SHARING))
    seen: dict[str, int] = {}
    keys = []
    for kind in order:
        keys.append((kind, seen.get(kind, 0)))
        seen[kind] = seen.get(kind, 0) + 1
    return keys


def pool_keys(orders: Sequence[str], sharing: str) -> list[PoolKey]:
    """Every key some order needs, sorted: by kind then ordinal (``ordinal``), by
    position then kind (``slot``)."""
    keys = {key for order in orders for key in path_keys(order, sharing)}
    if sharing == "slot":
        return sorted(keys, key=lambda k: (k[1], _rank(k[0])))
    return sorted(keys, key=lambda k: (_rank(k[0]), k[1]))


def canonical_orders(orders: Sequence[str]) -> tuple[str, ...]:
    """The distinct orders in canonical form (first occurrence kept); ConfigError naming
    ``orders[i]`` for one that does not parse."""
    if isinstance(orders, str) or not orders:
        raise ConfigError("orders", orders, "a non-empty list of order strings")
    out: list[str] = []
    for i, text in enumerate(orders):
        try:
            order = parse_order(text, kind="lm")
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"orders[{i}]", text, f"an order string ({exc})") from None
        if order not in out:
            out.append(order)
    return tuple(out)


class _PooledLM(OrderedLM):
    """An ``OrderedLM`` whose ``hidden`` runs the layers of the active path only."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__(cfg)
        self.active: tuple[int, ...] | None = None

    def hidden(self, idx: Tensor) -> Tensor:
        if self.active is None:
            raise RuntimeError("no order chosen: call the Supernet with order=...")
        return self.hidden_along(idx, [self.layers[i] for i in self.active])


class Supernet(nn.Module):
    """One pool of sublayers shared by ``orders`` (see the module docstring)."""

    def __init__(
        self, model: ModelConfig, orders: Sequence[str], *, sharing: str = "ordinal"
    ) -> None:
        super().__init__()
        if sharing not in SHARING:
            raise ConfigError("supernet.sharing", sharing, "one of " + ", ".join(SHARING))
        if model.guidance.mode != "none":
            raise ConfigError(
                "model.guidance.mode",
                model.guidance.mode,
                "none (a supernet shares weights by its scheme, not by guidance)",
            )
        model.require_vocab()
        self.orders: tuple[str, ...] = canonical_orders(orders)
        self.sharing = sharing
        self.keys: tuple[PoolKey, ...] = tuple(pool_keys(self.orders, sharing))
        self._index = {key: i for i, key in enumerate(self.keys)}
        self._paths: dict[str, tuple[int, ...]] = {}
        pool = "".join(kind for kind, _ in self.keys)
        self.lm = _PooledLM(dataclasses.replace(model, order=pool))
        self.depth = max(len(o) for o in self.orders)
        """The deepest order's number of sublayers."""
        residual_std = 0.02 / math.sqrt(self.depth)
        for layer in self.lm.layers:
            for out in output_projections(layer):
                nn.init.normal_(out.weight, std=residual_std)

    @property
    def model_config(self) -> ModelConfig:
        """The pool's config (``order`` lists the pool's sublayers)."""
        return self.lm.cfg

    def path(self, order: str) -> tuple[int, ...]:
        """Indices into the pool of the sublayers ``order`` runs through."""
        cached = self._paths.get(order)
        if cached is not None:
            return cached
        canonical = Order.of(order, kind="lm")
        try:
            path = tuple(self._index[key] for key in path_keys(canonical, self.sharing))
        except KeyError as missing:
            raise ValueError(
                f"order {canonical!r} needs the pool sublayer {missing.args[0]} "
                f"that this {self.sharing} supernet does not hold"
            ) from None
        self._paths[order] = path
        return path

    def sublayers(self, order: str) -> list[nn.Module]:
        """The residual sublayer modules ``order`` runs through, input first."""
        return [self.lm.layers[i] for i in self.path(order)]

    def forward(self, idx: Tensor, targets: Tensor | None = None, *, order: str) -> LMOutput:
        """Like :meth:`OrderedLM.forward`, along ``order``."""
        self.lm.active = self.path(order)
        try:
            return self.lm(idx, targets)
        finally:
            self.lm.active = None

    def log_probs(self, idx: Tensor, *, order: str) -> Tensor:
        """Next-token log-probabilities (B, T, V) along ``order``."""
        self.lm.active = self.path(order)
        try:
            return self.lm.log_probs(idx)
        finally:
            self.lm.active = None
