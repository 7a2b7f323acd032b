"""Experiment files (``configs/*.yaml``): schema, loading and whole-file validation.

``load_experiment(path)`` parses the YAML, validates every section (pydantic for
shapes and types, then the spaces, the model, the data and the resources) and raises
one :class:`ExperimentError` listing *every* problem with its YAML path. Nothing here
starts Ray or touches MLflow.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import pydantic
from pydantic import (
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    field_validator,
)

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.plugins import PluginError, import_plugin, load_installed
from sublayer_search.search.core.problems import (
    NO_VALUE,
    ExperimentError,
    Problem,
    from_validation_error,
    unknown_key,
)
from sublayer_search.search.core.scalars import OWN_CHECKS, magnitude_problems, strict_scalars
from sublayer_search.search.core.section import Refused, Strict
from sublayer_search.search.core.yaml_input import read_yaml
from sublayer_search.search.plan.places import RaySection, TrackingSection
from sublayer_search.search.plan.sections import (
    BaselineSection,
    FailureSection,
    Resources,
    Seeds,
    SpaceSection,
    as_written,
    model_as_written,
    plain,
    space_section,
)
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.searchers.registry import read_search
from sublayer_search.search.searchers.settings import SearchSection
from sublayer_search.search.stopping.settings import FifoSettings, SchedulerSection
from sublayer_search.search.tasks.base import ModelSection, Task
from sublayer_search.search.tasks.registry import task_class, task_for, task_names
from sublayer_search.search.tasks.sections import TASK_SECTIONS, one_of, section_reader
from sublayer_search.spaces.registry import ALL_SPACES

__all__ = [
    "Experiment", "SpaceSection", "BaselineSection", "Resources", "SchedulerSection", "SearchSection",
    "FailureSection", "load_experiment", "parse_experiment",
    "read_yaml",
]


MAX_NAME = 100
"""Longest sweep name: it names folders and files (``<name>-<timestamp>``, ``<name>.latest``)."""
MAX_DESCRIPTION = 8000
"""Longest description: MLflow's limit for a run tag (the sweep run's note carries it whole)."""
TRAIN_FILE_SECTIONS = frozenset({"model", "data", "train"})
"""The sections of a ``sublayer train --config`` file (configs/train/): no name, no space."""
DATA_PATHS = ("path", "train_path", "valid_path", "test_path", "data_dir", "cache_dir",
              "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_tgt")
"""``data`` settings that name files or folders: relative ones are relative to the file."""


if TYPE_CHECKING:  # what every member is, to a type checker
    SpaceEntry = SpaceSection
else:
    SpaceEntry = space_section()
    """One ``space`` entry: its type's section, whose arguments its generator declares."""


class Experiment(Strict):
    """One sweep: what to train, how to search, where to run and track it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    """Built on first use: a file of one task builds that task's type only."""

    name: Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=r"^[A-Za-z0-9_.-]+$")]
    description: str = ""
    task: str = "lm"
    """A registered task (:mod:`sublayer_search.search.tasks`): ``lm`` (OrderedLM on a
    corpus) or ``translation`` (OrderedSeq2Seq / IOT) are built in."""
    space: SpaceEntry | Annotated[list[SpaceEntry], Field(min_length=1)]
    seeds: Seeds = 1
    baseline: BaselineSection = Field(default_factory=BaselineSection)
    model: Annotated[ModelSection[Any] | None, OWN_CHECKS, PlainValidator(as_written),
                     PlainSerializer(model_as_written)] = Field(default_factory=dict, validate_default=True)
    """The task's model config (written: its fields without ``order``, an optional
    ``preset``) and ``model.guidance``, read by the task's experiment type
    (:func:`experiment_member`); None where :func:`parse_experiment` reported its problems."""
    data: Annotated[object, OWN_CHECKS, PlainValidator(as_written)]
    """The task's data config (``DataConfig``; ``ParallelDataConfig`` for translation)."""
    train: TrainConfig = Field(default_factory=TrainConfig)
    translation: Annotated[object, OWN_CHECKS, PlainValidator(as_written)] = Field(
        default_factory=dict, validate_default=True)
    """The task's own config (``TranslationConfig``: beam, max_len, … for task: translation);
    None for a task without one."""
    resources: Resources = Field(default_factory=Resources)
    max_concurrent: int | None = Field(None, ge=1)
    scheduler: Annotated[SchedulerSection, PlainSerializer(plain)] = Field(
        default_factory=FifoSettings)
    """The stopping rule ``type`` names, and its settings (declared beside it)."""
    search: Annotated[SearchSection, OWN_CHECKS, PlainValidator(read_search),
                      PlainSerializer(plain)] = Field(
        default_factory=SearchSection)
    """The searcher ``algorithm`` names, and its settings (declared beside it)."""
    failure: FailureSection = Field(default_factory=FailureSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)
    ray: RaySection = Field(default_factory=RaySection)
    plugins: list[str] = Field(default_factory=list)
    """Modules imported before the file is read, each registering a space, searcher,
    stopping rule or task (``plugins: [my_pkg.my_space]``; importable where the sweep's
    nodes run). Installed plugins (entry points) need no line here."""
    reuse: bool | Literal["experiment", "store"] = False
    """Take trials that already finished with the same content key — order, seed and every
    resolved model/data/train setting (the config hash) — instead of training them again.
    ``true``/``experiment``: from earlier sweeps of this MLflow experiment; ``store``: from
    any experiment of the tracking store (copied into this sweep as runs tagged
    ``sublayer.reused_from``, so its studies see them)."""

    @field_validator("description")
    @classmethod
    def _fits_a_tag(cls, value: str) -> str:
        if len(value) > MAX_DESCRIPTION:
            raise ValueError(f"a description of at most {MAX_DESCRIPTION:,} characters (MLflow's "
                             f"limit for a tag; this one has {len(value):,}: keep longer notes "
                             "in a file beside the experiment)")
        return value

    @field_validator("task")
    @classmethod
    def _known_task(cls, value: str) -> str:
        return one_of(value, task_names())

    def new_task(self) -> Task[Any, Any, Any, Any]:
        """A new instance of this experiment's task, holding what its model section says
        beyond the template (a plan's own: what planning adds to it stays with that plan)."""
        task = task_for(self.task)
        if isinstance(self.model, ModelSection):
            task.bind(self.model)
        return task

    @property
    def spaces(self) -> list[SpaceSection]:
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


def _type_name(task: str) -> str:
    """The class name of ``task``'s experiment type (also its tag in the union: a class-like
    name, which problems drop from YAML paths)."""
    return task_class(task).__name__.removesuffix("Task") + "Experiment"


def _typed(task: str) -> type[Experiment]:
    """``Experiment`` with ``model``, ``data`` and ``translation`` typed by ``task``'s
    configs (the task's generic arguments) and read by its readers."""
    cls = task_class(task)
    types = dict(zip(TASK_SECTIONS, cls.section_types(), strict=True))
    fields: dict[str, Any] = {
        name: (Annotated[types[name] | None, OWN_CHECKS,
                         PlainValidator(section_reader(cls, name)), PlainSerializer(plain)],
               Field(default_factory=dict, validate_default=True))
        for name in TASK_SECTIONS}
    model, data = TASK_SECTIONS[:2]
    fields[model] = (Annotated[ModelSection[types[model]] | None,  # type: ignore[valid-type]
                               OWN_CHECKS, PlainValidator(section_reader(cls, model)),
                               PlainSerializer(model_as_written)],
                     Field(default_factory=dict, validate_default=True))
    fields[data] = (fields[data][0], ...)  # required
    typed: type[Experiment] = pydantic.create_model(
        _type_name(task), __base__=Experiment, __module__=__name__,
        __doc__=f"An experiment of task {task}: its sections typed by the task.", **fields)
    return typed


_TYPED: dict[str, type[Experiment]] = {}


def typed_experiment(task: str) -> type[Experiment]:
    """The experiment type of ``task`` (KeyError if no task is registered so)."""
    if task not in _TYPED:
        _TYPED[task] = _typed(task)
    return _TYPED[task]


def __getattr__(name: str) -> type[Experiment]:
    """The typed experiments by class name (``LMExperiment``): what pickle looks up. A
    process where that task is not registered (yet: a worker unpickling a plan before its
    task's module) gets the base type, whose fields are the same."""
    if not name.endswith("Experiment"):
        raise AttributeError(name)
    return next((typed_experiment(t) for t in task_names() if _type_name(t) == name),
                Experiment)


def _member(value: object) -> str:
    """The union member ``value`` is for: its task's type, else the base (``task:`` names
    no task: that is the problem reported, and the other sections are checked alone)."""
    name = value.get("task", "lm") if isinstance(value, dict) else getattr(value, "task", None)
    return _type_name(name) if isinstance(name, str) and name in task_names() else "Experiment"


def experiment_member(doc: object) -> type[Experiment]:
    """The experiment type that validates ``doc``: of the registered tasks' types (a union
    discriminated by ``task:``), the one its ``task`` names, else the base; chosen
    without building the others' schemas."""
    tag = _member(doc)
    return next((typed_experiment(n) for n in task_names() if _type_name(n) == tag),
                Experiment)


def _settle(exp: Experiment) -> tuple[Experiment, list[Problem]]:
    """``exp`` with what its refused sections kept (None for a task's), and their problems."""
    problems: list[Problem] = []
    update: dict[str, Any] = {}
    for name, value in exp:
        if isinstance(value, Refused):
            problems += value.problems
            update[name] = value.kept
    return (exp.model_copy(update=update) if update else exp), problems


def _read_alone(model: type[pydantic.BaseModel], raw: dict[Any, Any]) -> list[Problem]:
    """The problems of ``model``'s sections that read themselves (their validators called
    alone), in ``raw``: what a file whose other sections pydantic refused also has."""
    problems: list[Problem] = []
    for name, field in model.model_fields.items():
        readers = [m.func for m in field.metadata if isinstance(m, PlainValidator)]
        if OWN_CHECKS not in field.metadata or not readers or not isinstance(raw.get(name), dict):
            continue
        try:
            value = readers[0](raw[name])  # type: ignore[call-arg]
        except ValueError:  # pydantic's problem (reported)
            continue
        if isinstance(value, Refused):
            problems += value.problems
    return problems


def _sections_alone(doc: dict[Any, Any]) -> list[Problem]:
    task = doc.get("task", "lm")
    return _read_alone(typed_experiment(task) if task in task_names() else Experiment, doc)


def _known_names(raw: dict[Any, Any]) -> bool:
    """Whether every task, space, searcher and stopping rule ``raw`` names is registered."""
    from sublayer_search.search.searchers.registry import searcher_names
    from sublayer_search.search.stopping.registry import rule_names

    spaces = raw.get("space")
    spaces = spaces if isinstance(spaces, list) else [spaces]
    search, scheduler = raw.get("search"), raw.get("scheduler")
    wanted = [(raw.get("task", "lm"), task_names())]
    wanted += [(s.get("type"), tuple(ALL_SPACES)) for s in spaces if isinstance(s, dict)]
    if isinstance(search, dict) and "algorithm" in search:
        wanted.append((search["algorithm"], searcher_names()))
    if isinstance(scheduler, dict) and "type" in scheduler:
        wanted.append((scheduler["type"], rule_names()))
    return all(not isinstance(name, str) or name in names for name, names in wanted)


def _import_plugins(raw: dict[Any, Any], source: str) -> None:
    """The modules ``plugins:`` names, before the file is read (they register what it may
    name); then, if it names a strategy still unknown, the installed plugins (entry
    points: read only then, as a scan costs a dry run 0.06 s). A plugin that cannot be
    used is the file's one problem."""
    modules = raw.get("plugins")
    if modules is None:
        modules = []
    if not isinstance(modules, list) or not all(isinstance(m, str) and m for m in modules):
        raise ExperimentError(source, [Problem("plugins", modules, "a list of module names "
                                               "(plugins: [my_pkg.my_space])")])
    try:
        for i, module in enumerate(modules):
            import_plugin(module, f"plugins[{i}]")
        if not _known_names(raw):  # a name no one registered yet: an installed plugin's?
            load_installed()
    except PluginError as exc:
        raise ExperimentError(source, exc.problems) from None


def parse_experiment(raw: object, source: str = "<experiment>", *,
                     found: list[Problem] | None = None) -> Experiment:
    """Validate a parsed YAML document in one pass: shapes and types, and the sections its
    task reads (cross-field checks: :func:`~.steps.plan_sweep`).

    Raises :class:`ExperimentError` with every problem found. With a ``found`` list, the
    problems that leave the rest checkable (unknown top-level keys, a quoted number, a
    section the task refuses: that section is None) go there instead, for
    :func:`~.steps.plan_sweep` to report with its own.
    """
    if not isinstance(raw, dict):
        raise ExperimentError(source, [Problem("", type(raw).__name__, "a YAML mapping at the top level")])
    if raw and set(raw) <= TRAIN_FILE_SECTIONS:  # configs/train/*.yaml handed to `sweep`
        raise ExperimentError(source, [Problem(
            "", NO_VALUE, f"this is a `sublayer train --config` file (only "
            f"{'/'.join(sorted(raw))} sections), not an experiment file (name, space, …); "
            f"train with it: sublayer train --order ORDER --config {source}")])
    _import_plugins(raw, source)
    doc: dict[Any, Any]
    doc, problems = strict_scalars(Experiment, raw)
    if isinstance(doc.get("model"), dict):  # sizes beyond reason (the task checks the rest)
        too_big = magnitude_problems(doc["model"], "model", sizes=True)
        problems += too_big
        if too_big:
            bad = {p.path.split(".")[1].split("[")[0] for p in too_big}
            doc = {**doc, "model": {k: v for k, v in doc["model"].items() if str(k) not in bad}}
    unknown = [k for k in doc if isinstance(k, str) and k not in Experiment.model_fields]
    doc = {k: v for k, v in doc.items() if k not in unknown}
    exp: Experiment | None = None
    refused: list[Problem] = []
    try:
        exp, refused = _settle(experiment_member(doc).model_validate(doc))
    except pydantic.ValidationError as err:
        problems += from_validation_error(err, model=Experiment)
        refused = _sections_alone(doc)
    except RecursionError:
        problems.append(Problem("", "a document nested too deeply", "a flatter YAML document"))
    problems += [Problem(k, NO_VALUE, unknown_key(k, Experiment.model_fields))
                 for k in unknown] + refused
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
    :func:`search.plan.steps.plan_sweep` for the rest.

    Relative ``data`` paths are resolved against the file's folder, once, here.
    """
    raw = read_yaml(path)
    return parse_experiment(_relative_to(Path(path).resolve().parent, raw), str(path),
                            found=found)
