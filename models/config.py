"""Model configuration: one frozen, validated dataclass plus named presets.

``ModelConfig.order`` is canonicalised with :func:`spaces.order.parse_order` (a checked
:class:`~spaces.order.Order` is trusted as it is), so
``"(sf)^2"``, ``"interleaved(2)"`` and ``"sfsf"`` give equal configs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.errors import (
    Checks,
    ConfigError,
    ConfigErrors,
    check,
    is_int,
    is_number,
    is_positive_int,
)
from sublayer_search.models.guidance.config import GuidanceConfig, guidance_from
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.kinds import Dims, KindSettings
from sublayer_search.spaces.order import Order, counts

__all__ = [
    "ACTIVATIONS",
    "NORMS",
    "POSITIONS",
    "PRESETS",
    "ConfigError",
    "ModelConfig",
    "adaptive_bands",
    "check_dims",
    "check_flags",
    "check_half_width",
    "config_from_dict",
    "model_preset",
]

ACTIVATIONS = ("relu", "gelu")
NORMS = ("pre", "post")
POSITIONS = ("learned", "sinusoidal")


MAX_WIDTH = 65_536
"""Sanity bound of ``d_model`` (``d_ff`` may be 4x this): one ``s`` sublayer of this
width already holds 4·d² = 17 billion weights."""
MAX_CONTEXT = 1_048_576


def _memory_words(name: str, value: int) -> str:
    """What ``value`` would cost: fp32 weights of one sublayer, or one attention map."""
    if name == "context":
        gib = value * value * 4 / 2**30
        return f"one attention map of {value:,}² would take {gib:,.0f} GiB"
    weights = 4 * value * value if name == "d_model" else 2 * value * value // 4
    return f"one sublayer of this width alone needs {weights * 4 / 2**30:,.0f} GiB of fp32 weights"


def check_half_width(d_ff: int, orders: str) -> None:
    """An ``h`` (half-width feedforward, d_ff/2) needs an even ``d_ff``: then it is
    exactly half an ``f``, as the budget arithmetic assumes."""
    check("h" not in orders or d_ff % 2 == 0, "model.d_ff", d_ff,
          "an even number (the order has half-width feedforwards h of d_ff/2)")


def check_dims(cfg: Any) -> None:
    """Validate what every model config has: ``d_model``, ``n_heads``, ``d_ff`` and
    ``context``; the dropouts (stored as floats); ``activation``, ``norm``, ``positions``.
    Every problem is raised together (:class:`ConfigErrors`)."""
    checks = Checks()
    whole = True
    for name in ("d_model", "n_heads", "d_ff", "context"):
        value = getattr(cfg, name)
        whole &= is_positive_int(value)
        checks(is_positive_int(value), f"model.{name}", value, "a positive integer")
    if whole:
        checks(cfg.d_model % cfg.n_heads == 0, "model.d_model", cfg.d_model,
               f"a multiple of n_heads ({cfg.n_heads})")
        for name, bound in (("d_model", MAX_WIDTH), ("d_ff", 4 * MAX_WIDTH),
                            ("context", MAX_CONTEXT)):
            value = getattr(cfg, name)
            checks(value <= bound, f"model.{name}", value,
                   f"at most {bound:,} (a sanity bound: {_memory_words(name, value)})")
    for name in ("dropout", "attn_dropout", "act_dropout"):
        value = getattr(cfg, name)
        fine = is_number(value) and 0.0 <= value < 1.0
        checks(fine, f"model.{name}", value, "a number in [0, 1)")
        if fine:
            object.__setattr__(cfg, name, float(value))
    for name, allowed in (("activation", ACTIVATIONS), ("norm", NORMS), ("positions", POSITIONS)):
        value = getattr(cfg, name)
        checks(value in allowed, f"model.{name}", value, "one of " + ", ".join(allowed))
    checks.raise_any()


def check_flags(cfg: Any, names: tuple[str, ...]) -> None:
    """ConfigError unless each setting ``names`` of ``cfg`` is a bool."""
    for name in names:
        value = getattr(cfg, name)
        check(isinstance(value, bool), f"model.{name}", value, "true or false")


def sublayer_settings(value: Any) -> KindSettings:
    """``model.sublayers`` as :class:`~spaces.kinds.KindSettings` (a mapping or None: the
    defaults); a bad value is a :class:`ConfigError` naming ``model.sublayers.<field>``."""
    try:
        return KindSettings.from_value({} if value is None else value)
    except SpaceError as exc:
        raise ConfigError(f"model.{exc.field}", exc.value, exc.expected) from None


def sublayers_dict(out: dict[str, Any], settings: KindSettings) -> dict[str, Any]:
    """``out`` (a config's ``asdict``) with ``sublayers`` as the settings that differ from
    the defaults, or without it when none do (so a model without the hybrid kinds reads,
    and hashes, as before them)."""
    changed = settings.changed()
    out = {k: v for k, v in out.items() if k != "sublayers"}
    if changed:
        out["sublayers"] = changed
    return out


def config_from_dict(cls: Any, data: Mapping[str, Any]) -> Any:
    """``cls(**data)`` for a model config dataclass; unknown or missing keys raise.

    Every problem is reported together (:class:`ConfigErrors`), as a train section's are:
    the config checks itself one value at a time, so a setting it refuses is set aside
    (back to its default) and the rest checked again, until nothing more is found.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("model", data, "a mapping of model settings")
    fields = dataclasses.fields(cls)
    accepted = tuple(f.name for f in fields)
    required = {f.name for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    checks = Checks()
    for key, value in data.items():
        checks(key in accepted, f"model.{key}", value,
               "one of the model settings: " + ", ".join(accepted))
    for name in sorted(required - set(data)):
        checks(False, f"model.{name}", None, "a value (this setting is required)")
    if checks.errors:
        checks.raise_any()
    known = dict(data)
    errors: list[ConfigError] = []
    for _ in range(len(known) + 1):
        try:
            config = cls(**known)
        except ConfigError as exc:
            found = [e for e in (exc.errors if isinstance(exc, ConfigErrors) else [exc])
                     if str(e) not in map(str, errors)]
            errors += found
            keys = {e.field.removeprefix("model.").split(".")[0].split("[")[0] for e in found}
            dropped = keys & (set(known) - required)
            if not dropped:
                break
            for key in dropped:
                known.pop(key)
            continue
        if not errors:
            return config
        break
    raise errors[0] if len(errors) == 1 else ConfigErrors(errors)


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Shape and regularisation of an :class:`models.lm.OrderedLM`.

    ``vocab_size=None`` means "take it from the corpus" (see :meth:`with_vocab`).
    ``cutoffs`` split the vocabulary into bands for the adaptive input/softmax
    (Baevski & Auli 2019); band ``i`` has width ``d_model // adaptive_factor**i``.
    """

    order: str
    vocab_size: int | None = None
    d_model: int
    n_heads: int
    d_ff: int
    context: int
    dropout: float = 0.1
    attn_dropout: float = 0.0
    act_dropout: float = 0.0
    activation: str = "relu"
    norm: str = "pre"
    positions: str = "learned"
    scale_embedding: bool = False
    tie_embeddings: bool = True
    adaptive_input: bool = False
    adaptive_softmax: bool = False
    cutoffs: tuple[int, ...] = ()
    adaptive_factor: float = 4.0
    guidance: GuidanceConfig = dataclasses.field(default_factory=GuidanceConfig)
    """Cross-layer guidance (Crossformer): soft or hard, per block; the layer above a
    sublayer is the next one *of the same kind* in ``order`` (see
    :mod:`models.guidance.config`)."""
    sublayers: KindSettings = dataclasses.field(default_factory=KindSettings)
    """Settings of the hybrid kinds ``w``, ``r``, ``e`` (window, experts, ...; see
    :class:`spaces.kinds.KindSettings`); left out of :meth:`to_dict` when all default."""

    def __post_init__(self) -> None:
        if not isinstance(self.order, str):
            raise ConfigError("model.order", self.order, "an order string such as 'sfsf'")
        object.__setattr__(self, "order", Order.of(self.order, kind="lm"))
        object.__setattr__(self, "guidance", guidance_from(self.guidance))
        object.__setattr__(self, "sublayers", sublayer_settings(self.sublayers))
        self.guidance.check_chains(counts(self.order), f"the order {self.order!r}")
        check(not self.guidance.cross_attention, "model.guidance.cross_attention", True,
              "false for a language model (no cross-attention to guide)")
        vocab = self.vocab_size
        check(vocab is None or (is_int(vocab) and vocab >= 2), "model.vocab_size", vocab,
              "an integer >= 2 or null")
        check_dims(self)
        check_half_width(self.d_ff, self.order)
        check_flags(self, ("scale_embedding", "tie_embeddings", "adaptive_input",
                           "adaptive_softmax"))
        self._check_adaptive()

    def _check_adaptive(self) -> None:
        cutoffs = self.cutoffs
        if isinstance(cutoffs, str) or not isinstance(cutoffs, tuple | list):
            raise ConfigError("model.cutoffs", cutoffs, "a list of increasing integers")
        cutoffs = tuple(cutoffs)
        object.__setattr__(self, "cutoffs", cutoffs)
        for i, c in enumerate(cutoffs):
            check(is_positive_int(c), f"model.cutoffs[{i}]", c, "a positive integer")
            if i and c <= cutoffs[i - 1]:
                raise ConfigError(
                    f"model.cutoffs[{i}]", c, f"an integer greater than {cutoffs[i - 1]}"
                )
        if cutoffs and self.vocab_size is not None and cutoffs[-1] >= self.vocab_size:
            raise ConfigError(
                f"model.cutoffs[{len(cutoffs) - 1}]",
                cutoffs[-1],
                f"an integer below vocab_size ({self.vocab_size})",
            )
        factor = self.adaptive_factor
        check(is_number(factor) and factor >= 1.0, "model.adaptive_factor", factor, "a number >= 1")
        object.__setattr__(self, "adaptive_factor", float(factor))
        if self.adaptive_input or self.adaptive_softmax:
            option = "adaptive_input" if self.adaptive_input else "adaptive_softmax"
            if not cutoffs:
                raise ConfigError(
                    "model.cutoffs", cutoffs, f"at least one cutoff when {option} is true"
                )
            smallest = int(self.d_model // (self.adaptive_factor ** len(cutoffs)))
            if smallest < 1:
                raise ConfigError(
                    "model.adaptive_factor",
                    self.adaptive_factor,
                    f"a factor leaving every band at least 1 wide "
                    f"(d_model {self.d_model}, {len(cutoffs)} cutoffs)",
                )

    # -- construction helpers ------------------------------------------------------------

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModelConfig:
        """Build from a plain mapping (e.g. parsed YAML); unknown or missing keys raise."""
        return config_from_dict(cls, data)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python settings (``cutoffs`` as a list), the inverse of :meth:`from_dict`;
        ``sublayers`` only where some differ from the defaults."""
        out = dataclasses.asdict(self)
        out["cutoffs"] = list(self.cutoffs)
        out["guidance"] = self.guidance.to_dict()
        return sublayers_dict(out, self.sublayers)

    @property
    def dims(self) -> Dims:
        """What :mod:`spaces.kinds` accounts a sublayer of this model by."""
        return Dims(d_model=self.d_model, d_ff=self.d_ff, n_heads=self.n_heads,
                    context=self.context, settings=self.sublayers)

    def with_vocab(self, vocab_size: int) -> ModelConfig:
        """A copy with ``vocab_size`` set (validated again)."""
        return dataclasses.replace(self, vocab_size=vocab_size)

    def require_vocab(self) -> int:
        """``vocab_size``, or ConfigError when it is still unknown."""
        if self.vocab_size is None:
            raise ConfigError(
                "model.vocab_size", None, "an integer >= 2 (set it from the corpus: with_vocab(n))"
            )
        return self.vocab_size


def adaptive_bands(cfg: ModelConfig) -> tuple[tuple[int, int, int], ...]:
    """``(start, stop, width)`` of each vocabulary band of the adaptive input/softmax.

    Band ``i`` covers token ids ``[start, stop)`` with embedding width
    ``int(d_model // adaptive_factor**i)`` (the same rounding as
    ``torch.nn.AdaptiveLogSoftmaxWithLoss`` uses for its tail widths).
    """
    vocab = cfg.require_vocab()
    edges = (0, *cfg.cutoffs, vocab)
    return tuple(
        (edges[i], edges[i + 1], int(cfg.d_model // (cfg.adaptive_factor**i)))
        for i in range(len(edges) - 1)
    )


PRESETS: dict[str, ModelConfig] = {
    # Used by tests: two layers, runs in milliseconds on a CPU.
    "debug": ModelConfig(order="sfsf", d_model=32, n_heads=2, d_ff=128, context=32),
    "tiny": ModelConfig(order="interleaved(4)", d_model=64, n_heads=4, d_ff=256, context=64),
    # Press et al. 2020 / Baevski & Auli 2019 WikiText-103 baseline (16 layers, 247M params).
    "press2020": ModelConfig(
        order="(sf)^16",
        vocab_size=267735,
        d_model=1024,
        n_heads=16,
        d_ff=4096,
        context=512,
        dropout=0.3,
        attn_dropout=0.1,
        act_dropout=0.1,
        activation="relu",
        norm="pre",
        positions="sinusoidal",
        scale_embedding=True,
        tie_embeddings=True,
        adaptive_input=True,
        adaptive_softmax=True,
        cutoffs=(20000, 60000),
        adaptive_factor=4.0,
    ),
}


def model_preset(name: str, **overrides: Any) -> ModelConfig:
    """A preset with some settings replaced, e.g. ``model_preset("tiny", order="ssff")``."""
    if name not in PRESETS:
        raise ConfigError("model.preset", name, "one of " + ", ".join(PRESETS))
    return ModelConfig.from_dict({**PRESETS[name].to_dict(), **overrides})
