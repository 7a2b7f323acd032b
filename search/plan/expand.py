"""Planning, step 3 of 3: *expand*. Pure: from what was validated and resolved to a
concretely typed :class:`~.sweep_plan.SweepPlan`.

Each candidate's model config is built once (guidance applied), each spec once from it,
and the trials from the specs: every row of the trial table is computed from its spec.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sublayer_search.search.core.guidance_axis import Settings, check_guided
from sublayer_search.search.core.problems import ExperimentError, Problem, from_exception
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import VariantCandidate
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.plan.resolve import Resolved
from sublayer_search.search.plan.sweep_plan import AnyTask, SweepPlan, build_model
from sublayer_search.search.plan.validate import Validated
from sublayer_search.search.searchers.queue import queued
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.search.searchers.settings import STATIC_OBJECTIVES

__all__ = ["expand", "model_configs"]


def model_configs(v: Validated, r: Resolved, problems: list[Problem]) -> dict[str, Any]:
    """Every candidate's (and the baseline's) model config by name, or problems."""
    pool = [*v.pool, *([v.baseline] if v.baseline else [])]
    return _models(v.task, r.template, pool, v.guidance, problems)


def expand(v: Validated, r: Resolved, models: dict[str, Any], source: str) -> SweepPlan[Any, Any, Any, Any]:
    """Step 3: the plan (raises :class:`ExperimentError` for a metric or objective the
    trials do not report, the problems only the data can tell)."""
    exp, task, data, extra = v.experiment, v.task, v.experiment.data, v.experiment.translation
    metric = exp.search.metric or task.metric(data)
    if exp.search.metric is not None and not task.reports(exp.search.metric, data):
        raise ExperimentError(source, [Problem("search.metric", exp.search.metric,
                                               "a metric the trials report: "
                                               + ", ".join(sorted(task.reported_metrics(data))))])
    if _objective_problems(exp, task, data):
        raise ExperimentError(source, _objective_problems(exp, task, data))
    specs = {name: task.spec(model, data, exp.train, extra) for name, model in models.items()}
    trials = _trials(exp, task, v.pool, v.baseline, v.seeds_of, specs)
    if search_algorithm(exp.search.algorithm).plans_every_trial:  # a prior: best-predicted first
        trials = queued(trials, r.prior, task.unit_costs(r.template))
    return SweepPlan(experiment=exp, source=source, model=r.template, data=data, extra=extra,
                     candidates=v.pool, baseline=v.baseline, trials=trials, specs=specs,
                     metric=metric, task=task, duplicates=v.duplicates, prior=r.prior,
                     history=("validated", "resolved", "expanded"))


def _objective_problems(exp: Experiment, task: AnyTask, data: Any) -> list[Problem]:
    """Objectives the trials never report (checked once the data is known)."""
    out = []
    for i, name in enumerate(exp.search.front()):
        if name not in STATIC_OBJECTIVES and not task.reports(name, data):
            out.append(Problem(f"search.objectives[{i}]", name, "a metric the trials report ("
                               + ", ".join(sorted(task.reported_metrics(data)))
                               + ") or one of " + ", ".join(STATIC_OBJECTIVES)))
    return out


def _models(task: AnyTask, template: Any, pool: Sequence[VariantCandidate],
            guidance: Settings, problems: list[Problem]) -> dict[str, Any]:
    """Every candidate's model config (guidance applied) by name, built once; a problem
    when one does not build or a guidance setting does not fit its orders."""
    for cand in pool:
        try:
            task.model_for(template, cand.variant)
        except ValueError as exc:
            problems.append(from_exception(exc, f"space ({cand.name})"))
            return {}
    built: dict[str, Any] = {}

    def build(cand: VariantCandidate) -> Any:
        built[cand.name] = build_model(task, template, cand.variant)
        return built[cand.name]

    check_guided(pool, guidance, build, problems)
    if problems:
        return {}
    for cand in pool:
        if cand.name not in built:
            build(cand)
    return built


def _trials(exp: Experiment, task: AnyTask, pool: Sequence[VariantCandidate],
            base: VariantCandidate | None, seeds_of: dict[tuple[str, str], list[int]],
            specs: dict[str, Any]) -> list[Trial[Any]]:
    """The baseline's trials, then (grid) every candidate's with its seeds; a candidate
    that is the baseline's model joins the baseline trial of its seed."""
    trials: list[Trial[Any]] = []
    seen: dict[tuple[str, int, str], int] = {}

    def add(cand: VariantCandidate, seed: int, baseline: bool) -> None:
        key = (cand.order, seed, task.identity(cand.variant))
        if key in seen:  # the baseline order inside the space (e.g. sandwich k=0): one trial
            i = seen[key]
            if baseline != trials[i].baseline:
                trials[i] = replace(trials[i], baseline=True,
                                    params={**cand.params, **trials[i].params})
            return
        seen[key] = len(trials)
        trials.append(Trial.of(cand, seed, specs[cand.name], baseline=baseline))

    if base is not None:
        for seed in exp.baseline_seeds:
            add(base, seed, True)
    if search_algorithm(exp.search.algorithm).plans_every_trial:
        for cand in pool:
            # a guided copy has its space's seeds (its stem is the space's name)
            for seed in seeds_of.get((cand.space, cand.stem), exp.seed_list):
                add(cand, seed, False)
    return trials
