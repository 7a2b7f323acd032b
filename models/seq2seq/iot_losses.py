"""The parts of the IOT training objective (:class:`models.seq2seq.iot_model.IOTSeq2Seq`):
Gumbel-softmax weights, the clamp of π, the exploration and exploitation losses and one
decoder path's share of L_C with either way of combining label smoothing over the paths.
"""

from __future__ import annotations

import math
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["clamp_probs", "exploitation_loss", "exploration_loss", "gumbel_weights",
           "path_loss"]


def gumbel_weights(logits: Tensor, tau: float, *, generator: torch.Generator | None = None) -> Tensor:
    """Gumbel-softmax weights ``softmax((logits + g) / tau)``, g ~ Gumbel(0, 1); rows sum to 1."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float32)
    g = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    return F.softmax((logits.float() + g) / tau, dim=-1)


def clamp_probs(probs: Tensor, floor: float = 0.05, clamp: str = "below") -> Tensor:
    """π clamped from below at ``floor`` (``clamp="below"``, ours) or into
    ``[floor, 1 − (N−1)·floor]`` (``"both"``, the authors' code); N = last dimension."""
    p = probs.float()
    if clamp == "below":
        return p.clamp_min(floor)
    if clamp != "both":
        raise ValueError(f"clamp must be 'below' or 'both', got {clamp!r}")
    return p.clamp(floor, max(1.0 - (probs.shape[-1] - 1) * floor, floor))


def exploration_loss(probs: Tensor, floor: float = 0.05, clamp: str = "below", *,
                     clamped: bool = True) -> Tensor:
    """``L_D = KL(u ‖ clamp(mean_x π_x))`` for probabilities (B, N); with ``clamped``
    False (the authors' criterion) ``KL(u ‖ mean_x π_x)``, π unclamped."""
    n = probs.shape[-1]
    mean = probs.float().mean(0)
    if clamped:
        mean = clamp_probs(mean, floor, clamp)
    return (math.log(1.0 / n) - mean.log()).sum() / n


def exploitation_loss(probs: Tensor, floor: float = 0.05, clamp: str = "below") -> Tensor:
    """``L_S = −mean_x KL(u ‖ clamp(π_x))`` for probabilities (B, N)."""
    n = probs.shape[-1]
    p = clamp_probs(probs, floor, clamp)
    return -((math.log(1.0 / n) - p.log()).sum(-1) / n).mean()


class _Head(Protocol):
    def head_nll(self, h: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0,
                 weights: Tensor | None = None) -> Tensor: ...


def path_loss(model: _Head, h: Tensor, tgt_out: Tensor, weights: Tensor, n_tokens: Tensor, *,
              label_smoothing: float, smoothing: str) -> Tensor:
    """One path's share of L_C from its decoder states ``h`` (B, T, d) and sentence
    weights (B,) (γ_m·λ_n), divided by the batch's ``n_tokens``.

    ``smoothing="weighted"`` (ours): ``Σ_b w_b Σ_t [(1−ε)·nll + ε·ū]``; ``"summed"`` (the
    authors' criterion): ``Σ_b w_b (1−ε) Σ_t nll + ε Σ_b Σ_t ū`` — the smoothing term
    (ū = mean over the vocabulary of −log p) unweighted, so summed over the paths it
    counts every path once. ε = ``label_smoothing``; padding counts nothing.
    """
    eps = float(label_smoothing)
    if smoothing == "weighted" or eps == 0.0:
        return model.head_nll(h, tgt_out, eps, weights / n_tokens)
    if smoothing != "summed":
        raise ValueError(f"smoothing must be 'weighted' or 'summed', got {smoothing!r}")
    nll = model.head_nll(h, tgt_out, 0.0, weights * (1.0 - eps) / n_tokens)
    uniform = model.head_nll(h, tgt_out, 1.0, torch.full_like(weights, eps) / n_tokens)
    return nll + uniform
