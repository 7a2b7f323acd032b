"""``w``: sliding-window attention, a self-attention whose token attends to itself and
the ``window - 1`` tokens before it (Longformer's and Mistral's local attention; Samba's
attention layer). Same weights as an ``s`` (4d² + 4d); a key/value cache of ``window``
tokens instead of the whole context."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from sublayer_search.models.blocks import SelfAttention
from sublayer_search.spaces.kinds import Dims

__all__ = ["SlidingWindowAttention", "band_mask", "blocked_window_attention"]


def band_mask(t: int, window: int, device: torch.device | None = None) -> Tensor:
    """(T, T) bool, True where query i may attend key j: ``i - window < j <= i``."""
    i = torch.arange(t, device=device)[:, None]
    j = torch.arange(t, device=device)[None, :]
    return (j <= i) & (j > i - window)


def blocked_window_attention(q: Tensor, k: Tensor, v: Tensor, window: int, *,
                             dropout_p: float = 0.0) -> Tensor:
    """Causal attention over the last ``window`` keys, (B, H, T, dh) each, in blocks of
    ``window`` queries: a block attends to itself and the block before it, so time and
    memory grow with T·window, not T² (a (T, T) mask would be quadratic)."""
    b, h, t, dh = q.shape
    n = -(-t // window)  # blocks
    pad = n * window - t

    def blocks(z: Tensor) -> Tensor:  # (B, H, n, W, dh), the end padded with zeros
        return F.pad(z, (0, 0, 0, pad)).view(b, h, n, window, dh)

    qb, kb, vb = blocks(q), blocks(k), blocks(v)
    before = (F.pad(kb, (0, 0, 0, 0, 1, 0))[:, :, :-1], F.pad(vb, (0, 0, 0, 0, 1, 0))[:, :, :-1])
    keys, values = torch.cat([before[0], kb], dim=3), torch.cat([before[1], vb], dim=3)
    # query a of a block, key c of [previous block, this block]: c - W is a's offset
    a = torch.arange(window, device=q.device)[:, None]
    c = torch.arange(2 * window, device=q.device)[None, :]
    mask = ((c <= a + window) & (c > a)).expand(n, window, 2 * window).clone()
    mask[0, :, :window] = False  # the first block has no block before it
    y = F.scaled_dot_product_attention(qb, keys, values, attn_mask=mask, dropout_p=dropout_p)
    return y.reshape(b, h, n * window, dh)[:, :, :t]


class SlidingWindowAttention(SelfAttention):
    """Causal multi-head attention over the last ``window`` tokens (SDPA in blocks of
    ``window`` queries, :func:`blocked_window_attention`; with ``capture`` set, explicit
    probabilities over the whole band mask, as :class:`SelfAttention`)."""

    def __init__(self, d_model: int, n_heads: int, *, window: int,
                 attn_dropout: float = 0.0) -> None:
        super().__init__(d_model, n_heads, attn_dropout=attn_dropout, causal=True)
        if window < 1:
            raise ValueError(f"window {window} is not a positive integer")
        self.window = window

    @classmethod
    def from_dims(cls, dims: Dims, *, attn_dropout: float = 0.0, **_: object) -> SlidingWindowAttention:
        return cls(dims.d_model, dims.n_heads, window=dims.settings.window,
                   attn_dropout=attn_dropout)

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        b, t, d = x.shape
        if key_padding_mask is not None:
            raise ValueError("sliding-window attention is for language models (no padding)")
        if t <= self.window:  # the band holds every earlier token: plain causal attention
            return super().forward(x)
        qkv = self._project(x).view(b, t, 3, self.n_heads, d // self.n_heads)
        q, k, v = (part.transpose(1, 2) for part in qkv.unbind(2))  # (B, H, T, dh)
        p = self.attn_dropout if self.training else 0.0
        if self.capture is None:
            y = blocked_window_attention(q, k, v, self.window, dropout_p=p)
        else:  # the whole (T, T) map, as capture_attention hands it out
            mask = band_mask(t, self.window, x.device)
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            probs = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            self.capture.append(probs.detach())
            y = F.dropout(probs, p=p) @ v
        return self.out(y.transpose(1, 2).reshape(b, t, d))
