"""The task seam: what differs between kinds of sweep (language models, translation, …).

A :class:`Task` turns an experiment's ``model`` / ``data`` / task sections into configs,
says which alphabet its spaces use, which baseline to train, how to build one trial's
spec, table row and tracked params, and which training function trains it. Planning,
the searchers, Ray and MLflow are the same for every task. Add a task by subclassing
:class:`Task` and calling :func:`sublayer_search.search.tasks.register`.
"""

from __future__ import annotations

import dataclasses
import typing
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import pydantic

from sublayer_search.models.data.errors import DataError
from sublayer_search.models.train_config import TrainConfig, flat_settings
from sublayer_search.search.core.trial import Spec, SpecT
from sublayer_search.search.core.variant import Variant, VariantCandidate, plain_identity
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.records import best

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from sublayer_search.models.data.download import Folders
    from sublayer_search.models.training_loop import FitResult, Reporter

    class Corpus(Folders, DataclassInstance, Protocol):
        """A data config (``DataConfig``, ``ParallelDataConfig``)."""

from sublayer_search.search.core.guidance_axis import Settings, guidance_settings
from sublayer_search.search.core.problems import Problem, from_validation_error, problems_from

__all__ = ["ModelSection", "Spec", "Task", "obtain_corpus", "validate_section"]

ModelT = TypeVar("ModelT")
DataT = TypeVar("DataT")
ExtraT = TypeVar("ExtraT")


SectionT = TypeVar("SectionT")
CorpusT = TypeVar("CorpusT", bound="Corpus")
"""A data config: a dataclass with the folders a corpus is looked for in."""


@dataclass(frozen=True)
class ModelSection(Generic[ModelT]):
    """An experiment's ``model`` section as its task read it (:meth:`Task.read_model`)."""

    template: ModelT
    """The task's model config; its order stands in until planning puts the baseline's."""
    guidance: Settings
    """``model.guidance``: label → (YAML path, setting); ``none`` alone when unguided."""
    own: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """What the section says to the task beyond its template (:meth:`Task.own_settings`;
    the task of a plan gets it by :meth:`Task.bind`)."""


def validate_section(cls: type[SectionT], raw: object, prefix: str,
                     problems: list[Problem]) -> SectionT | None:
    """Validate ``raw`` into dataclass ``cls`` with pydantic, collecting problems.

    The dataclass sits in a wrapper model that forbids unknown keys (pydantic applies
    the enclosing model's ``extra`` rule to nested stdlib dataclasses).
    """
    from sublayer_search.search.core.scalars import strict_scalars

    raw, strict = strict_scalars(cls, raw, prefix)  # "100" for a number, 'yes' for true/false
    problems.extend(strict)
    wrapper = pydantic.create_model("Section", __config__=pydantic.ConfigDict(extra="forbid"),
                                    section=(cls, ...))
    try:
        validated = wrapper.model_validate({"section": raw if raw is not None else {}})
        section: SectionT = getattr(validated, "section")  # noqa: B009  # a dynamic model
        return None if strict else section  # a dropped value would read as its default
    except pydantic.ValidationError as err:
        problems.extend(from_validation_error(err, prefix, strip=1, model=cls))
    except ValueError as exc:
        problems.extend(problems_from(exc, prefix, raw))
    return None


FETCH_HINT = "`sublayer fetch <this experiment file>`, with the SUBLAYER_DATA_DIR the nodes read"
"""The command that puts a sweep's corpus on disk before it runs (``sublayer fetch``)."""


def obtain_corpus(name: str, on_disk: Callable[[], object], download: Callable[[], object],
                  problems: list[Problem], notes: list[str] | None, where: str = "", *,
                  downloadable: bool = True) -> bool:
    """A corpus not on disk is downloaded now, by the driver, before Ray starts: a failed
    download is a problem of the file, not of every trial. With ``notes`` (``--dry-run``)
    nothing is fetched: one note says what the sweep will fetch (or, when it cannot
    fetch the corpus, ``downloadable`` false, why it will stop). True when the corpus is
    (or will be) there."""
    try:
        on_disk()
        return True
    except DataError as exc:
        missing = exc
    if notes is not None:
        if downloadable:
            notes.append(f"data.name: {name} is not on disk here; the sweep downloads it"
                         f"{' into ' + where if where else ''} before it starts")
        else:
            notes.append(f"data.name: {str(missing).rstrip('.')}; a sweep refuses to start "
                         "without them")
        return True
    try:
        download()
    except DataError as exc:
        problems.append(Problem("data.name", name, f"an available corpus: {exc} (where the "
                                "nodes cannot download, fetch it first where they can, on a "
                                f"login node: {FETCH_HINT})"))
        return False
    return True


def fetch_into_data_dir(data: CorpusT, resolve: Callable[[CorpusT], Mapping[str, Any]]) -> list[Path]:
    """Put the corpus of ``data`` on disk where trials read it: found where it is, else
    downloaded into the data folder (``data.data_dir``, else ``$SUBLAYER_DATA_DIR``) when
    one is set, else into the cache. ``resolve`` finds (and downloads) its files; the
    files found (a pair per split for a parallel corpus) are returned."""
    from sublayer_search.models.data.download import data_root

    root = data_root(data)
    target = dataclasses.replace(data, cache_dir=str(root)) if root is not None and \
        getattr(data, "path", None) is None else data
    found = resolve(target)
    return [p for value in found.values() for p in (value if isinstance(value, tuple) else (value,))]


class Task(ABC, Generic[ModelT, DataT, ExtraT, SpecT]):
    """One kind of sweep. ``ModelT``: the model config a trial trains; ``DataT``: the data
    config; ``ExtraT``: the task's own experiment section (or ``None``); ``SpecT``: what
    :meth:`fit` trains."""

    name: ClassVar[str]
    """The experiment's ``task:`` value."""
    kind: ClassVar[str] = "lm"
    """Alphabet of the spaces' orders (``lm``: s/f; ``decoder``: s/c/f)."""
    section: ClassVar[str | None] = None
    """The experiment section holding this task's own settings (``translation``), if any."""
    refusals: ClassVar[dict[str, str]] = {}
    """What its models cannot do, each with why: ``fsdp`` (sharded one sublayer per unit
    by ``train.parallel: fsdp``), ``supernet`` (ranked by a one-shot weight-sharing
    supernet), ``proxy`` (trained only where a proxy sweep scores them best:
    ``search.proxy``). Planning refuses them naming the task and the reason."""
    checkpoints: ClassVar[bool] = True
    """Whether its trials write checkpoints (and resume from them); a task whose trials
    are short enough to start again says False (the dry run then counts no disk)."""
    estimate: str | None = None
    """Set by :meth:`resolve` in a dry run whose vocabulary-dependent counts (``params``,
    ``flops_per_token`` of :meth:`row`) are estimates: what they assume (a vocabulary the
    sweep has not built yet). None when they are exact."""

    # -- the experiment's sections -------------------------------------------------------
    @classmethod
    def section_types(cls) -> tuple[Any, Any, Any]:
        """The types of its ``model`` template, ``data`` and own section: its ``ModelT``,
        ``DataT`` and ``ExtraT`` (what the task's experiment type declares)."""
        for base in getattr(cls, "__orig_bases__", ()):
            if typing.get_origin(base) is Task:
                model, data, extra, _ = typing.get_args(base)
                return model, data, extra
        return object, object, object

    def read_model(self, raw: dict[str, Any], problems: list[Problem]) -> ModelSection[ModelT] | None:
        """The ``model`` section: its guidance settings, what :meth:`own_settings` takes
        and the rest as :meth:`template`."""
        raw = dict(raw)
        guidance = guidance_settings(raw.pop("guidance", None), problems)
        own = self.own_settings(raw)
        template = self.template(raw, problems)
        return None if template is None else ModelSection(template, guidance, own)

    def own_settings(self, raw: dict[str, Any]) -> dict[str, Any]:
        """Settings of the model section for the task itself, not its template (taken out
        of ``raw``); none by default."""
        return {}

    def bind(self, model: ModelSection[ModelT]) -> None:
        """Take what the experiment's model section says beyond its template
        (:attr:`ModelSection.own`); nothing by default."""

    @abstractmethod
    def template(self, raw: dict[str, Any], problems: list[Problem]) -> ModelT | None:
        """The model section as a config whose order the baseline fills in later."""

    @abstractmethod
    def data(self, raw: dict[str, Any], problems: list[Problem]) -> DataT | None:
        """The data section as a config (availability is checked by :meth:`resolve`)."""

    def extra(self, raw: dict[str, Any], problems: list[Problem]) -> ExtraT | None:
        """The task's own section (:attr:`section`); ``None`` when it has none (then the
        experiment's ``translation`` section must be empty)."""
        if raw:
            problems.append(Problem("translation", raw, f"no such section: task {self.name} "
                                    "has no settings of its own"))
        return None

    def settings(self) -> dict[str, Any]:
        """Model settings the template does not hold (hashed with it, so reuse never takes
        a run trained with other ones); none by default."""
        return {}

    def corpus_on_disk(self, data: DataT) -> list[Path]:
        """The files of the corpus a trial reads, found on disk here (nothing downloaded);
        raises ``DataError`` naming what is missing. A task whose data has no files: []."""
        return []

    def fetch_corpus(self, data: DataT) -> list[Path]:
        """Put the corpus on disk here (:func:`fetch_into_data_dir`): its files. Raises
        ``DataError`` when it is missing and cannot be downloaded."""
        return []

    @abstractmethod
    def metric(self, data: DataT) -> str:
        """The main validation metric trials report (its direction sets the search mode)."""

    def reported_metrics(self, data: DataT) -> frozenset[str]:
        """The metrics every evaluation of a trial reports (what a search may optimise)."""
        main = self.metric(data)
        return frozenset({"train_loss", "val_loss", main, best(main), "lr", "tokens_per_s"})

    def reports(self, name: str, data: DataT) -> bool:
        return name in self.reported_metrics(data)

    # -- spaces, search and baseline -----------------------------------------------------
    def space_problem(self, space_type: str) -> str | None:
        """What is expected instead, when this task cannot sweep ``space_type`` (a task
        sweeps every space unless it says so here)."""
        return None

    def space_args(self, space: str,
                   args: dict[str, Any]) -> tuple[str, dict[str, Any], str | None]:
        """(alphabet for the space, the space's own arguments, the side its candidates'
        orders are: :attr:`~.variant.Variant.side`)."""
        return self.kind, args, None

    @abstractmethod
    def baseline(self, pool: Sequence[Candidate], template: ModelT | None,
                 problems: list[Problem]) -> VariantCandidate | None:
        """The default baseline at the pool's budget (``None`` with a problem if none)."""

    def explicit_baseline(self, order: str) -> VariantCandidate:
        """The baseline given explicitly as ``order`` (``baseline.order``)."""
        return VariantCandidate(order=order, space="baseline", name=f"baseline_{len(order)}",
                                baseline=True, variant=Variant(order=order))

    def identity(self, variant: Variant) -> str:
        """What, besides order and seed, makes two variants different models (also of a
        finished run's variant, to match trials for ``reuse``): the side and guidance."""
        return plain_identity(variant)

    # -- one trial -----------------------------------------------------------------------
    @abstractmethod
    def resolve(self, template: ModelT, data: DataT, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> ModelT:
        """The template with the baseline's order and the corpus vocabulary filled in.

        With ``notes`` not None (a dry run) a corpus that cannot be read yet gives an
        estimate and a note instead of a problem.
        """

    @abstractmethod
    def model_for(self, template: ModelT, variant: Variant) -> ModelT:
        """The model config of one variant, guidance aside (raises ValueError for an
        invalid one)."""

    @abstractmethod
    def spec(self, model: ModelT, data: DataT, train: TrainConfig, extra: ExtraT | None) -> SpecT:
        """What :meth:`fit` trains."""

    def unit_costs(self, model: ModelT) -> tuple[float, float]:
        """(``f``, ``c``) in ``s``-units for the model's dims: what order-aware searchers
        measure budgets in (an ``f`` of d_ff = 4d costs two ``s``; ``c`` = 4d² = one)."""
        return 2.0, 1.0

    @abstractmethod
    def row(self, model: ModelT, variant: Variant) -> dict[str, Any]:
        """Table columns of one trial: ``units``, ``params``, ``flops_per_token``."""

    def describe_models(self, models: Sequence[tuple[str, Variant, ModelT]]) -> list[str]:
        """Lines the dry run prints under its table about the planned models, each given
        with its role (``baseline trial``, ``trial``, ``candidate``); none by default."""
        return []

    def tracking_params(self, model: ModelT, variant: Variant) -> dict[str, Any]:
        """Task-specific MLflow params of a trial, beyond its row and :meth:`flat` spec."""
        return {}

    def flat(self, spec: SpecT) -> dict[str, Any]:
        """Every setting of ``spec`` as ``{"model.d_model": 64, …}``, for tracking."""
        return flat_settings(spec)

    def result_artifacts(self, last: Mapping[str, Any]) -> dict[str, str]:
        """Text files a trial's run keeps from its last report (path -> text); none by
        default."""
        return {}

    @abstractmethod
    def fit(self, spec: SpecT, report: Reporter, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> FitResult:
        """Train one trial (through :func:`sublayer_search.models.training_loop.train`)."""
