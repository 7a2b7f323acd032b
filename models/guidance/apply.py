"""Cross-layer guidance on built sublayers (the settings: :mod:`models.guidance.config`).

:func:`guide` takes the residual sublayers of one stack (bottom first) with the
guided pairs of its order and

* ``hard``: makes the upper matrix *the same* ``nn.Parameter`` as the lower one (one
  tensor: ``model.parameters()``, the optimizer and a checkpoint hold it once, and the
  gradients of both uses add up in it);
* ``soft``: returns the (lower, upper) weight pairs; :func:`guidance_penalty` is
  ``Σ ‖A(t) − sg(B(t+1))‖²`` over them (the upper side detached), which the trainer
  scales by ``alpha`` and adds to the loss.

Models keep the soft pairs in a plain list attribute (not registered again) and expose
:func:`guidance_penalty` through ``model.guidance_penalty()``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import torch
from torch import Tensor, nn

from sublayer_search.models.blocks import projection
from sublayer_search.models.guidance.config import (
    BLOCK_KINDS,
    GuidanceConfig,
    Pair,
    chain_pairs,
)

__all__ = ["WeightPair", "guidance_penalty", "guide", "guide_chains", "guide_stack"]

WeightPair = tuple[nn.Linear, nn.Linear]
"""(lower projection, upper projection) of a soft pair: their weights are compared."""


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
        lower = projection(layers[p.lower], p.lower_role)
        upper = projection(layers[p.upper], p.upper_role)
        if guidance.mode == "hard":
            upper.weight = lower.weight
        else:
            links.append((lower, upper))
    return links


def guide_chains(chains: Mapping[str, Sequence[nn.Module]],
                 guidance: GuidanceConfig) -> list[WeightPair]:
    """:func:`guide` along each chain (kind → its sublayers, bottom first)."""
    links: list[WeightPair] = []
    for block in guidance.blocks:
        for kind in BLOCK_KINDS[block]:
            chain = list(chains.get(kind, ()))
            links += guide(chain, chain_pairs(len(chain), block, guidance), guidance)
    return links


def guide_stack(layers: Iterable[nn.Module], order: str,
                guidance: GuidanceConfig) -> list[WeightPair]:
    """:func:`guide_chains` over a stack built from ``order`` (one sublayer per character):
    the layer above is the next sublayer of the same kind."""
    stack = list(zip(layers, order, strict=True))
    kinds = {k for block in guidance.blocks for k in BLOCK_KINDS[block]}
    return guide_chains({k: [m for m, ch in stack if ch == k] for k in kinds}, guidance)


def guidance_penalty(links: Sequence[WeightPair]) -> Tensor | None:
    """``Σ ‖W_lower − sg(W_upper)‖²`` (squared Frobenius norms, fp32); None without pairs."""
    total: Tensor | None = None
    for lower, upper in links:
        diff = lower.weight.float() - upper.weight.detach().float()
        term = torch.sum(diff * diff)
        total = term if total is None else total + term
    return total
