"""Run a planned sweep on Ray Tune with MLflow tracking (``sublayer sweep``).

Order of events: connect to (or start) Ray and check that some node can hold one
trial; open the MLflow store, experiment and parent run; run or restore the Tuner;
close every run on every exit path.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from ray import tune
from ray.tune.schedulers import FIFOScheduler
from ray.tune.search import ConcurrencyLimiter

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.search.plan.problems import ExperimentError, Problem
from sublayer_search.search.plan.sweep_plan import SweepPlan, Trial, trial_table
from sublayer_search.search.plan.variant import run_variant
from sublayer_search.search.run.checkpoints import fill_checkpoint_gaps
from sublayer_search.search.run.local_ray import shutdown_ray, start_local_ray
from sublayer_search.search.run.progress import SweepProgress
from sublayer_search.search.run.schedulers import CandidateASHA
from sublayer_search.search.run.trainable import train_trial
from sublayer_search.search.searchers.tune import make_searcher
from sublayer_search.search.searchers.warm_start import with_warm_start
from sublayer_search.search.tracking.buffer import TrackingOutage, ride_out, short_http_retries
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.links import label_experiment
from sublayer_search.search.tracking.runs import (
    close_sweep,
    copy_trial,
    ensure_store,
    finished_trials,
    open_sweep_run,
)
from sublayer_search.spaces.records import ended_status

log = logging.getLogger(__name__)

__all__ = ["SweepOutcome", "run_sweep", "connect", "latest_run_name", "TrackingOutage"]


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


def _pointer(plan: SweepPlan) -> Path:
    return Path(plan.experiment.storage_path()) / f"{plan.experiment.name}.latest"


def latest_run_name(plan: SweepPlan) -> str | None:
    ptr = _pointer(plan)
    return ptr.read_text().strip() if ptr.is_file() else None


def _scheduler(plan: SweepPlan) -> Any:
    spec = plan.experiment.scheduler
    if spec.type == "fifo":
        return FIFOScheduler()
    return CandidateASHA(time_attr="step", metric=spec.metric, mode=spec.mode,
                         max_t=plan.experiment.train.steps,
                         grace_period=spec.grace_period * plan.experiment.train.eval_every,
                         reduction_factor=spec.reduction_factor)


def _tuner(plan: SweepPlan, ray_run: str, callback: MlflowTracking) -> tune.Tuner:
    exp = plan.experiment
    searcher: Any = make_searcher(plan)
    if exp.max_concurrent:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=exp.max_concurrent)
    if exp.search.algorithm == "grid":
        num_samples = len(plan.trials)
    else:
        num_samples = len(plan.trials) + int(exp.search.num_samples or 0)
    trainable = tune.with_resources(tune.with_parameters(train_trial, plan=plan),
                                    {"cpu": exp.resources.cpu, "gpu": exp.resources.gpu})
    return tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, scheduler=_scheduler(plan),
                                    num_samples=num_samples, reuse_actors=True),
        run_config=tune.RunConfig(
            name=ray_run, storage_path=exp.storage_path(),
            callbacks=[callback, SweepProgress(total=num_samples, metric=plan.metric,
                                               mode=plan.mode, steps=exp.train.steps)],
            failure_config=tune.FailureConfig(max_failures=exp.failure.retries),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            verbose=0,
        ),
    )


def _rows(results: Any, plan: SweepPlan) -> list[dict[str, Any]]:
    rows = []
    for res in results:
        cfg = (res.config or {}).get("trial", {})
        last = res.metrics or {}
        rows.append({
            "name": cfg.get("name"), "order": cfg.get("order"), "seed": cfg.get("seed"),
            "family": "baseline" if cfg.get("baseline") else cfg.get("space"),
            "status": "failed" if res.error else str(ended_status(last, plan.experiment.train.steps)),
            "steps": last.get("step"), plan.metric: last.get(plan.metric),
            f"best_{plan.metric}": last.get(f"best_{plan.metric}"),
        })
    return sorted(rows, key=lambda r: (str(r["family"]), str(r["name"])))


def _table_csv(plan: SweepPlan) -> str:
    rows = trial_table(plan)
    buf = io.StringIO()
    if rows:
        columns = list(dict.fromkeys(k for row in rows for k in row))  # n_h: some rows only
        writer = csv.DictWriter(buf, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return buf.getvalue()


def _reuse(client: Any, exp_id: str, parent_id: str,
           plan: SweepPlan) -> tuple[SweepPlan, dict[tuple[str, int, str], str]]:
    """Drop trials whose content key — (order, seed, identity, config hash) — already
    finished (identity: what else tells models apart, such as an IOT subset)."""
    from dataclasses import replace

    scope = [exp_id]
    if plan.experiment.reuse == "store":
        scope += [e.experiment_id for e in client.search_experiments(max_results=50000)
                  if e.experiment_id != exp_id]
    def identity(params: dict[str, str]) -> str:  # a run's variant, read from its params
        variant = run_variant(params)
        return "?" if variant is None else plan.task.identity(variant)

    def key(t: Trial) -> tuple[str, int, str]:
        return (t.order, t.seed, plan.task.identity(t.variant))

    done = finished_trials(client, scope, plan.config_hash, identity)
    same = (set(finished_trials(client, exp_id, plan.config_hash, identity))
            if len(scope) > 1 else set(done))
    reused = {key(t): done[key(t)] for t in plan.trials if key(t) in done}
    for found, run_id in list(reused.items()):
        if found not in same:  # from another experiment: copied in, so its studies see it
            copy_trial(client, run_id, exp_id, parent_id)
    if reused:
        lines = [f"{order}\t{seed}\t{run_id}" for (order, seed, _), run_id in reused.items()]
        client.log_text(parent_id, "order\tseed\trun_id\n" + "\n".join(lines) + "\n",
                        "reused_trials.tsv")
    client.set_tag(parent_id, "sublayer.reused_trials", str(len(reused)))
    kept = [t for t in plan.trials if key(t) not in reused]
    return replace(plan, trials=kept), reused


class _SigintWatch:
    """Did Ray Tune's SIGINT handler fire during ``fit``?

    Tune installs its own handler for the run and, on the first Ctrl-C, stops the run
    gracefully and puts back the handler it found. So: install a marker handler first;
    if the marker is back in place after ``fit``, Ctrl-C was pressed. Outside the main
    thread (no signal handlers) this reports nothing and the results decide alone.
    """

    def __enter__(self) -> _SigintWatch:
        self.fired = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._marker)
        return self

    @staticmethod
    def _marker(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self._previous is not None:
            self.fired = signal.getsignal(signal.SIGINT) is self._marker
            signal.signal(signal.SIGINT, self._previous)


def _incomplete(results: Any, plan: SweepPlan) -> bool:
    """Some trial neither finished nor failed, or a grid trial never started."""
    ended = results.num_terminated + results.num_errors
    return ended < len(results) or (plan.experiment.search.algorithm == "grid"
                                    and len(results) < len(plan.trials))


BACKLOG = "tracking_backlog.jsonl"
"""MLflow writes an outage left unwritten, in the Ray run folder (``--resume`` writes them)."""


def _use_callback(tuner: tune.Tuner, callback: MlflowTracking) -> None:
    """Tune restores the callbacks pickled when the sweep started; track with this run's
    instead (its tracking URI and outage limit, the runs its backlog replay found)."""
    inner = getattr(tuner, "_local_tuner", None)
    config = inner.get_run_config() if inner is not None else None
    if config is not None and config.callbacks:
        config.callbacks = [callback if isinstance(c, MlflowTracking) else c
                            for c in config.callbacks]


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
    exp = plan.experiment
    address = address or exp.ray.address or os.environ.get("RAY_ADDRESS")
    uri = tracking_uri or exp.tracking.uri
    storage = Path(exp.storage_path())
    restart = False
    if resume:
        ray_run = latest_run_name(plan)
        if ray_run is None:
            raise ExperimentError(plan.source, [Problem("--resume", str(storage / exp.name),
                                                        "a sweep started earlier with this file "
                                                        "(none found under ray.storage_path)")])
        # killed before Tune's first snapshot: run it again under the same names and runs
        restart = not tune.Tuner.can_restore(str(storage / ray_run))
    else:
        ray_run = f"{exp.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no table, no TensorBoard hint
    # MLflow prints a "View run" link per closed run, with the URI's password if it has one;
    # the sweep prints its own links (without it) at the end
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    if not resume:  # before Ray starts: an unknown experiment name is bad input (exit 2)
        plan = with_warm_start(plan, uri)
    started = connect(plan, address)
    try:
        check_cluster(plan)
        if not resume:  # before any MLflow call: --resume after a kill or outage finds it
            storage.mkdir(parents=True, exist_ok=True)
            _pointer(plan).write_text(ray_run)
        short_http_retries()  # each request fails fast: ride_out and the buffer wait instead
        limit_s, backlog = exp.tracking.outage_limit_s, storage / ray_run / BACKLOG
        client, exp_id, parent_id = ride_out(
            "the sweep's MLflow run was opened",
            lambda retry: _open(uri, plan, ray_run, resume=resume or retry),
            limit_s=limit_s, backlog=backlog)
        tracker = MlflowTracking
        if exp.search.algorithm == "oneshot":  # stage 1: a supernet ranks the space's orders
            from sublayer_search.search.oneshot.stage_one import OneShotTracking, run_stage_one

            plan = run_stage_one(plan, client, exp_id, parent_id, storage / ray_run)
            tracker = OneShotTracking  # stage 2: the top-k as a grid, tagged with their rank
        reused: dict[tuple[str, int, str], str] = {}
        if exp.reuse and not resume:
            plan, reused = _reuse(client, exp_id, parent_id, plan)
        if not resume or restart:
            source = (Path(plan.source).read_text() if Path(plan.source).is_file()
                      else json.dumps(exp.model_dump(), indent=2, default=str))
            # the file as written, but a password in its tracking URI is not logged
            texts = {"experiment.yaml": source.replace(exp.tracking.uri,
                                                       redact_uri(exp.tracking.uri)),
                     "trials.csv": _table_csv(plan)}
            ride_out("the sweep's experiment.yaml and trials.csv were logged",
                     lambda retry: [client.log_text(parent_id, text, name)
                                    for name, text in texts.items()],
                     limit_s=limit_s, backlog=backlog)
        callback = tracker(tracking_uri=uri, experiment_id=exp_id, parent_run_id=parent_id,
                           plan=plan, match_names=restart)
        callback.buffer.journal = backlog  # on disk through an outage: a killed driver keeps it
        if resume and callback.buffer.load(backlog):
            _write_backlog(callback, backlog, uri)  # what an outage left unwritten, first
        status = "FAILED"
        results: Any = []
        interrupted = ran = False
        try:
            with _SigintWatch() as sigint:
                if resume and not restart:
                    fill_checkpoint_gaps(storage / ray_run)
                    tuner = tune.Tuner.restore(
                        str(storage / ray_run),
                        trainable=tune.with_resources(
                            tune.with_parameters(train_trial, plan=plan),
                            {"cpu": exp.resources.cpu, "gpu": exp.resources.gpu}),
                        resume_unfinished=True, resume_errored=False, restart_errored=False)
                    _use_callback(tuner, callback)
                    results = tuner.fit()
                    ran = True
                elif plan.trials or exp.search.algorithm != "grid":  # else: all were reused
                    results = _tuner(plan, ray_run, callback).fit()
                    ran = True
            _write_backlog(callback, backlog, uri)
            # Tune's handler replaces the marker only while it runs: nothing ran, nothing fired
            interrupted = (ran and sigint.fired) or (bool(results) and _incomplete(results, plan))
            status = "KILLED" if interrupted else "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        except TrackingOutage:
            status = ""  # MLflow is down: the parent run is closed by --resume
            raise
        finally:
            if status:
                _close(client, exp_id, parent_id, status, callback.buffer.limit_s, backlog)
        return SweepOutcome(experiment_id=exp_id, parent_run_id=parent_id, ray_run=ray_run,
                            trials=_rows(results, plan), reused=len(reused),
                            interrupted=interrupted)
    finally:
        if started:
            shutdown_ray()
