"""Sublayers — ``s`` self-attention, ``f`` feedforward, ``c`` cross-attention, ``h``
half-width feedforward — and the residual wrapper that gives each one its own LayerNorm
and dropout.

Parameter counts (match :func:`spaces.cost.unit_costs` with ``exact=True``):

* ``s``: fused q,k,v projection ``Linear(d, 3d)`` + output ``Linear(d, d)`` = 4d² + 4d
  (a fused ``Linear(d, 3d)`` holds exactly the weights of three ``Linear(d, d)``);
* ``c``: ``Linear(d, d)`` for queries + fused ``Linear(d, 2d)`` for keys/values over the
  memory + output ``Linear(d, d)`` = 4d² + 4d;
* ``f``: ``Linear(d, d_ff)`` + ``Linear(d_ff, d)`` = 2·d·d_ff + d_ff + d;
* ``h``: a ``FeedForward`` of width d_ff/2 (:func:`spaces.cost.half_width`) = d·d_ff +
  d_ff/2 + d (the Macaron block's halves, see :mod:`spaces.generators.families`);
* :class:`Residual` adds one ``LayerNorm(d)`` = 2d.

With ``split_qkv=True`` (cross-layer guidance on self-attention, :mod:`models.guidance.apply`)
a self-attention holds q, k and v as three ``Linear(d, d)`` (same count) so that one of
them can be shared with, or pulled towards, another sublayer's; it still runs one matmul
over their concatenated weights. A cross-attention guided as well (``cross_attention`` of
the guidance) splits its fused k,v the same way (:meth:`CrossAttention.split_kv`).
"""

from __future__ import annotations

import importlib
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.kernels.linear import Linear, linear
from sublayer_search.spaces.cost import half_width
from sublayer_search.spaces.kinds import CLASSIC, Dims, KindSettings, all_symbols, kind_of

__all__ = [
    "CrossAttention",
    "FeedForward",
    "Residual",
    "SelfAttention",
    "attend",
    "build_sublayer",
    "output_projection",
    "output_projections",
    "projection",
]


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool,
    key_padding_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    capture: list[Tensor] | None = None,
) -> Tensor:
    """Scaled dot-product attention over heads: q (B, H, T, dh), k/v (B, H, S, dh).

    ``key_padding_mask`` (B, S) bool is True at keys to ignore (padding). Without
    ``capture`` this is ``F.scaled_dot_product_attention``; with a list it computes
    ``softmax(QKᵀ/√dh + mask)`` explicitly and appends the detached (B, H, T, S)
    probabilities to it.
    """
    t, s = q.shape[-2], k.shape[-2]
    mask = None  # bool, True = may attend; broadcast to (B, H, T, S)
    if key_padding_mask is not None:
        mask = ~key_padding_mask[:, None, None, :].to(torch.bool)
        if causal:
            mask = mask & torch.ones(t, s, dtype=torch.bool, device=q.device).tril()
    if capture is None:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal and mask is None
        )
    if mask is None and causal:
        mask = torch.ones(t, s, dtype=torch.bool, device=q.device).tril()
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, S)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = scores.softmax(dim=-1)
    capture.append(probs.detach())
    return F.dropout(probs, p=dropout_p) @ v


class SelfAttention(nn.Module):
    """Multi-head self-attention (causal by default), 4d² + 4d parameters.

    Set ``capture`` to a list (see :func:`models.lm.capture_attention`) to record the
    attention probabilities of every forward pass; ``None`` (the default) uses SDPA.
    """

    def __init__(
        self, d_model: int, n_heads: int, *, attn_dropout: float = 0.0, causal: bool = True,
        split_qkv: bool = False,
    ) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        self.n_heads = n_heads
        self.causal = causal
        self.attn_dropout = attn_dropout
        self.qkv: nn.Linear | None = None
        self.q: nn.Linear | None = None
        self.k: nn.Linear | None = None
        self.v: nn.Linear | None = None
        if split_qkv:  # three matrices that guidance may share, one matmul
            self.q, self.k, self.v = (Linear(d_model, d_model) for _ in range(3))
        else:
            self.qkv = Linear(d_model, 3 * d_model)  # rows: q, k, v
        self.out = Linear(d_model, d_model)
        self.capture: list[Tensor] | None = None

    def _project(self, x: Tensor) -> Tensor:
        """(B, T, d) → (B, T, 3d): q, k, v."""
        if self.qkv is not None:
            return self.qkv(x)
        assert self.q is not None and self.k is not None and self.v is not None
        parts = (self.q, self.k, self.v)
        return linear(x, torch.cat([p.weight for p in parts]), torch.cat([p.bias for p in parts]))

    def forward(self, x: Tensor, key_padding_mask: Tensor | None = None) -> Tensor:
        b, t, d = x.shape  # (B, T, d)
        qkv = self._project(x).view(b, t, 3, self.n_heads, d // self.n_heads)
        # each (B, H, T, dh); unbinding dim 2 lets the backward stack the three gradients
        # straight into the (B, T, 3, H, dh) layout: one copy instead of two
        q, k, v = (part.transpose(1, 2) for part in qkv.unbind(2))
        y = attend(
            q,
            k,
            v,
            causal=self.causal,
            key_padding_mask=key_padding_mask,
            dropout_p=self.attn_dropout if self.training else 0.0,
            capture=self.capture,
        )
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class CrossAttention(nn.Module):
    """Multi-head attention from ``x`` (B, T, d) over ``memory`` (B, S, d); non-causal."""

    def __init__(self, d_model: int, n_heads: int, *, attn_dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not a multiple of n_heads {n_heads}")
        self.n_heads = n_heads
        self.attn_dropout = attn_dropout
        self.q = Linear(d_model, d_model)
        self.kv: nn.Linear | None = Linear(d_model, 2 * d_model)  # rows: k, v
        self.k: nn.Linear | None = None
        self.v: nn.Linear | None = None
        self.out = Linear(d_model, d_model)

    def split_kv(self) -> None:
        """Hold k and v as two ``Linear(d, d)`` (the fused one's rows; same count) so that
        guidance can share or pull one of them; still one matmul over the memory."""
        if self.kv is None:
            return
        d = self.q.in_features
        self.k, self.v = (Linear(d, d) for _ in range(2))
        with torch.no_grad():
            for i, part in enumerate((self.k, self.v)):
                part.weight.copy_(self.kv.weight[i * d:(i + 1) * d])
                part.bias.copy_(self.kv.bias[i * d:(i + 1) * d])
        self.kv = None

    def _project_kv(self, memory: Tensor) -> Tensor:
        """(B, S, d) → (B, S, 2d): k, v."""
        if self.kv is not None:
            return self.kv(memory)
        assert self.k is not None and self.v is not None
        return linear(memory, torch.cat([self.k.weight, self.v.weight]),
                      torch.cat([self.k.bias, self.v.bias]))

    def forward(
        self, x: Tensor, memory: Tensor, memory_padding_mask: Tensor | None = None
    ) -> Tensor:
        b, t, d = x.shape
        s = memory.shape[1]
        dh = d // self.n_heads
        q = self.q(x).view(b, t, self.n_heads, dh).transpose(1, 2)  # (B, H, T, dh)
        kv = self._project_kv(memory).view(b, s, 2, self.n_heads, dh)
        k, v = (part.transpose(1, 2) for part in kv.unbind(2))  # (B, H, S, dh) each
        y = attend(
            q,
            k,
            v,
            causal=False,
            key_padding_mask=memory_padding_mask,
            dropout_p=self.attn_dropout if self.training else 0.0,
        )
        return self.out(y.transpose(1, 2).reshape(b, t, d))


class FeedForward(nn.Module):
    """``Linear(d, d_ff) → activation → dropout → Linear(d_ff, d)``."""

    def __init__(
        self, d_model: int, d_ff: int, *, activation: str = "relu", act_dropout: float = 0.0
    ) -> None:
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"unknown activation {activation!r} (expected relu or gelu)")
        self.fc1 = Linear(d_model, d_ff)
        self.act = nn.ReLU() if activation == "relu" else nn.GELU()
        self.drop = nn.Dropout(act_dropout)
        self.fc2 = Linear(d_ff, d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.drop(self.act(self.fc1(x))))


class Residual(nn.Module):
    """A sublayer with its LayerNorm, dropout and residual connection.

    ``norm="pre"``: ``x + dropout(sub(norm(x)))``; ``norm="post"``: ``norm(x + dropout(sub(x)))``.
    Extra arguments (masks, memory) are passed to the sublayer.
    """

    def __init__(self, sublayer: nn.Module, d_model: int, *, dropout: float, norm: str) -> None:
        super().__init__()
        if norm not in ("pre", "post"):
            raise ValueError(f"unknown norm {norm!r} (expected pre or post)")
        self.sublayer = sublayer
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.pre_norm = norm == "pre"

    def forward(self, x: Tensor, *args: object, **kwargs: object) -> Tensor:
        if self.pre_norm:
            return x + self.drop(self.sublayer(self.norm(x), *args, **kwargs))
        return self.norm(x + self.drop(self.sublayer(x, *args, **kwargs)))


def output_projection(layer: nn.Module) -> nn.Linear:
    """The last ``Linear`` of a (residual) sublayer: ``out`` of an attention, ``fc2`` of a
    feedforward (the weights that get the scaled-down residual init)."""
    sub = layer.sublayer if isinstance(layer, Residual) else layer
    if isinstance(sub, FeedForward):
        return sub.fc2
    if isinstance(sub, SelfAttention | CrossAttention):
        return sub.out
    raise TypeError(f"{type(sub).__name__} is not a sublayer with an output projection")


def output_projections(layer: nn.Module) -> list[nn.Linear]:
    """Every ``Linear`` of a (residual) sublayer that writes to the residual stream:
    :func:`output_projection`'s, or a hybrid kind's own (each expert's ``fc2``)."""
    sub = layer.sublayer if isinstance(layer, Residual) else layer
    own = getattr(sub, "output_projections", None)
    return list(own()) if callable(own) else [output_projection(layer)]


def projection(layer: nn.Module, role: str) -> nn.Linear:
    """The ``Linear`` of a (residual) sublayer by role: ``q``, ``k``, ``v``, ``out`` of a
    self-attention built with ``split_qkv`` (of a cross-attention: ``k`` and ``v`` once
    split, :meth:`CrossAttention.split_kv`); ``w1``, ``w2`` of a feedforward."""
    sub = layer.sublayer if isinstance(layer, Residual) else layer
    found: nn.Module | None = None
    if isinstance(sub, FeedForward):
        found = {"w1": sub.fc1, "w2": sub.fc2}.get(role)
    elif isinstance(sub, SelfAttention | CrossAttention):
        found = {"q": sub.q, "k": sub.k, "v": sub.v, "out": sub.out}.get(role)
    if not isinstance(found, nn.Linear):
        raise TypeError(f"{type(sub).__name__} has no {role!r} projection of its own")
    return found


def build_sublayer(
    kind: str,
    *,
    d_model: int,
    n_heads: int,
    d_ff: int,
    dropout: float = 0.0,
    attn_dropout: float = 0.0,
    act_dropout: float = 0.0,
    activation: str = "relu",
    norm: str = "pre",
    causal: bool = True,
    split_qkv: bool = False,
    settings: KindSettings | None = None,
) -> Residual:
    """One residual sublayer for an order symbol: ``"s"``, ``"f"``, ``"c"``, ``"h"``, or a
    hybrid kind of :mod:`spaces.kinds` (``w``, ``r``, ``e``: its module's ``from_dims``,
    with ``settings``) (``split_qkv``: see :class:`SelfAttention`)."""
    sub: nn.Module
    if kind not in CLASSIC and kind in all_symbols():
        dims = Dims(d_model=d_model, d_ff=d_ff, n_heads=n_heads,
                    settings=settings or KindSettings())
        module_name, _, class_name = kind_of(kind).module.partition(":")
        factory = getattr(importlib.import_module(module_name), class_name)
        sub = factory.from_dims(dims, attn_dropout=attn_dropout, act_dropout=act_dropout,
                                activation=activation)
    elif kind == "s":
        sub = SelfAttention(d_model, n_heads, attn_dropout=attn_dropout, causal=causal,
                            split_qkv=split_qkv)
    elif kind in ("f", "h"):
        width = d_ff if kind == "f" else half_width(d_ff)
        sub = FeedForward(d_model, width, activation=activation, act_dropout=act_dropout)
    elif kind == "c":
        sub = CrossAttention(d_model, n_heads, attn_dropout=attn_dropout)
    else:
        raise ValueError(f"unknown sublayer kind {kind!r} (expected one of "
                         f"{', '.join(all_symbols())})")
    return Residual(sub, d_model, dropout=dropout, norm=norm)
