"""A recorded sweep read from an export (``sublayer export``) instead of MLflow.

Builds the :class:`~.replay_store.RecordedSweep` that :func:`~.replay_store.load_sweep`
builds from the store, by the same rules: the export's latest sweep (meta
``sweep_run_id``; an export pooled over several sweeps replays the latest, as MLflow
does), trials in order of start, the curve of the scheduler's metric (one point per
step, the last logged), the final value from the main metric's curve, the end from the
stamp of ``final_<metric>``.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.study_export import StudyExport, builtin_export
from sublayer_search.analysis.store.study_export import open_export as find_export
from sublayer_search.search.recorded.curves import Curve, Point, RecordedSweep
from sublayer_search.search.recorded.errors import ReplayError
from sublayer_search.spaces.records import FAILED_STATUSES, TrialStatus, final

__all__ = ["ExportUnreadable", "open_export", "sweep_from_export"]


class ExportUnreadable(ReplayError):
    """An export that cannot be read; the message (the analysis one) names file and fault."""

    def __init__(self, message: str) -> None:
        ValueError.__init__(self, message)


def open_export(path: str, *, name: str | None = None, builtin: bool = False) -> StudyExport:
    """A built-in export (``builtin``), or the one ``path`` names (a ``<name>_meta.json``
    file, or a folder: with ``name``, or holding one export); ExportUnreadable else."""
    try:
        return builtin_export(path) if builtin else find_export(path, name=name)
    except AnalysisError as exc:
        raise ExportUnreadable(str(exc)) from None


def _last_per_step(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.drop_duplicates("step", keep="last").sort_values("step", kind="stable")


def sweep_from_export(export: StudyExport, *, scheduler_metric: str | None = None
                      ) -> RecordedSweep:
    """The recorded sweep of ``export``, as :func:`.replay_store.load_sweep` reads it."""
    meta, metric = export.meta, export.metric
    parent = meta.get("sweep_run_id")
    trials = export.trials
    if parent is not None and "parent_run_id" in trials.columns:
        trials = trials[trials["parent_run_id"] == parent]
    if trials.empty:
        raise ReplayError("export", export.name, f"a sweep with trials (sweep {parent} has none)")
    train = meta.get("train") or {}
    for key in ("steps", "eval_every"):
        if not isinstance(train.get(key), int):
            raise ReplayError(f"export {export.name} meta train.{key}", train.get(key),
                              "a whole number shared by the sweep's trials")
    sched_metric = scheduler_metric or metric
    keys = {key: rows for key, rows in export.history.groupby(["run_id", "key"], sort=False)}
    curves, stopped = [], {}
    for trial in trials.sort_values(["start_ms", "name"], kind="stable").itertuples():
        status = str(trial.status)
        history = keys.get((trial.run_id, sched_metric))
        if history is None:
            if status in FAILED_STATUSES:
                continue  # failed before its first evaluation: nothing to replay
            logged = sorted({k for r, k in keys if r == trial.run_id})
            raise ReplayError("--metric", sched_metric,
                              f"a metric every trial logged ({trial.name} has no history "
                              f"of it; logged: {', '.join(logged)})")
        history = _last_per_step(history)
        ranked = history if sched_metric == metric else keys.get((trial.run_id, metric))
        ranked = _last_per_step(ranked) if ranked is not None else None
        ends = keys.get((trial.run_id, final(metric)))
        if status == TrialStatus.STOPPED:
            steps: Any = getattr(trial, "steps", None)
            stopped[str(trial.name)] = int(history["step"].iloc[-1] if pd.isna(steps) else steps)
        curves.append(Curve(
            name=str(trial.name), order=str(trial.order or ""),
            points=tuple(Point(step=int(s), value=float(v), time=float(t)) for s, v, t
                         in zip(history["step"], history["value"], history["time_ms"],
                                strict=True)),
            final=float(ranked["value"].iloc[-1]) if ranked is not None else math.nan,
            baseline=bool(trial.baseline), complete=status == TrialStatus.FINISHED,
            failed=status == TrialStatus.FAILED, start=float(trial.start_ms),
            end=float(_last_per_step(ends)["time_ms"].iloc[-1]) if ends is not None else None))
    return RecordedSweep(
        experiment=str(meta.get("experiment", export.name)), parent_run_id=str(parent),
        metric=metric, scheduler_metric=sched_metric, curves=tuple(curves),
        steps=int(train["steps"]), eval_every=int(train["eval_every"]),
        recorded_scheduler=str(meta.get("scheduler") or "fifo"), stopped=stopped)
