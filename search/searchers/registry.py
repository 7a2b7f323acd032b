"""Searchers by name (``search.algorithm``): what each can do, and how its searcher is built.

A searcher declares its capabilities as class attributes of a :class:`SearchAlgorithm`
subclass registered with ``@register_searcher("name")``; the experiment's allowed names,
every planning check, the dry run and the sweep ask these declarations, never the name.
Declarations are light (no Ray, no Optuna: ``--dry-run`` reads them): one module each
in :mod:`sublayer_search.search.searchers.algorithms`, every one of which is imported on
the first lookup. :meth:`SearchAlgorithm.make` builds the Ray Tune searcher, a
:class:`~sublayer_search.search.searchers.base.Stateful` whose hooks (``warm_start``,
``mark_taken``) do nothing unless it overrides them.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_core import PydanticCustomError

from sublayer_search.search.plan.problems import Problem

if TYPE_CHECKING:
    from sublayer_search.search.plan.variant import VariantCandidate

__all__ = ["SearchAlgorithm", "known_searcher", "listed", "register_searcher",
           "search_algorithm", "searcher_names", "unregister_searcher"]

BUILTIN = "sublayer_search.search.searchers.algorithms"
"""The package whose every module declares one searcher (imported on the first lookup)."""


class SearchAlgorithm:
    """What one ``search.algorithm`` can do (class attributes) and how it is built."""

    name: ClassVar[str] = ""
    position: ClassVar[float] = math.inf
    """Where lists of searchers (error messages) name it; unranked ones follow, by name."""
    needs_budget: ClassVar[bool] = True
    """``search.num_samples`` is required: it proposes that many trials beyond the plan's."""
    plans_every_trial: ClassVar[bool] = False
    """The plan lists every trial it runs (grid): seeds per space, a dry run of the
    plan's models only, a sweep short of the plan's trials did not finish."""
    takes_prior: ClassVar[bool] = False
    """``search.prior`` shapes it (:mod:`~sublayer_search.search.searchers.prior`)."""
    several_objectives: ClassVar[bool] = False
    """``search.objectives``: a Pareto front over two or more objectives."""
    takes_replicates: ClassVar[bool] = False
    """``search.replicates``: a cap on the seeds one candidate trains."""
    takes_warm_start: ClassVar[bool] = True
    """``search.warm_start``: told earlier sweeps' results first (its ``warm_start`` hook)."""
    guided_candidates: ClassVar[bool] = True
    """Searches candidates with ``model.guidance``."""
    iot_subsets: ClassVar[bool] = True
    """Searches IOT subsets (space ``iot_subsets``: a model is a set of orders)."""
    resumable: ClassVar[bool] = True
    """``sublayer sweep --resume`` restores its state (``save``/``restore``)."""
    supernet_stage: ClassVar[bool] = False
    """A weight-sharing supernet ranks the space's orders first (stage 1); the best train
    as a grid (stage 2). Takes ``search.supernet`` and ``search.top_k``."""
    why_not: ClassVar[Mapping[str, str]] = {}
    """By capability it lacks: why, said after what a file asking for it is told to use
    instead (which the registry lists: no searcher names another)."""

    @classmethod
    def make(cls, plan: Any) -> Any:
        """The Ray Tune searcher of ``plan`` (a ``SweepPlan``), warm-started with
        ``plan.warm`` where it takes a warm start."""
        raise NotImplementedError(f"searcher {cls.name!r} builds no searcher")

    @classmethod
    def refusal(cls, capability: str, instead: str) -> str:
        """``instead`` (what to use), with why this searcher lacks ``capability``."""
        why = cls.why_not.get(capability)
        return f"{instead} ({why})" if why else instead

    @classmethod
    def pool_problems(cls, pool: Sequence[VariantCandidate]) -> list[Problem]:
        """What it cannot search among the planned candidates (guided ones, IOT subsets),
        from its capabilities; a searcher with rules of its own overrides this."""
        problems = []
        if not cls.iot_subsets and any(c.variant.subset is not None for c in pool):
            problems.append(Problem("search.algorithm", cls.name, cls.refusal(
                "iot_subsets", f"{listed(searcher_names(iot_subsets=True))} for iot_subsets")))
        if not cls.guided_candidates and any(c.variant.guided for c in pool):
            problems.append(Problem("search.algorithm", cls.name, cls.refusal(
                "guided_candidates",
                f"{listed(searcher_names(guided_candidates=True))} with model.guidance")))
        return problems


_SEARCHERS: dict[str, type[SearchAlgorithm]] = {}
_loaded = False


def register_searcher(name: str) -> Callable[[type[SearchAlgorithm]], type[SearchAlgorithm]]:
    """Make the decorated class the searcher of ``search.algorithm: <name>``."""
    if not name:
        raise ValueError("a searcher needs a non-empty name")

    def add(cls: type[SearchAlgorithm]) -> type[SearchAlgorithm]:
        cls.name = name
        _SEARCHERS[name] = cls
        return cls

    return add


def unregister_searcher(name: str) -> None:
    _SEARCHERS.pop(name, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        package = importlib.import_module(BUILTIN)
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{BUILTIN}.{module.name}")


def searcher_names(**capabilities: Any) -> tuple[str, ...]:
    """Registered names in listing order; with ``capability=value``, those declaring it."""
    _load()
    found = [cls for cls in _SEARCHERS.values()
             if all(getattr(cls, key) == value for key, value in capabilities.items())]
    return tuple(cls.name for cls in sorted(found, key=lambda c: (c.position, c.name)))


def search_algorithm(name: str) -> type[SearchAlgorithm]:
    """The declaration registered as ``name`` (KeyError if none is)."""
    _load()
    return _SEARCHERS[name]


def listed(names: Sequence[str], quote: Callable[[str], str] = str) -> str:
    """``a, b or c``."""
    words = [quote(n) for n in names]
    return " or ".join([", ".join(words[:-1]), words[-1]] if len(words) > 1 else words)


def known_searcher(value: Any) -> Any:
    """``search.algorithm``, checked against the registry before its type (pydantic's error
    for a literal, also for a value that is no string)."""
    names = searcher_names()
    if not isinstance(value, str) or value not in names:
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": listed(names, repr)})
    return value
