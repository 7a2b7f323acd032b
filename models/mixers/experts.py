"""``e``: a mixture-of-experts feedforward (Shazeer et al. 2017; Switch Transformer,
Fedus et al. 2022; Jamba's MoE layers).

A router ``Linear(d, E)`` (no bias) scores the ``E`` experts for each token; the token
goes to its ``top_k`` best, their outputs weighed by the softmax of the chosen scores.
Each expert is a :class:`~models.blocks.FeedForward` of width ``d_e`` (``expert_ff``,
by default ``d_ff // top_k``: a token then passes through an ``f``'s weights). The
load-balancing loss is Switch's ``E · Σᵢ fᵢ · Pᵢ`` (``fᵢ`` the share of the token-slots
routed to expert i, ``Pᵢ`` its mean router probability): 1 when balanced, up to ``E``
when one expert takes everything. Parameters: all ``E`` experts and the router (total);
a token uses ``top_k`` experts and the router (active): :mod:`spaces.kinds` counts both.
"""

from __future__ import annotations

from typing import cast

import torch
from torch import Tensor, nn

from sublayer_search.models.blocks import FeedForward
from sublayer_search.spaces.kinds import Dims

__all__ = ["MixtureOfExperts"]


class MixtureOfExperts(nn.Module):
    """Top-k routed feedforward experts; :attr:`balance_loss` holds the last forward's."""

    def __init__(self, d_model: int, *, experts: int, top_k: int, expert_ff: int,
                 activation: str = "relu", act_dropout: float = 0.0) -> None:
        super().__init__()
        if not 1 <= top_k <= experts:
            raise ValueError(f"top_k {top_k} is not in 1..{experts}")
        self.top_k = top_k
        self.router = nn.Linear(d_model, experts, bias=False)
        self.experts = nn.ModuleList(
            FeedForward(d_model, expert_ff, activation=activation, act_dropout=act_dropout)
            for _ in range(experts))
        self.balance_loss: Tensor | None = None

    @classmethod
    def from_dims(cls, dims: Dims, *, activation: str = "relu", act_dropout: float = 0.0,
                  **_: object) -> MixtureOfExperts:
        s = dims.settings
        return cls(dims.d_model, experts=s.experts, top_k=s.top_k, expert_ff=dims.expert_ff,
                   activation=activation, act_dropout=act_dropout)

    def output_projections(self) -> list[nn.Linear]:
        return [cast(FeedForward, expert).fc2 for expert in self.experts]

    def forward(self, x: Tensor) -> Tensor:
        shape = x.shape
        tokens = x.reshape(-1, shape[-1])  # (N, d)
        probs = self.router(tokens).float().softmax(dim=-1)  # (N, E)
        weight, chosen = probs.topk(self.top_k, dim=-1)  # (N, k)
        weight = weight / weight.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(tokens)
        n_experts = len(self.experts)
        for e, expert in enumerate(self.experts):  # a loop over experts, never over tokens
            rows, slot = (chosen == e).nonzero(as_tuple=True)
            if rows.numel():
                y = expert(tokens[rows]) * weight[rows, slot, None].to(tokens.dtype)
                out.index_add_(0, rows, y)
        share = torch.zeros(n_experts, device=x.device).index_add_(
            0, chosen.reshape(-1), torch.ones(chosen.numel(), device=x.device))
        share = share / chosen.numel()  # fᵢ: no gradient (counts), as in Switch
        self.balance_loss = n_experts * (share * probs.mean(dim=0)).sum()
        return out.reshape(shape)
