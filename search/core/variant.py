"""What one trial trains: a :class:`Variant` (order, guidance, IOT subset, side).

The plan builds one per candidate of its pool (:class:`VariantCandidate`); trials, the
searchers, the trainable, reuse, warm start and tracking carry it as it is. Its
``label`` (``hg-kq+ffn``) and the task's identity (``decoder+hg-kq``, ``decoder:146``)
are strings derived from it for display, MLflow tags and keys; nothing reads a variant
back from them. A finished run's variant is read from its structured params
(:func:`run_variant`: ``side``, ``subset``, and the guidance by
:meth:`GuidanceConfig.from_params`, the one way back of a guidance setting).

The order alone does not tell two models apart: an IOT subset is named after its first
order (the subsets {1, 2} and {1, 4, 6} of a decoder share it), and a guided model shares
its order with the unguided one. :func:`variant_key` joins the order and the identity:
what a searcher trains once per seed. The plain decoder's key is its order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.order import any_order

__all__ = ["Identity", "PLAIN", "Subset", "Variant", "VariantCandidate", "plain_identity",
           "run_variant", "variant_key", "variant_of"]

PLAIN = "decoder"
"""The identity of an unguided language model or plain decoder."""

SUBSET_PARAMS = ("subset", "codes", "codes0", "stack", "layers", "orders")
"""The ``iot_subsets`` space's params of a candidate: its :class:`Subset`."""


@dataclass(frozen=True, kw_only=True)
class Subset:
    """An IOT model: a subset of block orders (codes, 1-based) stacked ``layers`` times."""

    stack: str
    """``decoder`` or ``encoder``: the stack whose blocks the codes name."""
    name: str
    """The subset's id (``146``)."""
    codes: tuple[int, ...]
    layers: int
    orders: tuple[str, ...]
    """The subset's orders (the first one names the candidate)."""

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> Subset | None:
        """The subset an ``iot_subsets`` candidate's params describe (``None``: no subset)."""
        if "subset" not in params:
            return None
        return cls(stack=str(params.get("stack", "decoder")), name=str(params["subset"]),
                   codes=tuple(int(c) for c in params["codes"]), layers=int(params["layers"]),
                   orders=tuple(str(o) for o in params.get("orders", ())))

    def params(self) -> dict[str, Any]:
        """The params a trial of this subset records (as the space names them)."""
        return {"subset": self.name, "codes": list(self.codes),
                "codes0": [c - 1 for c in self.codes], "stack": self.stack,
                "layers": self.layers, "orders": list(self.orders)}


@dataclass(frozen=True, kw_only=True)
class Variant:
    """One model of a sweep: what a trial trains with a seed."""

    order: str
    """A checked :class:`~spaces.order.Order` (plain text given here is parsed)."""
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)
    side: str | None = None
    """The stack a translation order is (``encoder`` / ``decoder``); ``None`` for a
    language model (and for an IOT model, whose subset names its stack)."""
    subset: Subset | None = None

    def __post_init__(self) -> None:  # a checked order is trusted, plain text parsed
        object.__setattr__(self, "order", any_order(self.order))

    @property
    def label(self) -> str:
        """The guidance label (``none``, ``sg-kq``, ``hg-kq+ffn``): display and tags only."""
        return self.guidance.label

    @property
    def guided(self) -> bool:
        return self.guidance.active

    def with_order(self, order: str) -> Variant:
        """The same kind of model with another order (evolution's child of a parent)."""
        return replace(self, order=order)

    def params(self) -> dict[str, Any]:
        """What the variant adds to a trial's recorded params: ``side``, an IOT subset."""
        out: dict[str, Any] = {} if self.side is None else {"side": self.side}
        if self.subset is not None:
            out.update(self.subset.params())
        return out

    def to_dict(self) -> dict[str, Any]:
        """Plain data (a Ray trial config); :meth:`from_dict` rebuilds it."""
        return {"order": self.order, "guidance": self.guidance.to_dict(), "side": self.side,
                "subset": None if self.subset is None else self.subset.params()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variant:
        subset = data.get("subset")
        return cls(order=data["order"], guidance=GuidanceConfig.from_dict(data["guidance"]),
                   side=data.get("side"), subset=None if subset is None else Subset.of(subset))


Identity = Callable[[Variant], str]
"""A task's identity of a variant: what, besides order and seed, makes it another model."""


def plain_identity(variant: Variant) -> str:
    """The identity of most tasks: the side (``decoder`` by default), plus the guidance
    label of a guided model (``decoder+hg-kq``)."""
    guided = f"+{variant.label}" if variant.guided else ""
    return (variant.side or PLAIN) + guided


def variant_key(order: str, identity: str) -> str:
    """``order`` for the plain model, else ``order|identity`` (``scfscf|decoder:146``,
    ``ssfsff|decoder+hg-kq``)."""
    return order if identity == PLAIN else f"{order}|{identity}"


@dataclass(frozen=True, kw_only=True)
class VariantCandidate(Candidate):
    """A candidate of the plan's pool: the space's candidate with the variant it trains.

    ``params`` keep the space's facts that do not identify the model (``k``, ``family``,
    ``index``); the variant holds what does.
    """

    variant: Variant
    stem: str = ""
    """The space's name of the candidate before the guidance axis (``sandwich16_6`` for
    ``sandwich16_6+hg-kq``); empty: the name itself."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.stem:
            object.__setattr__(self, "stem", self.name)

    @classmethod
    def of(cls, cand: Candidate, *, side: str | None = None) -> VariantCandidate:
        """A space's candidate as a model of the pool (its IOT params become its subset)."""
        params = {k: v for k, v in cand.params.items() if k not in SUBSET_PARAMS}
        variant = Variant(order=cand.order, side=side, subset=Subset.of(cand.params))
        return cls(order=cand.order, space=cand.space, name=cand.name, params=params,
                   baseline=cand.baseline, variant=variant)

    def guided(self, guidance: GuidanceConfig) -> VariantCandidate:
        """This candidate under ``guidance``: named ``<name>+<label>``."""
        if not guidance.active:
            return self
        return replace(self, name=f"{self.stem}+{guidance.label}", stem=self.stem,
                       variant=replace(self.variant, guidance=guidance))


def variant_of(cand: Candidate) -> Variant:
    """The variant a candidate trains: a pool's own, or a bare space candidate's order as
    the plain, unguided model (searchers built on a space without a plan)."""
    if isinstance(cand, VariantCandidate):
        return cand.variant
    return Variant(order=cand.order)


def _split(text: str | None) -> tuple[str, ...]:
    return tuple(part for part in (text or "").split("+") if part)


def run_variant(params: Mapping[str, str]) -> Variant | None:
    """The variant a finished trial run trained, from its params (``order``, ``side``, the
    subset's ``subset``/``stack``/``codes``/``layers``/``orders`` and the guidance params
    :meth:`GuidanceConfig.from_params` reads); ``None`` when they describe no valid one."""
    if "order" not in params:
        return None
    try:
        guidance = GuidanceConfig.from_params(params)
        subset = None
        if params.get("subset"):
            subset = Subset(stack=params.get("stack") or "decoder", name=params["subset"],
                            codes=tuple(int(c) for c in _split(params.get("codes", "")
                                                               .replace(",", "+"))),
                            layers=int(params.get("layers") or 0),
                            orders=_split((params.get("orders") or "").replace(",", "+")))
        return Variant(order=params["order"], guidance=guidance,
                       side=params.get("side") or None, subset=subset)
    except ValueError:
        return None
