"""``r``: a gated linear recurrence, the scalar-decay family of Mamba-2 (its "state-space
duality" form) and gated linear attention.

Per head, with ``q``, ``k``, ``v`` projections of the input and a decay
``a_t = sigmoid(w·x_t + b)`` in (0, 1) computed from the token itself::

    S_t = a_t · S_{t-1} + k_t v_tᵀ        (a dk × dv state per head)
    y_t = S_tᵀ q_t                          then RMS-normalised per head, projected out

Why this member of the family: a scalar decay per head makes the recurrence a masked,
decayed linear attention, so the whole sequence runs as chunks of plain matmuls (within a
chunk the decays are a (L × L) lower-triangular factor; between chunks the state carries),
fast on CPU with no per-token Python loop and no custom kernel. Gated DeltaNet's delta
rule needs a triangular solve per chunk, and Mamba-1's per-channel decay a scan over
d·N states; both cost more for the same state. The state, d²/H numbers per sequence and
layer whatever the context, is what MAD normalises its comparisons by (iso-state). Weights:
q, k, v and out (4d², as an ``s``) plus the decay's d·H; exact: 4d + H biases besides.
Left out, and said so: Mamba's short convolution and output gate.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.kernels.linear import Linear
from sublayer_search.spaces.kinds import Dims

__all__ = ["GatedLinearRecurrence", "recurrence_reference"]

DECAY_INIT = (0.9, 0.999)
"""The heads' initial decays (sigmoid of the bias), spread evenly: short and long memory."""


def _rms(y: Tensor, eps: float = 1e-6) -> Tensor:
    return y * torch.rsqrt(y.pow(2).mean(dim=-1, keepdim=True) + eps)


class GatedLinearRecurrence(nn.Module):
    """The recurrence above, causal, computed in chunks of ``chunk`` tokens."""

    def __init__(self, d_model: int, n_heads: int, *, chunk: int = 32) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        if chunk < 1:
            raise ValueError(f"chunk {chunk} is not a positive integer")
        self.n_heads = n_heads
        self.chunk = chunk
        self.qkv = Linear(d_model, 3 * d_model)  # rows: q, k, v
        self.decay = Linear(d_model, n_heads)  # the decay's logit per head
        self.out = Linear(d_model, d_model)
        self.init_own()

    @classmethod
    def from_dims(cls, dims: Dims, **_: object) -> GatedLinearRecurrence:
        return cls(dims.d_model, dims.n_heads, chunk=dims.settings.chunk)

    def init_own(self) -> None:
        """The decay's bias: heads from short to long memory (a model's global init would
        zero it, a decay of 1/2 per token; :class:`~models.lm.OrderedLM` calls this after)."""
        low, high = DECAY_INIT
        decays = torch.linspace(low, high, self.n_heads)
        with torch.no_grad():
            self.decay.bias.copy_(torch.log(decays / (1 - decays)))

    def output_projections(self) -> list[nn.Linear]:
        return [self.out]

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """q (scaled), k, v as (B, H, T, dh) and the log-decays (B, H, T)."""
        b, t, d = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.n_heads, d // self.n_heads)
        q, k, v = (part.transpose(1, 2) for part in qkv.unbind(2))
        log_a = F.logsigmoid(self.decay(x).float()).transpose(1, 2)  # (B, H, T), <= 0
        return q / math.sqrt(q.shape[-1]), k, v, log_a

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v, log_a = self.heads(x)
        dh = d // self.n_heads
        state = q.new_zeros(b, self.n_heads, dh, dh, dtype=torch.float32)
        outs = []
        for start in range(0, t, self.chunk):  # a chunk of tokens at a time
            end = min(start + self.chunk, t)
            qc, kc, vc = (z[:, :, start:end].float() for z in (q, k, v))
            cum = log_a[:, :, start:end].cumsum(dim=-1)  # (B, H, L): Σ_{j<=i} log a_j
            gap = cum[..., :, None] - cum[..., None, :]  # log of Π_{j<m<=i} a_m
            lower = torch.ones(end - start, end - start, dtype=torch.bool, device=x.device).tril()
            decay = gap.masked_fill(~lower, float("-inf")).exp()
            y = ((qc @ kc.transpose(-2, -1)) * decay) @ vc  # within the chunk
            y = y + (qc * cum.exp()[..., None]) @ state  # from the chunks before
            to_end = (cum[..., -1:] - cum).exp()[..., None]  # (B, H, L, 1)
            state = cum[..., -1].exp()[..., None, None] * state \
                + (kc * to_end).transpose(-2, -1) @ vc
            outs.append(y)
        y = _rms(torch.cat(outs, dim=2)).to(x.dtype)  # (B, H, T, dh)
        return self.out(y.transpose(1, 2).reshape(b, t, d))


def recurrence_reference(module: GatedLinearRecurrence, x: Tensor) -> Tensor:
    """The same outputs one token at a time (``S_t = a_t S_{t-1} + k_t v_tᵀ``): the
    definition the chunked form is tested against; slow, for tests only."""
    b, t, d = x.shape
    q, k, v, log_a = module.heads(x)
    dh = d // module.n_heads
    state = torch.zeros(b, module.n_heads, dh, dh, dtype=torch.float32, device=x.device)
    ys = []
    for i in range(t):
        a = log_a[:, :, i].exp()[..., None, None]
        state = a * state + k[:, :, i, :, None].float() @ v[:, :, i, None, :].float()
        ys.append((q[:, :, i, None, :].float() @ state)[:, :, 0])  # (B, H, dh)
    y = _rms(torch.stack(ys, dim=2)).to(x.dtype)
    return module.out(y.transpose(1, 2).reshape(b, t, d))
