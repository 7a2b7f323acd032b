"""Searchers by name (``search.algorithm``): what each can do, its settings, and how its
searcher is built. The ``search`` section is read as the settings of the searcher its
``algorithm`` names (:func:`read_search`).

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

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import pydantic
from pydantic_core import PydanticCustomError

from sublayer_search.search.core.modules import import_every_module
from sublayer_search.search.core.plugins import claim, declare_group
from sublayer_search.search.core.problems import Problem, from_validation_error
from sublayer_search.search.core.scalars import strict_scalars
from sublayer_search.search.core.section import Refused
from sublayer_search.search.searchers.settings import MISPLACED, SearchSection
from sublayer_search.search.tasks.sections import mapping
from sublayer_search.spaces.kinds import first_hybrid
from sublayer_search.spaces.problems import ProblemError

if TYPE_CHECKING:
    from ray.tune.search import Searcher

    from sublayer_search.search.core.variant import VariantCandidate
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchedExperiment, SearchInput

__all__ = ["SearchAlgorithm", "dry_run_footer", "known_searcher", "listed", "read_search", "register_searcher",
           "make_searcher", "search_algorithm", "searcher_names", "unregister_searcher"]

BUILTIN = "sublayer_search.search.searchers.algorithms"
"""The package whose every module declares one searcher (imported on the first lookup)."""


class SearchAlgorithm:
    """What one ``search.algorithm`` can do (class attributes) and how it is built."""

    name: ClassVar[str] = ""
    settings: ClassVar[type[SearchSection]] = SearchSection
    """Its ``search`` section: the common settings, and its own in a subclass declared
    beside it (a setting of another searcher is refused, named as such)."""
    position: ClassVar[float] = math.inf
    """Where lists of searchers (error messages) name it; unranked ones follow, by name."""
    needs_budget: ClassVar[bool] = True
    """``search.num_samples`` is required: it proposes that many trials beyond the plan's."""
    plans_every_trial: ClassVar[bool] = False
    """The plan lists every trial it runs (grid): seeds per space, a dry run of the
    plan's models only, a sweep short of the plan's trials did not finish."""
    stage_two: ClassVar[str] = ""
    """With ``supernet_stage``: the registered searcher that runs the ranked orders."""
    takes_prior: ClassVar[bool] = False
    """``search.prior`` shapes it (:mod:`~sublayer_search.search.searchers.prior`)."""
    takes_warm_start: ClassVar[bool] = True
    """``search.warm_start``: told earlier sweeps' results first (its ``warm_start`` hook)."""
    guided_candidates: ClassVar[bool] = True
    """Searches candidates with ``model.guidance``."""
    iot_subsets: ClassVar[bool] = True
    """Searches IOT subsets (space ``iot_subsets``: a model is a set of orders)."""
    any_kinds: ClassVar[bool] = True
    """Searches orders of any sublayer kinds (:mod:`~sublayer_search.spaces.kinds`); False:
    it reads order features (halves, units, mutations) that weigh s, f, c and h only."""
    resumable: ClassVar[bool] = True
    """``sublayer sweep --resume`` restores its state (``save``/``restore``)."""
    supernet_stage: ClassVar[bool] = False
    """A weight-sharing supernet ranks the space's orders first (stage 1); the best train
    as a grid (stage 2). Takes ``search.supernet`` and ``search.top_k``."""
    why_not: ClassVar[Mapping[str, str]] = {}
    """By capability it lacks: why, said after what a file asking for it is told to use
    instead (which the registry lists: no searcher names another)."""

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        """The Ray Tune searcher of ``plan`` (a sweep plan), warm-started with
        ``plan.warm`` where it takes a warm start."""
        raise NotImplementedError(f"searcher {cls.name!r} builds no searcher")

    @classmethod
    def goal(cls, plan: SearchInput) -> str:
        """What the dry run says it optimises: the metric by default."""
        return f"metric {plan.metric}"

    @classmethod
    def footer(cls, plan: SearchInput) -> str:
        """What ``sublayer sweep --dry-run`` prints under the trial table: the trials it
        runs (a budget beyond the plan's, unless it plans every trial), then its goal."""
        n, tail = len(plan.trials), f"; {cls.goal(plan)}; nothing was run"
        if cls.plans_every_trial:
            return f"{n} trial(s){tail}"
        return (f"{n} trial(s) + up to {plan.experiment.search.num_samples} proposed by "
                f"{cls.name} from {len(plan.candidates)} candidates{tail}")

    @classmethod
    def refusal(cls, capability: str, instead: str) -> str:
        """``instead`` (what to use), with why this searcher lacks ``capability``."""
        why = cls.why_not.get(capability)
        return f"{instead} ({why})" if why else instead

    @classmethod
    def problems(cls, exp: SearchedExperiment,
                 pool: Sequence[VariantCandidate]) -> list[Problem]:
        """Every problem of searching ``pool`` this way as ``exp`` asks (its settings, the
        candidates); by default :meth:`pool_problems`."""
        return cls.pool_problems(pool)

    @classmethod
    def pool_problems(cls, pool: Sequence[VariantCandidate]) -> list[Problem]:
        """What it cannot search among the planned candidates (guided ones, IOT subsets),
        from its capabilities; a searcher with rules of its own overrides this."""
        problems = []
        if not cls.iot_subsets and any(c.variant.subset is not None for c in pool):
            problems.append(Problem("search.algorithm", cls.name, cls.refusal(
                "iot_subsets", f"{listed(searcher_names(iot_subsets=True))} for iot_subsets")))
        hybrid = first_hybrid(c.order for c in pool)
        if not cls.any_kinds and hybrid is not None:
            problems.append(Problem("search.algorithm", cls.name, cls.refusal(
                "any_kinds", f"{listed(searcher_names(any_kinds=True))} for orders with "
                             f"the hybrid kinds w, r, e (the space holds {hybrid!r})")))
        if not cls.guided_candidates and any(c.variant.guided for c in pool):
            problems.append(Problem("search.algorithm", cls.name, cls.refusal(
                "guided_candidates",
                f"{listed(searcher_names(guided_candidates=True))} with model.guidance")))
        return problems


_SEARCHERS: dict[str, type[SearchAlgorithm]] = {}


def register_searcher(name: str) -> Callable[[type[SearchAlgorithm]], type[SearchAlgorithm]]:
    """Make the decorated class the searcher of ``search.algorithm: <name>``."""
    if not name:
        raise ValueError("a searcher needs a non-empty name")

    def add(cls: type[SearchAlgorithm]) -> type[SearchAlgorithm]:
        contract: list[str] = []
        if not (isinstance(cls, type) and issubclass(cls, SearchAlgorithm)):
            contract.append("a subclass of SearchAlgorithm")
        else:
            if cls.make.__func__ is SearchAlgorithm.make.__func__:  # type: ignore[attr-defined]
                contract.append("a make(plan) that builds its Ray Tune searcher")
            if not (isinstance(cls.settings, type) and issubclass(cls.settings, SearchSection)):
                contract.append("settings: a subclass of SearchSection")
        claim("searcher", name, cls, dict(_SEARCHERS), contract)
        cls.name = name
        _SEARCHERS[name] = cls
        return cls

    return add


def unregister_searcher(name: str) -> None:
    _SEARCHERS.pop(name, None)


def _load() -> None:
    import_every_module(BUILTIN)


def searcher_names(**capabilities: bool | int | str) -> tuple[str, ...]:
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


def known_searcher(value: object) -> str:
    """``search.algorithm``, checked against the registry before its type (pydantic's error
    for a literal, also for a value that is no string)."""
    names = searcher_names()
    if not isinstance(value, str) or value not in names:
        raise PydanticCustomError("literal_error", "Input should be {expected}",
                                  {"expected": listed(names, repr)})
    return value


def dry_run_footer(plan: SearchInput) -> str:
    """The footer of the searcher that runs ``plan`` (:meth:`SearchAlgorithm.footer`)."""
    return search_algorithm(plan.algorithm).footer(plan)


def _owners() -> dict[str, list[str]]:
    """Each searcher's own setting, with the searchers declaring it."""
    owners: dict[str, list[str]] = {}
    for name in searcher_names():
        for key in search_algorithm(name).settings.model_fields:
            if key not in SearchSection.model_fields:
                owners.setdefault(key, []).append(name)
    return owners


def _misplaced(raw: dict[str, Any], algorithm: str) -> list[Problem]:
    own = search_algorithm(algorithm).settings.model_fields
    problems = []
    for key, names in _owners().items():
        if key in raw and key not in own:
            text = search_algorithm(names[0]).settings.elsewhere.get(key, MISPLACED)
            problems.append(Problem(f"search.{key}", raw[key], text.format(
                key=key, algorithm=algorithm, owners=listed(names))))
    return problems


def read_search(raw: object) -> SearchSection | Refused:
    """The section as the settings of its searcher; a :class:`Refused` keeping them when
    only some keys are wrong (another searcher's setting, a quoted number, a bad
    ``supernet``: the file's other checks still run), a ``ProblemError`` otherwise."""
    if isinstance(raw, SearchSection):
        return raw
    section = mapping(raw)
    algorithm = section.get("algorithm", "grid")
    names = searcher_names()
    if not isinstance(algorithm, str) or algorithm not in names:
        raise ProblemError([Problem("algorithm", algorithm, f"one of {listed(names, repr)}")])
    settings = search_algorithm(algorithm).settings
    section = {k: v for k, v in section.items()  # another searcher's setting left null: unset
               if v is not None or k in settings.model_fields or k not in _owners()}
    misplaced = _misplaced(section, algorithm)
    moved = {p.path.removeprefix("search.") for p in misplaced}
    rest, quoted = strict_scalars(settings, {k: v for k, v in section.items()
                                             if k not in moved}, "search")
    try:
        value = settings.model_validate(rest)
    except pydantic.ValidationError as err:  # the section stands no more: every problem now
        raise ProblemError(quoted + from_validation_error(err, "search", model=settings)
                           + misplaced) from None
    refused = [v for _, v in value if isinstance(v, Refused)]  # settings read whole
    if refused:
        value = value.model_copy(update={k: v.kept for k, v in value if isinstance(v, Refused)})
    found = quoted + [p for r in refused for p in r.problems] + misplaced
    return Refused(tuple(found), value) if found else value


def make_searcher(plan: SearchInput) -> Searcher:
    """The searcher an experiment asks for: its registered declaration builds it
    (:mod:`~sublayer_search.search.searchers.registry`)."""
    return search_algorithm(plan.algorithm).make(plan)


declare_group("searcher", lambda: tuple(_SEARCHERS))
