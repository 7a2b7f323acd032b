"""A finished sweep, read from MLflow, as an export (:mod:`analysis.store.study_export`).

Every trial run of the experiment is exported (tag ``sublayer.role=trial``): a sweep
pooled over several runs of the same experiment (resumed, extended, or re-run with
reused trials) ships all of them, as ``sublayer analyze`` pools them; each row keeps
``parent_run_id``, its sweep. The meta describes every sweep (parent run) and takes
the metric, scheduler, train settings and experiment YAML from the latest one. The
tracking URI is not written, and passwords in URIs of the YAML are masked.
"""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.tracking import MlflowClient

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store import runs as analysis_runs
from sublayer_search.analysis.store.mlflow_store import open_store
from sublayer_search.analysis.store.study_export import write_export
from sublayer_search.analysis.store.trial_record import TrialRecord
from sublayer_search.spaces.records import Role, Tag, direction, final

__all__ = ["collect", "export_experiment", "masked"]

_YAML = "experiment.yaml"
_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+@", re.IGNORECASE)


def masked(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@host`` replaced by ``***``."""
    return _PASSWORD.sub(r"\1***@", text)


def _times(trials: pd.DataFrame, curves: pd.DataFrame, trial_runs: list[Any]) -> pd.DataFrame:
    """``start_ms``: run start; ``end_ms``: the last ``final_<metric>`` stamp, else run end."""
    info = {r.info.run_id: r.info for r in trial_runs}
    ends = curves.groupby(["run_id", "key"])["time_ms"].last()
    out = trials.copy()
    out["start_ms"] = pd.array([info[r].start_time for r in out["run_id"]], dtype="Int64")
    end: list[int | None] = []
    for run_id, metric in zip(out["run_id"], out["metric"], strict=True):
        stamp = ends.get((run_id, final(metric))) if isinstance(metric, str) else None
        end.append(int(stamp) if stamp is not None and not pd.isna(stamp)
                   else info[run_id].end_time)
    out["end_ms"] = pd.array(end, dtype="Int64")
    return out


def _text_artifact(client: MlflowClient, run_id: str, path: str) -> str | None:
    try:
        if path not in {a.path for a in client.list_artifacts(run_id)}:
            return None
        with tempfile.TemporaryDirectory(prefix="sublayer-export-") as tmp:
            text = Path(client.download_artifacts(run_id, path, tmp)).read_text(encoding="utf-8")
            return masked(text)
    except (OSError, UnicodeDecodeError):
        return None


def _sweep(run: Any) -> dict[str, Any]:
    start, end = run.info.start_time, run.info.end_time
    tags, params = run.data.tags, run.data.params
    return {
        "run_id": run.info.run_id, "name": run.info.run_name, "status": run.info.status,
        "start_ms": start, "end_ms": end,
        "wall_s": round((end - start) / 1000, 1) if start and end else None,
        "metric": tags.get(Tag.METRIC), "search": tags.get(Tag.SEARCH),
        "git_commit": tags.get(Tag.GIT_COMMIT),
        "versions": {k.removeprefix("version."): v for k, v in sorted(tags.items())
                     if k.startswith("version.")},
        "params": dict(sorted(params.items())),
    }


def _train(trial_runs: list[Any], parent_id: str | None) -> dict[str, Any]:
    """``train.*`` params shared by the latest sweep's trials (numbers as numbers)."""
    records = [TrialRecord.from_mlflow(r) for r in trial_runs]
    own = [r for r in records if r.parent_run_id == parent_id] or records
    shared: dict[str, Any] = {}
    keys = {k for r in own for k in r.settings if k.startswith("train.")}
    for key in sorted(keys):
        values = {r.settings.get(key) for r in own}
        if len(values) == 1 and (text := values.pop()) is not None:
            shared[key.removeprefix("train.")] = _number(text)
    return shared


def _number(text: str) -> Any:
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if math.isfinite(value) and value == int(value) else value


def collect(experiment: str, tracking_uri: str | None = None
            ) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """(trials, curves, meta) of every trial run of ``experiment``; AnalysisError for an
    unknown experiment or one without trial runs."""
    client = open_store(tracking_uri)
    trials, trial_runs = analysis_runs.load_with_runs(experiment, tracking_uri, client=client)
    if trials.empty:
        raise AnalysisError(f"experiment {experiment!r} has no trial runs (tag "
                            f"{Tag.ROLE}={Role.TRIAL}): nothing to export")
    exp_id = str(trials.attrs["experiment_id"])
    curves = analysis_runs.history_frame(client, trial_runs, when=True)
    trials = _times(trials, curves, trial_runs)
    sweeps = [_sweep(r) for r in analysis_runs.runs_with_role(client, exp_id, Role.SWEEP)]
    latest = sweeps[-1] if sweeps else None
    metrics = sorted({m for m in trials["metric"] if isinstance(m, str)})
    metric = (latest or {}).get("metric") or (metrics[0] if metrics else None)
    if not metric:
        raise AnalysisError(f"experiment {experiment!r} names no metric (tag {Tag.METRIC} "
                            "of its sweep, param metric of its trials): nothing to rank")
    walls = [s["wall_s"] for s in sweeps if s["wall_s"] is not None]
    meta: dict[str, Any] = {
        "experiment": experiment, "metric": metric, "mode": direction(metric),
        "train": _train(trial_runs, latest["run_id"] if latest else None),
        "scheduler": (latest or {}).get("params", {}).get("scheduler", "fifo"),
        "search": (latest or {}).get("search"),
        "sweep_run_id": latest["run_id"] if latest else None,
        "experiment_yaml": _text_artifact(client, latest["run_id"], _YAML) if latest else None,
        "versions": (latest or {}).get("versions", {}),
        "git_commit": (latest or {}).get("git_commit"),
        "start_ms": min((s["start_ms"] for s in sweeps if s["start_ms"]), default=None),
        "end_ms": max((s["end_ms"] for s in sweeps if s["end_ms"]), default=None),
        "wall_s": round(sum(walls), 1) if walls else None,
        "sweeps": sweeps,
    }
    return trials, curves, meta


def export_experiment(experiment: str, out_dir: str | Path, *, name: str | None = None,
                      tracking_uri: str | None = None) -> list[Path]:
    """Write the export of ``experiment`` (file names start with ``name``, default the
    experiment's name) into ``out_dir``; the three paths written."""
    trials, curves, meta = collect(experiment, tracking_uri)
    return write_export(trials, curves, meta, out_dir, name or experiment)
