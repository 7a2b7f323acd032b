"""MLflow tracking, written by the driver only, in batches.

One parent run per sweep (tag ``sublayer.role=sweep``), one child run per trial
(tags ``mlflow.parentRunId`` and ``sublayer.role=trial``). Ray's own
``MLflowLoggerCallback`` makes one HTTP call per metric key; this callback makes one
``log_batch`` call per report.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import math
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from ray.tune import Callback
from ray.tune.result import AUTO_RESULT_KEYS

from sublayer_search.spaces.records import STATUS_KEY, Role, Tag, TrialStatus, best, final

from .plan import SweepPlan, Trial

__all__ = ["MlflowTracking", "open_sweep_run", "close_sweep", "finished_trials", "ensure_store",
           "environment_tags", "PLACEMENT_KEYS", "metrics_of"]

PLACEMENT_KEYS = ("node_id", "node_ip", "gpu_ids", "resumed_from_step")
"""What the trainable adds to each report about where the trial runs (tags, not metrics)."""
_NOT_METRICS = frozenset({*AUTO_RESULT_KEYS, *PLACEMENT_KEYS, "step", "done", "trial_id",
                          "experiment_tag", "should_checkpoint", "experiment_id"})
_BATCH = 100  # MLflow accepts at most 100 params / 1000 metrics per log_batch call
ROLE, STATUS, STORAGE = Tag.ROLE, Tag.STATUS, Tag.RAY_RUN


def metrics_of(result: dict[str, Any]) -> dict[str, float]:
    """Every numeric metric the trainer reported (Ray's own fields and placement left out)."""
    return {k: float(v) for k, v in result.items()
            if k not in _NOT_METRICS and isinstance(v, int | float) and not isinstance(v, bool)}


def ensure_store(uri: str) -> MlflowClient:
    """A client whose store exists (a new SQLite file is created here, once, by the driver)."""
    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).expanduser().resolve().parent.mkdir(parents=True,
                                                                                 exist_ok=True)
    client = MlflowClient(tracking_uri=uri)
    client.search_experiments(max_results=1)
    return client


def _version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def environment_tags() -> dict[str, str]:
    """Git commit of the project and versions of the packages that shape results."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    tags = {Tag.GIT_COMMIT: commit or "unknown"}
    for pkg in ("sublayer-search", "torch", "ray", "mlflow", "optuna"):
        tags[f"version.{pkg}"] = _version(pkg)
    return tags


def _chunks(items: list[Any], size: int = _BATCH) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def open_sweep_run(client: MlflowClient, plan: SweepPlan, ray_run: str,
                   *, resume: bool) -> tuple[str, str]:
    """(experiment id, parent run id): reused on ``--resume``, created otherwise."""
    exp = plan.experiment
    found = client.get_experiment_by_name(exp.experiment_name)
    exp_id = found.experiment_id if found else client.create_experiment(exp.experiment_name)
    if resume:
        runs = client.search_runs([exp_id], filter_string=f"tags.`{STORAGE}` = '{ray_run}' and "
                                  f"tags.`{ROLE}` = '{Role.SWEEP}'", max_results=1)
        if runs:
            client.update_run(runs[0].info.run_id, status="RUNNING")
            return exp_id, runs[0].info.run_id
    tags = {ROLE: Role.SWEEP.value, STORAGE: ray_run, Tag.NOTE: exp.description,
            Tag.SEARCH: exp.search.algorithm, Tag.METRIC: plan.metric,
            **environment_tags()}
    run = client.create_run(exp_id, run_name=exp.name, tags=tags)
    params = [Param("source", plan.source), Param("search", exp.search.algorithm),
              Param("scheduler", exp.scheduler.type), Param("trials_planned", str(len(plan.trials))),
              Param("config_hash", plan.config_hash)]
    client.log_batch(run.info.run_id, params=params)
    return exp_id, run.info.run_id


def finished_trials(client: MlflowClient, exp_ids: str | list[str], config_hash: str,
                    identity: Callable[[dict[str, str]], str] | None = None,
                    ) -> dict[tuple[str, int, str], str]:
    """(order, seed, identity) -> run id of every trial that finished with these settings
    (the oldest one, when several experiments hold the same trial). ``identity`` reads
    what else tells models apart from a run's params (an IOT subset: its codes)."""
    runs = client.search_runs(
        [exp_ids] if isinstance(exp_ids, str) else exp_ids, max_results=50000,
        order_by=["attributes.start_time DESC"],
        filter_string=f"params.config_hash = '{config_hash}' and "
                      f"tags.`{STATUS}` = '{TrialStatus.FINISHED}' "
                      "and attributes.status = 'FINISHED'")
    key = identity or (lambda params: "")
    return {(r.data.params["order"], int(r.data.params["seed"]), key(r.data.params)): r.info.run_id
            for r in runs}


def copy_trial(client: MlflowClient, run_id: str, exp_id: str, parent_id: str) -> str:
    """Copy a finished trial run (params, tags, every metric's history) into this sweep as
    a child run tagged ``sublayer.reused_from``; return the new run's id."""
    source = client.get_run(run_id)
    tags = {k: v for k, v in source.data.tags.items() if not k.startswith("mlflow.")}
    tags.update({Tag.PARENT: parent_id, Tag.REUSED_FROM: run_id})
    run = client.create_run(exp_id, run_name=source.info.run_name, tags=tags)
    new_id = run.info.run_id
    params = [Param(k, v) for k, v in source.data.params.items()]
    for chunk in _chunks(params):
        client.log_batch(new_id, params=chunk)
    history = [m for key in source.data.metrics for m in client.get_metric_history(run_id, key)]
    for chunk in _chunks(history, 1000):
        client.log_batch(new_id, metrics=chunk)
    client.set_terminated(new_id, status="FINISHED")
    return new_id


def close_sweep(client: MlflowClient, exp_id: str, parent_id: str, status: str) -> None:
    """Finish the parent run and mark any child still RUNNING as KILLED."""
    children = client.search_runs([exp_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}' "
                                  "and attributes.status = 'RUNNING'")
    for run in children:
        client.set_tag(run.info.run_id, STATUS, TrialStatus.KILLED.value)
        client.set_terminated(run.info.run_id, status="KILLED")
    if children and status == "FINISHED":
        status = "KILLED"  # Ray stopped on Ctrl-C with trials still running: resumable
    client.set_terminated(parent_id, status=status)


def _fmt(value: Any) -> str:
    text = "" if value is None else str(value)
    return text[:6000]


def _model_dict(model: Any) -> dict[str, Any]:
    """The model config as plain JSON (rebuilds the model: ``search.attention``)."""
    to_dict = getattr(model, "to_dict", None)
    return to_dict() if to_dict is not None else dataclasses.asdict(model)


class MlflowTracking(Callback):
    """Driver-side Ray Tune callback: a child run per trial, metrics via ``log_batch``."""

    def __init__(self, *, tracking_uri: str, experiment_id: str, parent_run_id: str,
                 plan: SweepPlan) -> None:
        self.tracking_uri = tracking_uri
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.plan = plan
        self._client: MlflowClient | None = None
        self._runs: dict[str, str] = {}
        self._last_step: dict[str, int] = {}
        self._placed: set[str] = set()
        self._done: set[str] = set()
        self._env = environment_tags()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    # -- run bookkeeping ---------------------------------------------------------------
    def _existing(self) -> dict[str, Any]:
        runs = self.client.search_runs(
            [self.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}'",
            max_results=10000)
        return {r.data.tags.get(Tag.RAY_TRIAL_ID, ""): r for r in runs}

    def _describe(self, trial: Trial, ray_id: str) -> tuple[list[Param], list[RunTag]]:
        row = self.plan.row(trial)
        spec = self.plan.spec_for(trial)
        params: dict[str, Any] = {k: v for k, v in row.items() if k not in ("name", "family")}
        params.update(candidate=trial.candidate, metric=self.plan.metric,
                      config_hash=self.plan.config_hash, task=self.plan.experiment.task)
        params.update({k: v for k, v in trial.params.items() if k not in params})
        params.update(self.plan.task.tracking_params(self.plan.model_for(trial), trial.params))
        params.update(self.plan.task.flat(spec))
        tags = {Tag.PARENT: self.parent_run_id, ROLE: Role.TRIAL.value, Tag.SPACE: trial.space,
                Tag.FAMILY: trial.family, Tag.BASELINE: str(trial.baseline).lower(),
                STATUS: TrialStatus.RUNNING.value, Tag.RAY_TRIAL_ID: ray_id,
                "sublayer.guidance": trial.guidance, **self._env}
        return ([Param(k, _fmt(v)) for k, v in params.items() if v is not None],
                [RunTag(k, _fmt(v)) for k, v in tags.items()])

    def _run_for(self, trial: Any) -> str:
        if trial.trial_id in self._runs:
            return self._runs[trial.trial_id]
        spec = Trial.from_config(trial.config["trial"])
        old = self._existing().get(trial.trial_id)
        if old is not None and old.info.status == "FINISHED":
            # it had finished before the driver died, but Ray's last snapshot predates
            # that: Ray replays it from its final checkpoint; the run stays as it was
            self._done.add(trial.trial_id)
            run_id = old.info.run_id
        elif old is not None:  # resumed after the driver died: same run, no duplicate
            run_id = old.info.run_id
            self.client.update_run(run_id, status="RUNNING")
            history = self.client.get_metric_history(run_id, "val_loss")
            self._last_step[trial.trial_id] = max((m.step for m in history), default=-1)
        else:
            params, tags = self._describe(spec, trial.trial_id)
            run = self.client.create_run(self.experiment_id, run_name=spec.name,
                                         tags={t.key: t.value for t in tags})
            run_id = run.info.run_id
            for chunk in _chunks(params):
                self.client.log_batch(run_id, params=chunk)
        self._runs[trial.trial_id] = run_id
        return run_id

    # -- Ray Tune hooks ----------------------------------------------------------------
    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._run_for(trial)

    def on_trial_result(self, iteration: int, trials: list, trial: Any, result: dict,
                        **info: Any) -> None:
        run_id = self._run_for(trial)
        if trial.trial_id in self._done:
            return
        if trial.trial_id not in self._placed and "node_id" in result:
            self._placed.add(trial.trial_id)
            self.client.log_batch(run_id, tags=[RunTag(f"ray.{k}", _fmt(result.get(k)))
                                                 for k in ("node_id", "node_ip", "gpu_ids")]
                                + [RunTag(Tag.RESUMED_FROM_STEP,
                                          str(result.get("resumed_from_step", 0)))])
        step = int(result.get("step", result.get("training_iteration", 0)))
        if step <= self._last_step.get(trial.trial_id, -1):
            return  # already logged before a resume
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in metrics_of(result).items()]
        if metrics:
            self.client.log_batch(run_id, metrics=metrics)
        self._last_step[trial.trial_id] = step

    def _finish(self, trial: Any, status: TrialStatus, mlflow_status: str,
                extra: dict[str, str]) -> None:
        run_id = self._run_for(trial)
        if trial.trial_id in self._done:
            return
        last = trial.last_result or {}
        metric = self.plan.metric
        now = int(time.time() * 1000)
        finals = []
        step = int(last.get("step", 0))
        for key, name in ((metric, final(metric)), (best(metric), best(metric))):
            value = last.get(key)
            if isinstance(value, int | float) and math.isfinite(value):
                finals.append(Metric(name, float(value), now, step))
        tags = [RunTag(STATUS, status.value), RunTag(Tag.STEPS, str(step))]
        tags += [RunTag(k, _fmt(v)) for k, v in extra.items()]
        self.client.log_batch(run_id, metrics=finals, tags=tags)
        if isinstance(last.get("routing_bleu"), str | dict):
            matrix = last["routing_bleu"]
            text = matrix if isinstance(matrix, str) else json.dumps(matrix, indent=1)
            self.client.log_text(run_id, text, "routing_bleu.json")
        if self.plan.experiment.tracking.log_checkpoints and status == TrialStatus.FINISHED \
                and trial.checkpoint:
            self.client.log_artifacts(run_id, trial.checkpoint.path, "checkpoint")
            model = self.plan.model_for(Trial.from_config(trial.config["trial"]))
            self.client.log_dict(run_id, _model_dict(model), "checkpoint/model.json")
        self.client.set_terminated(run_id, status=mlflow_status)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        last = trial.last_result or {}
        status = last.get(STATUS_KEY, TrialStatus.FINISHED)
        steps = self.plan.experiment.train.steps
        if status == TrialStatus.DIVERGED:
            self._finish(trial, TrialStatus.DIVERGED, "FAILED",
                         {Tag.ERROR: "loss became NaN or inf"})
        elif status == TrialStatus.RUNNING and int(last.get("step", steps)) < steps:
            self._finish(trial, TrialStatus.STOPPED, "FINISHED", {Tag.STOPPED_BY: "scheduler"})
        else:
            self._finish(trial, TrialStatus.FINISHED, "FINISHED", {})

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        message = "trial raised"
        path = getattr(trial, "error_file", None)
        if path and Path(path).is_file():
            message = Path(path).read_text(errors="replace")[-5000:]
        self._finish(trial, TrialStatus.FAILED, "FAILED",
                     {Tag.ERROR: message, Tag.ATTEMPTS: str(trial.num_failures)})
