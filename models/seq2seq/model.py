"""Encoder–decoder transformer whose encoder and decoder each follow an order string.

``OrderedSeq2Seq(cfg)`` reads top to bottom: source embedding (× √d when
``scale_embedding``) + positions → dropout → one residual sublayer per character of
``cfg.encoder_order`` (``s`` non-causal self-attention with the source padding mask,
``f`` feedforward) → final LayerNorm (pre-norm) = the *memory*; target embedding +
positions → dropout → one residual sublayer per character of ``cfg.decoder_order``
(``s`` causal self-attention with the target padding mask, ``c`` cross-attention over
the memory with the source padding mask, ``f``) → final LayerNorm → output head
(tied to the target embedding when ``tie_output``).

Any decoder order is accepted (``cfs``, ``ffsscc``, …): the source reaches the decoder
only through ``c`` sublayers. With ``shared_embeddings`` one embedding serves source and
target (a joint BPE vocabulary: ``src_vocab_size == tgt_vocab_size``). Learned
positions are separate tables for the two sides. Decoding recomputes the decoder over
the whole prefix at every step (no key/value cache: orders such as ``cfs`` would need a
cache per sublayer kind, and the models here are small).

Press et al.'s translation sandwich groups the decoder's ``s`` and ``c`` into one unit:
:func:`sandwich_orders` / :func:`with_sandwich` build it with :func:`spaces.generators.sandwich`.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.blocks import Residual, build_sublayer, output_projection
from sublayer_search.models.guidance.apply import WeightPair, guidance_penalty, guide_stack
from sublayer_search.models.kernels.fused_loss import fusable, linear_cross_entropy
from sublayer_search.models.lm import sinusoidal_table
from sublayer_search.models.seq2seq.config import (
    SEQ2SEQ_PRESETS,
    Seq2SeqConfig,
    Seq2SeqDims,
    sandwich_orders,
    seq2seq_flops_per_token,
    seq2seq_param_count,
    seq2seq_preset,
    with_sandwich,
)

__all__ = [
    "SEQ2SEQ_PRESETS",
    "EncoderOut",
    "OrderedSeq2Seq",
    "Seq2SeqConfig",
    "Seq2SeqDims",
    "Seq2SeqOutput",
    "sandwich_orders",
    "seq2seq_flops_per_token",
    "seq2seq_param_count",
    "seq2seq_preset",
    "with_sandwich",
]


class Seq2SeqOutput(NamedTuple):
    """``loss``: mean over non-pad target tokens (label-smoothed when asked; None without
    targets); ``logits``: (B, T, V_t), None when training with the fused head
    (:attr:`Seq2SeqBase.fused_loss`)."""

    loss: Tensor | None
    logits: Tensor | None


class EncoderOut(NamedTuple):
    """Encoder result handed to the decoder: ``memory`` (B, S, d), ``padding_mask`` (B, S)
    True at source padding, ``route`` (B,) the decoder order index per sentence (IOT only)."""

    memory: Tensor
    padding_mask: Tensor
    route: Tensor | None = None

    def select(self, index: Tensor) -> EncoderOut:
        """Rows ``index`` (e.g. each sentence repeated per beam)."""
        route = None if self.route is None else self.route.index_select(0, index)
        return EncoderOut(self.memory.index_select(0, index),
                          self.padding_mask.index_select(0, index), route)


class _Embedder(nn.Module):
    """Token embedding (possibly shared) × scale + positions, then dropout."""

    pos_table: Tensor  # buffer, with sinusoidal positions

    def __init__(self, embed: nn.Embedding, cfg: Seq2SeqDims) -> None:
        super().__init__()
        self.embed = embed
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embedding else 1.0
        self.context = cfg.context
        self.pos: nn.Embedding | None = None
        if cfg.positions == "learned":
            self.pos = nn.Embedding(cfg.context, cfg.d_model)
        else:
            self.register_buffer("pos_table", sinusoidal_table(cfg.context, cfg.d_model),
                                 persistent=False)
        self.drop = nn.Dropout(cfg.dropout)

    def tokens(self, idx: Tensor) -> Tensor:
        """Scaled token embeddings (B, T, d), no positions."""
        return self.embed(idx) * self.scale

    def forward(self, idx: Tensor) -> Tensor:
        t = idx.shape[1]
        if t > self.context:
            raise ValueError(f"sequence length {t} exceeds the context ({self.context})")
        pos = self.pos.weight[:t] if self.pos is not None else self.pos_table[:t]
        return self.drop(self.tokens(idx) + pos)


def make_sublayer(kind: str, cfg: Seq2SeqDims, *, causal: bool) -> Residual:
    return build_sublayer(kind, d_model=cfg.d_model, n_heads=cfg.n_heads, d_ff=cfg.d_ff,
                          dropout=cfg.dropout, attn_dropout=cfg.attn_dropout,
                          act_dropout=cfg.act_dropout, activation=cfg.activation,
                          norm=cfg.norm, causal=causal,
                          split_qkv=cfg.guidance.touches_attention)


def apply_sublayer(layer: nn.Module, kind: str, x: Tensor, *, pad: Tensor | None = None,
                   memory: Tensor | None = None, memory_pad: Tensor | None = None) -> Tensor:
    """Run one residual sublayer with the arguments its kind takes."""
    if kind == "s":
        return layer(x, pad)
    if kind == "c":
        return layer(x, memory, memory_pad)
    return layer(x)


class Seq2SeqBase(nn.Module):
    """Embeddings, final norms, head and initialisation shared by the seq2seq models."""

    pad_id = 0
    cfg: Seq2SeqDims  # set by the subclass

    def __init__(self, cfg: Seq2SeqDims) -> None:
        super().__init__()
        src_vocab, tgt_vocab = cfg.require_vocab()
        d = cfg.d_model
        src_embed = nn.Embedding(src_vocab, d)
        tgt_embed = src_embed if cfg.shared_embeddings else nn.Embedding(tgt_vocab, d)
        self.src_embed = _Embedder(src_embed, cfg)
        self.tgt_embed = _Embedder(tgt_embed, cfg)
        pre = cfg.norm == "pre"
        self.encoder_norm: nn.Module = nn.LayerNorm(d) if pre else nn.Identity()
        self.decoder_norm: nn.Module = nn.LayerNorm(d) if pre else nn.Identity()
        self.head = nn.Linear(d, tgt_vocab, bias=False)
        self.fused_loss = True
        """Training losses without (B, T, V) logits (:meth:`head_nll`); a runtime switch."""
        self.guided: list[WeightPair] = []
        """Soft cross-layer guidance pairs (set by the subclass; hard shares weights)."""

    def guidance_penalty(self) -> Tensor | None:
        """Soft guidance: ``Σ N(A(t) − sg(B(t+1)))`` over both stacks (unscaled; ``N`` each
        pair's norm, by default ``‖·‖²_F``)."""
        return guidance_penalty(self.guided)

    def _init_weights(self, depth: int) -> None:
        cfg = self.cfg
        std = 0.02
        residual_std = std / math.sqrt(max(depth, 1))
        for module in self.modules():
            if isinstance(module, Residual):
                for sub in module.sublayer.modules():
                    if isinstance(sub, nn.Linear):
                        nn.init.normal_(sub.weight, std=std)
                        nn.init.zeros_(sub.bias)
                nn.init.normal_(output_projection(module).weight, std=residual_std)
        emb_std = cfg.d_model**-0.5 if cfg.scale_embedding else std
        for embedder in (self.src_embed, self.tgt_embed):
            nn.init.normal_(embedder.embed.weight, std=emb_std)
            if embedder.pos is not None:
                nn.init.normal_(embedder.pos.weight, std=std)
        nn.init.normal_(self.head.weight, std=emb_std)
        if cfg.tie_output:
            self.head.weight = self.tgt_embed.embed.weight

    def loss(self, logits: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Mean cross-entropy over non-pad target tokens."""
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt_out.reshape(-1),
                               ignore_index=self.pad_id, label_smoothing=label_smoothing)

    def token_nll(self, logits: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0) -> Tensor:
        """Per-token loss (B, T), zero at padding."""
        b, t, v = logits.shape
        return F.cross_entropy(logits.reshape(-1, v).float(), tgt_out.reshape(-1),
                               ignore_index=self.pad_id, label_smoothing=label_smoothing,
                               reduction="none").view(b, t)

    def fused(self, h: Tensor) -> bool:
        """Whether a training loss of decoder states ``h`` takes the fused head."""
        return self.fused_loss and fusable(h, self.head.weight)

    def head_nll(self, h: Tensor, tgt_out: Tensor, label_smoothing: float = 0.0,
                 weights: Tensor | None = None) -> Tensor:
        """Loss of decoder states ``h`` (B, T, d) through the head, fused when training
        (:func:`~models.kernels.fused_loss.linear_cross_entropy`, no logits). Without ``weights``:
        :meth:`loss`; with sentence weights (B,): ``Σ_b weights_b · Σ_t nll_bt``."""
        if not self.fused(h):
            logits = self.head(h)
            if weights is None:
                return self.loss(logits, tgt_out, label_smoothing)
            return (weights * self.token_nll(logits, tgt_out, label_smoothing).sum(1)).sum()
        rows = None if weights is None else weights[:, None].expand(tgt_out.shape).reshape(-1)
        return linear_cross_entropy(h.reshape(-1, h.shape[-1]), self.head.weight,
                                    tgt_out.reshape(-1), label_smoothing=label_smoothing,
                                    ignore_index=self.pad_id, row_weights=rows)

    def log_probs_last(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Log-probabilities (B, V) of the next token after the prefix ``tgt_in`` (B, T)."""
        logits = self.decode(tgt_in, enc)[:, -1]
        return F.log_softmax(logits.float(), dim=-1)

    def decode(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:  # pragma: no cover
        raise NotImplementedError


class OrderedSeq2Seq(Seq2SeqBase):
    """Encoder–decoder with one residual sublayer per character of each order."""

    cfg: Seq2SeqConfig

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__(cfg)
        self.cfg = cfg
        self.encoder = nn.ModuleList(make_sublayer(k, cfg, causal=False)
                                     for k in cfg.encoder_order)
        self.decoder = nn.ModuleList(make_sublayer(k, cfg, causal=True)
                                     for k in cfg.decoder_order)
        self.guided = (guide_stack(self.encoder, cfg.encoder_order, cfg.guidance)
                       + guide_stack(self.decoder, cfg.decoder_order, cfg.guidance))
        self._init_weights(len(cfg.encoder_order) + len(cfg.decoder_order))

    def encode(self, src: Tensor) -> EncoderOut:
        """Source ids (B, S) → memory (B, S, d) and the source padding mask."""
        pad = src.eq(self.pad_id)
        x = self.src_embed(src)
        for kind, layer in zip(self.cfg.encoder_order, self.encoder, strict=True):
            x = apply_sublayer(layer, kind, x, pad=pad)
        return EncoderOut(self.encoder_norm(x), pad)

    def decode(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Target prefix ids (B, T) → logits (B, T, V_t)."""
        return self.head(self.decode_hidden(tgt_in, enc))

    def decode_hidden(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Target prefix ids (B, T) → final decoder states (B, T, d), before the head."""
        pad = tgt_in.eq(self.pad_id)
        x = self.tgt_embed(tgt_in)
        for kind, layer in zip(self.cfg.decoder_order, self.decoder, strict=True):
            x = apply_sublayer(layer, kind, x, pad=pad, memory=enc.memory,
                               memory_pad=enc.padding_mask)
        return self.decoder_norm(x)

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor | None = None, *,
                label_smoothing: float = 0.0) -> Seq2SeqOutput:
        h = self.decode_hidden(tgt_in, self.encode(src))
        if tgt_out is not None and self.fused(h):
            return Seq2SeqOutput(self.head_nll(h, tgt_out, label_smoothing), None)
        logits = self.head(h)
        loss = None if tgt_out is None else self.loss(logits, tgt_out, label_smoothing)
        return Seq2SeqOutput(loss, logits)
