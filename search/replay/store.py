"""A finished sweep's learning curves, read from MLflow (the edge of ``sublayer replay``).

The latest sweep (parent run, tag ``sublayer.role=sweep``) of an experiment; each trial
run's history of the scheduler's metric gives the curve (``step``, value, timestamp),
the history of the sweep's main metric its final value, and the timestamp of
``final_<metric>`` (written when the trial ended) its end.
"""

from __future__ import annotations

import math
from typing import Any

from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store.histories import read_histories
from sublayer_search.analysis.store.runs import search_all
from sublayer_search.analysis.store.trial_record import TrialRecord
from sublayer_search.search.recorded.curves import Curve, Point, RecordedSweep
from sublayer_search.search.recorded.errors import ReplayError
from sublayer_search.spaces.records import FAILED_STATUSES, Role, Tag, TrialStatus, final

__all__ = ["RecordedSweep", "load_sweep"]


def _int_param(records: list[TrialRecord], key: str) -> int:
    values = {r.settings[key] for r in records if key in r.settings}
    if len(values) != 1:
        raise ReplayError(f"param {key}", sorted(values), "one value shared by the sweep's trials")
    return int(float(values.pop()))


def _by_step(points: list[Any]) -> list[Any]:
    by_step = {m.step: m for m in points}  # a resume may repeat a step: the last one counts
    return [by_step[s] for s in sorted(by_step)]


def _experiments(client: MlflowClient) -> str:
    names = sorted(e.name for e in client.search_experiments(max_results=1000)
                   if e.name != "Default")
    shown = ", ".join(names[:10]) + (", …" if len(names) > 10 else "")
    return shown or "none"


def load_sweep(client: MlflowClient, experiment: str, *,
               scheduler_metric: str | None = None) -> RecordedSweep:
    """The latest sweep of ``experiment``: its trials' curves of ``scheduler_metric``
    (default: the sweep's main metric)."""
    found = client.get_experiment_by_name(experiment)
    if found is None:
        raise ReplayError("experiment", experiment,
                          f"an MLflow experiment in this store (found: {_experiments(client)})")
    exp_id = found.experiment_id
    parents = client.search_runs([exp_id], filter_string=f"tags.`{Tag.ROLE}` = '{Role.SWEEP}'",
                                 order_by=["attributes.start_time DESC"], max_results=1)
    if not parents:
        raise ReplayError("experiment", experiment, "an experiment holding a sweep (it has none)")
    parent = parents[0]
    metric = parent.data.tags.get(Tag.METRIC, "")
    runs = search_all(client, exp_id, f"tags.mlflow.parentRunId = '{parent.info.run_id}' "
                                      f"and tags.`{Tag.ROLE}` = '{Role.TRIAL}'")
    if not runs or not metric:
        raise ReplayError("experiment", experiment, "a sweep with trials and a main metric "
                          f"(its latest sweep, run {parent.info.run_id}, has none)")
    sched_metric = scheduler_metric or metric
    keys = {sched_metric, metric, final(metric)}
    histories = read_histories(client, {r.info.run_id: keys for r in runs})
    curves, stopped = [], {}
    records = []
    for run in sorted(runs, key=lambda r: (r.info.start_time, r.info.run_name)):
        record = TrialRecord.from_mlflow(run)
        records.append(record)
        status = record.status
        history = _by_step(histories[(run.info.run_id, sched_metric)])
        if not history:
            if status in FAILED_STATUSES:
                continue  # failed before its first evaluation: nothing to replay
            raise ReplayError("--metric", sched_metric,
                              f"a metric every trial logged ({run.info.run_name} has no history "
                              f"of it; logged: {', '.join(sorted(run.data.metrics))})")
        ranked = history if sched_metric == metric else _by_step(
            histories[(run.info.run_id, metric)])
        ends = _by_step(histories[(run.info.run_id, final(metric))])
        if status == TrialStatus.STOPPED:
            stopped[record.name] = history[-1].step if record.steps is None else record.steps
        curves.append(Curve(
            name=record.name, order=record.order or "",
            points=tuple(Point(step=m.step, value=float(m.value), time=float(m.timestamp))
                         for m in history),
            final=float(ranked[-1].value) if ranked else math.nan,
            baseline=record.baseline,
            complete=status == TrialStatus.FINISHED, failed=status == TrialStatus.FAILED,
            start=float(run.info.start_time),
            end=float(ends[-1].timestamp) if ends else None))
    return RecordedSweep(
        experiment=experiment, parent_run_id=parent.info.run_id, metric=metric,
        scheduler_metric=sched_metric, curves=tuple(curves),
        steps=_int_param(records, "train.steps"),
        eval_every=_int_param(records, "train.eval_every"),
        recorded_scheduler=parent.data.params.get("scheduler", "fifo"), stopped=stopped)
