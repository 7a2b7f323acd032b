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
:func:`sandwich_orders` / :func:`with_sandwich` build it with :func:`spaces.sandwich`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.blocks import FeedForward, Residual, build_sublayer
from sublayer_search.models.config import ACTIVATIONS, NORMS, POSITIONS
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import sinusoidal_table
from sublayer_search.spaces.cost import unit_costs
from sublayer_search.spaces.order import counts, parse_order
from sublayer_search.spaces.sandwich import sandwich

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


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, kw_only=True)
class Seq2SeqDims:
    """Widths, vocabularies and regularisation shared by every encoder–decoder config.

    ``context`` is the longest sequence on either side (positions table size).
    ``*_vocab_size=None`` means "take it from the corpus" (:meth:`with_vocab`).
    """

    src_vocab_size: int | None = None
    tgt_vocab_size: int | None = None
    shared_embeddings: bool = True
    tie_output: bool = True
    d_model: int
    n_heads: int
    d_ff: int
    context: int = 256
    dropout: float = 0.1
    attn_dropout: float = 0.0
    act_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "pre"
    positions: str = "sinusoidal"
    scale_embedding: bool = True

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size"):
            value = getattr(self, name)
            if value is not None and not (_is_int(value) and value >= 2):
                raise ConfigError(f"model.{name}", value, "an integer >= 2 or null")
        for name in ("d_model", "n_heads", "d_ff", "context"):
            value = getattr(self, name)
            if not (_is_int(value) and value > 0):
                raise ConfigError(f"model.{name}", value, "a positive integer")
        if self.d_model % self.n_heads:
            raise ConfigError("model.d_model", self.d_model,
                              f"a multiple of n_heads ({self.n_heads})")
        for name in ("dropout", "attn_dropout", "act_dropout"):
            value = getattr(self, name)
            if not (_is_number(value) and 0.0 <= value < 1.0):
                raise ConfigError(f"model.{name}", value, "a number in [0, 1)")
            object.__setattr__(self, name, float(value))
        for name, allowed in (("activation", ACTIVATIONS), ("norm", NORMS),
                              ("positions", POSITIONS)):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"model.{name}", value, "one of " + ", ".join(allowed))
        for name in ("shared_embeddings", "tie_output", "scale_embedding"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"model.{name}", getattr(self, name), "true or false")
        src, tgt = self.src_vocab_size, self.tgt_vocab_size
        if self.shared_embeddings and src is not None and tgt is not None and src != tgt:
            raise ConfigError("model.tgt_vocab_size", tgt,
                              f"the source vocabulary size ({src}) when shared_embeddings "
                              "is true (a joint vocabulary)")

    # -- construction helpers --------------------------------------------------------------

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        """Build from a plain mapping; unknown or missing keys raise ConfigError."""
        if not isinstance(data, Mapping):
            raise ConfigError("model", data, "a mapping of model settings")
        accepted = cls.field_names()
        for key, value in data.items():
            if key not in accepted:
                raise ConfigError(f"model.{key}", value,
                                  "one of the model settings: " + ", ".join(accepted))
        for f in dataclasses.fields(cls):
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING \
                    and f.name not in data:
                raise ConfigError(f"model.{f.name}", None, "a value (this setting is required)")
        return cls(**dict(data))

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}

    def with_vocab(self, src_vocab_size: int, tgt_vocab_size: int | None = None) -> Any:
        """A copy with both vocabulary sizes set (``tgt`` defaults to ``src``)."""
        tgt = src_vocab_size if tgt_vocab_size is None else tgt_vocab_size
        return dataclasses.replace(self, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt)

    def require_vocab(self) -> tuple[int, int]:
        if self.src_vocab_size is None or self.tgt_vocab_size is None:
            raise ConfigError("model.src_vocab_size", self.src_vocab_size,
                              "an integer >= 2 (set it from the corpus: with_vocab(src, tgt))")
        return self.src_vocab_size, self.tgt_vocab_size


@dataclass(frozen=True, kw_only=True)
class Seq2SeqConfig(Seq2SeqDims):
    """An encoder order over ``s``/``f`` and a decoder order over ``s``/``c``/``f``.

    Both are canonicalised with :func:`spaces.order.parse_order` (kinds "encoder" and
    "decoder"), so ``"(sf)^6"`` and ``"interleaved(2)"`` work; a ``c`` in the encoder
    raises :class:`~spaces.errors.OrderError` (a ValueError).
    """

    encoder_order: str
    decoder_order: str

    def __post_init__(self) -> None:
        for name, kind in (("encoder_order", "encoder"), ("decoder_order", "decoder")):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ConfigError(f"model.{name}", value, f"an order string for the {kind}")
            object.__setattr__(self, name, parse_order(value, kind=kind))
        super().__post_init__()


SEQ2SEQ_PRESETS: dict[str, Seq2SeqConfig] = {
    # Used by tests: two layers each side, milliseconds on a CPU.
    "debug": Seq2SeqConfig(encoder_order="sfsf", decoder_order="scfscf", d_model=32,
                           n_heads=2, d_ff=64, context=64),
    "tiny": Seq2SeqConfig(encoder_order="(sf)^3", decoder_order="(scf)^3", d_model=64,
                          n_heads=4, d_ff=256, context=128),
    # fairseq transformer_iwslt_de_en (the IOT paper's IWSLT14 model).
    "iwslt14": Seq2SeqConfig(encoder_order="(sf)^6", decoder_order="(scf)^6", d_model=512,
                             n_heads=4, d_ff=1024, context=1024, dropout=0.3),
    # Vaswani et al. big / Press et al.'s WMT14 En-De model.
    "wmt14-big": Seq2SeqConfig(encoder_order="(sf)^6", decoder_order="(scf)^6", d_model=1024,
                               n_heads=16, d_ff=4096, context=1024, dropout=0.3),
}


def seq2seq_preset(name: str, **overrides: Any) -> Seq2SeqConfig:
    """A preset with some settings replaced, e.g. ``seq2seq_preset("debug", decoder_order="cfs")``."""
    if name not in SEQ2SEQ_PRESETS:
        raise ConfigError("model.preset", name, "one of " + ", ".join(SEQ2SEQ_PRESETS))
    return Seq2SeqConfig.from_dict({**SEQ2SEQ_PRESETS[name].to_dict(), **overrides})


def sandwich_orders(n: int, *, side: str = "decoder") -> list[str]:
    """All sandwich orders with ``n`` layers for one side (k = 0 … n−1).

    The decoder groups ``s`` and ``c`` into one unit: ``(sc)^k (scf)^(n−k) f^k``.
    """
    if side not in ("encoder", "decoder"):
        raise ConfigError("side", side, "one of encoder, decoder")
    return sandwich(n, kind=side)


def with_sandwich(cfg: Seq2SeqConfig, *, n: int, k: int, side: str = "decoder") -> Seq2SeqConfig:
    """``cfg`` with one side replaced by sandwich^n_k (the other side unchanged)."""
    if side not in ("encoder", "decoder"):
        raise ConfigError("side", side, "one of encoder, decoder")
    order = sandwich(n, [k], kind=side)[0]
    return dataclasses.replace(cfg, **{f"{side}_order": order})


def seq2seq_param_count(cfg: Seq2SeqConfig) -> int:
    """Exact number of trainable parameters of ``OrderedSeq2Seq(cfg)``.

    Embeddings (source V_s·d, plus target V_t·d unless shared) + learned positions
    (context·d per side) + Σ exact sublayer costs of both orders + two final
    LayerNorms (pre-norm) + the head V_t·d unless tied.
    """
    src, tgt = cfg.require_vocab()
    d = cfg.d_model
    costs = unit_costs(d_model=d, d_ff=cfg.d_ff, exact=True)
    n = {k: counts(cfg.encoder_order)[k] + counts(cfg.decoder_order)[k] for k in "sfc"}
    embeddings = src * d + (0 if cfg.shared_embeddings else tgt * d)
    positions = 2 * cfg.context * d if cfg.positions == "learned" else 0
    sublayers = sum(n[k] * costs[k] for k in "sfc")
    final_norms = 2 * 2 * d if cfg.norm == "pre" else 0
    head = 0 if cfg.tie_output else tgt * d
    return embeddings + positions + sublayers + final_norms + head


def seq2seq_flops_per_token(cfg: Seq2SeqConfig) -> int:
    """Forward FLOPs per target token of one encoder–decoder pass (multiply-add = 2).

    The convention of :func:`models.accounting.flops_per_token`, with source and target
    of equal length: ``2 ·`` (matmul weights of both orders: 4d² per ``s``/``c``,
    2·d·d_ff per ``f``, plus the V_t·d output layer) ``+ 2 · 2 · context · d`` per
    attention sublayer (``s`` on either side, ``c``) at the full context. An IOT model
    at inference runs one such path (training runs every path of its subset).
    """
    _, tgt = cfg.require_vocab()
    d, ctx = cfg.d_model, cfg.context
    n = {k: counts(cfg.encoder_order)[k] + counts(cfg.decoder_order)[k] for k in "sfc"}
    matmul = (n["s"] + n["c"]) * 4 * d * d + n["f"] * 2 * d * cfg.d_ff + tgt * d
    return 2 * matmul + (n["s"] + n["c"]) * 2 * 2 * ctx * d


class Seq2SeqOutput(NamedTuple):
    """``loss``: mean over non-pad target tokens (label-smoothed when asked; None without
    targets); ``logits``: (B, T, V_t)."""

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
                          norm=cfg.norm, causal=causal)


def apply_sublayer(layer: Residual, kind: str, x: Tensor, *, pad: Tensor | None = None,
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
                sub = module.sublayer
                out = sub.fc2 if isinstance(sub, FeedForward) else sub.out
                nn.init.normal_(out.weight, std=residual_std)
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

    def log_probs_last(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Log-probabilities (B, V) of the next token after the prefix ``tgt_in`` (B, T)."""
        logits = self.decode(tgt_in, enc)[:, -1]
        return F.log_softmax(logits.float(), dim=-1)

    def decode(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:  # pragma: no cover
        raise NotImplementedError


class OrderedSeq2Seq(Seq2SeqBase):
    """Encoder–decoder with one residual sublayer per character of each order."""

    def __init__(self, cfg: Seq2SeqConfig) -> None:
        super().__init__(cfg)
        self.cfg = cfg
        self.encoder = nn.ModuleList(make_sublayer(k, cfg, causal=False)
                                     for k in cfg.encoder_order)
        self.decoder = nn.ModuleList(make_sublayer(k, cfg, causal=True)
                                     for k in cfg.decoder_order)
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
        pad = tgt_in.eq(self.pad_id)
        x = self.tgt_embed(tgt_in)
        for kind, layer in zip(self.cfg.decoder_order, self.decoder, strict=True):
            x = apply_sublayer(layer, kind, x, pad=pad, memory=enc.memory,
                               memory_pad=enc.padding_mask)
        return self.head(self.decoder_norm(x))

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor | None = None, *,
                label_smoothing: float = 0.0) -> Seq2SeqOutput:
        logits = self.decode(tgt_in, self.encode(src))
        loss = None if tgt_out is None else self.loss(logits, tgt_out, label_smoothing)
        return Seq2SeqOutput(loss, logits)
