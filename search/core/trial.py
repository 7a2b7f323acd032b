"""One trial: a variant, a seed and the spec that trains it, built once at planning.

The :class:`Trial` object itself is what Ray carries as ``config["trial"]`` to the
trainable and back to the tracking callback: nothing on the run path rebuilds a spec
or parses a trial back from plain data.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.variant import Variant, variant_of
from sublayer_search.spaces.candidate import Candidate

__all__ = ["Spec", "SpecSource", "SpecT", "Trial", "reseeded"]


class Spec(Protocol):
    """What a task's :meth:`Task.fit` trains: a frozen dataclass with a ``train`` section
    (so a planned spec is re-seeded per trial without the task)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def train(self) -> TrainConfig: ...


SpecT = TypeVar("SpecT", bound=Spec)


def reseeded(spec: SpecT, seed: int) -> SpecT:
    """``spec`` trained with ``seed`` (every task's spec holds a ``train`` section)."""
    if spec.train.seed == seed:
        return spec
    return replace(spec, train=replace(spec.train, seed=seed))  # type: ignore[type-var]


@dataclass(frozen=True, kw_only=True)
class Trial(Generic[SpecT]):
    """One (variant, seed) to train: what Ray gets as ``config["trial"]``."""

    name: str
    """Readable and unique in the sweep: ``sandwich16_6@seed2``, ``sandwich16_6+hg-kq@seed0``."""
    candidate: str
    variant: Variant
    """The model it trains: order, guidance, IOT subset, side."""
    seed: int
    space: str
    spec: SpecT | None = None
    """What the task's ``fit`` trains (the variant's model, the data, training with
    :attr:`seed`), built at planning. ``None`` only for a searcher run outside a sweep
    (the oracle benchmark, its tests): nothing trains those."""
    baseline: bool = False
    params: dict[str, Any] = field(default_factory=dict)
    """Facts about the trial that do not identify its model (``k``, ``family``, a
    one-shot rank); recorded as MLflow params."""

    @property
    def order(self) -> str:
        return self.variant.order

    @property
    def family(self) -> str:
        """``baseline``, the family of the order (an explicit sandwich), or the space."""
        if self.baseline:
            return "baseline"
        return str(self.params.get("family", self.space))

    @property
    def guidance(self) -> str:
        """Cross-layer guidance label, for display: ``none``, ``sg-kq``, ``hg-kq+ffn``, …"""
        return self.variant.label

    def describe(self) -> dict[str, Any]:
        """Plain data for display and records (never parsed back into a trial)."""
        return {"name": self.name, "candidate": self.candidate, "order": self.order,
                "seed": self.seed, "space": self.space, "baseline": self.baseline,
                "params": dict(self.params), "variant": self.variant.to_dict()}

    def planned_spec(self) -> SpecT:
        """:attr:`spec`, or a clear error for a trial no sweep planned."""
        if self.spec is None:
            raise ValueError(f"trial {self.name} has no spec: it was suggested by a searcher "
                             "outside a sweep (give the searcher the plan's specs)")
        return self.spec

    @classmethod
    def of(cls, cand: Candidate, seed: int, spec: SpecT | None = None, *,
           baseline: bool = False) -> Trial[SpecT]:
        """``cand`` trained with ``seed``; ``spec`` is the candidate's planned spec."""
        return cls(name=f"{cand.name}@seed{seed}", candidate=cand.name, variant=variant_of(cand),
                   seed=seed, space=cand.space,
                   spec=None if spec is None else reseeded(spec, seed),
                   baseline=baseline or cand.baseline, params=dict(cand.params))


SpecSource = Callable[[str, Variant], Any]
"""The planned spec of a candidate, by name, or of a variant the plan did not hold (an
evolution's mutant): :meth:`SweepPlan.spec_source`. Searchers outside a sweep have none."""
