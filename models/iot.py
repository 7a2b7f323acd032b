"""IOT: instance-wise layer reordering (Zhu et al., ICLR 2021) over one set of weights.

``IOTSeq2Seq(cfg)`` holds, per encoder block, one ``s`` and one ``f`` residual sublayer
and, per decoder block, one ``s``, one ``c`` and one ``f``; a block *order* (a code of
:mod:`spaces.iot`, e.g. decoder 4 = ``csf``) says in which order a block applies them.
Every order of the subset runs the same modules, so the M encoders and N decoders share
all weights. The only extra parameters are the predictors:

* encoder (only when M > 1): ``Linear(d, M, bias=False)`` over the mean (non-pad)
  scaled source token embedding;
* decoder (only when N > 1): ``Linear(d, N, bias=False)`` over the mean (non-pad)
  encoder output.

So ``iot_param_count(cfg) == seq2seq_param_count(cfg.base_config()) + N·d·[N>1] +
M·d·[M>1]``. (With N = 1 a predictor would be a constant softmax over one class, so
none is built: IOT with N = M = 1 *is* the plain transformer.)

Training (``model.train()``): Gumbel-softmax weights ``γ = softmax((log π + g)/τ)`` per
sentence (τ from :func:`temperature`, an exponential anneal from ``tau_start`` to
``tau_end`` over ``anneal_steps``); every path (m, n) is run and

    L = Σ_m Σ_n Σ_x γ_m(x) λ_n(x) · Σ_t ℓ_t(x) / #tokens            (L_C)
        + c1 · L_D,  L_D = KL(u ‖ clamp(E_x[π_x], floor))           (exploration)
        + c2 · L_S,  L_S = −E_x[KL(u ‖ clamp(π_x, floor))]          (exploitation)

with u uniform, ``floor`` = 0.05, c1 = 0.1, c2 = 0.01 (the paper's values; all
settable); L_D and L_S are summed over the predictors present, the decoder's averaged
over the M encoder paths. ``logits`` of the predictors are the logs of π, so γ uses them
directly. Inference (``model.eval()``): the argmax order of each predictor, per
sentence; :meth:`IOTSeq2Seq.encode` can force an order instead (for the paper's Fig. 2
matrix of BLEU per routed split × order).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq import (
    EncoderOut,
    Seq2SeqBase,
    Seq2SeqConfig,
    Seq2SeqDims,
    apply_sublayer,
    make_sublayer,
    seq2seq_param_count,
)
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.iot import DECODER_BLOCKS, ENCODER_BLOCKS, iot_subsets, validate_iot

__all__ = [
    "IOT_MODEL_MODES",
    "IOTConfig",
    "IOTOutput",
    "IOTSeq2Seq",
    "exploitation_loss",
    "exploration_loss",
    "gumbel_weights",
    "iot_param_count",
    "temperature",
]

IOT_MODEL_MODES = ("paper", "diverse")
"""Subset modes that give one subset (others: pass the codes of one subset)."""
_STACKS = {"decoder": DECODER_BLOCKS, "encoder": ENCODER_BLOCKS}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True, kw_only=True)
class IOTConfig(Seq2SeqDims):
    """An IOT model: layer counts, order subsets and the routing/training settings.

    Subsets: give ``decoder_codes`` (e.g. ``(1, 2, 4, 6)``) or ``decoder_size`` with
    ``decoder_mode`` "paper" or "diverse" (see :func:`spaces.iot.iot_subsets`); the same
    for the encoder (default: one order, ``sf``). After validation the ``*_codes`` are
    the sorted resolved codes and ``*_size`` their number.
    """

    encoder_layers: int
    decoder_layers: int
    decoder_codes: tuple[int, ...] | None = None
    decoder_size: int = 4
    decoder_mode: str = "paper"
    encoder_codes: tuple[int, ...] | None = None
    encoder_size: int = 1
    encoder_mode: str = "paper"
    tau_start: float = 1.0
    tau_end: float = 0.1
    anneal_steps: int | None = None
    c1: float = 0.1
    c2: float = 0.01
    floor: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("encoder_layers", "decoder_layers"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
                raise ConfigError(f"model.{name}", value, "a positive integer")
        for stack in ("decoder", "encoder"):
            codes = self._resolve(stack)
            object.__setattr__(self, f"{stack}_codes", codes)
            object.__setattr__(self, f"{stack}_size", len(codes))
        for name in ("tau_start", "tau_end"):
            value = getattr(self, name)
            if not (_number(value) and value > 0):
                raise ConfigError(f"model.{name}", value, "a positive number")
            object.__setattr__(self, name, float(value))
        if self.anneal_steps is not None and not (
            isinstance(self.anneal_steps, int) and self.anneal_steps > 0
        ):
            raise ConfigError("model.anneal_steps", self.anneal_steps,
                              "a positive integer or null (the training steps)")
        for name in ("c1", "c2"):
            value = getattr(self, name)
            if not (_number(value) and value >= 0):
                raise ConfigError(f"model.{name}", value, "a number >= 0")
            object.__setattr__(self, name, float(value))
        if not (_number(self.floor) and 0 <= self.floor < 1):
            raise ConfigError("model.floor", self.floor, "a number in [0, 1)")

    def _resolve(self, stack: str) -> tuple[int, ...]:
        blocks = _STACKS[stack]
        codes = getattr(self, f"{stack}_codes")
        if codes is not None:
            field = f"model.{stack}_codes"
            if isinstance(codes, str | bytes) or not isinstance(codes, tuple | list) or not codes:
                raise ConfigError(field, codes, f"a non-empty list of codes in 1..{len(blocks)}")
            for i, c in enumerate(codes):
                if isinstance(c, bool) or c not in blocks:
                    raise ConfigError(f"{field}[{i}]", c, f"a code in 1..{len(blocks)}")
            if len(set(codes)) != len(codes):
                raise ConfigError(field, codes, "distinct codes")
            return tuple(sorted(codes))
        size, mode = getattr(self, f"{stack}_size"), getattr(self, f"{stack}_mode")
        try:
            validate_iot(stack, size, mode if mode in IOT_MODEL_MODES else "exhaustive")
        except SpaceError as exc:
            raise ConfigError(f"model.{stack}_{exc.field}", exc.value, exc.expected) from None
        if mode not in IOT_MODEL_MODES:
            raise ConfigError(f"model.{stack}_mode", mode,
                              "one of " + ", ".join(IOT_MODEL_MODES)
                              + f" (or give {stack}_codes: one subset from iot_subsets)")
        (subset,) = iot_subsets(stack, size, mode)
        return subset.codes

    @property
    def decoder_blocks(self) -> tuple[str, ...]:
        """Block orders of the decoder subset, e.g. ``("scf", "fsc", "csf", "fcs")``."""
        assert self.decoder_codes is not None
        return tuple(DECODER_BLOCKS[c] for c in self.decoder_codes)

    @property
    def encoder_blocks(self) -> tuple[str, ...]:
        assert self.encoder_codes is not None
        return tuple(ENCODER_BLOCKS[c] for c in self.encoder_codes)

    @property
    def decoder_orders(self) -> tuple[str, ...]:
        """Each decoder block stacked ``decoder_layers`` times."""
        return tuple(b * self.decoder_layers for b in self.decoder_blocks)

    @property
    def encoder_orders(self) -> tuple[str, ...]:
        return tuple(b * self.encoder_layers for b in self.encoder_blocks)

    def base_config(self) -> Seq2SeqConfig:
        """The plain model with the first order of each subset (same shared weights)."""
        dims = {f.name: getattr(self, f.name) for f in dataclasses.fields(Seq2SeqDims)}
        return Seq2SeqConfig(**dims, encoder_order=self.encoder_orders[0],
                             decoder_order=self.decoder_orders[0])

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        for name in ("decoder_codes", "encoder_codes"):
            out[name] = list(getattr(self, name))
        return out


def iot_param_count(cfg: IOTConfig) -> int:
    """Exact parameters of ``IOTSeq2Seq(cfg)``: the base model + the predictors."""
    n, m = cfg.decoder_size, cfg.encoder_size
    d = cfg.d_model
    return seq2seq_param_count(cfg.base_config()) + (n * d if n > 1 else 0) \
        + (m * d if m > 1 else 0)


def temperature(cfg: IOTConfig, step: int, total_steps: int) -> float:
    """Gumbel temperature at ``step``: ``tau_start·(tau_end/tau_start)^min(step/A, 1)``,
    ``A`` = ``cfg.anneal_steps`` or ``total_steps``."""
    span = cfg.anneal_steps or max(total_steps, 1)
    frac = min(max(step, 0) / span, 1.0)
    return cfg.tau_start * (cfg.tau_end / cfg.tau_start) ** frac


def gumbel_weights(logits: Tensor, tau: float, *, generator: torch.Generator | None = None) -> Tensor:
    """Gumbel-softmax weights ``softmax((logits + g) / tau)``, g ~ Gumbel(0, 1); rows sum to 1."""
    u = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=torch.float32)
    g = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    return F.softmax((logits.float() + g) / tau, dim=-1)


def exploration_loss(probs: Tensor, floor: float = 0.05) -> Tensor:
    """``L_D = KL(u ‖ clamp(mean_x π_x, floor))`` for probabilities (B, N)."""
    n = probs.shape[-1]
    mean = probs.float().mean(0).clamp_min(floor)
    return (math.log(1.0 / n) - mean.log()).sum() / n


def exploitation_loss(probs: Tensor, floor: float = 0.05) -> Tensor:
    """``L_S = −mean_x KL(u ‖ clamp(π_x, floor))`` for probabilities (B, N)."""
    n = probs.shape[-1]
    p = probs.float().clamp_min(floor)
    return -((math.log(1.0 / n) - p.log()).sum(-1) / n).mean()


class IOTOutput(NamedTuple):
    """``loss``: training objective (train mode) or mean NLL of the argmax path (eval);
    ``logits``: argmax-path logits in eval mode (None in train mode); the parts of the
    objective (``path_loss`` = L_C, ``explore`` = L_D, ``exploit`` = L_S) in train mode."""

    loss: Tensor | None
    logits: Tensor | None
    path_loss: Tensor | None = None
    explore: Tensor | None = None
    exploit: Tensor | None = None


def _masked_mean(x: Tensor, pad: Tensor) -> Tensor:
    keep = (~pad).unsqueeze(-1).to(x.dtype)  # (B, S, 1)
    return (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)


class IOTSeq2Seq(Seq2SeqBase):
    """Encoder–decoder whose block orders are chosen per sentence from a subset."""

    def __init__(self, cfg: IOTConfig) -> None:
        super().__init__(cfg)
        self.cfg = cfg
        self.encoder = nn.ModuleList(
            nn.ModuleDict({k: make_sublayer(k, cfg, causal=False) for k in "sf"})
            for _ in range(cfg.encoder_layers)
        )
        self.decoder = nn.ModuleList(
            nn.ModuleDict({k: make_sublayer(k, cfg, causal=True) for k in "scf"})
            for _ in range(cfg.decoder_layers)
        )
        m, n = cfg.encoder_size, cfg.decoder_size
        self.encoder_predictor = nn.Linear(cfg.d_model, m, bias=False) if m > 1 else None
        self.decoder_predictor = nn.Linear(cfg.d_model, n, bias=False) if n > 1 else None
        self._init_weights(2 * cfg.encoder_layers + 3 * cfg.decoder_layers)
        for pred in (self.encoder_predictor, self.decoder_predictor):
            if pred is not None:
                nn.init.normal_(pred.weight, std=0.02)
        self.tau = cfg.tau_start

    def set_temperature(self, tau: float) -> None:
        if not tau > 0:
            raise ValueError(f"temperature must be positive, got {tau}")
        self.tau = float(tau)

    # -- paths ------------------------------------------------------------------------------

    def _encode_path(self, x: Tensor, pad: Tensor, m: int) -> Tensor:
        block = self.cfg.encoder_blocks[m]
        for layer in self.encoder:
            for kind in block:
                x = apply_sublayer(layer[kind], kind, x, pad=pad)
        return self.encoder_norm(x)

    def _decode_path(self, tgt_in: Tensor, memory: Tensor, mem_pad: Tensor, n: int) -> Tensor:
        pad = tgt_in.eq(self.pad_id)
        x = self.tgt_embed(tgt_in)
        block = self.cfg.decoder_blocks[n]
        for layer in self.decoder:
            for kind in block:
                x = apply_sublayer(layer[kind], kind, x, pad=pad, memory=memory,
                                   memory_pad=mem_pad)
        return self.head(self.decoder_norm(x))

    # -- predictors -------------------------------------------------------------------------

    def encoder_logits(self, src: Tensor) -> Tensor | None:
        """Log-probabilities (B, M) of the encoder orders; None when M = 1."""
        if self.encoder_predictor is None:
            return None
        pad = src.eq(self.pad_id)
        mean = _masked_mean(self.src_embed.tokens(src), pad)
        return F.log_softmax(self.encoder_predictor(mean).float(), dim=-1)

    def decoder_logits(self, memory: Tensor, pad: Tensor) -> Tensor | None:
        """Log-probabilities (B, N) of the decoder orders; None when N = 1."""
        if self.decoder_predictor is None:
            return None
        return F.log_softmax(self.decoder_predictor(_masked_mean(memory, pad)).float(), dim=-1)

    def route_probs(self, src: Tensor) -> tuple[Tensor | None, Tensor]:
        """π of the encoder (or None) and of the decoder (B, N) along the argmax encoder path."""
        enc = self.encode(src)
        dec = self.decoder_logits(enc.memory, enc.padding_mask)
        probs = torch.ones(src.shape[0], 1, device=src.device) if dec is None else dec.exp()
        e = self.encoder_logits(src)
        return (None if e is None else e.exp()), probs

    def routing_weights(self, src: Tensor, *, tau: float | None = None,
                        generator: torch.Generator | None = None) -> Tensor:
        """Gumbel-softmax decoder weights λ (B, N) at ``tau`` (default: the current one)."""
        enc = self.encode(src)
        logits = self.decoder_logits(enc.memory, enc.padding_mask)
        if logits is None:
            return torch.ones(src.shape[0], 1, device=src.device)
        return gumbel_weights(logits, self.tau if tau is None else tau, generator=generator)

    # -- inference --------------------------------------------------------------------------

    def _rows(self, route: Tensor, fn, n_rows: int) -> Tensor:
        """Apply ``fn(rows, r)`` per distinct route value and scatter back (row order kept)."""
        values = route.unique().tolist()
        if len(values) == 1:
            return fn(None, values[0])
        out: Tensor | None = None
        for r in values:
            rows = (route == r).nonzero().squeeze(1)
            part = fn(rows, r)
            if out is None:
                out = part.new_empty((n_rows, *part.shape[1:]))
            out[rows] = part
        assert out is not None
        return out

    def encode(self, src: Tensor, *, encoder_route: int | None = None,
               decoder_route: int | None = None) -> EncoderOut:
        """Memory along the argmax (or forced) encoder order and the decoder route (B,)."""
        pad = src.eq(self.pad_id)
        b = src.shape[0]
        e_logits = self.encoder_logits(src) if encoder_route is None else None
        e_route = (torch.full((b,), encoder_route or 0, device=src.device) if e_logits is None
                   else e_logits.argmax(-1))
        x = self.src_embed(src)

        def run(rows: Tensor | None, m: int) -> Tensor:
            if rows is None:
                return self._encode_path(x, pad, m)
            return self._encode_path(x[rows], pad[rows], m)

        memory = self._rows(e_route, run, b)
        if decoder_route is not None:
            if not 0 <= decoder_route < self.cfg.decoder_size:
                raise ValueError(f"decoder_route {decoder_route} outside 0..{self.cfg.decoder_size - 1}")
            route = torch.full((b,), decoder_route, device=src.device, dtype=torch.long)
        else:
            d_logits = self.decoder_logits(memory, pad)
            route = (torch.zeros(b, dtype=torch.long, device=src.device) if d_logits is None
                     else d_logits.argmax(-1))
        return EncoderOut(memory, pad, route)

    def decode(self, tgt_in: Tensor, enc: EncoderOut) -> Tensor:
        """Logits (B, T, V_t) with each row's decoder order from ``enc.route``."""
        route = enc.route if enc.route is not None else torch.zeros(
            tgt_in.shape[0], dtype=torch.long, device=tgt_in.device)

        def run(rows: Tensor | None, n: int) -> Tensor:
            if rows is None:
                return self._decode_path(tgt_in, enc.memory, enc.padding_mask, n)
            return self._decode_path(tgt_in[rows], enc.memory[rows], enc.padding_mask[rows], n)

        return self._rows(route, run, tgt_in.shape[0])

    # -- training ---------------------------------------------------------------------------

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor | None = None, *,
                label_smoothing: float = 0.0) -> IOTOutput:
        if not self.training:
            logits = self.decode(tgt_in, self.encode(src))
            loss = None if tgt_out is None else self.loss(logits, tgt_out, label_smoothing)
            return IOTOutput(loss, logits)
        if tgt_out is None:
            raise ValueError("training mode needs tgt_out (use model.eval() to decode)")
        cfg = self.cfg
        pad = src.eq(self.pad_id)
        b = src.shape[0]
        n_tokens = tgt_out.ne(self.pad_id).sum().clamp_min(1)
        e_logits = self.encoder_logits(src)
        gamma = (torch.ones(b, 1, device=src.device) if e_logits is None
                 else gumbel_weights(e_logits, self.tau))
        x = self.src_embed(src)
        path_loss = x.new_zeros((), dtype=torch.float32)
        explore = x.new_zeros((), dtype=torch.float32)
        exploit = x.new_zeros((), dtype=torch.float32)
        for m in range(cfg.encoder_size):
            memory = self._encode_path(x, pad, m)
            d_logits = self.decoder_logits(memory, pad)
            lam = (torch.ones(b, 1, device=src.device) if d_logits is None
                   else gumbel_weights(d_logits, self.tau))
            if d_logits is not None:
                probs = d_logits.exp()
                explore = explore + exploration_loss(probs, cfg.floor) / cfg.encoder_size
                exploit = exploit + exploitation_loss(probs, cfg.floor) / cfg.encoder_size
            for n in range(cfg.decoder_size):
                logits = self._decode_path(tgt_in, memory, pad, n)
                per_sentence = self.token_nll(logits, tgt_out, label_smoothing).sum(1)  # (B,)
                path_loss = path_loss + (gamma[:, m] * lam[:, n] * per_sentence).sum() / n_tokens
        if e_logits is not None:
            probs = e_logits.exp()
            explore = explore + exploration_loss(probs, cfg.floor)
            exploit = exploit + exploitation_loss(probs, cfg.floor)
        loss = path_loss + cfg.c1 * explore + cfg.c2 * exploit
        return IOTOutput(loss, None, path_loss, explore, exploit)
