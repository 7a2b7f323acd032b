"""Cross-layer guidance on built sublayers (the settings: :mod:`models.guidance.config`).

:func:`guide` takes the residual sublayers of one stack (bottom first) with the
guided pairs of its order and

* ``hard``: makes the upper matrix *the same* ``nn.Parameter`` as the lower one (one
  tensor: ``model.parameters()``, the optimizer and a checkpoint hold it once, and the
  gradients of both uses add up in it);
* ``soft``: returns the (lower, upper) weight pairs with the setting's norm;
  :func:`guidance_penalty` is ``Σ N(A(t) − sg(B(t+1)))`` over them (the upper side
  detached; ``N`` = ``‖·‖²_F`` by default, ``‖·‖_F`` with ``norm: l2``), which the trainer
  scales by ``alpha`` and adds to the loss.

A guided cross-attention (``cross_attention``) has its fused k,v split first
(:meth:`models.blocks.CrossAttention.split_kv`), before the model initialises its weights.

Models keep the soft pairs in a plain list attribute (not registered again) and expose
:func:`guidance_penalty` through ``model.guidance_penalty()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from sublayer_search.models.blocks import CrossAttention, Residual, projection
from sublayer_search.models.guidance.config import GuidanceConfig, Pair, chain_pairs

__all__ = ["WeightPair", "guidance_penalty", "guide", "guide_chains", "guide_stack"]

class WeightPair(NamedTuple):
    """A soft pair: the lower and upper projections, whose weights are compared by
    ``norm`` (``squared_frobenius`` or ``l2``)."""

    lower: nn.Linear
    upper: nn.Linear
    norm: str = "squared_frobenius"


def _own(layer: nn.Module, role: str) -> nn.Linear:
    """:func:`projection`, a fused cross-attention k,v split first."""
    sub = layer.sublayer if isinstance(layer, Residual) else layer
    if isinstance(sub, CrossAttention) and role in ("k", "v"):
        sub.split_kv()
    return projection(layer, role)


def guide(layers: Sequence[nn.Module], pairs: Sequence[Pair],
          guidance: GuidanceConfig) -> list[WeightPair]:
    """Apply ``guidance`` to ``layers`` along ``pairs`` (positions index ``layers``).

    Hard: shares the weights now and returns ``[]``; soft: returns the pairs to
    regularise; none: ``[]``.
    """
    if not guidance.active:
        return []
    links: list[WeightPair] = []
    for p in pairs:
        lower = _own(layers[p.lower], p.lower_role)
        upper = _own(layers[p.upper], p.upper_role)
        if guidance.mode == "hard":
            upper.weight = lower.weight
        else:
            links.append(WeightPair(lower, upper, guidance.norm))
    return links


def guide_chains(chains: Mapping[str, Sequence[nn.Module]],
                 guidance: GuidanceConfig) -> list[WeightPair]:
    """:func:`guide` along each chain (kind → its sublayers, bottom first)."""
    links: list[WeightPair] = []
    for block in guidance.blocks:
        for kind in guidance.kinds(block):
            chain = list(chains.get(kind, ()))
            links += guide(chain, chain_pairs(len(chain), block, guidance), guidance)
    return links


def guide_stack(layers: Iterable[nn.Module], order: str,
                guidance: GuidanceConfig) -> list[WeightPair]:
    """:func:`guide_chains` over a stack built from ``order`` (one sublayer per character):
    the layer above is the next sublayer of the same kind."""
    stack = list(zip(layers, order, strict=True))
    kinds = {k for block in guidance.blocks for k in guidance.kinds(block)}
    return guide_chains({k: [m for m, ch in stack if ch == k] for k in kinds}, guidance)


def guidance_penalty(links: Sequence[WeightPair]) -> Tensor | None:
    """``Σ N(W_lower − sg(W_upper))`` in fp32, ``N`` each pair's norm: ``‖·‖²_F`` (sum of
    squared entries) or ``‖·‖_F`` (``l2``: its square root); None without pairs."""
    total: Tensor | None = None
    for lower, upper, norm in links:
        diff = lower.weight.float() - upper.weight.detach().float()
        # l2: vector_norm's gradient is 0, not NaN, where a pair is equal
        term = torch.linalg.vector_norm(diff) if norm == "l2" else torch.sum(diff * diff)
        total = term if total is None else total + term
    return total
