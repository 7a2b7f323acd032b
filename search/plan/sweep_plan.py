"""The sweep plan: a validated experiment with its candidates and trials, typed by its
task (:class:`SweepPlan`; made by :func:`~.steps.plan_sweep`). The steps of a run that
change it (warm start, one-shot stage 1, reuse) return a new plan named in its
:attr:`SweepPlan.history` (:func:`then`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from functools import cached_property
from typing import Any, Generic

from sublayer_search.analysis.store.trial_record import TrialRecord
from sublayer_search.search.core.config_hash import config_hash
from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Variant, VariantCandidate
from sublayer_search.search.plan.duplicates import Duplicate
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.search.tasks import Task
from sublayer_search.search.tasks.base import DataT, ExtraT, ModelT, SpecT
from sublayer_search.spaces.order import counts
from sublayer_search.spaces.records import Direction, direction
from sublayer_search.spaces.registry import extra_columns

__all__ = ["AnyTask", "SweepPlan", "build_model", "then", "trial_table"]

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
    runs_as: str | None = None
    """The searcher that runs this plan's trials where a step of the run chose one other
    than the file's (one-shot's stage two runs its ranked orders as a ``grid``)."""
    history: tuple[str, ...] = ()
    """The steps that made this plan, in order: ``validated``, ``resolved``,
    ``expanded``, then those of the run (``warm start``, ``stage one``, ``reuse``)."""

    @property
    def algorithm(self) -> str:
        """The registered searcher that runs the plan (:attr:`runs_as`, else the file's)."""
        return self.runs_as or self.experiment.search.algorithm

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
        return build_model(self.task, self.model, trial.variant)

    @cached_property  # asked once per row of the trial table: O(n²) as a property
    def guided(self) -> bool:
        """Some candidate is guided (the trial table gets a ``guidance`` column)."""
        return any(c.variant.guided for c in self.candidates)

    def spec_of(self, variant: Variant) -> SpecT:
        """The spec of a variant the plan did not hold (an evolution's mutant)."""
        return self.task.spec(build_model(self.task, self.model, variant), self.data,
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
        model = asdict(self.model)  # type: ignore[call-overload]
        if "sublayers" in model:  # the hybrid kinds' settings: only those set, so that a
            model.pop("sublayers")  # model without them hashes as before them
            changed = getattr(self.model, "sublayers").changed()  # noqa: B009 - LM configs only
            model.update({f"sublayers.{k}": v for k, v in changed.items()})
        out.update({f"model.{k}": v for k, v in model.items() if k != "guidance"})
        # settings beside the template (IOT routing): hashed too, so reuse never takes a
        # run trained with other ones (none: the hash is unchanged)
        out.update({f"model.{k}": v for k, v in self.task.settings().items()})
        if self.extra is not None and self.task.section is not None:
            out.update({f"{self.task.section}.{k}": v
                        for k, v in asdict(self.extra).items()})  # type: ignore[call-overload]
        return out

    @cached_property  # asked once per trial by its record
    def config_hash(self) -> str:
        return config_hash(self.settings())

    def describe_models(self) -> list[str]:
        """The task's lines on the planned models (translation: IOT and baseline depths):
        the trials, and the candidates an adaptive searcher may propose."""
        models = [("baseline trial" if t.baseline else "trial", t.variant, self.model_for(t))
                  for t in self.trials]
        if not search_algorithm(self.algorithm).plans_every_trial:
            models += [("candidate", c.variant, build_model(self.task, self.model, c.variant))
                       for c in self.candidates]
        return self.task.describe_models(models)

    def row(self, trial: Trial, model: ModelT | None = None) -> dict[str, Any]:
        """The trial's table row: what the dry run prints and MLflow records as params
        (``model``: the trial's, when the caller has built it)."""
        c = counts(trial.order)
        row = {"name": trial.name, "order": trial.order, "seed": trial.seed, "space": trial.space,
               "family": trial.family,
               **{col: trial.params.get(col) for col in extra_columns()},  # sandwich k
               "n_s": c["s"], "n_f": c["f"], "n_c": c["c"]}
        for kind in c:  # half-width feedforwards (macaron), the hybrid kinds: only where
            if kind not in "sfc":  # there are some (n_h, n_w, n_r, n_e)
                row[f"n_{kind}"] = c[kind]
        if self.guided:
            row["guidance"] = trial.guidance
        row.update(self.task.row(model or self.model_for(trial), trial.variant))
        return row

    def record(self, trial: Trial) -> TrialRecord:
        """The trial's record as planned: its row, the experiment's metric, settings and
        hash, its variant's and the task's facts (what its MLflow run is given)."""
        model = self.model_for(trial)
        row = self.row(trial, model)
        written: dict[str, Any] = {k: v for k, v in row.items() if k not in ("name", "family")}
        written.update(candidate=trial.candidate, metric=self.metric,
                       config_hash=self.config_hash, task=self.experiment.task,
                       objectives=tuple(self.experiment.search.front()) or None)
        facts = {**trial.variant.params(), **trial.params}  # side, IOT subset; k, family, …
        written.update({k: v for k, v in facts.items() if k not in written})
        written.update(self.task.tracking_params(model, trial.variant))
        written.update(self.task.flat(trial.planned_spec()))
        return TrialRecord.planned_from(written, name=trial.name, family=trial.family,
                                        baseline=trial.baseline, guidance=trial.guidance)


def build_model(task: Task[ModelT, Any, Any, Any], template: ModelT, variant: Variant) -> ModelT:
    """The model config of ``variant`` from the task's ``template``."""
    """The model config of ``variant``: the task's, with the variant's guidance (validated
    again by the config: hard guidance needs a pair)."""
    model = task.model_for(template, variant)
    if not variant.guided:
        return model
    return replace(model, guidance=variant.guidance)  # type: ignore[type-var]


def trial_table(plan: SweepPlan) -> list[dict[str, Any]]:
    return [plan.row(t) for t in plan.trials]


def then(plan: SweepPlan[ModelT, DataT, ExtraT, SpecT], step: str, *,
         trials: list[Trial[SpecT]] | None = None, warm: tuple[Observation, ...] | None = None,
         runs_as: str | None = None) -> SweepPlan[ModelT, DataT, ExtraT, SpecT]:
    """``plan`` after a step of the run (``warm start``, ``stage one``, ``reuse``): a new
    plan with the trials, the warm start or the searcher the step changed, the step
    named in its history."""
    return replace(plan, trials=plan.trials if trials is None else trials,
                   warm=plan.warm if warm is None else warm,
                   runs_as=plan.runs_as if runs_as is None else runs_as,
                   history=(*plan.history, step))
