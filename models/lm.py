"""Decoder-only language model whose sublayers follow an order string.

``OrderedLM(cfg)`` reads top to bottom: token embedding (plain or adaptive input,
optionally scaled by √d) + positions (learned, or a sinusoidal buffer without
parameters) → dropout → one residual sublayer per character of ``cfg.order`` →
final LayerNorm (pre-norm only: a post-norm stack already ends in a LayerNorm) →
output head (plain softmax or adaptive softmax).

What the output head shares with the input when ``tie_embeddings=True``:

* plain input, plain softmax: the head weight *is* the token embedding (V × d);
* plain input, adaptive softmax: the head's shortlist rows are embedding rows
  ``[0, cutoffs[0])``; its ``len(cutoffs)`` cluster rows and the tails are its own;
* adaptive input, plain softmax: logits of band i are ``(h Pᵢᵀ) Eᵢᵀ`` with the input's
  band embedding Eᵢ and projection Pᵢ, so there are no head parameters at all;
* adaptive input, adaptive softmax (the paper's baseline; fairseq's
  ``tie_adaptive_weights`` + ``tie_adaptive_proj``): shortlist rows = band-0 embedding,
  tail i's projection ``Linear(d, dᵢ₊₁)`` = input projection Pᵢ₊₁ (used transposed) and
  its output ``Linear(dᵢ₊₁, |band|)`` = band embedding Eᵢ₊₁; only the head's
  ``len(cutoffs)`` cluster rows (× d) are its own. The input's band-0 projection (d × d)
  is not shared.

With ``tie_embeddings=False`` the head is a ``Linear(d, V, bias=False)`` or an untouched
``nn.AdaptiveLogSoftmaxWithLoss``. :func:`models.accounting.param_count` counts exactly this.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.blocks import SelfAttention, build_sublayer, output_projections
from sublayer_search.models.config import ModelConfig, adaptive_bands
from sublayer_search.models.guidance.apply import WeightPair, guidance_penalty, guide_stack
from sublayer_search.models.kernels.fused_loss import linear_cross_entropy

__all__ = [
    "AdaptiveInput",
    "LMOutput",
    "OrderedLM",
    "capture_attention",
    "sinusoidal_table",
]


class LMOutput(NamedTuple):
    """``loss``: mean NLL in nats (None without targets); ``logits``: (B, T, V) or None
    (always None with the adaptive softmax: use :meth:`OrderedLM.log_probs`)."""

    loss: Tensor | None
    logits: Tensor | None


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """Fixed positions of Vaswani et al.: sin on even, cos on odd features, (length, d)."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(1e4) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq)[:, : d_model // 2]
    return table


class AdaptiveInput(nn.Module):
    """Adaptive input embeddings (Baevski & Auli 2019).

    Band i (token ids ``[start, stop)``) has an embedding ``Eᵢ`` of width
    ``dᵢ = d // factor**i`` and a projection ``Pᵢ`` (dᵢ × d, no bias) to the model width;
    band 0 has a d × d projection too, as in fairseq (the paper's 247M-parameter model).
    ``Pᵢ`` is stored as (dᵢ, d) and applied as ``e @ Pᵢ`` so that the adaptive softmax's
    tail projection ``Linear(d, dᵢ)`` can share it.
    """

    def __init__(self, bands: tuple[tuple[int, int, int], ...], d_model: int) -> None:
        super().__init__()
        self.bands = bands
        self.d_model = d_model
        self.embeddings = nn.ModuleList(nn.Embedding(stop - start, w) for start, stop, w in bands)
        self.projections = nn.ParameterList(
            nn.Parameter(torch.empty(w, d_model)) for _, _, w in bands
        )
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for i, (_, _, width) in enumerate(self.bands):
            nn.init.normal_(self.embedding(i).weight, std=width**-0.5)
            nn.init.xavier_uniform_(self.projections[i])

    def embedding(self, i: int) -> nn.Embedding:
        """Band ``i``'s embedding ``Eᵢ``."""
        return cast(nn.Embedding, self.embeddings[i])

    def forward(self, idx: Tensor) -> Tensor:
        """(…) token ids → (…, d). Every band is evaluated on every token and selected with
        ``where`` (no host sync; the extra cost is the small projections)."""
        out: Tensor | None = None
        for (start, stop, _), emb, proj in zip(
            self.bands, self.embeddings, self.projections, strict=True
        ):
            inside = (idx >= start) & (idx < stop)
            local = (idx - start).clamp(0, stop - start - 1)
            band = emb(local) @ proj  # (…, d)
            out = torch.where(inside[..., None], band, 0.0 if out is None else out)
        assert out is not None
        return out

    def logits(self, h: Tensor) -> Tensor:
        """Tied full-softmax logits (…, V): band i is ``(h Pᵢᵀ) Eᵢᵀ``."""
        return torch.cat(
            [
                (h @ proj.t()) @ self.embedding(i).weight.t()
                for i, proj in enumerate(self.projections)
            ],
            dim=-1,
        )


class _TiedAdaptiveHead(nn.Module):
    """Adaptive-softmax head whose shortlist rows are an embedding's first rows."""

    def __init__(self, embedding: Tensor, shortlist: int, n_clusters: int) -> None:
        super().__init__()
        self.embedding = embedding  # shared, (≥ shortlist, d)
        self.shortlist = shortlist
        self.cluster = nn.Parameter(torch.empty(n_clusters, embedding.shape[1]))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.cluster, std=0.02)

    def forward(self, h: Tensor) -> Tensor:
        weight = torch.cat([self.embedding[: self.shortlist], self.cluster], dim=0)
        return F.linear(h, weight)


class OrderedLM(nn.Module):
    """Causal LM with one residual sublayer per character of ``cfg.order``."""

    pos_table: Tensor  # buffer, with sinusoidal positions

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        vocab = cfg.require_vocab()
        d = cfg.d_model
        self.cfg = cfg
        self.embed: nn.Embedding | AdaptiveInput
        if cfg.adaptive_input:
            self.embed = AdaptiveInput(adaptive_bands(cfg), d)
        else:
            self.embed = nn.Embedding(vocab, d)
        self.embed_scale = math.sqrt(d) if cfg.scale_embedding else 1.0
        self.pos: nn.Embedding | None = None
        if cfg.positions == "learned":
            self.pos = nn.Embedding(cfg.context, d)
        else:
            self.register_buffer("pos_table", sinusoidal_table(cfg.context, d), persistent=False)
        self.drop = nn.Dropout(cfg.dropout)
        self.layers = nn.ModuleList(
            build_sublayer(
                kind,
                d_model=d,
                n_heads=cfg.n_heads,
                d_ff=cfg.d_ff,
                dropout=cfg.dropout,
                attn_dropout=cfg.attn_dropout,
                act_dropout=cfg.act_dropout,
                activation=cfg.activation,
                norm=cfg.norm,
                split_qkv=cfg.guidance.touches_attention,
                settings=cfg.sublayers,
            )
            for kind in cfg.order
        )
        self._balanced = tuple(m for m in self.layers.modules() if hasattr(m, "balance_loss"))
        """The sublayers that keep a load-balancing loss (experts), found once."""
        # cross-layer guidance: hard shares matrices now, soft keeps the pairs to pull
        self.guided: list[WeightPair] = guide_stack(self.layers, cfg.order, cfg.guidance)
        self.final_norm: nn.Module = nn.LayerNorm(d) if cfg.norm == "pre" else nn.Identity()
        self.head: nn.Linear | None = None
        self.fused_loss = True
        """Training loss without (B, T, V) logits (see :meth:`forward`); a runtime switch."""
        self.adaptive_softmax: nn.AdaptiveLogSoftmaxWithLoss | None = None
        if cfg.adaptive_softmax:
            self.adaptive_softmax = nn.AdaptiveLogSoftmaxWithLoss(
                d, vocab, list(cfg.cutoffs), div_value=cfg.adaptive_factor
            )
        elif not (cfg.tie_embeddings and cfg.adaptive_input):
            self.head = nn.Linear(d, vocab, bias=False)
        self._init_weights()
        if cfg.tie_embeddings:
            self._tie()

    @property
    def order(self) -> str:
        return self.cfg.order

    def guidance_penalty(self) -> Tensor | None:
        """Soft guidance: ``Σ N(A(t) − sg(B(t+1)))`` (unscaled; ``N`` each pair's norm, by default
        ``‖·‖²_F``); None without soft pairs."""
        return guidance_penalty(self.guided)

    def balance_loss(self) -> Tensor | None:
        """``model.sublayers.balance ·`` the mean load-balancing loss of the last forward's
        mixture-of-experts sublayers (``e``); None without them."""
        losses: list[Tensor] = [loss for m in self._balanced
                                if isinstance(loss := getattr(m, "balance_loss", None), Tensor)]
        if not losses:
            return None
        return self.cfg.sublayers.balance * torch.stack(losses).mean()

    def _init_weights(self) -> None:
        std = 0.02
        residual_std = std / math.sqrt(len(self.cfg.order))  # GPT-2: 0.02 / √(2·layers)
        for module in self.layers.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, std=std)
                if module.bias is not None:  # a router has none
                    nn.init.zeros_(module.bias)
        for layer in self.layers:
            for out in output_projections(layer):
                nn.init.normal_(out.weight, std=residual_std)
        for module in self.layers.modules():  # a hybrid kind's own (a recurrence's decays)
            own = getattr(module, "init_own", None)
            if callable(own):
                own()
        if isinstance(self.embed, nn.Embedding):
            emb_std = self.cfg.d_model**-0.5 if self.cfg.scale_embedding else std
            nn.init.normal_(self.embed.weight, std=emb_std)
        if self.pos is not None:
            nn.init.normal_(self.pos.weight, std=std)
        if self.head is not None:
            nn.init.normal_(self.head.weight, std=std)
        if self.adaptive_softmax is not None:
            for module in self.adaptive_softmax.modules():
                if isinstance(module, nn.Linear):
                    nn.init.normal_(module.weight, std=std)

    def _tie(self) -> None:
        asm = self.adaptive_softmax
        if asm is None:
            if isinstance(self.embed, nn.Embedding):
                assert self.head is not None
                self.head.weight = self.embed.weight
            return  # tied adaptive input + full softmax: AdaptiveInput.logits, no head
        # torch types asm.head as a Linear; any module computing the head's logits will do
        if isinstance(self.embed, nn.Embedding):
            asm.head = _TiedAdaptiveHead(  # type: ignore[assignment]  # see above
                self.embed.weight, asm.shortlist_size, asm.n_clusters)
            return
        embed = self.embed
        asm.head = _TiedAdaptiveHead(  # type: ignore[assignment]  # see above
            embed.embedding(0).weight, asm.shortlist_size, asm.n_clusters)
        for i, tail in enumerate(asm.tail):
            tail = cast(nn.Sequential, tail)  # Linear(d, d_{i+1}), Linear(d_{i+1}, |band|)
            tail[0].weight = embed.projections[i + 1]  # (d_{i+1}, d): Linear(d, d_{i+1})
            tail[1].weight = embed.embedding(i + 1).weight  # (|band|, d_{i+1})

    def hidden(self, idx: Tensor) -> Tensor:
        """Final hidden states (B, T, d) of token ids (B, T), T ≤ context."""
        return self.hidden_along(idx, self.layers)

    def hidden_along(self, idx: Tensor, layers: Iterable[nn.Module]) -> Tensor:
        """:meth:`hidden` through ``layers`` (a supernet passes one order's path)."""
        t = idx.shape[1]
        if t > self.cfg.context:
            raise ValueError(f"sequence length {t} exceeds the context ({self.cfg.context})")
        x = self.embed(idx)  # (B, T, d)
        if self.embed_scale != 1.0:
            x = x * self.embed_scale
        pos = self.pos.weight[:t] if self.pos is not None else self.pos_table[:t]
        x = self.drop(x + pos)
        for layer in layers:
            x = layer(x)
        return self.final_norm(x)

    def _logits(self, h: Tensor) -> Tensor:
        if self.head is not None:
            return self.head(h)
        assert isinstance(self.embed, AdaptiveInput)
        return self.embed.logits(h)

    def _fused_head(self, h: Tensor) -> bool:
        """Train with :func:`~models.kernels.fused_loss.linear_cross_entropy` (no (B, T, V) logits):
        a plain linear head, gradients wanted, no autocast and no ``torch.compile`` trace
        (those keep the standard path, which the compiler fuses itself)."""
        return (self.fused_loss and self.head is not None and torch.is_grad_enabled()
                and (h.requires_grad or self.head.weight.requires_grad)
                and not torch.is_autocast_enabled(h.device.type)
                and not torch.compiler.is_compiling())

    def forward(self, idx: Tensor, targets: Tensor | None = None) -> LMOutput:
        """``idx``/``targets`` (B, T) long → loss (mean NLL, nats) and logits (B, T, V).

        When training (gradients enabled) with a full-softmax head the loss comes from
        the chunked :func:`~models.kernels.fused_loss.linear_cross_entropy` and ``logits`` is
        None; call the model without targets for logits. ``fused_loss = False`` turns
        this off."""
        h = self.hidden(idx)
        if self.adaptive_softmax is not None:
            if targets is None:
                return LMOutput(None, None)
            # float32, outside autocast: torch's adaptive softmax mixes dtypes under CPU
            # autocast (float32 output buffer, bfloat16 cluster log-probabilities)
            with torch.autocast(h.device.type, enabled=False):
                out = self.adaptive_softmax(h.reshape(-1, h.shape[-1]).float(),
                                            targets.reshape(-1))
            return LMOutput(out.loss, None)
        if targets is not None and self._fused_head(h):
            assert self.head is not None
            d = h.shape[-1]
            return LMOutput(linear_cross_entropy(h.reshape(-1, d), self.head.weight,
                                                 targets.reshape(-1)), None)
        logits = self._logits(h)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return LMOutput(loss, logits)

    def log_probs(self, idx: Tensor) -> Tensor:
        """Log-probabilities (B, T, V) of the next token at every position."""
        h = self.hidden(idx)
        if self.adaptive_softmax is not None:
            b, t, d = h.shape
            return self.adaptive_softmax.log_prob(h.reshape(-1, d)).view(b, t, -1)
        return F.log_softmax(self._logits(h).float(), dim=-1)


@contextmanager
def capture_attention(model: nn.Module) -> Iterator[list[Tensor]]:
    """Record self-attention probabilities while the context is open.

    Yields a list that every forward pass extends with one detached (B, H, T, T) tensor
    per self-attention sublayer, in order. Inside, attention is computed explicitly
    (softmax(QKᵀ/√dh + causal mask)); outside, SDPA runs and nothing is stored.
    """
    modules = [m for m in model.modules() if isinstance(m, SelfAttention)]
    previous = [m.capture for m in modules]
    probs: list[Tensor] = []
    for m in modules:
        m.capture = probs
    try:
        yield probs
    finally:
        for m, old in zip(modules, previous, strict=True):
            m.capture = old
