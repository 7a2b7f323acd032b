"""The driver's Ray Tune callback that writes MLflow: one child run per trial.

Every write becomes a JSON-able op in a :class:`~.tracking_buffer.WriteBuffer`, so an
MLflow outage delays writes instead of losing them. Ops name a trial by its Ray trial
id; the MLflow run is found or created when the op is applied, and every op is safe to
apply twice (a replayed backlog after ``--resume`` or a retried request):

- ``open``: find this trial's run under the parent run (by tag ``ray.trial_id``) or
  create it with its params; a run found FINISHED is left alone from then on.
- ``batch``: metrics (skipped up to the step the run already holds) and tags.
- ``text`` / ``dict`` / ``artifacts``: files on the run; ``end``: its final status.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient
from ray.tune import Callback
from ray.tune.experiment import Trial as RayTrial

from sublayer_search.analysis.store.trial_record import (
    CHECKPOINT_ARTIFACT,
    MODEL_ARTIFACT,
    outcome_to_mlflow,
    param_value,
)
from sublayer_search.search.core.rebind import Rebound
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.tracking.buffer import WriteBuffer, short_http_retries
from sublayer_search.search.tracking.files import checkpoint_uri, local_copy
from sublayer_search.search.tracking.runs import environment_tags, metrics_of
from sublayer_search.search.tracking.values import chunks, model_dict
from sublayer_search.search.tracking.waiting import Waiting
from sublayer_search.spaces.records import Tag, TrialStatus, ended_status

__all__ = ["MlflowTracking", "RESTARTS"]

RESTARTS = Tag.RESTARTS
DEVICE_TAGS = {"device": Tag.DEVICE, "device_name": Tag.DEVICE_NAME,
               "device_count": Tag.DEVICE_COUNT}
"""The trainable's reported device facts and the run tags they become."""
_HISTORY_KEY = "val_loss"  # the metric every task reports at every evaluation


class MlflowTracking(Rebound, Callback):
    """Driver-side Ray Tune callback: a child run per trial, metrics via ``log_batch``."""

    def __init__(self, *, tracking_uri: str, experiment_id: str, parent_run_id: str,
                 plan: SweepPlan, outage_limit_s: float | None = None,
                 max_buffered: int | None = None, match_names: bool = False,
                 fresh: bool = False) -> None:
        spec = plan.experiment.tracking
        self.tracking_uri = tracking_uri
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.plan = plan
        self._client: MlflowClient | None = None
        self._runs: dict[str, str] = {}
        self._logged: dict[str, int] = {}  # highest evaluation step the run holds
        self._opened: set[str] = set()
        self._placed: set[str] = set()
        self._process: dict[str, tuple[Any, Any]] = {}  # trial -> (pid, node) of its reports
        self._restarts: dict[str, int] = {}
        self._done: set[str] = set()
        self._env = environment_tags()
        self.waiting = Waiting(plan.experiment.resources.workers > 1)
        """Started trials that wait for their workers' resources (MLflow: SCHEDULED)."""
        self.buffer = WriteBuffer(
            self._apply,
            limit_s=spec.outage_limit_s if outage_limit_s is None else outage_limit_s,
            max_ops=spec.max_buffered if max_buffered is None else max_buffered)
        self.stop_requested = False
        self.match_names = match_names
        """Also find a trial's run by its name (a sweep run again under the same parent
        after it was killed before Tune first saved its state: new Ray trial ids)."""
        self.fresh = fresh
        """The parent run had no child runs when the sweep started: a trial's run is created
        without searching for one first (a search per trial costs in proportion to the
        runs already there); a retried create still searches, so it never duplicates."""
        short_http_retries()

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_client": None}

    @property
    def client(self) -> MlflowClient:
        if self._client is None:
            self._client = MlflowClient(tracking_uri=self.tracking_uri)
        return self._client

    # -- applying ops (driver only; called by the buffer, in order) --------------------
    def _apply(self, op: dict[str, Any]) -> None:
        tid = op["trial"]
        if op["op"] == "open":
            self._open(op)
            return
        if tid not in self._runs and tid not in self._done:
            self._open({"trial": tid})  # a saved backlog whose run was opened before
        if tid in self._done:
            return  # the run had finished before a driver died: it stays as it was
        run_id = self._runs[tid]
        kind = op["op"]
        if kind == "batch":
            step = op.get("step")
            metrics = [Metric(k, v, ts, s) for k, v, ts, s in op.get("metrics", [])]
            if step is not None and step <= self._logged.get(tid, -1):
                metrics = []  # logged before a restart or a resume
            if op.get("once"):  # final values: a driver killed after writing them wrote them
                metrics = [m for m in metrics if not any(
                    h.step == m.step for h in self.client.get_metric_history(run_id, m.key))]
            tags = [RunTag(k, v) for k, v in op.get("tags", {}).items()]
            if metrics or tags:
                self.client.log_batch(run_id, metrics=metrics, tags=tags)
            if step is not None:
                self._logged[tid] = max(step, self._logged.get(tid, -1))
        elif kind == "text":
            self.client.log_text(run_id, op["text"], op["path"])
        elif kind == "dict":
            self.client.log_dict(run_id, op["data"], op["path"])
        elif kind == "artifacts":
            with local_copy(op["dir"]) as folder:  # an object store's: downloaded first
                if folder is not None:
                    self.client.log_artifacts(run_id, str(folder), op["path"])
        elif kind == "status":  # waiting for resources (SCHEDULED) or training again
            self.client.update_run(run_id, status=op["status"])
            self.client.set_tag(run_id, Tag.STATUS, op["tag"])
        elif kind == "end":
            self.client.set_terminated(run_id, status=op["status"])
        else:
            raise ValueError(f"unknown tracking op {kind!r}")

    def _find(self, tid: str, name: str | None = None) -> Any:
        which = f"attributes.run_name = '{name}'" if name else f"tags.`{Tag.RAY_TRIAL_ID}` = '{tid}'"
        runs = self.client.search_runs(
            [self.experiment_id], max_results=10,
            filter_string=f"tags.mlflow.parentRunId = '{self.parent_run_id}' and {which}",
            order_by=["attributes.start_time ASC"])
        if name and runs and runs[0].data.tags.get(Tag.RAY_TRIAL_ID) != tid:
            self.client.set_tag(runs[0].info.run_id, Tag.RAY_TRIAL_ID, tid)  # its new Ray id
        return runs[0] if runs else None

    def _open(self, op: dict[str, Any]) -> None:
        tid = op["trial"]
        if tid in self._runs or tid in self._done:
            return
        first_try = not op.get("tried")
        op["tried"] = True  # a retry after a failed request searches: it may have been made
        new = self.fresh and first_try and "name" in op
        old = None if new else self._find(tid)
        if old is None and self.match_names and "name" in op:
            old = self._find(tid, op["name"])
        if old is not None and old.info.status == "FINISHED":
            # it had finished before the driver died, but Ray's last snapshot predates
            # that: Ray replays it from its final checkpoint; the run stays as it was
            self._done.add(tid)
        elif old is not None:  # resumed after the driver died: same run, no duplicate
            self.client.update_run(old.info.run_id, status="RUNNING")
            history = self.client.get_metric_history(old.info.run_id, _HISTORY_KEY)
            self._logged[tid] = max((m.step for m in history), default=-1)
        elif "name" not in op:
            raise LookupError(f"no MLflow run of Ray trial {tid} under run {self.parent_run_id}")
        else:
            run = self.client.create_run(self.experiment_id, run_name=op["name"],
                                         tags=op["tags"])
            params = [Param(k, v) for k, v in op["params"].items()]
            for chunk in chunks(params):
                self.client.log_batch(run.info.run_id, params=chunk)
            self._runs[tid] = run.info.run_id
            return
        self._runs[tid] = old.info.run_id

    # -- making ops (Ray Tune hooks) ---------------------------------------------------
    def _submit(self, op: dict[str, Any]) -> None:
        self.buffer.submit(op)
        self._check_outage()

    def _check_outage(self) -> None:
        """Past the outage limit: ask Tune to stop like Ctrl-C (state saved, resumable)."""
        if self.buffer.overdue and not self.stop_requested:
            import os
            import signal

            self.stop_requested = True
            if signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None):
                os.kill(os.getpid(), signal.SIGUSR1)  # Tune's own "stop and save" signal
            else:  # no Tune handler (not the main thread): raising stops the loop
                raise RuntimeError(f"MLflow unreachable for {self.buffer.outage_s:.0f} s: "
                                   f"{self.buffer.last_error}")

    def _describe(self, trial: Trial, ray_id: str) -> tuple[dict[str, str], dict[str, str]]:
        """The params and tags a trial's run is created with: its planned record's, the
        run's parent, Ray's trial id, the driver's environment."""
        record = replace(self.plan.record(trial), parent_run_id=self.parent_run_id,
                         trial_id=ray_id, status=TrialStatus.RUNNING)
        params, tags, _ = record.to_mlflow()
        return params, {**tags, **self._env}

    def _open_trial(self, trial: Any) -> None:
        if trial.trial_id in self._opened:
            return
        self._opened.add(trial.trial_id)
        planned: Trial[Any] = trial.config["trial"]
        params, tags = self._describe(planned, trial.trial_id)
        self._submit({"op": "open", "trial": trial.trial_id, "name": planned.name, "tags": tags,
                      "params": params})

    def on_trial_start(self, iteration: int, trials: list[RayTrial], trial: RayTrial, **info: object) -> None:
        self._open_trial(trial)
        if self.waiting.started(trial):
            self._submit({"op": "status", "trial": trial.trial_id, "status": "SCHEDULED",
                          "tag": TrialStatus.WAITING.value})

    def on_step_end(self, iteration: int, trials: list[RayTrial], **info: object) -> None:
        if len(self.buffer):
            self.buffer.pump()
            self._check_outage()

    def on_trial_recover(self, iteration: int, trials: list[RayTrial], trial: RayTrial, **info: object) -> None:
        """Ray restarts the trial from its last checkpoint (maybe on another node)."""
        self._open_trial(trial)
        self._restarted(trial, int(getattr(trial, "num_failures", 0) or 0))

    def _restarted(self, trial: Any, count: int) -> None:
        """Tag the restart count (once per restart) and tag where the trial runs next."""
        tid = trial.trial_id
        if count <= self._restarts.get(tid, 0):
            return
        self._restarts[tid] = count
        self._placed.discard(tid)
        self._process.pop(tid, None)  # its next report comes from the new process
        self._submit({"op": "batch", "trial": tid, "tags": {RESTARTS: str(count)}})

    def _seen_in(self, trial: Any, result: dict) -> None:
        """A report from a new process of a trial this driver saw before is a restart, even
        when Ray did not call :meth:`on_trial_recover` (a lost node's actor can fail before
        its training task does, and Ray then restarts the trial on that path)."""
        tid, where = trial.trial_id, (result.get("pid"), result.get("node_id"))
        before = self._process.get(tid)
        self._process[tid] = where
        if before is not None and where != before and None not in where:
            failures = int(getattr(trial, "num_failures", 0) or 0)
            self._restarted(trial, max(failures, self._restarts.get(tid, 0) + 1))

    def on_trial_result(self, iteration: int, trials: list[RayTrial], trial: RayTrial, result: dict,
                        **info: object) -> None:
        self._open_trial(trial)
        if self.waiting.reported(trial):
            self._submit({"op": "status", "trial": trial.trial_id, "status": "RUNNING",
                          "tag": TrialStatus.RUNNING.value})
        self._seen_in(trial, result)
        tags: dict[str, str] = {}
        if trial.trial_id not in self._placed and "node_id" in result:
            self._placed.add(trial.trial_id)
            tags = {f"ray.{k}": param_value(result.get(k)) for k in ("node_id", "node_ip", "gpu_ids")}
            tags[Tag.RESUMED_FROM_STEP] = str(result.get("resumed_from_step", 0))
            tags.update({tag: param_value(result[key]) for key, tag in DEVICE_TAGS.items()
                         if key in result})
        step = int(result.get("step", result.get("training_iteration", 0)))
        now = int(time.time() * 1000)
        metrics = [[k, v, now, step] for k, v in metrics_of(result).items()]
        if tags:
            self._submit({"op": "batch", "trial": trial.trial_id, "tags": tags})
        self._submit({"op": "batch", "trial": trial.trial_id, "metrics": metrics, "step": step})

    def _finish(self, trial: Any, status: TrialStatus, mlflow_status: str,
                extra: dict[str, str]) -> None:
        self._open_trial(trial)
        self.waiting.ended(trial)
        tid = trial.trial_id
        last = trial.last_result or {}
        metric = self.plan.metric
        now = int(time.time() * 1000)
        step = int(last.get("step", 0))
        tags, values = outcome_to_mlflow(metric=metric, status=status, steps=step,
                                         final_value=last.get(metric))
        finals = [[key, value, now, step] for key, value in values.items()]
        tags.update({k: param_value(v) for k, v in extra.items()})
        self._submit({"op": "batch", "trial": tid, "metrics": finals, "tags": tags, "once": True})
        for path, text in self.plan.task.result_artifacts(last).items():
            self._submit({"op": "text", "trial": tid, "text": text, "path": path})
        if self.plan.experiment.tracking.log_checkpoints and status == TrialStatus.FINISHED \
                and trial.checkpoint:
            self._submit({"op": "artifacts", "trial": tid, "path": CHECKPOINT_ARTIFACT,
                          "dir": checkpoint_uri(self.plan.experiment.ray.storage_path,
                                                trial.checkpoint.path)})
            model = self.plan.model_for(trial.config["trial"])
            self._submit({"op": "dict", "trial": tid, "data": model_dict(model),
                          "path": MODEL_ARTIFACT})
        self._submit({"op": "end", "trial": tid, "status": mlflow_status})

    def on_trial_complete(self, iteration: int, trials: list[RayTrial], trial: RayTrial, **info: object) -> None:
        status = ended_status(trial.last_result or {}, self.plan.experiment.train.steps)
        if status == TrialStatus.DIVERGED:
            self._finish(trial, TrialStatus.DIVERGED, "FAILED",
                         {Tag.ERROR: "loss became NaN or inf"})
        elif status == TrialStatus.STOPPED:
            self._finish(trial, TrialStatus.STOPPED, "FINISHED", {Tag.STOPPED_BY: "scheduler"})
        else:
            self._finish(trial, TrialStatus.FINISHED, "FINISHED", {})

    def on_trial_error(self, iteration: int, trials: list[RayTrial], trial: RayTrial, **info: object) -> None:
        message = "trial raised"
        path = getattr(trial, "error_file", None)
        if path and Path(path).is_file():
            message = Path(path).read_text(errors="replace")[-5000:]
        self._finish(trial, TrialStatus.FAILED, "FAILED",
                     {Tag.ERROR: message, Tag.ATTEMPTS: str(trial.num_failures)})
