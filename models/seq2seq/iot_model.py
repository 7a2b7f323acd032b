"""IOT: instance-wise layer reordering (Zhu et al., ICLR 2021) over one set of weights.

``IOTSeq2Seq(cfg)`` holds, per encoder block, one ``s`` and one ``f`` residual sublayer
and, per decoder block, one ``s``, one ``c`` and one ``f``; a block *order* (a code of
:mod:`spaces.generators.iot_subsets`, e.g. decoder 4 = ``csf``) says in which order a block applies them.
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
sentence (τ from :func:`temperature`: by default an exponential anneal from
``tau_start`` to ``tau_end`` over ``anneal_steps``; ``tau_schedule: step`` is the
authors' step-down, 20 throughout in their published settings); every path (m, n) is
run and

    L = Σ_m Σ_n Σ_x γ_m(x) λ_n(x) · Σ_t ℓ_t(x) / #tokens            (L_C)
        + c1 · L_D,  L_D = KL(u ‖ clamp(E_x[π_x], floor))           (exploration)
        + c2 · L_S,  L_S = −E_x[KL(u ‖ clamp(π_x, floor))]          (exploitation)

with u uniform, ``floor`` = 0.05, c1 = 0.1, c2 = 0.01 (the paper's values; all
settable; ``clamp: both`` also caps π at 1 − (N−1)·floor, as the authors' code does);
L_D and L_S are summed over the predictors present, the decoder's averaged
over the M encoder paths. ``logits`` of the predictors are the logs of π, so γ uses them
directly (ours); ``routing: authors`` (:data:`models.seq2seq.iot_config.AUTHORS_ROUTING`)
is the authors' run: γ from log clamp(π), L_D on the unclamped π, L_S on the clamped,
τ from 20 with a minimum of 2, dropout on the predictor's logits, the label-smoothing
term summed over the paths (only the NLL weighted: :func:`~.iot_losses.path_loss`), one
whole forward pass per decoder path with λ the mean of the passes' Gumbel samples
(:meth:`IOTSeq2Seq._forward_per_path`), predictor init std d^-0.5. Inference
(``model.eval()``): the argmax order of each predictor, per sentence;
:meth:`IOTSeq2Seq.encode` can force an order instead (for the paper's Fig. 2 matrix of
BLEU per routed split × order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sublayer_search.models.guidance.apply import guide_chains
from sublayer_search.models.seq2seq.iot_config import (
    IOT_MODEL_MODES,
    IOTConfig,
    iot_param_count,
    temperature,
)
from sublayer_search.models.seq2seq.iot_losses import (
    clamp_probs,
    exploitation_loss,
    exploration_loss,
    gumbel_weights,
    path_loss,
)
from sublayer_search.models.seq2seq.model import (
    EncoderOut,
    Seq2SeqBase,
    apply_sublayer,
    make_sublayer,
)

__all__ = [
    "IOT_MODEL_MODES",
    "IOTConfig",
    "IOTOutput",
    "IOTSeq2Seq",
    "clamp_probs",
    "exploitation_loss",
    "exploration_loss",
    "gumbel_weights",
    "iot_param_count",
    "path_loss",
    "temperature",
]


class IOTOutput(NamedTuple):
    """``loss``: training objective (train mode) or mean NLL of the argmax path (eval);
    ``logits``: argmax-path logits in eval mode (None in train mode); the parts of the
    objective (``path_loss`` = L_C, ``explore`` = L_D, ``exploit`` = L_S) and the path
    ``weights`` used (B, M, N), γ_m·λ_n per sentence, in train mode."""

    loss: Tensor | None
    logits: Tensor | None
    path_loss: Tensor | None = None
    explore: Tensor | None = None
    exploit: Tensor | None = None
    weights: Tensor | None = None


def _masked_mean(x: Tensor, pad: Tensor) -> Tensor:
    keep = (~pad).unsqueeze(-1).to(x.dtype)  # (B, S, 1)
    return (x * keep).sum(1) / keep.sum(1).clamp_min(1.0)


class IOTSeq2Seq(Seq2SeqBase):
    """Encoder–decoder whose block orders are chosen per sentence from a subset."""

    cfg: IOTConfig

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
        # cross-layer guidance: a module's layer above is the same kind's in the next layer
        # (the decoder's c too with cross_attention: its layer above is the next layer's c)
        self.guided = [pair for stack, kinds in ((self.encoder, "sf"), (self.decoder, "scf"))
                       for pair in guide_chains({k: [cast(nn.ModuleDict, layer)[k]
                                                     for layer in stack] for k in kinds},
                                                cfg.guidance)]
        m, n = cfg.encoder_size, cfg.decoder_size
        self.encoder_predictor = nn.Linear(cfg.d_model, m, bias=False) if m > 1 else None
        self.decoder_predictor = nn.Linear(cfg.d_model, n, bias=False) if n > 1 else None
        self.predictor_dropout = nn.Dropout(cfg.predictor_dropout or 0.0)
        self._init_weights(2 * cfg.encoder_layers + 3 * cfg.decoder_layers)
        for pred in (self.encoder_predictor, self.decoder_predictor):
            if pred is not None:
                nn.init.normal_(pred.weight, std=cfg.predictor_init_std or 0.02)
        self.tau = temperature(cfg, 0, 1)

    def set_temperature(self, tau: float) -> None:
        if not tau > 0:
            raise ValueError(f"temperature must be positive, got {tau}")
        self.tau = float(tau)

    # -- paths ------------------------------------------------------------------------------

    def _encode_path(self, x: Tensor, pad: Tensor, m: int) -> Tensor:
        block = self.cfg.encoder_blocks[m]
        for layer in self.encoder:
            for kind in block:
                x = apply_sublayer(cast(nn.ModuleDict, layer)[kind], kind, x, pad=pad)
        return self.encoder_norm(x)

    def _decode_path(self, tgt_in: Tensor, memory: Tensor, mem_pad: Tensor, n: int) -> Tensor:
        """Final decoder states (B, T, d) along decoder order ``n``, before the head."""
        pad = tgt_in.eq(self.pad_id)
        x = self.tgt_embed(tgt_in)
        block = self.cfg.decoder_blocks[n]
        for layer in self.decoder:
            for kind in block:
                x = apply_sublayer(cast(nn.ModuleDict, layer)[kind], kind, x, pad=pad,
                                   memory=memory, memory_pad=mem_pad)
        return self.decoder_norm(x)

    # -- predictors -------------------------------------------------------------------------

    def _predict(self, predictor: nn.Module, mean: Tensor) -> Tensor:
        """log softmax of the predictor, dropout (training) on its input or its logits."""
        if self.cfg.predictor_dropout_at == "input":
            return F.log_softmax(predictor(self.predictor_dropout(mean)).float(), dim=-1)
        return F.log_softmax(self.predictor_dropout(predictor(mean)).float(), dim=-1)

    def encoder_logits(self, src: Tensor) -> Tensor | None:
        """Log-probabilities (B, M) of the encoder orders; None when M = 1."""
        if self.encoder_predictor is None:
            return None
        pad = src.eq(self.pad_id)
        return self._predict(self.encoder_predictor,
                             _masked_mean(self.src_embed.tokens(src), pad))

    def decoder_logits(self, memory: Tensor, pad: Tensor) -> Tensor | None:
        """Log-probabilities (B, N) of the decoder orders; None when N = 1."""
        if self.decoder_predictor is None:
            return None
        return self._predict(self.decoder_predictor, _masked_mean(memory, pad))

    def gumbel_logits(self, log_probs: Tensor) -> Tensor:
        """What the Gumbel-softmax perturbs: log π (``gumbel_from`` "pi", ours) or
        log clamp(π) (``"clamped"``, the authors' ``--gs-clamp``)."""
        if self.cfg.gumbel_from == "pi":
            return log_probs
        return clamp_probs(log_probs.exp(), self.cfg.floor, self.cfg.clamp).log()

    def routing_weights(self, src: Tensor, *, tau: float | None = None,
                        generator: torch.Generator | None = None) -> Tensor:
        """Gumbel-softmax decoder weights λ (B, N) at ``tau`` (default: the current one)."""
        enc = self.encode(src)
        logits = self.decoder_logits(enc.memory, enc.padding_mask)
        if logits is None:
            return torch.ones(src.shape[0], 1, device=src.device)
        return gumbel_weights(self.gumbel_logits(logits), self.tau if tau is None else tau,
                              generator=generator)

    # -- inference --------------------------------------------------------------------------

    def _rows(self, route: Tensor, fn: Callable[[Tensor | None, int], Tensor],
              n_rows: int) -> Tensor:
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
                return self.head(self._decode_path(tgt_in, enc.memory, enc.padding_mask, n))
            return self.head(self._decode_path(tgt_in[rows], enc.memory[rows],
                                               enc.padding_mask[rows], n))

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
        if self.cfg.path_passes == "per_path":
            return self._forward_per_path(src, tgt_in, tgt_out, label_smoothing)
        cfg = self.cfg
        pad = src.eq(self.pad_id)
        b = src.shape[0]
        n_tokens = tgt_out.ne(self.pad_id).sum().clamp_min(1)
        e_logits = self.encoder_logits(src)
        gamma = (torch.ones(b, 1, device=src.device) if e_logits is None
                 else gumbel_weights(self.gumbel_logits(e_logits), self.tau))
        x = self.src_embed(src)
        path = x.new_zeros((), dtype=torch.float32)
        explore = x.new_zeros((), dtype=torch.float32)
        exploit = x.new_zeros((), dtype=torch.float32)
        used = []
        for m in range(cfg.encoder_size):
            memory = self._encode_path(x, pad, m)
            d_logits = self.decoder_logits(memory, pad)
            lam = (torch.ones(b, 1, device=src.device) if d_logits is None
                   else gumbel_weights(self.gumbel_logits(d_logits), self.tau))
            if d_logits is not None:
                probs = d_logits.exp()
                share = cfg.encoder_size
                explore = explore + exploration_loss(probs, cfg.floor, cfg.clamp,
                                                     clamped=cfg.explore_clamp) / share
                exploit = exploit + exploitation_loss(probs, cfg.floor, cfg.clamp) / share
            weights = gamma[:, m, None] * lam  # (B, N)
            used.append(weights)
            for n in range(cfg.decoder_size):
                h = self._decode_path(tgt_in, memory, pad, n)  # per-path loss, fused head
                path = path + path_loss(self, h, tgt_out, weights[:, n], n_tokens,
                                        label_smoothing=label_smoothing,
                                        smoothing=cfg.path_smoothing)
        if e_logits is not None:
            probs = e_logits.exp()
            explore = explore + exploration_loss(probs, cfg.floor, cfg.clamp,
                                                 clamped=cfg.explore_clamp)
            exploit = exploit + exploitation_loss(probs, cfg.floor, cfg.clamp)
        loss = path + cfg.c1 * explore + cfg.c2 * exploit
        return IOTOutput(loss, None, path, explore, exploit, torch.stack(used, 1))

    def _forward_per_path(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor,
                          label_smoothing: float) -> IOTOutput:
        """The authors' criterion (``path_passes: per_path``, one encoder order): decoder
        path n is a whole forward pass of its own (embedding, encoder, predictor: their
        own dropout masks and Gumbel draw); the weights λ are the mean of the N passes'
        Gumbel samples, L_D takes the mean π and L_S the mean clamped π of the passes."""
        cfg = self.cfg
        pad = src.eq(self.pad_id)
        b = src.shape[0]
        n_tokens = tgt_out.ne(self.pad_id).sum().clamp_min(1)
        samples, probs, clamped, states = [], [], [], []
        for n in range(cfg.decoder_size):
            memory = self._encode_path(self.src_embed(src), pad, 0)
            d_logits = self.decoder_logits(memory, pad)
            if d_logits is not None:
                samples.append(gumbel_weights(self.gumbel_logits(d_logits), self.tau))
                probs.append(d_logits.exp())
                clamped.append(clamp_probs(probs[-1], cfg.floor, cfg.clamp))
            states.append(self._decode_path(tgt_in, memory, pad, n))
        lam = (torch.stack(samples).mean(0) if samples
               else torch.ones(b, 1, device=src.device))
        path = sum((path_loss(self, h, tgt_out, lam[:, n], n_tokens,
                              label_smoothing=label_smoothing, smoothing=cfg.path_smoothing)
                    for n, h in enumerate(states)), start=lam.new_zeros(()))
        explore = exploit = lam.new_zeros(())
        if probs:
            explore = exploration_loss(torch.stack(probs).mean(0), cfg.floor, cfg.clamp,
                                       clamped=cfg.explore_clamp)
            # the mean of clamped π lies inside the clamp: clamping it again changes nothing
            exploit = exploitation_loss(torch.stack(clamped).mean(0), cfg.floor, cfg.clamp)
        loss = path + cfg.c1 * explore + cfg.c2 * exploit
        return IOTOutput(loss, None, path, explore, exploit, lam[:, None, :])
