"""From a validated experiment to a sweep plan: the trial table and the candidate pool.

``plan_sweep(exp)`` runs every cross-field check (space arguments, model, budget of
the baseline, data availability, local resources) and collects *all* problems before
raising one :class:`ExperimentError`. It never starts Ray nor touches MLflow.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from models.accounting import flops_per_token, param_count
from models.config import ModelConfig, model_preset
from models.data import DataError, corpus_info, load_corpus
from models.data.download import resolve_files
from models.data.registry import get_spec
from models.train import TrialSpec
from spaces.candidate import Candidate
from spaces.cost import units
from spaces.errors import OrderError
from spaces.order import counts, interleaved, parse_order
from spaces.registry import expand

from .config import Experiment, config_hash, settings_of
from .problems import ExperimentError, Problem, from_exception

__all__ = ["Trial", "SweepPlan", "plan_sweep", "trial_table"]

_BASELINE_PLACEHOLDER = "sf"


@dataclass(frozen=True, kw_only=True)
class Trial:
    """One (order, seed) to train: what Ray gets as ``config["trial"]``."""

    name: str
    """Readable and unique in the sweep: ``sandwich16_6@seed2``."""
    candidate: str
    order: str
    seed: int
    space: str
    baseline: bool = False
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def family(self) -> str:
        return "baseline" if self.baseline else self.space

    def to_config(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Trial:
        return cls(**data)

    @classmethod
    def of(cls, cand: Candidate, seed: int, *, baseline: bool = False) -> Trial:
        return cls(name=f"{cand.name}@seed{seed}", candidate=cand.name, order=cand.order,
                   seed=seed, space=cand.space, baseline=baseline or cand.baseline,
                   params=dict(cand.params))


@dataclass(frozen=True, kw_only=True)
class SweepPlan:
    """A validated experiment with its expanded candidates and trials."""

    experiment: Experiment
    source: str
    model: ModelConfig
    """The model template (baseline order, vocabulary filled in)."""
    candidates: list[Candidate]
    """The space's pool, baseline excluded (searchers draw from it)."""
    baseline: Candidate | None
    trials: list[Trial]
    """Grid: every trial. Adaptive searchers: the baseline trials only."""
    metric: str
    """Main validation metric (``val_ppl`` or ``val_bpc``)."""

    def spec_for(self, trial: Trial) -> TrialSpec:
        exp = self.experiment
        return TrialSpec(model=replace(self.model, order=trial.order), data=exp.data,
                         train=replace(exp.train, seed=trial.seed))

    @property
    def config_hash(self) -> str:
        return config_hash({**settings_of(self.experiment),
                            **{f"model.{k}": v for k, v in asdict(self.model).items()}})

    def row(self, trial: Trial) -> dict[str, Any]:
        """The trial's table row: what the dry run prints and MLflow records as params."""
        cfg = replace(self.model, order=trial.order)
        c = counts(trial.order)
        return {
            "name": trial.name, "order": trial.order, "seed": trial.seed, "space": trial.space,
            "family": trial.family, "k": trial.params.get("k"), "n_s": c["s"], "n_f": c["f"],
            "n_c": c["c"], "units": units(trial.order, f_units=_f_units(cfg)),
            "params": param_count(cfg), "flops_per_token": flops_per_token(cfg),
        }


def _f_units(cfg: ModelConfig) -> float:
    return (2 * cfg.d_model * cfg.d_ff) / (4 * cfg.d_model**2)


def trial_table(plan: SweepPlan) -> list[dict[str, Any]]:
    return [plan.row(t) for t in plan.trials]


def _model_template(exp: Experiment, problems: list[Problem]) -> ModelConfig | None:
    raw = dict(exp.model)
    if "order" in raw:
        problems.append(Problem("model.order", raw["order"],
                                "no order here: orders come from the space and the baseline"))
        raw.pop("order")
    preset = raw.pop("preset", None)
    try:
        if preset is not None:
            return model_preset(str(preset), order=_BASELINE_PLACEHOLDER, **raw)
        return ModelConfig.from_dict({"order": _BASELINE_PLACEHOLDER, **raw})
    except (ValueError, TypeError) as exc:
        problems.append(from_exception(exc, "model", value=raw))
        return None


def _space_args(args: dict[str, Any]) -> dict[str, Any]:
    """Accept ``k`` as the YAML spelling of the sandwich argument ``ks``."""
    if "k" in args and "ks" not in args:
        args = dict(args)
        args["ks"] = args.pop("k")
        if isinstance(args["ks"], int):
            args["ks"] = [args["ks"]]
    return args


def _space_error_path(prefix: str, exc: Exception, original: dict[str, Any]) -> Problem:
    prob = from_exception(exc, prefix)
    if "k" in original and "ks" not in original:
        prob = Problem(prob.path.replace(".ks", ".k"), prob.value, prob.expected)
    return prob


def _expand_spaces(exp: Experiment, problems: list[Problem]) -> list[Candidate]:
    out: list[Candidate] = []
    many = isinstance(exp.space, list)
    for i, space in enumerate(exp.spaces):
        prefix = f"space[{i}]" if many else "space"
        if space.type == "iot_subsets":
            problems.append(Problem(f"{prefix}.type", space.type,
                                    "a language-model space (iot_subsets needs task: translation)"))
            continue
        try:
            out.extend(expand(space.type, _space_args(space.args), kind="lm"))
        except ValueError as exc:
            problems.append(_space_error_path(prefix, exc, space.args))
    return out


def _baseline(exp: Experiment, pool: Sequence[Candidate], template: ModelConfig | None,
              problems: list[Problem]) -> Candidate | None:
    if not exp.baseline.enabled:
        return None
    if exp.baseline.order is not None:
        try:
            order = parse_order(exp.baseline.order, kind="lm")
        except OrderError as exc:
            problems.append(Problem("baseline.order", exp.baseline.order,
                                    f"a valid lm order (position {exc.position}: {exc.problem})"))
            return None
        return Candidate(order=order, space="baseline", name=f"baseline_{len(order)}",
                         baseline=True)
    if not pool:
        return None
    f_units = _f_units(template) if template is not None else 2.0
    budgets = sorted({units(c.order, f_units=f_units) for c in pool})
    if len(budgets) != 1:
        problems.append(Problem("baseline.order", None,
                                f"an explicit baseline order: the space mixes budgets {budgets}"))
        return None
    n, rest = divmod(budgets[0], 1 + f_units)
    if rest or n < 1:
        problems.append(Problem("baseline.order", None,
                                f"an explicit baseline order: a budget of {budgets[0]:g} units is "
                                f"not a whole number of (sf) layers ({1 + f_units:g} units each)"))
        return None
    order = interleaved(int(n))
    return Candidate(order=order, space="baseline", name=f"interleaved{int(n)}", baseline=True)


def _check_data(exp: Experiment, problems: list[Problem]) -> tuple[str, int | None]:
    """The main metric and the vocabulary size, checking the corpus is available."""
    info = corpus_info(exp.data.name)
    level = exp.data.resolved_level
    try:
        resolve_files(replace(exp.data, download=False), get_spec(exp.data.name))
    except DataError as exc:
        if not exp.data.download:
            problems.append(Problem("data.name", exp.data.name, f"an available corpus: {exc}"))
            return ("val_ppl" if level == "word" else "val_bpc"), info.vocab_size
    vocab = info.vocab_size
    return ("val_ppl" if level == "word" else "val_bpc"), vocab


def _check_resources(exp: Experiment, problems: list[Problem]) -> None:
    """Local runs: a trial must fit this machine (clusters are checked after connecting)."""
    if exp.ray.address or os.environ.get("RAY_ADDRESS"):
        return
    cpus = exp.ray.num_cpus or os.cpu_count() or 1
    if exp.resources.cpu > cpus:
        problems.append(Problem("resources.cpu", exp.resources.cpu,
                                f"at most {cpus} (CPUs of this machine / ray.num_cpus)"))
    gpus = exp.ray.num_gpus if exp.ray.num_gpus is not None else _local_gpus()
    if exp.resources.gpu > gpus:
        problems.append(Problem("resources.gpu", exp.resources.gpu,
                                f"at most {gpus} (GPUs of this machine / ray.num_gpus)"))
    if exp.resources.gpu > 1 and exp.resources.gpu != int(exp.resources.gpu):
        problems.append(Problem("resources.gpu", exp.resources.gpu,
                                "a fraction below 1 or a whole number of GPUs"))


def _local_gpus() -> int:
    import torch

    return torch.cuda.device_count()


def _check_search(exp: Experiment, pool: Sequence[Candidate], problems: list[Problem]) -> None:
    algo = exp.search.algorithm
    if algo != "grid" and exp.search.num_samples is None:
        problems.append(Problem("search.num_samples", None,
                                f"a trial budget (a positive integer) for search.algorithm {algo}"))
    if algo == "evolution" and pool:
        spaces = {c.space for c in pool}
        if len(spaces) > 1:
            problems.append(Problem("search.algorithm", algo,
                                    "grid or optuna when the experiment has several spaces"))
    if exp.scheduler.type == "asha" and exp.scheduler.metric not in ("val_loss", "train_loss"):
        problems.append(Problem("scheduler.metric", exp.scheduler.metric,
                                "val_loss or train_loss (reported at every evaluation)"))


def resource_problems(exp: Experiment, address: str | None = None) -> list[Problem]:
    """Problems of ``resources`` on this machine (none when a cluster address is given)."""
    problems: list[Problem] = []
    if not address:
        _check_resources(exp, problems)
    return problems


def plan_sweep(exp: Experiment, source: str = "<experiment>", *, address: str | None = None,
               check_resources: bool = True) -> SweepPlan:
    """Validate everything about ``exp`` and expand it; raise one error listing every problem.

    Resources are checked against this machine unless a cluster ``address`` is given
    (then :func:`search.sweep.check_cluster` checks them after connecting) or
    ``check_resources`` is false (``--dry-run`` only warns).
    """
    problems: list[Problem] = []
    template = _model_template(exp, problems)
    pool = _expand_spaces(exp, problems)
    base = _baseline(exp, pool, template, problems)
    metric, vocab = _check_data(exp, problems)
    if check_resources:
        problems += resource_problems(exp, address)
    _check_search(exp, pool, problems)
    if template is not None and base is not None:
        template = replace(template, order=base.order)
    if template is not None and template.vocab_size is None:
        if vocab is None and not problems:
            try:
                vocab = load_corpus(exp.data).vocab_size
            except (DataError, OSError) as exc:
                problems.append(Problem("data.name", exp.data.name, f"a readable corpus: {exc}"))
        if vocab is not None:
            template = template.with_vocab(vocab)
    if template is not None:
        for cand in pool:
            try:
                replace(template, order=cand.order)
            except ValueError as exc:
                problems.append(from_exception(exc, f"space ({cand.name})"))
                break
    if problems:
        raise ExperimentError(source, problems)
    assert template is not None
    if exp.search.metric is not None:
        metric = exp.search.metric

    trials: list[Trial] = []
    seen: dict[tuple[str, int], int] = {}

    def add(cand: Candidate, seed: int, baseline: bool) -> None:
        key = (cand.order, seed)
        if key in seen:  # the baseline order inside the space (e.g. sandwich k=0): one trial
            i = seen[key]
            if baseline != trials[i].baseline:
                trials[i] = replace(trials[i], baseline=True,
                                    params={**cand.params, **trials[i].params})
            return
        seen[key] = len(trials)
        trials.append(Trial.of(cand, seed, baseline=baseline))

    if base is not None:
        for seed in exp.baseline_seeds:
            add(base, seed, True)
    if exp.search.algorithm == "grid":
        for cand in pool:
            for seed in exp.seed_list:
                add(cand, seed, False)
    return SweepPlan(experiment=exp, source=source, model=template, candidates=pool,
                     baseline=base, trials=trials, metric=metric)
