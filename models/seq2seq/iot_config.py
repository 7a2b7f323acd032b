"""IOT configuration (:class:`IOTConfig`), its exact parameter count and the Gumbel
temperature schedule; the model is :class:`models.seq2seq.iot_model.IOTSeq2Seq`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.errors import ConfigError, check, is_number, is_positive_int
from sublayer_search.models.seq2seq.config import Seq2SeqConfig, Seq2SeqDims, seq2seq_param_count
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.iot_subsets import (
    DECODER_BLOCKS,
    ENCODER_BLOCKS,
    iot_subsets,
    validate_iot,
)

__all__ = ["AUTHORS_ROUTING", "DROPOUT_SITES", "GUMBEL_FROM", "IOT_CLAMPS", "IOT_MODEL_MODES",
           "PATH_PASSES", "PATH_SMOOTHING", "ROUTINGS", "TAU_SCHEDULES", "IOTConfig",
           "iot_param_count", "temperature"]

IOT_MODEL_MODES = ("paper", "diverse")
"""Subset modes that give one subset (others: pass the codes of one subset)."""
_STACKS = {"decoder": DECODER_BLOCKS, "encoder": ENCODER_BLOCKS}
TAU_SCHEDULES = ("anneal", "step")
"""Gumbel temperature schedules: ours (smooth anneal, default) and the authors' code's."""
IOT_CLAMPS = ("below", "both")
"""Clamps of π in L_D and L_S: ours (from below, default) and the authors' code's."""
_TAU_START = {"anneal": 1.0, "step": 20.0}
GUMBEL_FROM = ("pi", "clamped")
"""What the Gumbel-softmax logits are: log π (ours) or log clamp(π) (the authors' --gs-clamp)."""
DROPOUT_SITES = ("input", "logits")
"""Where predictor dropout acts: the d-dim mean representation (ours) or the M/N-way
logits before the softmax (the authors' model)."""
PATH_SMOOTHING = ("weighted", "summed")
"""Label smoothing over the paths: each path's smoothed loss weighted by γλ (ours), or
only the NLL weighted and the smoothing term summed over the paths (the authors' criterion)."""
PATH_PASSES = ("shared", "per_path")
"""One encoder pass and one Gumbel sample shared by every decoder path (ours), or one
whole forward pass per decoder path, the weights averaged over the passes (the authors')."""
ROUTINGS = ("ours", "authors")
"""``routing`` presets: ours (the field defaults) and the authors' routing, every setting of
their criterion and model (what else differs from their run: docs/translation-and-iot.md)."""
AUTHORS_ROUTING: dict[str, Any] = {
    "tau_schedule": "step", "tau_start": 20.0, "tau_end": 2.0, "clamp": "both",
    "gumbel_from": "clamped", "explore_clamp": False, "predictor_dropout": None,
    "predictor_dropout_at": "logits", "path_smoothing": "summed", "path_passes": "per_path",
    "predictor_init_std": None,
}
"""``routing: authors``: Zhu et al.'s published train script, IOT criterion and model. The
Gumbel logits are log clamp(π) (``--gs-clamp``, π in [floor, 1 − (N−1)·floor]); L_D uses
the *unclamped* π and L_S the clamped one; the temperature starts at 20
(``--gumbel-softmax-max``) with a minimum of 2 (``--gumbel-softmax-min``); dropout (the
model's ``dropout``: ``predictor_dropout`` None) acts on the predictor's N-way logits;
the label-smoothing term is summed over the paths, only the NLL is weighted by λ; every
decoder path is its own forward pass (encoder and predictor included, with their own
dropout and Gumbel draw) and the weights used are the mean of the N passes' samples, as
are the π of L_D and the clamped π of L_S; the predictor starts at std d_model^-0.5. A
field given explicitly with another value than its default overrides the preset."""


@dataclass(frozen=True, kw_only=True)
class IOTConfig(Seq2SeqDims):
    """An IOT model: layer counts, order subsets and the routing/training settings.

    Subsets: give ``decoder_codes`` (e.g. ``(1, 2, 4, 6)``) or ``decoder_size`` with
    ``decoder_mode`` "paper" or "diverse" (see :func:`spaces.generators.iot_subsets.iot_subsets`); the same
    for the encoder (default: one order, ``sf``). After validation the ``*_codes`` are
    the sorted resolved codes and ``*_size`` their number.

    Gumbel temperature (:func:`temperature`), ``tau_schedule``:

    * ``"anneal"`` (default, ours): exponential from ``tau_start`` (default 1.0) to
      ``tau_end`` (0.1) over ``anneal_steps`` (default: the training steps);
    * ``"step"`` (the authors' code): ``tau_start`` (default 20.0, their published
      value) times ``tau_decay`` after every ``tau_interval`` updates, never below
      ``tau_end``. ``tau_decay`` defaults to 1.0, i.e. their published settings: τ = 20
      throughout; a ``tau_decay`` < 1 needs ``tau_interval``.

    ``clamp`` of the routing probabilities π: ``"below"`` (default, ours) is π ≥
    ``floor``; ``"both"`` (the authors' code) is π in [floor, 1 − (N−1)·floor] (needs
    N·floor ≤ 1). Where the clamp applies: L_S always; L_D when ``explore_clamp`` (ours;
    the authors' L_D uses π unclamped); the Gumbel logits when ``gumbel_from`` is
    ``"clamped"`` (the authors': log clamp(π)), else log π (ours). ``predictor_dropout``
    (ours 0; None = the model's ``dropout``) acts in training on the predictors' mean
    representation (``predictor_dropout_at: input``, ours) or on their logits
    (``logits``, the authors'). ``predictor_init_std``: the predictors' initial weights
    (ours 0.02; None = d_model^-0.5, the authors').

    ``path_smoothing``: ``"weighted"`` (ours) weights each path's label-smoothed loss by
    γλ; ``"summed"`` (the authors' criterion) weights only the NLL and adds every path's
    smoothing term unweighted. ``path_passes``: ``"shared"`` (ours) encodes once and
    draws one Gumbel sample for all decoder paths; ``"per_path"`` (the authors') runs one
    whole forward pass per decoder path (its own dropout masks and Gumbel draw) and uses
    the mean of the N samples as the weights, the mean π in L_D and the mean clamped π in
    L_S (one encoder order only: their criterion pairs pass i with encoder order
    min(i, M − 1) instead of running every (m, n) path).

    ``routing``: ``"ours"`` (the defaults below) or ``"authors"`` (:data:`AUTHORS_ROUTING`:
    every routing setting of their code: step schedule 20 with minimum 2, clamp both,
    Gumbel from the clamped π, L_D unclamped, dropout on the predictor's logits, smoothing
    summed over paths, one pass per path with averaged weights, predictor init d^-0.5).

    Why the defaults are ours: the anneal ends near one-hot weights (τ = 0.1), so the
    last updates train the paths that argmax inference runs; at τ = 20 the weights stay
    near uniform, every path is trained alike and the predictor learns from L_D and L_S
    alone. With ``clamp: below`` a confident predictor is not held back from choosing
    one order. Runs made before these options existed used exactly these defaults.
    """

    encoder_layers: int
    decoder_layers: int
    decoder_codes: tuple[int, ...] | None = None
    decoder_size: int = 4
    decoder_mode: str = "paper"
    encoder_codes: tuple[int, ...] | None = None
    encoder_size: int = 1
    encoder_mode: str = "paper"
    tau_schedule: str = "anneal"
    tau_start: float | None = None
    tau_end: float = 0.1
    anneal_steps: int | None = None
    tau_decay: float | None = None
    tau_interval: int | None = None
    c1: float = 0.1
    c2: float = 0.01
    floor: float = 0.05
    clamp: str = "below"
    gumbel_from: str = "pi"
    explore_clamp: bool = True
    predictor_dropout: float | None = 0.0
    predictor_dropout_at: str = "input"
    predictor_init_std: float | None = 0.02
    path_smoothing: str = "weighted"
    path_passes: str = "shared"
    routing: str = "ours"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._apply_routing()
        for name in ("encoder_layers", "decoder_layers"):
            value = getattr(self, name)
            check(is_positive_int(value), f"model.{name}", value, "a positive integer")
        for side in ("encoder", "decoder"):
            layers = getattr(self, f"{side}_layers")
            chains = {"s": layers, "f": layers} | ({"c": layers} if side == "decoder" else {})
            self.guidance.check_chains(chains, f"the IOT {side} with {side}_layers {layers}")
        for stack in ("decoder", "encoder"):
            codes = self._resolve(stack)
            object.__setattr__(self, f"{stack}_codes", codes)
            object.__setattr__(self, f"{stack}_size", len(codes))
        self._check_schedule()
        for name in ("c1", "c2"):
            value = getattr(self, name)
            check(is_number(value, finite=True) and value >= 0, f"model.{name}", value,
                  "a number >= 0")
            object.__setattr__(self, name, float(value))
        check(is_number(self.floor, finite=True) and 0 <= self.floor < 1, "model.floor",
              self.floor, "a number in [0, 1)")
        check(self.clamp in IOT_CLAMPS, "model.clamp", self.clamp,
              "below (ours, the default: pi >= floor) or both (the authors': pi in "
              "[floor, 1 - (N-1)*floor])")
        check(self.gumbel_from in GUMBEL_FROM, "model.gumbel_from", self.gumbel_from,
              "pi (ours: Gumbel logits log pi) or clamped (the authors': log clamp(pi))")
        check(isinstance(self.explore_clamp, bool), "model.explore_clamp", self.explore_clamp,
              "true (ours: L_D on the clamped pi) or false (the authors': unclamped)")
        if self.predictor_dropout is None:
            object.__setattr__(self, "predictor_dropout", float(self.dropout))
        drop = self.predictor_dropout
        check(is_number(drop, finite=True) and drop is not None and 0 <= drop < 1,
              "model.predictor_dropout", drop, "a number in [0, 1) or null (the model's dropout)")
        self._check_paths()
        largest = max(self.decoder_size, self.encoder_size)
        if self.clamp == "both" and largest * self.floor > 1:
            raise ConfigError("model.floor", self.floor, f"at most 1/{largest} with clamp both "
                              f"and {largest} orders (else floor > 1 - (N-1)*floor)")

    def _check_paths(self) -> None:
        check(self.predictor_dropout_at in DROPOUT_SITES, "model.predictor_dropout_at",
              self.predictor_dropout_at, "input (ours: the mean representation) or logits "
              "(the authors': the predictor's N-way logits)")
        if self.predictor_init_std is None:
            object.__setattr__(self, "predictor_init_std", float(self.d_model) ** -0.5)
        std = self.predictor_init_std
        check(is_number(std, finite=True) and std is not None and std > 0,
              "model.predictor_init_std", std, "a positive number or null (d_model^-0.5)")
        if std is not None:
            object.__setattr__(self, "predictor_init_std", float(std))
        check(self.path_smoothing in PATH_SMOOTHING, "model.path_smoothing",
              self.path_smoothing, "weighted (ours: each path's smoothed loss times its "
              "weight) or summed (the authors': the smoothing term summed over the paths)")
        check(self.path_passes in PATH_PASSES, "model.path_passes", self.path_passes,
              "shared (ours: one encoder pass and Gumbel sample for every path) or per_path "
              "(the authors': one pass per decoder path, the weights averaged)")
        if self.path_passes == "per_path" and self.encoder_size > 1:
            raise ConfigError("model.encoder_size", self.encoder_size,
                              "1 with path_passes per_path (the authors' criterion pairs pass "
                              "i with encoder order min(i, M-1), not every (m, n) path; their "
                              "published run reorders the decoder only); to reorder the "
                              "encoder too use routing ours (path_passes shared) and give "
                              "the authors' other settings one by one")

    def _apply_routing(self) -> None:
        check(self.routing in ROUTINGS, "model.routing", self.routing,
              "ours (the defaults) or authors (Zhu et al.'s run: step tau 20 to 2, clamp "
              "both, Gumbel from the clamped pi, L_D unclamped, dropout on the predictor "
              "logits, smoothing summed over paths, one pass per path, init d^-0.5)")
        if self.routing != "authors":
            return
        defaults = {f.name: f.default for f in dataclasses.fields(IOTConfig)}
        for name, value in AUTHORS_ROUTING.items():
            if getattr(self, name) == defaults[name]:
                object.__setattr__(self, name, value)

    def _check_schedule(self) -> None:
        sched = self.tau_schedule
        check(sched in TAU_SCHEDULES, "model.tau_schedule", sched,
              "anneal (ours, the default: tau_start to tau_end smoothly) or step (the "
              "authors': tau_start times tau_decay every tau_interval updates)")
        if self.tau_start is None:
            object.__setattr__(self, "tau_start", _TAU_START[sched])
        for name in ("tau_start", "tau_end"):
            value = getattr(self, name)
            check(is_number(value, finite=True) and value > 0, f"model.{name}", value,
                  "a positive number")
            object.__setattr__(self, name, float(value))
        other = "step" if sched == "anneal" else "anneal"
        only = ("tau_decay", "tau_interval") if sched == "anneal" else ("anneal_steps",)
        for name in only:
            if getattr(self, name) is not None:
                raise ConfigError(f"model.{name}", getattr(self, name),
                                  f"null with tau_schedule {sched} (only for {other})")
        if self.anneal_steps is not None and not is_positive_int(self.anneal_steps):
            raise ConfigError("model.anneal_steps", self.anneal_steps,
                              "a positive integer or null (the training steps)")
        if sched == "anneal":
            return
        assert self.tau_start is not None
        check(self.tau_end <= self.tau_start, "model.tau_end", self.tau_end,
              f"at most tau_start ({self.tau_start}) with tau_schedule step (its lower bound)")
        decay = 1.0 if self.tau_decay is None else self.tau_decay
        check(is_number(decay, finite=True) and 0 < decay <= 1, "model.tau_decay", decay,
              "a number in (0, 1] (1: tau_start throughout, the authors' published setting)")
        object.__setattr__(self, "tau_decay", float(decay))
        if self.tau_interval is not None or decay < 1:
            check(is_positive_int(self.tau_interval), "model.tau_interval", self.tau_interval,
                  "a positive integer: updates between two steps of tau (needed when "
                  "tau_decay < 1)")

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
    """Gumbel temperature at ``step`` (0-based updates done).

    ``anneal``: ``tau_start·(tau_end/tau_start)^min(step/A, 1)``, ``A`` =
    ``cfg.anneal_steps`` or ``total_steps``. ``step``: ``max(tau_end, tau_start ·
    tau_decay^⌊step / tau_interval⌋)`` (constant ``tau_start`` when ``tau_decay`` is 1).
    """
    start = cfg.tau_start if cfg.tau_start is not None else _TAU_START[cfg.tau_schedule]
    if cfg.tau_schedule == "step":
        decay = 1.0 if cfg.tau_decay is None else cfg.tau_decay
        if decay == 1.0 or cfg.tau_interval is None:
            return start
        return max(cfg.tau_end, start * decay ** (max(step, 0) // cfg.tau_interval))
    span = cfg.anneal_steps or max(total_steps, 1)
    frac = min(max(step, 0) / span, 1.0)
    return start * (cfg.tau_end / start) ** frac
