"""From a validated experiment to a sweep plan: the trial table and the candidate pool.

``plan_sweep(exp)`` runs every cross-field check (space arguments, model, budget of
the baseline, data availability, local resources) and collects *all* problems before
raising one :class:`ExperimentError`. It never starts Ray nor touches MLflow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Any, Generic

from sublayer_search.search.oneshot.checks import oneshot_problems
from sublayer_search.search.plan.duplicates import Duplicate, drop_duplicates
from sublayer_search.search.plan.experiment import STATIC_OBJECTIVES, Experiment, config_hash
from sublayer_search.search.plan.guidance_axis import (
    Settings,
    check_guided,
    cross,
    guidance_settings,
)
from sublayer_search.search.plan.preflight import place_problems, secret_problems
from sublayer_search.search.plan.problems import ExperimentError, Problem, from_exception
from sublayer_search.search.plan.resources import worker_problems
from sublayer_search.search.plan.trial import Trial
from sublayer_search.search.plan.variant import Variant, VariantCandidate
from sublayer_search.search.searchers.observation import Observation
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.queue import queued, search_prior
from sublayer_search.search.searchers.registry import listed, search_algorithm, searcher_names
from sublayer_search.search.tasks import Task
from sublayer_search.search.tasks.base import DataT, ExtraT, ModelT, SpecT
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import OrderError
from sublayer_search.spaces.order import counts, parse_order
from sublayer_search.spaces.records import Direction, direction
from sublayer_search.spaces.registry import expand, space_arguments

__all__ = ["SweepPlan", "plan_sweep", "trial_table"]

AnyTask = Task[Any, Any, Any, Any]


@dataclass(frozen=True, kw_only=True)
class SweepPlan(Generic[ModelT, DataT, ExtraT, SpecT]):
    """A validated experiment with its expanded candidates and trials, typed by its task."""

    experiment: Experiment
    source: str
    model: ModelT
    """The model template (baseline orders, vocabulary filled in)."""
    data: DataT
    """The data config (``DataConfig``, or ``ParallelDataConfig`` for translation)."""
    extra: ExtraT | None = None
    """The task's own section (``TranslationConfig`` for translation)."""
    candidates: list[VariantCandidate]
    """The space's pool, baseline excluded (searchers draw from it)."""
    baseline: VariantCandidate | None
    trials: list[Trial[SpecT]]
    """Grid: every trial. Adaptive searchers: the baseline trials only."""
    specs: dict[str, SpecT]
    """Each candidate's spec by name (the baseline's too), built once here: a trial
    trains its candidate's spec with its own seed (:meth:`Trial.of`)."""
    metric: str
    """Main validation metric (``val_ppl``, ``val_bpc`` or ``val_bleu``)."""
    task: Task[ModelT, DataT, ExtraT, SpecT]
    """LM, translation, …: configs, baseline, spec and fit of a trial."""
    warm: tuple[Observation, ...] = ()
    """Finished trials of earlier sweeps told to the searcher first (``search.warm_start``)."""
    duplicates: tuple[Duplicate, ...] = ()
    """Candidates that were another's model (:mod:`.duplicates`): the dry run notes them."""
    prior: OrderPrior | None = None
    """``search.prior``, fitted once at planning: it orders a grid's queue
    (:mod:`~sublayer_search.search.searchers.queue`)."""

    @property
    def mode(self) -> Direction:
        """``min`` for losses and perplexities, ``max`` for BLEU (the metric's direction)."""
        return direction(self.metric)

    def for_trials(self) -> SweepPlan[ModelT, DataT, ExtraT, SpecT]:
        """This plan without its per-candidate tables (candidates, trials, specs, warm
        start): what a trial's process needs, since its ``Trial`` carries its own spec. Ray
        deserialises the bound plan at every trial start: at 5,000 trials the whole plan
        is 2.7 MB and 0.2 s of a worker's CPU each time, this about 0.1 MB."""
        return replace(self, candidates=[], trials=[], specs={}, warm=(), prior=None)

    def model_for(self, trial: Trial) -> ModelT:
        return _build(self.task, self.model, trial.variant)

    @cached_property  # asked once per row of the trial table: O(n²) as a property
    def guided(self) -> bool:
        """Some candidate is guided (the trial table gets a ``guidance`` column)."""
        return any(c.variant.guided for c in self.candidates)

    def spec_of(self, variant: Variant) -> SpecT:
        """The spec of a variant the plan did not hold (an evolution's mutant)."""
        return self.task.spec(_build(self.task, self.model, variant), self.data,
                              self.experiment.train, self.extra)

    def spec_source(self, name: str, variant: Variant) -> SpecT:
        """The planned spec of candidate ``name``; for a variant the plan did not hold (an
        evolution's mutant), built now (:class:`~.trial.SpecSource`)."""
        planned = self.specs.get(name)
        return self.spec_of(variant) if planned is None else planned

    def settings(self) -> dict[str, Any]:
        """Every data/train/model setting, flat (``train.lr``), for hashing and params."""
        out = {f"data.{k}": v for k, v in asdict(self.data).items()}  # type: ignore[call-overload]
        out.update({f"train.{k}": v for k, v in asdict(self.experiment.train).items()})
        # a trial's guidance is in its identity (its variant), not in the shared template
        out.update({f"model.{k}": v for k, v in asdict(self.model).items()  # type: ignore[call-overload]
                    if k != "guidance"})
        # settings beside the template (IOT routing): hashed too, so reuse never takes a
        # run trained with other ones (none: the hash is unchanged)
        out.update({f"model.{k}": v for k, v in self.task.settings().items()})
        if self.extra is not None and self.task.section is not None:
            out.update({f"{self.task.section}.{k}": v
                        for k, v in asdict(self.extra).items()})  # type: ignore[call-overload]
        return out

    @property
    def config_hash(self) -> str:
        return config_hash(self.settings())

    def describe_models(self) -> list[str]:
        """The task's lines on the planned models (translation: IOT and baseline depths):
        the trials, and the candidates an adaptive searcher may propose."""
        models = [("baseline trial" if t.baseline else "trial", t.variant, self.model_for(t))
                  for t in self.trials]
        if not search_algorithm(self.experiment.search.algorithm).plans_every_trial:
            models += [("candidate", c.variant, _build(self.task, self.model, c.variant))
                       for c in self.candidates]
        return self.task.describe_models(models)

    def row(self, trial: Trial) -> dict[str, Any]:
        """The trial's table row: what the dry run prints and MLflow records as params."""
        c = counts(trial.order)
        row = {"name": trial.name, "order": trial.order, "seed": trial.seed, "space": trial.space,
               "family": trial.family, "k": trial.params.get("k"), "n_s": c["s"], "n_f": c["f"],
               "n_c": c["c"]}
        if "h" in c:  # half-width feedforwards (macaron): only where there are some
            row["n_h"] = c["h"]
        if self.guided:
            row["guidance"] = trial.guidance
        row.update(self.task.row(self.model_for(trial), trial.variant))
        return row


def _build(task: Task[ModelT, Any, Any, Any], template: ModelT, variant: Variant) -> ModelT:
    """The model config of ``variant``: the task's, with the variant's guidance (validated
    again by the config: hard guidance needs a pair)."""
    model = task.model_for(template, variant)
    if not variant.guided:
        return model
    return replace(model, guidance=variant.guidance)  # type: ignore[type-var]


def trial_table(plan: SweepPlan) -> list[dict[str, Any]]:
    return [plan.row(t) for t in plan.trials]


def _space_error_path(prefix: str, exc: Exception, original: dict[str, Any]) -> Problem:
    prob = from_exception(exc, prefix)
    if "k" in original and "ks" not in original:
        prob = Problem(prob.path.replace(".ks", ".k"), prob.value, prob.expected)
    return prob


def _expand_spaces(exp: Experiment, task: AnyTask, problems: list[Problem],
                   seeds_of: dict[tuple[str, str], list[int]]) -> list[VariantCandidate]:
    """Every space's candidates; ``seeds_of`` gets the seeds of spaces that set their own,
    keyed by (space, candidate name)."""
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
        try:
            kind, args, side = task.space_args(space.type, space.args)
            suffix = "_enc" if side == "encoder" else ""
            cands = [VariantCandidate.of(replace(c, name=c.name + suffix), side=side)
                     for c in expand(space.type, space_arguments(args), kind=kind)]
            out.extend(cands)
            own = space.seed_list
            for c in cands if own is not None else ():
                seeds_of[(c.space, c.name)] = sorted({*seeds_of.get((c.space, c.name), []),
                                                      *(own or [])})
        except ValueError as exc:
            problems.append(_space_error_path(prefix, exc, space.args))
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
    problems += searcher.pool_problems(pool)  # guided candidates, IOT subsets
    _check_objectives(exp, problems)
    problems += oneshot_problems(exp, pool)  # supernet and top_k: oneshot only
    if exp.scheduler.type in ("asha", "curve") and exp.scheduler.metric not in ("val_loss", "train_loss"):
        problems.append(Problem("scheduler.metric", exp.scheduler.metric,
                                "val_loss or train_loss (reported at every evaluation)"))
    evaluations = exp.train.steps // exp.train.eval_every
    if exp.scheduler.type in ("asha", "curve") and exp.scheduler.grace_period > max(evaluations, 1):
        problems.append(Problem("scheduler.grace_period", exp.scheduler.grace_period,
                                f"at most {max(evaluations, 1)} (the evaluations of a trial: "
                                f"train.steps {exp.train.steps} / train.eval_every "
                                f"{exp.train.eval_every})"))


def _check_objectives(exp: Experiment, problems: list[Problem]) -> None:
    spec, searcher = exp.search, search_algorithm(exp.search.algorithm)
    if spec.warm_start is not False and not searcher.takes_warm_start:
        problems.append(Problem("search.warm_start", spec.warm_start, searcher.refusal(
            "takes_warm_start", f"false for search.algorithm {spec.algorithm}")))
    if spec.replicates is not None and not searcher.takes_replicates:
        problems.append(Problem("search.replicates", spec.replicates, "no replicates for "
                                f"search.algorithm {spec.algorithm} (they cap one candidate's "
                                f"seeds under {listed(searcher_names(takes_replicates=True))})"))
    if spec.objectives is None:
        return
    if not searcher.several_objectives:
        problems.append(Problem("search.objectives", spec.objectives,
                                f"no objectives for search.algorithm {spec.algorithm} "
                                "(multi-objective search needs "
                                f"{listed(searcher_names(several_objectives=True))})"))
    if len(spec.objectives) < 2:
        problems.append(Problem("search.objectives", spec.objectives, "two or more objectives "
                                "(for one, set search.metric)"))
        return
    if len(set(spec.objectives)) < len(spec.objectives):
        problems.append(Problem("search.objectives", spec.objectives, "distinct objectives"))
    if spec.objectives[0] in STATIC_OBJECTIVES:
        problems.append(Problem("search.objectives[0]", spec.objectives[0],
                                "a metric the trials report (params and flops_per_token "
                                "may follow it)"))
    if spec.metric is not None and spec.metric != spec.objectives[0]:
        problems.append(Problem("search.metric", spec.metric, f"the first objective, "
                                f"{spec.objectives[0]} (or leave search.metric out)"))


def _objective_problems(exp: Experiment, task: AnyTask, data: Any) -> list[Problem]:
    """Objectives the trials never report (checked once the data is known)."""
    out = []
    for i, name in enumerate(exp.search.objectives or []):
        if name not in STATIC_OBJECTIVES and not task.reports(name, data):
            out.append(Problem(f"search.objectives[{i}]", name, "a metric the trials report ("
                               + ", ".join(sorted(task.reported_metrics(data)))
                               + ") or one of " + ", ".join(STATIC_OBJECTIVES)))
    return out


def plan_sweep(exp: Experiment, source: str = "<experiment>", *, address: str | None = None,
               check_resources: bool = True, notes: list[str] | None = None,
               tracking_uri: str | None = None,
               found: Sequence[Problem] = ()) -> SweepPlan[Any, Any, Any, Any]:
    """Validate everything about ``exp`` and expand it; raise one error listing every problem.

    Resources are checked against this machine unless a cluster ``address`` is given
    (then :func:`search.run.sweep.check_cluster` checks them after connecting) or
    ``check_resources`` is false (``--dry-run`` only warns). A list given as ``notes``
    (``--dry-run``) collects what could only be estimated instead of failing on it.
    ``found``: the file's problems :func:`~.experiment.parse_experiment` left to report
    with these (its sections that failed are None).
    """
    problems: list[Problem] = list(found)
    task = exp.new_task()  # the task that read the model, data and translation sections
    template = exp.model.template if exp.model is not None else None
    guidance = exp.model.guidance if exp.model is not None else guidance_settings(None, [])
    data, extra = exp.data, exp.translation
    seeds_of: dict[tuple[str, str], list[int]] = {}
    pool = _expand_spaces(exp, task, problems, seeds_of)
    base = _baseline(exp, task, pool, template, problems)  # unguided, at the space's budget
    pool = cross(pool, [setting for _, setting in guidance.values()])
    pool, duplicates = drop_duplicates(  # per-space seeds: grid only (else a problem)
        pool, base, identity=task.identity, baseline_seeds=exp.baseline_seeds,
        seeds_of=lambda c: seeds_of.get((c.space, c.stem), exp.seed_list))
    if check_resources:  # a real sweep: where it will run and write
        problems += place_problems(exp, data, address=address, tracking_uri=tracking_uri)
    else:  # a dry run still refuses a secret in a URI
        problems += secret_problems(exp, tracking_uri)
    problems += worker_problems(exp)
    _check_search(exp, pool, problems)
    prior = search_prior(exp, tracking_uri, problems)
    if template is not None and data is not None and not problems:
        template = task.resolve(template, data, base, problems, notes)
    models: dict[str, Any] = {}
    if template is not None and not problems:
        models = _models(task, template, [*pool, *([base] if base else [])], guidance, problems)
    if problems or template is None or data is None:
        raise ExperimentError(source, problems)
    metric = exp.search.metric or task.metric(data)
    if exp.search.metric is not None and not task.reports(exp.search.metric, data):
        raise ExperimentError(source, [Problem("search.metric", exp.search.metric,
                                               "a metric the trials report: "
                                               + ", ".join(sorted(task.reported_metrics(data))))])
    if _objective_problems(exp, task, data):
        raise ExperimentError(source, _objective_problems(exp, task, data))
    specs = {name: task.spec(model, data, exp.train, extra) for name, model in models.items()}
    trials = _trials(exp, task, pool, base, seeds_of, specs)
    if search_algorithm(exp.search.algorithm).plans_every_trial:  # a prior: best-predicted first
        trials = queued(trials, prior, task.unit_costs(template))
    if notes is not None:
        notes += [d.note() for d in duplicates]
    return SweepPlan(experiment=exp, source=source, model=template, data=data, extra=extra,
                     candidates=pool, baseline=base, trials=trials, specs=specs, metric=metric,
                     task=task, duplicates=tuple(duplicates), prior=prior)


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
        built[cand.name] = _build(task, template, cand.variant)
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
