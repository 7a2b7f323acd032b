"""IOT configuration (:class:`IOTConfig`), its exact parameter count and the Gumbel
temperature schedule; the model is :class:`models.iot.IOTSeq2Seq`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.errors import ConfigError, check, is_number, is_positive_int
from sublayer_search.models.seq2seq_config import Seq2SeqConfig, Seq2SeqDims, seq2seq_param_count
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.iot import DECODER_BLOCKS, ENCODER_BLOCKS, iot_subsets, validate_iot

__all__ = ["IOT_MODEL_MODES", "IOTConfig", "iot_param_count", "temperature"]

IOT_MODEL_MODES = ("paper", "diverse")
"""Subset modes that give one subset (others: pass the codes of one subset)."""
_STACKS = {"decoder": DECODER_BLOCKS, "encoder": ENCODER_BLOCKS}


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
            check(is_positive_int(value), f"model.{name}", value, "a positive integer")
        for stack in ("decoder", "encoder"):
            codes = self._resolve(stack)
            object.__setattr__(self, f"{stack}_codes", codes)
            object.__setattr__(self, f"{stack}_size", len(codes))
        for name in ("tau_start", "tau_end"):
            value = getattr(self, name)
            check(is_number(value, finite=True) and value > 0, f"model.{name}", value,
                  "a positive number")
            object.__setattr__(self, name, float(value))
        if self.anneal_steps is not None and not (
            isinstance(self.anneal_steps, int) and self.anneal_steps > 0
        ):
            raise ConfigError("model.anneal_steps", self.anneal_steps,
                              "a positive integer or null (the training steps)")
        for name in ("c1", "c2"):
            value = getattr(self, name)
            check(is_number(value, finite=True) and value >= 0, f"model.{name}", value,
                  "a number >= 0")
            object.__setattr__(self, name, float(value))
        check(is_number(self.floor, finite=True) and 0 <= self.floor < 1, "model.floor",
              self.floor, "a number in [0, 1)")

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
