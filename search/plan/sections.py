"""The experiment file's plain sections: ``space``, ``baseline``, ``resources`` and
``failure`` (the sections a task or a strategy types live beside their owners)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Annotated, Any, Literal, Union

import pydantic
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SkipValidation,
    Tag,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from sublayer_search.search.core.plugins import declare_group
from sublayer_search.search.core.scalars import OWN_CHECKS
from sublayer_search.search.core.section import Strict
from sublayer_search.search.tasks.base import ModelSection
from sublayer_search.search.tasks.sections import one_of
from sublayer_search.spaces.registry import ALL_SPACES

__all__ = ["BaselineSection", "FailureSection", "Resources", "Seeds", "SpaceSection",
           "as_written", "model_as_written", "plain", "space_section"]


def _distinct(seeds: list[int]) -> list[int]:
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise PydanticCustomError("distinct", "a list of distinct seeds (repeated: {repeated})",
                                  {"repeated": ", ".join(map(str, repeated))})
    return seeds


Seeds = Annotated[int, Field(ge=1)] | Annotated[list[Annotated[int, Field(ge=0)]],
                                                Field(min_length=1), AfterValidator(_distinct)]
"""A count ``n`` (seeds ``0..n-1``, n >= 1) or a non-empty list of distinct seeds >= 0."""

class SpaceSection(BaseModel):
    """``{type: sandwich, n: 16, k: [0, 6]}``: a space name and its arguments."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
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

    _written: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _keep_order(cls, value: Any, handler: ModelWrapValidatorHandler[SpaceSection]) -> Any:
        section = handler(value)
        if isinstance(value, dict):
            section._written = tuple(str(k) for k in value)
        return section

    @property
    def args(self) -> dict[str, Any]:
        """The arguments as written, in the file's order (the generator checks them:
        :func:`space_section`)."""
        values = {**dict(self), **(self.model_extra or {})}
        return {k: values[k] for k in self._written if k not in SpaceSection.model_fields}


def _space_name(space: str) -> str:
    return "".join(part.capitalize() for part in space.split("_")) + "Space"


_TYPED: dict[str, type[SpaceSection]] = {}


def _typed_space(space: str) -> type[SpaceSection]:
    """:func:`_new_space_type`, made once."""
    if space not in _TYPED:
        _TYPED[space] = _new_space_type(space)
    return _TYPED[space]


def _new_space_type(space: str) -> type[SpaceSection]:
    """The section of space ``space``: its arguments are its generator's (names, types and
    defaults from the signature). Their values are checked by the generator itself, with
    the model kind the task gives (:func:`~sublayer_search.spaces.registry.validate`):
    declared here, not validated twice; other spellings (the sandwich's ``k``) and
    arguments a task adds (translation's ``side``) are kept for it."""
    info = ALL_SPACES[space]
    hints = typing.get_type_hints(info.build)
    fields: dict[str, Any] = {
        name: (Annotated[SkipValidation[hints.get(name, Any) | None],  # type: ignore[misc]
                         OWN_CHECKS],
               None if default is inspect.Parameter.empty else default)
        for name, default in info.arguments.items() if name not in SpaceSection.model_fields}
    fields["type"] = (Literal[space], ...)  # type: ignore[valid-type]
    typed: type[SpaceSection] = pydantic.create_model(
        _space_name(space), __base__=SpaceSection, __module__=__name__,
        __doc__=f"A {space} space: {info.summary}.", **fields)
    return typed


_SPACES: dict[tuple[str, ...], object] = {}


def _space_member(value: object) -> str:
    """The member for ``value``'s type; the base section for a type with none (unknown,
    or registered after the union was made: the base checks the registry)."""
    name = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return _space_name(name) if isinstance(name, str) and name in _TYPED else "SpaceSection"


def space_section() -> object:
    """One ``space`` entry: a union of the registered spaces' sections chosen by ``type``
    (pydantic's discriminated union); an unknown type is the base section's one problem."""
    names = tuple(ALL_SPACES)
    if names not in _SPACES:
        members: tuple[Any, ...] = tuple(
            Annotated[_typed_space(n), Tag(_space_name(n))] for n in names)
        members += (Annotated[SpaceSection, Tag("SpaceSection")],)
        union: Any = Union.__getitem__(members)  # type: ignore[attr-defined]
        _SPACES[names] = Annotated[union, Discriminator(_space_member)]
    return _SPACES[names]


def __getattr__(name: str) -> type[SpaceSection]:
    """The typed spaces by class name (``SandwichSpace``): what pickle looks up (the base
    section where that space is not registered in this process: the same fields)."""
    if not name.endswith("Space"):
        raise AttributeError(name)
    return next((_typed_space(s) for s in ALL_SPACES if _space_name(s) == name), SpaceSection)


def model_as_written(value: Any) -> Any:
    """A model section as written out: its template and guidance."""
    if not isinstance(value, ModelSection):
        return value
    return {k: v for k, v in dataclasses.asdict(value).items() if k != "own"}


def plain(value: object) -> object:
    """A section as written out: a config's fields, a settings model's dump."""
    if isinstance(value, BaseModel):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def as_written(value: object) -> object:
    """A task section as written: what the base type keeps where ``task:`` names no task
    (that is the problem reported; the sections mean nothing without a task)."""
    return value


class BaselineSection(Strict):
    """The interleaved order at the same budget, trained with several seeds."""

    enabled: bool = True
    seeds: Seeds = 3
    """A count (seeds 0..n-1) or an explicit list."""
    order: str | None = None
    """Override the baseline order (default: ``(sf)^n`` with the space's budget)."""


class Resources(Strict):
    cpu: float = Field(1.0, gt=0)
    """CPUs of one trial (of each worker when ``workers`` > 1)."""
    gpu: float = Field(0.0, ge=0)
    """Fractions share one GPU between trials (``0.5`` = two trials per GPU); with
    ``workers`` > 1, GPUs of each worker (a whole number)."""
    workers: int = Field(1, ge=1, le=1024)
    """Data-parallel workers of one trial (Ray Train, PyTorch DDP: gloo on CPUs, NCCL on
    GPUs). The global batch is ``train.batch_size``, split evenly across the workers."""


class FailureSection(Strict):
    retries: int = Field(0, ge=0)
    """Ray restarts a failed trial this many times (from its last checkpoint)."""
    tolerate: bool = False
    """Exit 0 even when trials failed or diverged (for sweeps where some are expected to);
    by default such a sweep exits with status 1."""


declare_group("space", lambda: tuple(ALL_SPACES))
