"""A finished trial of an earlier sweep, as a searcher is told it (warm start)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sublayer_search.search.core.variant import Variant

__all__ = ["Observation"]


@dataclass(frozen=True, kw_only=True)
class Observation:
    """A finished trial of an earlier sweep, told to a searcher before it suggests (warm start).

    Matched to this sweep by the content key of reuse: same config hash and identity
    (``search.warm_start``); ``order`` and ``seed`` are what it trained.
    """

    order: str
    seed: int
    value: float
    """The final value of the sweep's metric (``final_<metric>``)."""
    identity: str = "decoder"
    """The earlier trial's identity in its task (:meth:`~.tasks.base.Task.identity`: an
    IOT subset ``decoder:146``, a guided model ``decoder+hg-kq``): with the order, which
    model of the pool it is (:func:`~.variant.variant_key`)."""
    guidance: str = "none"
    """The earlier trial's cross-layer guidance label (``hg-kq+ffn``; ``none`` unguided):
    a guided run is a variant of its order of its own, never told as the unguided one.
    Derived from :attr:`variant` where one is given (its setting is the one form)."""
    name: str = "warm"
    """The earlier trial's candidate name (evolution names its children's parent by it)."""
    variant: Variant | None = None
    """The model it trained (``None``: the plain model of ``order``): a child of this
    order (evolution) is this variant with another order (the ``side`` of a translation
    order)."""
    extra: dict[str, float] = field(default_factory=dict)
    """Other objectives' values (``params``, ``flops_per_token``) for multi-objective search."""

    def __post_init__(self) -> None:
        if self.variant is not None:
            object.__setattr__(self, "guidance", self.variant.label)
