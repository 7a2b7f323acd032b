"""The experiment file's ``tracking`` and ``ray`` sections: where a sweep is tracked,
where it runs, and where it keeps its files (a folder or an object store)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from sublayer_search.search.plan.storage import artifact_uri, storage_uri

__all__ = ["TrackingSection", "RaySection"]


class TrackingSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str = "sqlite:///mlflow.db"
    experiment: str | None = None
    """MLflow experiment name (default: the sweep name)."""
    log_checkpoints: bool = False
    """Attach each finished trial's final checkpoint to its MLflow run."""
    outage_limit_s: float = Field(600.0, gt=0)
    """How long the sweep rides out an unreachable MLflow (writes buffered, retried with
    backoff) before it stops; ``--resume`` then writes the backlog and continues."""
    max_buffered: int = Field(100_000, ge=1)
    """Most MLflow writes held in memory during an outage (more stops the sweep too)."""
    artifact_location: Annotated[str | None, AfterValidator(artifact_uri)] = None
    """``s3://BUCKET/PREFIX``: where a new MLflow experiment keeps its artifacts (the
    endpoint: ``MLFLOW_S3_ENDPOINT_URL`` or ``AWS_ENDPOINT_URL``; docs/operations.md)."""


class RaySection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    address: str | None = None
    storage_path: Annotated[str, AfterValidator(storage_uri)] = "ray_results"
    """A folder, or ``s3://BUCKET/PREFIX`` (the endpoint: ``AWS_ENDPOINT_URL``): Ray Tune's
    runs (trial state, checkpoints) and the sweep's ``<name>.latest`` pointer."""
    num_cpus: int | None = Field(None, ge=1)
    num_gpus: int | None = Field(None, ge=0)
    keep_checkpoints: int = Field(1, ge=1)
    """Checkpoints each trial keeps under ``storage_path`` (its newest N; older ones are
    deleted once a newer one is safely in Tune's saved state): 1 is enough to resume."""
