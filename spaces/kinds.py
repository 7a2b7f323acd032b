"""Sublayer kinds: the symbols of an order, what each one does, and what it costs.

A kind is one registration (:class:`SublayerKind`): its symbol, its role (a *sequence*
mixer moves information between positions, a *channel* mixer transforms each position on
its own, a *cross* sublayer reads another sequence), the model kinds whose orders may hold
it, the torch module that ``models/`` builds for it (named, not imported: this package
never imports torch), and its accounting: parameters (weights alone, or exact with biases
and the sublayer's LayerNorm), the weights a token passes through (less than all of them
for a mixture of experts), the FLOPs beyond those matmuls, and the numbers a sequence
keeps at inference (attention's key/value cache, a recurrence's state).

Built in:

=====  ====================================  ========  =====================================
``s``  self-attention                        sequence  4d² weights, a KV cache of 2·T·d
``f``  feedforward                           channel   2·d·d_ff
``c``  cross-attention (decoders)            cross     4d², the memory's keys and values
``h``  half-width feedforward (Macaron)      channel   d·d_ff (an ``f`` of width d_ff/2)
``w``  sliding-window attention              sequence  4d², a KV cache of 2·min(W, T)·d
``r``  gated linear recurrence               sequence  4d² + d·H, a state of d²/H
``e``  mixture-of-experts feedforward        channel   E·2·d·d_e + d·E (top-k of E active)
=====  ====================================  ========  =====================================

``w``, ``r`` and ``e`` are for language models (``lm``): the encoder-decoder model keeps
``s``, ``c``, ``f`` and ``h``. Their settings (window, experts, ...) are
:class:`KindSettings`, the ``model.sublayers`` section of a config.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from sublayer_search.spaces.errors import SpaceError

__all__ = [
    "CLASSIC",
    "MODEL_KINDS",
    "ROLES",
    "Dims",
    "KindSettings",
    "SublayerKind",
    "all_symbols",
    "first_hybrid",
    "hybrid_kinds",
    "kind_of",
    "register_kind",
    "registered_kinds",
    "symbols_for",
]

ROLES = ("sequence", "channel", "cross")
"""What a sublayer mixes: positions (``sequence``), features of one position
(``channel``), or another sequence (``cross``)."""
MODEL_KINDS = ("lm", "encoder", "decoder")
"""The model kinds an order is written for (a language model, a seq2seq encoder or
decoder)."""
CLASSIC = "sfch"
"""The kinds every release before the hybrid kinds had, in the order of their tables."""


def _positive(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpaceError(name, value, "a positive integer")
    return value


@dataclass(frozen=True, kw_only=True)
class KindSettings:
    """Settings of the hybrid kinds (``model.sublayers``); the defaults leave a model
    without those kinds exactly as before (and out of its settings' hash)."""

    window: int = 16
    """``w``: the keys a token attends to, itself and the ``window - 1`` before it."""
    experts: int = 4
    """``e``: experts per mixture-of-experts sublayer."""
    top_k: int = 2
    """``e``: experts each token is routed to."""
    expert_ff: int | None = None
    """``e``: hidden width of one expert; ``None``: ``d_ff // top_k``, so that a token's
    active weights are an ``f``'s (and the sublayer holds ``experts / top_k`` of them)."""
    balance: float = 0.01
    """``e``: weight of the load-balancing loss (Switch Transformer's ``E·Σ fᵢ·Pᵢ``,
    averaged over the ``e`` sublayers) added to the training loss."""
    chunk: int = 32
    """``r``: chunk length of the parallel scan (speed only: the outputs are the
    recurrence's for any chunk length)."""

    def __post_init__(self) -> None:
        for name in ("window", "experts", "top_k", "chunk"):
            _positive(f"sublayers.{name}", getattr(self, name))
        if self.expert_ff is not None:
            _positive("sublayers.expert_ff", self.expert_ff)
        if self.top_k > self.experts:
            raise SpaceError("sublayers.top_k", self.top_k,
                             f"an integer in 1..{self.experts} (sublayers.experts)")
        b = self.balance
        if isinstance(b, bool) or not isinstance(b, int | float) or not 0 <= b < float("inf"):
            raise SpaceError("sublayers.balance", b, "a number >= 0")
        object.__setattr__(self, "balance", float(b))

    @classmethod
    def from_value(cls, value: object) -> KindSettings:
        """``value`` itself, or the settings a mapping (a YAML section) spells."""
        if isinstance(value, KindSettings):
            return value
        if not isinstance(value, Mapping):
            raise SpaceError("sublayers", value, "a mapping of sublayer settings")
        names = [f.name for f in fields(cls)]
        for key in value:
            if key not in names:
                raise SpaceError(f"sublayers.{key}", value[key],
                                 "one of the sublayer settings: " + ", ".join(names))
        return cls(**dict(value))

    def changed(self) -> dict[str, Any]:
        """The settings that differ from the defaults (what a config records)."""
        default = asdict(KindSettings())
        return {k: v for k, v in asdict(self).items() if v != default[k]}


@dataclass(frozen=True, kw_only=True)
class Dims:
    """What a kind's accounting reads: a model's widths, heads, context and settings."""

    d_model: int
    d_ff: int
    n_heads: int = 1
    context: int = 0
    settings: KindSettings = field(default_factory=KindSettings)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def expert_ff(self) -> int:
        s = self.settings
        return s.expert_ff if s.expert_ff is not None else max(self.d_ff // s.top_k, 1)


Count = Callable[[Dims], int]


def _zero(_: Dims) -> int:
    return 0


@dataclass(frozen=True, kw_only=True)
class SublayerKind:
    """One sublayer kind: its symbol, role, module and accounting (see the module doc)."""

    symbol: str
    name: str
    role: str
    models: tuple[str, ...]
    """The model kinds whose orders may hold it."""
    module: str
    """``"package.module:Class"`` of its torch module (``models/`` builds it)."""
    weights: Count
    """Entries of its weight matrices: the basis of s-units (``s`` = 4d²)."""
    extra: Count
    """Its biases and its residual LayerNorm: ``exact`` params minus ``weights``."""
    active: Count | None = None
    """Weights a token passes through; ``None``: all of them."""
    active_extra: Count | None = None
    """Biases and norms a token passes through; ``None``: all of them (:attr:`extra`)."""
    mixing: Count = _zero
    """Forward FLOPs per token beyond its matmuls (attention scores, a recurrence's
    state update), at the full context."""
    state: Count = _zero
    """Numbers one sequence keeps per sublayer at inference (key/value cache, state)."""
    settings: tuple[str, ...] = ()
    """The :class:`KindSettings` fields it reads."""

    def __post_init__(self) -> None:
        if not (len(self.symbol) == 1 and self.symbol.isalpha() and self.symbol.islower()):
            raise SpaceError("symbol", self.symbol, "one lowercase letter")
        if self.role not in ROLES:
            raise SpaceError("role", self.role, "one of " + ", ".join(ROLES))
        if not self.models or set(self.models) - set(MODEL_KINDS):
            raise SpaceError("models", self.models, "model kinds among " + ", ".join(MODEL_KINDS))
        if ":" not in self.module:
            raise SpaceError("module", self.module, "'package.module:Class'")
        unknown = set(self.settings) - {f.name for f in fields(KindSettings)}
        if unknown:
            raise SpaceError("settings", self.settings, "names of KindSettings fields")

    def params(self, dims: Dims, *, exact: bool = False) -> int:
        """Parameters of one sublayer: its weights, and with ``exact`` its biases and
        LayerNorm too (the count ``models/`` builds)."""
        return self.weights(dims) + (self.extra(dims) if exact else 0)

    def active_weights(self, dims: Dims) -> int:
        """Weights one token multiplies through (all of them but for a mixture)."""
        return self.weights(dims) if self.active is None else self.active(dims)

    def active_params(self, dims: Dims, *, exact: bool = False) -> int:
        """:meth:`params` a token passes through (a mixture: its ``top_k`` experts)."""
        extra = self.extra if self.active_extra is None else self.active_extra
        return self.active_weights(dims) + (extra(dims) if exact else 0)

    def flops(self, dims: Dims) -> int:
        """Forward FLOPs per token: 2 per active weight, plus :attr:`mixing`."""
        return 2 * self.active_weights(dims) + self.mixing(dims)


_REGISTRY: dict[str, SublayerKind] = {}


def register_kind(kind: SublayerKind) -> SublayerKind:
    """Add ``kind``; its symbol must be new (a kind is never replaced)."""
    if kind.symbol in _REGISTRY:
        raise SpaceError("symbol", kind.symbol,
                         "a symbol no kind has yet (taken: " + ", ".join(_REGISTRY) + ")")
    _REGISTRY[kind.symbol] = kind
    return kind


def registered_kinds() -> tuple[SublayerKind, ...]:
    """Every kind, in registration order (the classic four first: ``s``, ``c``, ``f``,
    ``h``, so that an alphabet keeps its order, ``scfh`` for decoders)."""
    return tuple(_REGISTRY.values())


def kind_of(symbol: str) -> SublayerKind:
    try:
        return _REGISTRY[symbol]
    except KeyError:
        raise SpaceError("kind", symbol, "a sublayer symbol, one of " + ", ".join(_REGISTRY)) \
            from None


def all_symbols() -> str:
    """Every registered symbol, in registration order (``scfhwre`` for the built-ins)."""
    return "".join(_REGISTRY)


def hybrid_kinds(order: str) -> str:
    """The kinds of ``order`` outside :data:`CLASSIC` (``w``, ``r``, ``e``, a plugin's), in
    registration order: what weighs by a model's dims and what order features leave out."""
    present = set(order) - set(CLASSIC)
    return "".join(sym for sym in all_symbols() if sym in present)


def first_hybrid(orders: Iterable[str]) -> str | None:
    """The first of ``orders`` holding a hybrid kind (:func:`hybrid_kinds`), else None."""
    return next((order for order in orders if hybrid_kinds(order)), None)


def symbols_for(model: str) -> str:
    """The symbols an order for model kind ``model`` may hold, in registration order."""
    return "".join(k.symbol for k in _REGISTRY.values() if model in k.models)


# -- the built-in kinds ---------------------------------------------------------------------
_BLOCKS = "sublayer_search.models.blocks"
_MIXERS = "sublayer_search.models.mixers"


def _attention_weights(d: Dims) -> int:
    return 4 * d.d_model**2


def _attention_extra(d: Dims) -> int:  # q, k, v, out biases + the LayerNorm
    return 6 * d.d_model


def _window(d: Dims) -> int:
    return min(d.settings.window, d.context) if d.context else d.settings.window


def _half(d: Dims) -> int:
    return _positive("d_ff", d.d_ff) // 2


for _kind in (
    SublayerKind(symbol="s", name="self-attention", role="sequence", models=MODEL_KINDS,
                 module=f"{_BLOCKS}:SelfAttention", weights=_attention_weights,
                 extra=_attention_extra, mixing=lambda d: 2 * 2 * d.context * d.d_model,
                 state=lambda d: 2 * d.context * d.d_model),
    SublayerKind(symbol="c", name="cross-attention", role="cross", models=("decoder",),
                 module=f"{_BLOCKS}:CrossAttention", weights=_attention_weights,
                 extra=_attention_extra, mixing=lambda d: 2 * 2 * d.context * d.d_model,
                 state=lambda d: 2 * d.context * d.d_model),
    SublayerKind(symbol="f", name="feedforward", role="channel", models=MODEL_KINDS,
                 module=f"{_BLOCKS}:FeedForward", weights=lambda d: 2 * d.d_model * d.d_ff,
                 extra=lambda d: d.d_ff + 3 * d.d_model),
    SublayerKind(symbol="h", name="half-width feedforward", role="channel", models=MODEL_KINDS,
                 module=f"{_BLOCKS}:FeedForward", weights=lambda d: 2 * d.d_model * _half(d),
                 extra=lambda d: _half(d) + 3 * d.d_model),
    SublayerKind(symbol="w", name="sliding-window attention", role="sequence", models=("lm",),
                 module=f"{_MIXERS}.window:SlidingWindowAttention", weights=_attention_weights,
                 extra=_attention_extra, mixing=lambda d: 2 * 2 * _window(d) * d.d_model,
                 state=lambda d: 2 * _window(d) * d.d_model, settings=("window",)),
    SublayerKind(symbol="r", name="gated linear recurrence", role="sequence", models=("lm",),
                 module=f"{_MIXERS}.recurrent:GatedLinearRecurrence",
                 weights=lambda d: 4 * d.d_model**2 + d.d_model * d.n_heads,
                 extra=lambda d: 6 * d.d_model + d.n_heads,
                 mixing=lambda d: 2 * 2 * d.d_model * d.head_dim,
                 state=lambda d: d.d_model * d.head_dim, settings=("chunk",)),
    SublayerKind(symbol="e", name="mixture-of-experts feedforward", role="channel",
                 models=("lm",), module=f"{_MIXERS}.experts:MixtureOfExperts",
                 weights=lambda d: d.settings.experts * 2 * d.d_model * d.expert_ff
                 + d.d_model * d.settings.experts,
                 extra=lambda d: d.settings.experts * (d.expert_ff + d.d_model) + 2 * d.d_model,
                 active=lambda d: d.settings.top_k * 2 * d.d_model * d.expert_ff
                 + d.d_model * d.settings.experts,
                 active_extra=lambda d: d.settings.top_k * (d.expert_ff + d.d_model)
                 + 2 * d.d_model,
                 settings=("experts", "top_k", "expert_ff", "balance")),
):
    register_kind(_kind)
