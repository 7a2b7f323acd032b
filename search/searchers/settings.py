"""The experiment file's ``search`` section: which searcher (``algorithm``), its budget, seed
and metric. A searcher with settings of its own (evolution's ``population``, Optuna's
``objectives``, the one-shot ``supernet``, …) declares them in a subclass beside it
(:attr:`~sublayer_search.search.searchers.registry.SearchAlgorithm.settings`); the section
is read as the settings of the searcher ``algorithm`` names
(:func:`~sublayer_search.search.searchers.registry.read_search`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar

from pydantic import Field

from sublayer_search.search.core.scalars import Count
from sublayer_search.search.core.section import Strict

__all__ = ["MISPLACED", "STATIC_OBJECTIVES", "ProxyStage", "SearchSection"]

STATIC_OBJECTIVES = ("params", "flops_per_token")
"""Objectives known from the order before training (the trial table's columns; minimised)."""

MISPLACED = "no {key} for search.algorithm {algorithm} (a setting of {owners})"
"""What a file that gives one searcher's setting to another is told, unless the setting
says otherwise (:attr:`SearchSection.elsewhere`)."""


class ProxyStage(Strict):
    """``search.proxy``: a proxy sweep ranks the orders first; only its best train."""

    experiment: Annotated[str, Field(min_length=1)]
    """The MLflow experiment (same store) of a finished proxy sweep (``task: mad``) that
    scored every order of this sweep's space."""
    top_k: Count = Field(5, ge=1)
    """How many of the orders the proxy scores best train (the baseline always trains)."""
    metric: Annotated[str, Field(min_length=1)] = "mad_acc"
    """The proxy's score (its direction by name: accuracies higher, losses lower)."""


class SearchSection(Strict):
    """What every searcher reads; the whole section of a searcher without settings of its
    own (``grid``, ``surrogate``)."""

    algorithm: str = "grid"
    """A registered searcher (:mod:`search.searchers.registry`): ``surrogate``, a GP over order
    features; ``oneshot``, a weight-sharing supernet ranks every order, the ``top_k`` train."""
    num_samples: Count | None = Field(None, ge=1)
    """Trial budget of ``optuna``/``surrogate``/``evolution`` (not counting the baseline seeds)."""
    seed: int = 0
    metric: str | None = None
    """Metric the searcher optimises (default: the corpus's main validation metric)."""
    warm_start: bool | str | Annotated[list[str], Field(min_length=1)] = False
    """Adaptive searchers: tell them the finished trials of earlier sweeps with the same
    content key (config hash, identity) first; ``true``: this MLflow experiment, a name
    or a list of names: those experiments."""
    prior: str | Annotated[list[str], Field(min_length=1)] | None = None
    """Studies that shape a searcher taking a prior before its first trial (``press2020``,
    an export, a trials CSV, an MLflow experiment;
    :mod:`~sublayer_search.search.searchers.prior`)."""

    proxy: ProxyStage | None = None
    """Proxy first: train only the ``top_k`` orders that a proxy sweep (``task: mad``)
    scored best, with the baseline (:mod:`~sublayer_search.search.run.proxy_stage`)."""

    elsewhere: ClassVar[Mapping[str, str]] = {}
    """By own setting: what a file giving it to another searcher is told (``{key}``,
    ``{algorithm}``, ``{owners}``); :data:`MISPLACED` where it names none."""

    def front(self) -> list[str]:
        """The objectives of a Pareto front (several objectives); [] for one metric."""
        return []
