"""Encoder–decoder configurations: :class:`Seq2SeqDims` (what every encoder–decoder
shares), :class:`Seq2SeqConfig` (plus one order per side), presets, sandwich orders and
exact parameter / FLOP counts. The modules are in :mod:`models.seq2seq.model`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.config import (
    check_dims,
    check_flags,
    check_half_width,
    config_from_dict,
)
from sublayer_search.models.errors import ConfigError, check, is_int
from sublayer_search.models.guidance.config import GuidanceConfig, guidance_from, saved_params
from sublayer_search.spaces.cost import half_width, sublayer_costs
from sublayer_search.spaces.generators.sandwich import sandwich
from sublayer_search.spaces.order import Order, counts

__all__ = [
    "SEQ2SEQ_PRESETS",
    "Seq2SeqConfig",
    "Seq2SeqDims",
    "sandwich_orders",
    "seq2seq_flops_per_token",
    "seq2seq_param_count",
    "seq2seq_preset",
    "with_sandwich",
]


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
    guidance: GuidanceConfig = dataclasses.field(default_factory=GuidanceConfig)
    """Cross-layer guidance (Crossformer) in the encoder and in the decoder, each a stack
    of its own; the layer above is the next sublayer of the same kind (IOT: the same
    kind's module of the next layer); cross-attention is left as is unless the guidance's
    ``cross_attention`` (then the decoder's ``c`` chain is guided too). See
    :mod:`models.guidance.config`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "guidance", guidance_from(self.guidance))
        for name in ("src_vocab_size", "tgt_vocab_size"):
            value = getattr(self, name)
            check(value is None or (is_int(value) and value >= 2), f"model.{name}", value,
                  "an integer >= 2 or null")
        check_dims(self)
        check_flags(self, ("shared_embeddings", "tie_output", "scale_embedding"))
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
        return config_from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["guidance"] = self.guidance.to_dict()
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
            object.__setattr__(self, name, Order.of(value, kind=kind))
        super().__post_init__()
        check_half_width(self.d_ff, self.encoder_order + self.decoder_order)
        for side in ("encoder", "decoder"):
            order = getattr(self, f"{side}_order")
            self.guidance.check_chains(counts(order), f"the {side} order {order!r}")


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
    if side == "encoder":
        return dataclasses.replace(cfg, encoder_order=order)
    return dataclasses.replace(cfg, decoder_order=order)


def _kind_counts(cfg: Seq2SeqConfig) -> dict[str, int]:
    """Sublayers of each kind (``s``, ``f``, ``c``, ``h``) over both orders."""
    enc, dec = counts(cfg.encoder_order), counts(cfg.decoder_order)
    return {k: enc.get(k, 0) + dec.get(k, 0) for k in "sfch"}


def seq2seq_param_count(cfg: Seq2SeqConfig) -> int:
    """Exact number of trainable parameters of ``OrderedSeq2Seq(cfg)``.

    Embeddings (source V_s·d, plus target V_t·d unless shared) + learned positions
    (context·d per side) + Σ exact sublayer costs of both orders + two final
    LayerNorms (pre-norm) + the head V_t·d unless tied − the matrices hard guidance
    shares in each order (FLOPs do not change with guidance).
    """
    src, tgt = cfg.require_vocab()
    d = cfg.d_model
    costs = sublayer_costs(d_model=d, d_ff=cfg.d_ff, exact=True)
    n = _kind_counts(cfg)
    embeddings = src * d + (0 if cfg.shared_embeddings else tgt * d)
    positions = 2 * cfg.context * d if cfg.positions == "learned" else 0
    sublayers = sum(n[k] * costs[k] for k in "sfch")
    for order in (cfg.encoder_order, cfg.decoder_order):
        sublayers -= saved_params(counts(order), cfg.guidance, d_model=d, d_ff=cfg.d_ff)
    final_norms = 2 * 2 * d if cfg.norm == "pre" else 0
    head = 0 if cfg.tie_output else tgt * d
    return embeddings + positions + sublayers + final_norms + head


def seq2seq_flops_per_token(cfg: Seq2SeqConfig) -> int:
    """Forward FLOPs per target token of one encoder–decoder pass (multiply-add = 2).

    The convention of :func:`models.accounting.flops_per_token`, with source and target
    of equal length: ``2 ·`` (matmul weights of both orders: 4d² per ``s``/``c``,
    2·d·d_ff per ``f``, d·d_ff per half-width ``h``, plus the V_t·d output layer) ``+ 2 · 2 · context · d`` per
    attention sublayer (``s`` on either side, ``c``) at the full context. An IOT model
    at inference runs one such path (training runs every path of its subset).
    """
    _, tgt = cfg.require_vocab()
    d, ctx = cfg.d_model, cfg.context
    n = _kind_counts(cfg)
    matmul = (n["s"] + n["c"]) * 4 * d * d + n["f"] * 2 * d * cfg.d_ff + tgt * d
    matmul += n["h"] * 2 * d * half_width(cfg.d_ff)
    return 2 * matmul + (n["s"] + n["c"]) * 2 * 2 * ctx * d
