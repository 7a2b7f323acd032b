"""Experiment files (``configs/*.yaml``): schema, loading and whole-file validation.

``load_experiment(path)`` parses the YAML, validates every section (pydantic for
shapes and types, then the spaces, the model, the data and the resources) and raises
one :class:`ExperimentError` listing *every* problem with its YAML path. Nothing here
starts Ray or touches MLflow.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.plan.places import RaySpec, TrackingSpec
from sublayer_search.search.plan.problems import (
    NO_VALUE,
    ExperimentError,
    Problem,
    from_validation_error,
    unknown_key,
)
from sublayer_search.search.plan.scalars import OWN_CHECKS, magnitude_problems, strict_scalars
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.plan.yaml_input import read_yaml
from sublayer_search.search.searchers.registry import known_searcher
from sublayer_search.search.tasks.base import ModelSection, Task
from sublayer_search.search.tasks.sections import one_of, read_section, read_supernet
from sublayer_search.spaces.registry import ALL_SPACES

__all__ = [
    "Experiment", "SpaceSpec", "BaselineSpec", "Resources", "SchedulerSpec", "SearchSpec",
    "FailureSpec", "load_experiment", "parse_experiment",
    "config_hash", "read_yaml",
]


def _distinct(seeds: list[int]) -> list[int]:
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise PydanticCustomError("distinct", "a list of distinct seeds (repeated: {repeated})",
                                  {"repeated": ", ".join(map(str, repeated))})
    return seeds


Seeds = Annotated[int, Field(ge=1)] | Annotated[list[Annotated[int, Field(ge=0)]],
                                                Field(min_length=1), AfterValidator(_distinct)]
"""A count ``n`` (seeds ``0..n-1``, n >= 1) or a non-empty list of distinct seeds >= 0."""

MAX_NAME = 100
"""Longest sweep name: it names folders and files (``<name>-<timestamp>``, ``<name>.latest``)."""
MAX_DESCRIPTION = 8000
"""Longest description: MLflow's limit for a run tag (the sweep run's note carries it whole)."""
TRAIN_FILE_SECTIONS = frozenset({"model", "data", "train"})
"""The sections of a ``sublayer train --config`` file (configs/train/): no name, no space."""
DATA_PATHS = ("path", "train_path", "valid_path", "test_path", "data_dir", "cache_dir",
              "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_tgt")
"""``data`` settings that name files or folders: relative ones are relative to the file."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SpaceSpec(BaseModel):
    """``{type: sandwich, n: 16, k: [0, 6]}``: a space name and its arguments."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: str
    """A space of the registry (:data:`~sublayer_search.spaces.registry.ALL_SPACES`)."""
    seeds: Seeds | None = None
    """This space's seeds (grid search), replacing the sweep's ``seeds`` for its orders:
    e.g. three seeds for the sandwich family, one per random permutation."""

    @field_validator("type", mode="before")
    @classmethod
    def _known_space(cls, value: Any) -> Any:
        return one_of(value, tuple(ALL_SPACES)) if isinstance(value, str) else value

    @property
    def seed_list(self) -> list[int] | None:
        s = self.seeds
        return None if s is None else list(range(s)) if isinstance(s, int) else list(s)

    @property
    def args(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class BaselineSpec(_Strict):
    """The interleaved order at the same budget, trained with several seeds."""

    enabled: bool = True
    seeds: Seeds = 3
    """A count (seeds 0..n-1) or an explicit list."""
    order: str | None = None
    """Override the baseline order (default: ``(sf)^n`` with the space's budget)."""


class Resources(_Strict):
    cpu: float = Field(1.0, gt=0)
    """CPUs of one trial (of each worker when ``workers`` > 1)."""
    gpu: float = Field(0.0, ge=0)
    """Fractions share one GPU between trials (``0.5`` = two trials per GPU); with
    ``workers`` > 1, GPUs of each worker (a whole number)."""
    workers: int = Field(1, ge=1, le=1024)
    """Data-parallel workers of one trial (Ray Train, PyTorch DDP: gloo on CPUs, NCCL on
    GPUs). The global batch is ``train.batch_size``, split evenly across the workers."""


class SchedulerSpec(_Strict):
    type: Literal["fifo", "asha", "curve"] = "fifo"
    """``curve``: learning-curve stopping, the early stopping to use
    (:mod:`~sublayer_search.search.run.curve_stopping`; docs/search.md); ``asha``: ASHA."""
    grace_period: int = Field(1, ge=1)
    """ASHA and curve: evaluations before a trial can be stopped (curve: at least 2)."""
    reduction_factor: float = Field(2.0, gt=1)
    z: float = Field(2.0, ge=0)
    """curve: noise margin, in sds of the catch-up between baseline seeds (docs/search.md)."""
    top_k: int = Field(3, ge=1)
    """curve: the best candidates the rule must keep."""
    metric: str = "val_loss"
    mode: Literal["min", "max"] = "min"


STATIC_OBJECTIVES = ("params", "flops_per_token")
"""Objectives known from the order before training (the trial table's columns; minimised)."""


class SearchSpec(_Strict):
    algorithm: Annotated[str, BeforeValidator(known_searcher)] = "grid"
    """A registered searcher (:mod:`search.searchers.registry`): ``surrogate``, a GP over order
    features; ``oneshot``, a weight-sharing supernet ranks every order, the ``top_k`` train."""
    num_samples: int | None = Field(None, ge=1)
    """Trial budget of ``optuna``/``surrogate``/``evolution`` (not counting the baseline seeds)."""
    seed: int = 0
    population: int = Field(8, ge=2)
    """Evolution: population size (regularized evolution, Real et al. 2019)."""
    sample_size: int = Field(3, ge=1)
    """Evolution: tournament size."""
    metric: str | None = None
    """Metric the searcher optimises (default: the corpus's main validation metric)."""
    objectives: list[str] | None = None
    """Optuna only: several objectives (``[val_ppl, flops_per_token]``; the first is the
    metric, the others reported metrics or ``params`` / ``flops_per_token``)."""
    sampler: Literal["tpe", "nsga2"] = "tpe"
    """Optuna's sampler: TPE (also multi-objective) or NSGA-II (multi-objective)."""
    replicates: int | None = Field(None, ge=1)
    """Optuna: most seeds one candidate trains (a candidate suggested again is a replicate,
    with the next seed). Default: no limit with one objective, 1 with several (a point of
    the front is measured once; ask for more to see seed noise on the front)."""
    warm_start: bool | str | Annotated[list[str], Field(min_length=1)] = False
    """Adaptive searchers: tell them the finished trials of earlier sweeps with the same
    content key (config hash, identity) first; ``true``: this MLflow experiment, a name
    or a list of names: those experiments."""
    prior: str | Annotated[list[str], Field(min_length=1)] | None = None
    """``surrogate``: studies that shape it before its first trial (``press2020``, an export,
    a trials CSV, an MLflow experiment; :mod:`~sublayer_search.search.searchers.prior`)."""
    supernet: Annotated[SupernetConfig | None, PlainValidator(read_supernet), OWN_CHECKS] = None
    """``oneshot``: the supernet's settings (``steps``, ``sharing``, ``eval_batches``, ``seed``, …)."""
    top_k: int | None = Field(None, ge=1)
    """``oneshot``: how many of the best-ranked orders train stand-alone (default 5)."""


class FailureSpec(_Strict):
    retries: int = Field(0, ge=0)
    """Ray restarts a failed trial this many times (from its last checkpoint)."""
    tolerate: bool = False
    """Exit 0 even when trials failed or diverged (for sweeps where some are expected to);
    by default such a sweep exits with status 1."""


def _asdict(value: Any) -> Any:
    return dataclasses.asdict(value) if isinstance(value, ModelSection) else value


class Experiment(_Strict):
    """One sweep: what to train, how to search, where to run and track it."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    task: str = "lm"
    """A registered task (:mod:`sublayer_search.search.tasks`): ``lm`` (OrderedLM on a
    corpus) or ``translation`` (OrderedSeq2Seq / IOT) are built in."""
    space: SpaceSpec | Annotated[list[SpaceSpec], Field(min_length=1)]
    seeds: Seeds = 1
    baseline: BaselineSpec = Field(default_factory=BaselineSpec)
    model: Annotated[ModelSection[Any] | None, OWN_CHECKS, PlainSerializer(_asdict)] = Field(
        default_factory=dict, validate_default=True)
    """The task's model config (written: its fields without ``order``, an optional
    ``preset``) and ``model.guidance``. Sections are None only where
    :func:`parse_experiment` was given a ``found`` list for their problems."""
    data: Annotated[Any, OWN_CHECKS]
    """The task's data config (``DataConfig``; ``ParallelDataConfig`` for translation)."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    translation: Annotated[Any, OWN_CHECKS] = Field(default_factory=dict, validate_default=True)
    """The task's own config (``TranslationConfig``: beam, max_len, … for task: translation);
    None for a task without one."""
    resources: Resources = Field(default_factory=Resources)
    max_concurrent: int | None = Field(None, ge=1)
    scheduler: SchedulerSpec = Field(default_factory=SchedulerSpec)
    search: SearchSpec = Field(default_factory=SearchSpec)
    failure: FailureSpec = Field(default_factory=FailureSpec)
    tracking: TrackingSpec = Field(default_factory=TrackingSpec)
    ray: RaySpec = Field(default_factory=RaySpec)
    reuse: bool | Literal["experiment", "store"] = False
    """Take trials that already finished with the same content key — order, seed and every
    resolved model/data/train setting (the config hash) — instead of training them again.
    ``true``/``experiment``: from earlier sweeps of this MLflow experiment; ``store``: from
    any experiment of the tracking store (copied into this sweep as runs tagged
    ``sublayer.reused_from``, so its studies see them)."""
    """Take trials whose (order, seed, config hash) already finished from MLflow."""

    @field_validator("description")
    @classmethod
    def _fits_a_tag(cls, value: str) -> str:
        if len(value) > MAX_DESCRIPTION:
            raise ValueError(f"a description of at most {MAX_DESCRIPTION:,} characters (MLflow's "
                             f"limit for a tag; this one has {len(value):,}: keep longer notes "
                             "in a file beside the experiment)")
        return value

    _task: Any = PrivateAttr(default=None)

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        from sublayer_search.search.tasks import task_names

        return one_of(value, task_names())

    @field_validator("model", "data", "translation", mode="plain")
    @classmethod
    def _task_section(cls, value: Any, info: ValidationInfo) -> Any:
        return read_section(value, info)

    @model_validator(mode="after")
    def _keep_task(self, info: ValidationInfo) -> Experiment:
        context = info.context if isinstance(info.context, dict) else {}
        self._task = context.get("task")
        return self

    def new_task(self) -> Task[Any, Any, Any, Any]:
        """A copy of the task that read this experiment's sections (a plan's own: what
        planning adds to it stays with that plan)."""
        from sublayer_search.search.tasks import task_for

        return copy.deepcopy(self._task) if self._task is not None else task_for(self.task)

    @property
    def spaces(self) -> list[SpaceSpec]:
        return list(self.space) if isinstance(self.space, list) else [self.space]

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def baseline_seeds(self) -> list[int]:
        s = self.baseline.seeds
        return list(range(s)) if isinstance(s, int) else list(s)

    @property
    def experiment_name(self) -> str:
        return self.tracking.experiment or self.name

    def storage_path(self) -> str:
        return Storage.of(self.ray.storage_path).uri  # an absolute folder or s3://BUCKET/…


ADDED_UNSET = ("translation.max_tokens",)
"""Settings added after runs were recorded: unset (None), they leave the hash as it was, so
reuse and warm start still find those runs."""


ADDED_DEFAULTS: dict[str, Any] = {"translation.bleu_tokenize": "13a",
                                  "translation.test_bleu": False}
"""Settings added later whose default is what runs recorded before did: at that default
they leave the hash as it was."""
ONLY_WITH = {"translation.batch_multiple": "translation.max_tokens"}
"""Settings that change nothing unless another is set: hashed only then, so runs recorded
before they were added keep their hash where they mean nothing."""


def config_hash(settings: dict[str, Any]) -> str:
    """Short stable hash of every setting except the order and the seed (and
    ``train.parallel``: DDP and FSDP train the same numbers, as any worker count does; and
    ``train.checkpoint_every``: how often a trial saves changes none of its numbers)."""
    keep = {k: v for k, v in settings.items()
            if k not in ("model.order", "train.seed", "train.parallel", "train.checkpoint_every")
            and not (k in ADDED_UNSET and v is None)
            and not (k in ADDED_DEFAULTS and v == ADDED_DEFAULTS[k])
            and not (k in ONLY_WITH and settings.get(ONLY_WITH[k]) is None)}
    blob = json.dumps(keep, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def parse_experiment(raw: Any, source: str = "<experiment>", *,
                     found: list[Problem] | None = None) -> Experiment:
    """Validate a parsed YAML document in one pass: shapes and types, and the sections its
    task reads (cross-field checks: :func:`~.sweep_plan.plan_sweep`).

    Raises :class:`ExperimentError` with every problem found. With a ``found`` list, the
    problems that leave the rest checkable (unknown top-level keys, a quoted number, a
    section the task refuses: that section is None) go there instead, for
    :func:`~.sweep_plan.plan_sweep` to report with its own.
    """
    if not isinstance(raw, dict):
        raise ExperimentError(source, [Problem("", type(raw).__name__, "a YAML mapping at the top level")])
    if raw and set(raw) <= TRAIN_FILE_SECTIONS:  # configs/train/*.yaml handed to `sweep`
        raise ExperimentError(source, [Problem(
            "", NO_VALUE, f"this is a `sublayer train --config` file (only "
            f"{'/'.join(sorted(raw))} sections), not an experiment file (name, space, …); "
            f"train with it: sublayer train --order ORDER --config {source}")])
    raw, problems = strict_scalars(Experiment, raw)
    if isinstance(raw.get("model"), dict):  # sizes beyond reason (the task checks the rest)
        too_big = magnitude_problems(raw["model"], "model", sizes=True)
        problems += too_big
        if too_big:
            bad = {p.path.split(".")[1].split("[")[0] for p in too_big}
            raw = {**raw, "model": {k: v for k, v in raw["model"].items() if str(k) not in bad}}
    unknown = [k for k in raw if isinstance(k, str) and k not in Experiment.model_fields]
    raw = {k: v for k, v in raw.items() if k not in unknown}
    context: dict[str, Any] = {"found": []}
    exp: Experiment | None = None
    try:
        exp = Experiment.model_validate(raw, context=context)
    except pydantic.ValidationError as err:
        problems += from_validation_error(err, model=Experiment)
    except RecursionError:
        problems.append(Problem("", "a document nested too deeply", "a flatter YAML document"))
    problems += [Problem(k, NO_VALUE, unknown_key(k, Experiment.model_fields))
                 for k in unknown] + context["found"]
    if exp is None or (problems and found is None):
        raise ExperimentError(source, problems) from None
    if found is not None:
        found += problems
    return exp


def _relative_to(folder: Path, raw: Any) -> Any:
    """``data`` paths made absolute against the experiment file's folder (trials run in
    other folders, on other nodes)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), dict):
        return raw
    data = dict(raw["data"])
    for key in DATA_PATHS:
        value = data.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            data[key] = str((folder / value).resolve())
    return {**raw, "data": data}


def load_experiment(path: str | os.PathLike[str], *,
                    found: list[Problem] | None = None) -> Experiment:
    """Read and check an experiment file (:func:`parse_experiment`, ``found`` included); see
    :func:`search.plan.sweep_plan.plan_sweep` for the rest.

    Relative ``data`` paths are resolved against the file's folder, once, here.
    """
    raw = read_yaml(path)
    return parse_experiment(_relative_to(Path(path).resolve().parent, raw), str(path),
                            found=found)
