"""What a searcher is built from: the parts of a sweep plan it reads.

A searcher never imports planning (planning imports the searchers, to check an experiment
against what each can do); a :class:`~sublayer_search.search.plan.sweep_plan.SweepPlan`
satisfies these protocols, and so can any object a test or a benchmark builds.
"""

from __future__ import annotations

from typing import Any, Protocol

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Spec, Trial
from sublayer_search.search.core.variant import Variant, VariantCandidate
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.settings import SearchSection
from sublayer_search.search.tasks.base import Task
from sublayer_search.spaces.records import Direction

__all__ = ["SearchInput", "SearchedExperiment"]


class SearchedExperiment(Protocol):
    """The experiment as a searcher reads it: its ``search`` section, seeds and task."""

    @property
    def search(self) -> SearchSection: ...

    @property
    def train(self) -> TrainConfig: ...

    @property
    def seed_list(self) -> list[int]: ...

    @property
    def task(self) -> str: ...


class SearchInput(Protocol):
    """A planned sweep as a searcher reads it."""

    @property
    def experiment(self) -> SearchedExperiment: ...

    @property
    def algorithm(self) -> str:
        """The registered searcher that runs the plan."""

    @property
    def trials(self) -> list[Trial[Any]]:
        """Every planned trial (the baseline seeds first)."""

    @property
    def candidates(self) -> list[VariantCandidate]:
        """The pool an adaptive searcher draws from."""

    @property
    def metric(self) -> str: ...

    @property
    def mode(self) -> Direction: ...

    @property
    def model(self) -> object:
        """The task's model config (what :meth:`Task.unit_costs` reads)."""

    @property
    def task(self) -> Task[Any, Any, Any, Any]: ...

    @property
    def warm(self) -> tuple[Observation, ...]: ...

    @property
    def prior(self) -> OrderPrior | None: ...

    def spec_source(self, name: str, variant: Variant) -> Spec:
        """The planned spec of a candidate, or of a variant the plan did not hold."""

    def row(self, trial: Trial[Any]) -> dict[str, Any]:
        """The trial's table row (static objectives: ``params``, ``flops_per_token``)."""
