"""The experiment file's plain sections: ``space``, ``baseline``, ``resources`` and
``failure`` (the sections a task or a strategy types live beside their owners)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from sublayer_search.search.core.section import Strict
from sublayer_search.search.tasks.sections import one_of
from sublayer_search.spaces.registry import ALL_SPACES

__all__ = ["BaselineSection", "FailureSection", "Resources", "Seeds", "SpaceSection"]


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
