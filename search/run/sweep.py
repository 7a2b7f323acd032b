"""Run a planned sweep on Ray Tune with MLflow tracking (``sublayer sweep``).

A :class:`SweepRun` goes through named phases: connect to (or start) Ray and check
that some node can hold one trial; *open* the MLflow store, experiment and parent run;
*restore or start* (what this run trains, its files, the tracking callback); *run* or
restore the Tuner (:mod:`.tuning`); *close* the parent run on every exit path but an
MLflow outage (``--resume`` closes it then).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import tune

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.plan.sweep_plan import SweepPlan, trial_table
from sublayer_search.search.plan.warm_start import with_warm_start
from sublayer_search.search.run.local_ray import shutdown_ray, start_local_ray
from sublayer_search.search.run.node_data import check_node_data
from sublayer_search.search.run.proxy_stage import with_proxy_stage
from sublayer_search.search.run.reuse import rerun_hint, reuse_finished
from sublayer_search.search.run.state_format import legacy_trials
from sublayer_search.search.run.tuning import (
    SigintWatch,
    incomplete,
    make_tuner,
    quiet_ray_resume_advice,
    restored_tuner,
    result_rows,
)
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.search.tracking.buffer import TrackingOutage, ride_out, short_http_retries
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.links import label_experiment
from sublayer_search.search.tracking.runs import (
    close_sweep,
    ensure_store,
    finished_sweep_run,
    open_sweep_run,
)

log = logging.getLogger(__name__)

__all__ = ["SweepOutcome", "SweepRun", "run_sweep", "connect", "latest_run_name",
           "nothing_to_resume", "TrackingOutage"]


@dataclass(frozen=True)
class SweepOutcome:
    experiment_id: str
    parent_run_id: str
    ray_run: str
    trials: list[dict[str, Any]]
    """One row per Ray trial: name, order, seed, status, final/best metric."""
    reused: int = 0
    """Trials taken from earlier runs of the experiment (``reuse: true``)."""
    interrupted: bool = False
    """Stopped by Ctrl-C (SIGINT) before every trial ended: ``--resume`` continues it."""


def connect(plan: SweepPlan, address: str | None) -> bool:
    """Join ``address`` or start a local Ray; return True if this call started Ray."""
    if ray.is_initialized():
        return False
    exp = plan.experiment
    if address:  # the cluster's own network and auth settings apply
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:  # 127.0.0.1 only, token auth, a private temp folder (see local_ray)
        start_local_ray(num_cpus=exp.ray.num_cpus, num_gpus=exp.ray.num_gpus)
    return True


def check_cluster(plan: SweepPlan) -> None:
    """Some alive node must hold one trial's resources (checked before MLflow is touched)."""
    want = plan.experiment.resources
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    if want.workers > 1:  # each worker on some node, all of them in the cluster at once
        _check_workers(plan, nodes)
        return
    if any(n.get("CPU", 0) >= want.cpu and n.get("GPU", 0) >= want.gpu for n in nodes):
        return
    best = max(((n.get("CPU", 0), n.get("GPU", 0)) for n in nodes), default=(0, 0))
    problems = []
    if want.gpu > best[1] or not nodes:
        problems.append(Problem("resources.gpu", want.gpu, f"at most {best[1]:g} (largest GPU count "
                                f"of a node in the cluster)"))
    if want.cpu > best[0] or not problems:
        problems.append(Problem("resources.cpu", want.cpu, f"at most {best[0]:g} (largest CPU count "
                                f"of a node in the cluster)"))
    raise ExperimentError(plan.source, problems)


def _check_workers(plan: SweepPlan, nodes: list[dict[str, float]]) -> None:
    want = plan.experiment.resources
    slots = sum(int(min(n.get("CPU", 0) / want.cpu,
                        n.get("GPU", 0) / want.gpu if want.gpu else float("inf")))
                for n in nodes)
    if slots >= want.workers:
        return
    cpus = sum(n.get("CPU", 0) for n in nodes)
    gpus = sum(n.get("GPU", 0) for n in nodes)
    raise ExperimentError(plan.source, [Problem(
        "resources.workers", want.workers,
        f"at most {slots} workers of {want.cpu:g} CPU(s) and {want.gpu:g} GPU(s) each (the "
        f"cluster's {len(nodes)} node(s) hold {cpus:g} CPUs and {gpus:g} GPUs)")])


def _pointer(plan: SweepPlan) -> str:
    """The file (under ``ray.storage_path``) naming the sweep's latest Ray run."""
    return f"{plan.experiment.name}.latest"


def latest_run_name(plan: SweepPlan) -> str | None:
    text = Storage.of(plan.experiment.ray.storage_path).read_text(_pointer(plan))
    return text.strip() if text is not None else None


def nothing_to_resume(plan: SweepPlan, tracking_uri: str | None = None) -> str | None:
    """Why ``--resume`` has nothing to do (the latest sweep of the file ended, its MLflow
    parent run FINISHED), read without starting Ray; None when there is something."""
    ray_run = latest_run_name(plan)
    if ray_run is None:
        return None  # said by the resume itself, as bad input
    short_http_retries()  # an unreachable server answers in seconds, not minutes
    done = finished_sweep_run(tracking_uri or plan.experiment.tracking.uri, plan, ray_run)
    if done is None:
        return None
    return (f"{plan.source}: its latest sweep ({ray_run}) already ran to its end (MLflow "
            f"parent run {done.info.run_id} is FINISHED): nothing to resume; run the file "
            "without --resume to start a new sweep")


def _table_csv(plan: SweepPlan) -> str:
    rows = trial_table(plan)
    buf = io.StringIO()
    if rows:
        columns = list(dict.fromkeys(k for row in rows for k in row))  # n_h: some rows only
        writer = csv.DictWriter(buf, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


BACKLOG = "tracking_backlog.jsonl"
"""MLflow writes an outage left unwritten, in the Ray run folder (``--resume`` writes them);
on the driver's disk when the runs are in an object store (:meth:`Storage.driver_folder`)."""


def _write_backlog(callback: MlflowTracking, backlog: Path, uri: str) -> None:
    """Write every buffered op (retrying up to ``tracking.outage_limit_s``), or save them to
    ``backlog`` and raise :class:`TrackingOutage`."""
    if callback.buffer.drain():
        backlog.unlink(missing_ok=True)
        return
    buffer = callback.buffer
    held = len(buffer)
    buffer.save(backlog)
    raise TrackingOutage(
        f"MLflow at {redact_uri(uri)} was unreachable for {buffer.outage_s:.0f} s "
        f"(tracking.outage_limit_s "
        f"= {buffer.limit_s:g}; last error: {buffer.last_error}); the sweep stopped and kept "
        f"{held} unwritten MLflow write(s) in {backlog}", backlog)


def _close(client: Any, exp_id: str, parent_id: str, status: str, limit_s: float,
           backlog: Path) -> None:
    """Close the sweep's parent run (and children left RUNNING), riding out an MLflow outage
    like any buffered write; past ``limit_s`` raise :class:`TrackingOutage` (``--resume``
    closes it) unless another exception is already on its way out."""
    unwinding = sys.exc_info()[0] is not None
    try:
        ride_out("the sweep's run was closed",
                 lambda retry: close_sweep(client, exp_id, parent_id, status),
                 limit_s=limit_s, backlog=backlog, then="sublayer sweep --resume closes it")
    except TrackingOutage as exc:
        if not unwinding:
            raise
        log.warning("%s", exc)


def _open(uri: str, plan: SweepPlan, ray_run: str, *, resume: bool) -> tuple[Any, str, str]:
    """(client, experiment id, parent run id) of the sweep, its experiment labelled; with
    ``resume`` the parent run is found again (a retry finds what a failed attempt made)."""
    client = ensure_store(uri)
    exp_id, parent_id = open_sweep_run(client, plan, ray_run, resume=resume)
    label_experiment(client, exp_id, plan)
    return client, exp_id, parent_id


def run_sweep(plan: SweepPlan, *, resume: bool = False, address: str | None = None,
              tracking_uri: str | None = None) -> SweepOutcome:
    """Run (or resume) the sweep; every trial ends up as a closed MLflow child run."""
    return SweepRun(plan, resume=resume, address=address, tracking_uri=tracking_uri).run()


class SweepRun:
    """One run of a sweep, in named phases: :meth:`open` (Ray, the MLflow parent run),
    :meth:`restore_or_start` (what this run trains and tracks), :meth:`fit` (Ray Tune),
    :meth:`close` (the parent run's status, on every exit path but an MLflow outage).

    A fresh sweep gets a new Ray run name; ``resume`` continues the latest one: Tune's
    state is restored, or (killed before Tune's first snapshot: a *restart*) the sweep
    runs again under the same names and MLflow runs.
    """

    def __init__(self, plan: SweepPlan, *, resume: bool = False, address: str | None = None,
                 tracking_uri: str | None = None) -> None:
        exp = plan.experiment
        self.plan = plan
        self.resume = resume
        self.address = address or exp.ray.address or os.environ.get("RAY_ADDRESS")
        self.uri = tracking_uri or exp.tracking.uri
        self.storage = Storage.of(exp.ray.storage_path)  # a folder or s3://BUCKET/PREFIX
        self.ray_run, self.restart = self._ray_run()
        self.backlog = self.storage.driver_folder(self.ray_run) / BACKLOG
        self.limit_s = exp.tracking.outage_limit_s
        self.reused: dict[tuple[str, int, str], str] = {}
        self.client: Any = None
        self.exp_id = self.parent_id = ""

    def _ray_run(self) -> tuple[str, bool]:
        """(the Ray run's name, whether a resumed sweep must restart from scratch)."""
        exp = self.plan.experiment
        if not self.resume:
            return f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}", False
        ray_run = latest_run_name(self.plan)
        if ray_run is None:
            raise ExperimentError(self.plan.source, [Problem(
                "--resume", self.storage.uri_of(exp.name),
                "a sweep started earlier with this file (none found under ray.storage_path)")])
        if old := legacy_trials(self.storage, ray_run):
            raise ExperimentError(self.plan.source, [Problem(
                "--resume", ray_run,
                f"a sweep this version can continue ({old} of the trials in "
                f"{self.storage.uri_of(ray_run)} were saved by a "
                "version before the Trial change; run the file again with `reuse: true`: "
                "its finished trials are kept, the rest train)")])
        # killed before Tune's first snapshot: run it again under the same names and runs
        return ray_run, not tune.Tuner.can_restore(
            self.storage.path(ray_run),
            storage_filesystem=self.storage.ray_options().get("storage_filesystem"))

    def run(self) -> SweepOutcome:
        """Every phase in turn; Ray is shut down again if this run started it."""
        _quiet_output()
        if not self.resume:  # before Ray starts: an unknown experiment name is bad input (exit 2)
            self.advance(with_warm_start(self.plan, self.uri))
        self.advance(with_proxy_stage(self.plan, self.uri))  # the same pick when resumed
        started = connect(self.plan, self.address)
        try:
            check_cluster(self.plan)
            if self.address:  # a cluster: its nodes read the corpus from their own disks
                check_node_data(self.plan)
            self.open()
            callback = self.restore_or_start()
            results, interrupted = self.fit(callback)
            return SweepOutcome(experiment_id=self.exp_id, parent_run_id=self.parent_id,
                                ray_run=self.ray_run,
                                trials=result_rows(results, self.plan, callback.waiting.ids),
                                reused=len(self.reused), interrupted=interrupted)
        finally:
            if started:
                shutdown_ray()

    def advance(self, plan: SweepPlan) -> None:
        """Run on the plan a step of the run returned (warm start, one-shot's stage one,
        reuse): the same plan, or a new one whose history names the step."""
        if plan.history[:len(self.plan.history)] != self.plan.history:
            raise RuntimeError(f"a plan step lost the plan's history: {plan.history}")
        self.plan = plan

    # -- open ------------------------------------------------------------------------
    def open(self) -> None:
        """The run pointer (before any MLflow call: ``--resume`` after a kill or outage
        finds it), then the MLflow experiment and parent run, riding out an outage."""
        if not self.resume:
            self.storage.write_text(self.ray_run, _pointer(self.plan))
        short_http_retries()  # each request fails fast: ride_out and the buffer wait instead
        self.client, self.exp_id, self.parent_id = ride_out(
            "the sweep's MLflow run was opened",
            lambda retry: _open(self.uri, self.plan, self.ray_run,
                                resume=self.resume or retry),
            limit_s=self.limit_s, backlog=self.backlog)

    # -- restore or start --------------------------------------------------------------
    def restore_or_start(self) -> MlflowTracking:
        """What this run trains (one-shot's stage 1 picks it; ``reuse`` drops what already
        finished), the sweep's files on a start, and the MLflow callback; a resumed
        sweep first writes what an outage left unwritten."""
        tracker = self._plan_trials()
        if not self.resume or self.restart:
            self._log_files()
        fresh = not self.resume and not self.restart and not ride_out(
            "the sweep looked for earlier trial runs",
            lambda retry: self.client.search_runs(
                [self.exp_id], filter_string=f"tags.mlflow.parentRunId = '{self.parent_id}'",
                max_results=1),
            limit_s=self.limit_s, backlog=self.backlog)
        callback = tracker(tracking_uri=self.uri, experiment_id=self.exp_id,
                           parent_run_id=self.parent_id, plan=self.plan,
                           match_names=self.restart, fresh=fresh)
        callback.buffer.journal = self.backlog  # on disk through an outage: a killed driver keeps it
        if self.resume and callback.buffer.load(self.backlog):
            _write_backlog(callback, self.backlog, self.uri)
        return callback

    def _plan_trials(self) -> type[MlflowTracking]:
        exp, tracker = self.plan.experiment, MlflowTracking
        if search_algorithm(exp.search.algorithm).supernet_stage:  # stage 1 ranks the orders
            from sublayer_search.search.oneshot.stage_one import OneShotTracking, run_stage_one

            self.advance(run_stage_one(self.plan, self.client, self.exp_id, self.parent_id,
                                       self.storage.driver_folder(self.ray_run)))
            tracker = OneShotTracking  # stage 2: the top-k as a grid, tagged with their rank
        if exp.reuse and not self.resume:
            plan, self.reused = reuse_finished(self.client, self.exp_id, self.parent_id, self.plan)
            self.advance(plan)
        elif not self.resume and (hint := rerun_hint(self.client, self.exp_id, self.plan,
                                                     str(self.plan.source))):
            print(f"sublayer sweep: note: {hint}", file=sys.stderr, flush=True)
        return tracker

    def _log_files(self) -> None:
        """``experiment.yaml`` (as written, a tracking URI's password redacted) and
        ``trials.csv`` on the parent run."""
        exp, source = self.plan.experiment, self.plan.source
        text = (Path(source).read_text() if Path(source).is_file()
                else json.dumps(exp.model_dump(), indent=2, default=str))
        texts = {"experiment.yaml": text.replace(exp.tracking.uri, redact_uri(exp.tracking.uri)),
                 "trials.csv": _table_csv(self.plan)}
        ride_out("the sweep's experiment.yaml and trials.csv were logged",
                 lambda retry: [self.client.log_text(self.parent_id, body, name)
                                for name, body in texts.items()],
                 limit_s=self.limit_s, backlog=self.backlog)

    # -- run ---------------------------------------------------------------------------
    def fit(self, callback: MlflowTracking) -> tuple[Any, bool]:
        """(Tune's results, interrupted) once every trial ended or Ctrl-C stopped them;
        the parent run is closed on every way out but an MLflow outage (``--resume``
        closes it then)."""
        try:
            results, interrupted = self._tune(callback)
            _write_backlog(callback, self.backlog, self.uri)
        except TrackingOutage:
            raise  # MLflow is down: the parent run stays open
        except KeyboardInterrupt:
            self.close("KILLED", callback)
            raise
        except BaseException:
            self.close("FAILED", callback)
            raise
        self.close("KILLED" if interrupted else "FINISHED", callback)
        return results, interrupted

    def _tune(self, callback: MlflowTracking) -> tuple[Any, bool]:
        """Restore Tune's run or start one (nothing to start: every grid trial was reused)."""
        results: Any = []
        with SigintWatch() as sigint:
            if self.resume and not self.restart:
                results = restored_tuner(self.plan, self.storage, self.ray_run, callback).fit()
            elif self.plan.trials or not search_algorithm(
                    self.plan.algorithm).plans_every_trial:
                results = make_tuner(self.plan, self.ray_run, callback).fit()
            else:
                return results, False
        # Tune's handler replaces the marker only while it runs: nothing ran, nothing fired
        return results, sigint.fired or (bool(results) and incomplete(results, self.plan))

    # -- close -------------------------------------------------------------------------
    def close(self, status: str, callback: MlflowTracking) -> None:
        """The parent run ends ``status`` (children left RUNNING are KILLED)."""
        _close(self.client, self.exp_id, self.parent_id, status, callback.buffer.limit_s,
               self.backlog)


def _quiet_output() -> None:
    """Tune's and MLflow's console output the sweep replaces with its own."""
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no table, no TensorBoard hint
    # MLflow prints a "View run" link per closed run, with the URI's password if it has one;
    # the sweep prints its own links (without it) at the end
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    quiet_ray_resume_advice()  # Ctrl-C: the sweep names its own resume command
