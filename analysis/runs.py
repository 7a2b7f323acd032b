"""Load a sweep's trials from MLflow into the tidy trial frame (see ``analysis.frame``).

Follows the MLflow conventions of the project contract: one experiment per sweep, a
parent run tagged ``sublayer.role=sweep`` and one child run per trial tagged
``sublayer.role=trial`` with params order, n_s, n_f, units, params, seed, k, metric...
and metrics ``final_<metric>`` / ``best_<metric>``. mlflow is imported lazily.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload
from urllib.parse import unquote, urlparse

import pandas as pd

from .errors import AnalysisError
from .frame import HISTORY_COLUMNS, STATUSES, lower_is_better, trials_frame

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.tracking import MlflowClient

__all__ = ["experiment_names", "find_sweep_run", "load", "load_history"]

_RUN_STATUS = {"FINISHED": "finished", "FAILED": "failed", "KILLED": "killed",
               "RUNNING": "running", "SCHEDULED": "running"}
_TRIAL_FILTER = "tags.`sublayer.role` = 'trial'"
_SWEEP_FILTER = "tags.`sublayer.role` = 'sweep'"
_PAGE = 1000


def _client(tracking_uri: str | None) -> MlflowClient:
    if tracking_uri:
        parsed = urlparse(tracking_uri)
        if parsed.scheme == "sqlite":
            path = unquote(tracking_uri[len("sqlite:///"):]) if tracking_uri.startswith(
                "sqlite:///") else ""
            if path and path != ":memory:" and not Path(path).exists():
                raise AnalysisError(f"no MLflow database at {path} (tracking URI {tracking_uri})")
        elif parsed.scheme in ("", "file") and not Path(parsed.path or tracking_uri).exists():
            raise AnalysisError(f"no MLflow store at {tracking_uri}")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=tracking_uri)


def experiment_names(tracking_uri: str | None = None) -> list[str]:
    """Names of the experiments in the store, sorted."""
    client = _client(tracking_uri)
    return sorted(e.name for e in client.search_experiments())


def _experiment_id(client: MlflowClient, experiment: str) -> str:
    if not experiment:
        raise AnalysisError("an experiment name is required")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = sorted(e.name for e in client.search_experiments())
        raise AnalysisError(
            f"unknown experiment {experiment!r}; available experiments: "
            f"{', '.join(repr(n) for n in names) or 'none'}"
        )
    return str(found.experiment_id)


def _search(client: MlflowClient, experiment_id: str, filter_string: str) -> list[Any]:
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=_PAGE, page_token=token,
            order_by=["attributes.start_time ASC"],
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _number(text: str | None, kind: type = float) -> Any:
    if text is None or text == "" or text.lower() in ("none", "null", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if kind is int:
        return int(value) if math.isfinite(value) and value == int(value) else None
    return value


def _status(tags: dict[str, str], run_status: str) -> str:
    status = tags.get("sublayer.status", "").strip().lower()
    if status in STATUSES:
        return status
    return _RUN_STATUS.get(run_status, "failed")


def _metric_name(params: dict[str, str], metrics: dict[str, float]) -> str | None:
    if params.get("metric"):
        return params["metric"]
    for name in ("val_ppl", "val_bpc", "val_loss"):
        if name in metrics or f"final_{name}" in metrics:
            return name
    return None


def _best_from_history(client: MlflowClient, run_id: str, metric: str) -> float | None:
    values = [m.value for m in client.get_metric_history(run_id, metric)]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    return min(values) if lower_is_better(metric) else max(values)


def _row(client: MlflowClient, run: Any) -> dict[str, Any]:
    params, tags, metrics = run.data.params, run.data.tags, run.data.metrics
    metric = _metric_name(params, metrics)
    final = best = None
    if metric:
        final = metrics.get(f"final_{metric}", metrics.get(metric))
        best = metrics.get(f"best_{metric}")
        if best is None and metric in metrics:
            best = _best_from_history(client, run.info.run_id, metric)
    family = tags.get("sublayer.family") or params.get("space")
    return {
        "run_id": run.info.run_id,
        "name": run.info.run_name or tags.get("mlflow.runName"),
        "order": params.get("order"),
        "family": family,
        "space": tags.get("sublayer.space") or params.get("space"),
        "seed": _number(params.get("seed"), int),
        "k": _number(params.get("k"), int),
        "n_s": _number(params.get("n_s"), int),
        "n_f": _number(params.get("n_f"), int),
        "units": _number(params.get("units")),
        "params": _number(params.get("params"), int),
        "metric": metric,
        "final": final,
        "best": best,
        "status": _status(tags, run.info.status),
        "baseline": tags.get("sublayer.baseline", "").lower() == "true" or family == "baseline",
        "n_c": _number(params.get("n_c"), int),
        "candidate": params.get("candidate"),
        "flops_per_token": _number(params.get("flops_per_token"), int),
        "config_hash": params.get("config_hash"),
        "parent_run_id": tags.get("mlflow.parentRunId"),
        "trial_id": tags.get("ray.trial_id"),
    }


@overload
def load(
    experiment: str, tracking_uri: str | None = ..., history: Literal[False] = ...
) -> pd.DataFrame: ...
@overload
def load(
    experiment: str, tracking_uri: str | None = ..., history: Literal[True] = ...
) -> tuple[pd.DataFrame, pd.DataFrame]: ...
def load(
    experiment: str, tracking_uri: str | None = None, history: bool = False
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """One row per trial of ``experiment`` (child runs tagged ``sublayer.role=trial``).

    Failed, diverged and killed trials stay, flagged in ``status``. With ``history=True``
    returns ``(trials, history)`` where history is a long frame run_id, key, step, value
    of every logged metric. Unknown experiment → AnalysisError listing the available ones.
    """
    client = _client(tracking_uri)
    experiment_id = _experiment_id(client, experiment)
    runs = _search(client, experiment_id, _TRIAL_FILTER)
    trials = trials_frame(_row(client, run) for run in runs)
    trials.attrs.update(experiment=experiment, experiment_id=experiment_id,
                        tracking_uri=tracking_uri)
    if not history:
        return trials
    return trials, _history(client, runs)


def _history(client: MlflowClient, runs: list[Any]) -> pd.DataFrame:
    rows = [
        {"run_id": run.info.run_id, "key": key, "step": m.step, "value": m.value}
        for run in runs
        for key in sorted(run.data.metrics)
        for m in client.get_metric_history(run.info.run_id, key)
    ]
    frame = pd.DataFrame(rows, columns=list(HISTORY_COLUMNS))
    frame["step"] = frame["step"].astype("int64")
    frame["value"] = frame["value"].astype(float)
    return frame.sort_values(["run_id", "key", "step"], kind="stable").reset_index(drop=True)


def load_history(
    experiment: str, tracking_uri: str | None = None, *, keys: list[str] | None = None
) -> pd.DataFrame:
    """Metric history (run_id, key, step, value) of the experiment's trials."""
    client = _client(tracking_uri)
    runs = _search(client, _experiment_id(client, experiment), _TRIAL_FILTER)
    frame = _history(client, runs)
    return frame if keys is None else frame[frame["key"].isin(keys)].reset_index(drop=True)


def find_sweep_run(experiment: str, tracking_uri: str | None = None) -> str | None:
    """Run id of the experiment's latest parent run (``sublayer.role=sweep``), or None."""
    client = _client(tracking_uri)
    runs = _search(client, _experiment_id(client, experiment), _SWEEP_FILTER)
    return runs[-1].info.run_id if runs else None
