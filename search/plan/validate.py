"""Planning, step 1 of 3: *validate*. The experiment file alone, no I/O.

Every space is expanded (generators are pure), the baseline chosen, the guidance axis
crossed, duplicates dropped, and each strategy checks what it owns (the searcher its
settings and the pool, the stopping rule its settings). Problems are collected, never
raised here: :func:`~.sweep_plan.plan_sweep` reports them with those of the other steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from sublayer_search.search.core.guidance_axis import Settings, cross, guidance_settings
from sublayer_search.search.core.problems import Problem, from_exception
from sublayer_search.search.core.variant import VariantCandidate
from sublayer_search.search.plan.duplicates import Duplicate, drop_duplicates
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.searchers.registry import listed, search_algorithm, searcher_names
from sublayer_search.search.stopping.registry import stopping_rule
from sublayer_search.search.tasks import Task, task_class
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import OrderError
from sublayer_search.spaces.kinds import first_hybrid
from sublayer_search.spaces.order import parse_order
from sublayer_search.spaces.registry import ALL_SPACES, expand, spelled

__all__ = ["Validated", "validate"]

AnyTask = Task[Any, Any, Any, Any]


@dataclass(frozen=True, kw_only=True)
class Validated:
    """What the file alone says: the candidate pool, the baseline and their seeds."""

    experiment: Experiment
    task: AnyTask
    """The task that read the model, data and task sections (this plan's own copy)."""
    template: Any
    """The task's model config (``None`` where the model section had problems)."""
    guidance: Settings
    pool: list[VariantCandidate]
    """The space's candidates, guidance crossed, duplicates dropped."""
    baseline: VariantCandidate | None
    duplicates: tuple[Duplicate, ...]
    seeds_of: dict[tuple[str, str], list[int]]
    """Seeds of candidates whose space sets its own, by (space, stem)."""


def validate(exp: Experiment, problems: list[Problem]) -> Validated:
    """Step 1: the file's candidates and every check that needs nothing but the file;
    problems are appended to ``problems``."""
    task = exp.new_task()
    template = exp.model.template if exp.model is not None else None
    guidance = exp.model.guidance if exp.model is not None else guidance_settings(None, [])
    seeds_of: dict[tuple[str, str], list[int]] = {}
    pool = _expand_spaces(exp, task, template, problems, seeds_of)
    base = _baseline(exp, task, pool, template, problems)  # unguided, at the space's budget
    pool = cross(pool, [setting for _, setting in guidance.values()])
    pool, duplicates = drop_duplicates(  # per-space seeds: grid only (else a problem)
        pool, base, identity=task.identity, baseline_seeds=exp.baseline_seeds,
        seeds_of=lambda c: seeds_of.get((c.space, c.stem), exp.seed_list))
    _check_search(exp, pool, problems)
    return Validated(experiment=exp, task=task, template=template, guidance=guidance,
                     pool=pool, baseline=base, duplicates=tuple(duplicates), seeds_of=seeds_of)


def _space_error_path(prefix: str, exc: Exception, space: str,
                      original: dict[str, Any]) -> Problem:
    """The problem at the argument as the file spells it (``k``, not the sandwich's ``ks``)."""
    prob = from_exception(exc, prefix)
    for alias, target in ALL_SPACES[space].aliases.items():
        if alias in original and target.argument not in original:
            prob = Problem(prob.path.replace(f".{target.argument}", f".{alias}"), prob.value,
                           prob.expected)
    return prob


def _expand_spaces(exp: Experiment, task: AnyTask, template: Any, problems: list[Problem],
                   seeds_of: dict[tuple[str, str], list[int]]) -> list[VariantCandidate]:
    """Every space's candidates (one that weighs its kinds by the ``template``'s dims gets
    them); ``seeds_of`` gets the seeds of spaces that set their own, keyed by (space,
    candidate name)."""
    out: list[VariantCandidate] = []
    many = isinstance(exp.space, list)
    for i, space in enumerate(exp.spaces):
        prefix = f"space[{i}]" if many else "space"
        if space.seeds is not None and not search_algorithm(exp.search.algorithm).plans_every_trial:
            only = listed(searcher_names(plans_every_trial=True))
            problems.append(Problem(f"{prefix}.seeds", space.seeds, "no seeds per space with "
                                    f"search.algorithm {exp.search.algorithm} ({only} only; "
                                    "set the sweep's seeds)"))
        unfit = task.space_problem(space.type)
        if unfit is not None:
            problems.append(Problem(f"{prefix}.type", space.type, unfit))
            continue
        if ALL_SPACES[space.type].weighs and getattr(template, "dims", None) is None:
            continue  # weighed by a model section that has problems of its own
        try:
            kind, args, side = task.space_args(space.type, space.args)
            suffix = "_enc" if side == "encoder" else ""
            cands = [VariantCandidate.of(replace(c, name=c.name + suffix), side=side)
                     for c in expand(space.type, spelled(space.type, args), kind=kind,
                                     dims=getattr(template, "dims", None))]
            out.extend(cands)
            own = space.seed_list
            for c in cands if own is not None else ():
                seeds_of[(c.space, c.name)] = sorted({*seeds_of.get((c.space, c.name), []),
                                                      *(own or [])})
        except ValueError as exc:
            problems.append(_space_error_path(prefix, exc, space.type, space.args))
    return out


def _baseline(exp: Experiment, task: AnyTask, pool: Sequence[Candidate], template: Any,
              problems: list[Problem]) -> VariantCandidate | None:
    if not exp.baseline.enabled:
        return None
    if exp.baseline.order is not None:
        try:
            order = parse_order(exp.baseline.order, kind=task.kind)
        except OrderError as exc:
            problems.append(Problem("baseline.order", exp.baseline.order,
                                    f"a valid {task.kind} order (position {exc.position}: "
                                    f"{exc.problem})"))
            return None
        return task.explicit_baseline(order)
    return task.baseline(pool, template, problems)


def _check_search(exp: Experiment, pool: Sequence[VariantCandidate],
                  problems: list[Problem]) -> None:
    algo = exp.search.algorithm
    searcher = search_algorithm(algo)
    if searcher.needs_budget and exp.search.num_samples is None:
        problems.append(Problem("search.num_samples", None,
                                f"a trial budget (a positive integer) for search.algorithm {algo}"))
    problems += searcher.problems(exp, pool)  # its settings; guided candidates, IOT subsets
    if exp.search.warm_start is not False and not searcher.takes_warm_start:
        problems.append(Problem("search.warm_start", exp.search.warm_start, searcher.refusal(
            "takes_warm_start", f"false for search.algorithm {algo}")))
    problems += stopping_rule(exp.scheduler.type).problems(exp.scheduler, exp.train)
    _check_hybrid(exp, pool, problems)
    if exp.search.proxy is not None:
        if not searcher.plans_every_trial:
            only = listed(searcher_names(plans_every_trial=True))
            problems.append(Problem("search.proxy", exp.search.proxy.experiment,
                                    f"no proxy stage with search.algorithm {algo} ({only} "
                                    "only: the stage picks among the planned orders)"))
        refused = task_class(exp.task).refusals.get("proxy")
        if refused:
            problems.append(Problem("search.proxy", exp.search.proxy.experiment,
                                    f"no proxy stage in {refused}"))


def _check_hybrid(exp: Experiment, pool: Sequence[VariantCandidate],
                  problems: list[Problem]) -> None:
    """Orders with the hybrid kinds (w, r, e) take no prior: its features weigh s, f, c
    and h only (a searcher's own refusal: ``any_kinds`` in its declaration)."""
    hybrid = first_hybrid(c.order for c in pool)
    if hybrid is not None and exp.search.prior is not None:
        problems.append(Problem("search.prior", exp.search.prior, "no prior for orders with "
                                f"the hybrid kinds w, r, e (the space holds {hybrid!r})"))
