"""Ray Tune for a sweep: the Tuner (searcher, scheduler, trainable, callbacks), a restored
one, whether Ctrl-C stopped it, and one row per trial of its results."""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ray import tune
from ray.tune.execution import class_cache
from ray.tune.search import ConcurrencyLimiter

from sublayer_search.search.core.rebind import rebinding
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.run.checkpoints import fill_checkpoint_gaps
from sublayer_search.search.run.moved_modules import moved_modules
from sublayer_search.search.run.progress import SweepProgress
from sublayer_search.search.run.retention import CheckpointRetention
from sublayer_search.search.run.trainable import train_trial
from sublayer_search.search.run.workers import TRIAL_RESOURCES, WholeTrials
from sublayer_search.search.searchers.registry import make_searcher, search_algorithm
from sublayer_search.search.stopping.registry import stopping_rule
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.spaces.records import TrialStatus, best, ended_status

if TYPE_CHECKING:
    from ray.tune import ResultGrid

__all__ = ["CREDENTIAL_ENV", "SigintWatch", "incomplete", "keep_credentials_out_of_trials",
           "make_tuner", "quiet_ray_resume_advice", "restored_tuner", "result_rows"]

CREDENTIAL_ENV = frozenset({"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN",
                            "AWS_SESSION_TOKEN"})
"""The driver's variables Ray Tune would copy into every trial's runtime env."""


def keep_credentials_out_of_trials() -> None:
    """Stop Ray Tune from copying the driver's AWS keys into each trial's runtime env.

    Tune hands ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and the session token of
    the driver's environment to every trial actor as its runtime env, and Ray's runtime-env
    agent logs that env in plain text (``session_*/logs/runtime_env_agent.log``), which
    the Slurm job copies to the shared folder and KubeRay keeps on every pod. The trials do
    not need it: a local Ray's workers inherit the driver's environment, and a cluster's
    nodes read their own (the Slurm job's ``--export=ALL``, a pod's secret), as the S3
    credentials always do here (``search/plan/credentials.py``). So the names are taken
    out of Tune's public list of variables to propagate; the rest of it stays.
    """
    class_cache.ENV_VARS_TO_PROPAGATE = set(class_cache.ENV_VARS_TO_PROPAGATE) - CREDENTIAL_ENV

PENDING = "pending"
"""The closing table's status of a trial an interrupted sweep never started."""


class _NoResumeAdvice(logging.Filter):
    """Drops Tune's "Resume experiment with: Tuner.restore(...)" warning: the sweep
    prints the one command that resumes it (``--resume``, or ``make run RESUME=1``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Tuner.restore(" not in record.getMessage()


def quiet_ray_resume_advice() -> None:
    """Install :class:`_NoResumeAdvice` on the logger Tune warns through (once)."""
    logger = logging.getLogger("ray.tune.tune")
    if not any(isinstance(f, _NoResumeAdvice) for f in logger.filters):
        logger.addFilter(_NoResumeAdvice())


def _scheduler(plan: SweepPlan) -> Any:
    exp = plan.experiment
    return stopping_rule(exp.scheduler.type).make(exp.scheduler, exp.train)


def _trainable(plan: SweepPlan) -> Any:
    """The trainable with the plan bound and one trial's resources."""
    exp = plan.experiment
    bound = tune.with_parameters(train_trial, plan=plan.for_trials())
    if exp.resources.workers > 1:  # the workers ask for the CPUs and GPUs; Tune starts
        return tune.with_resources(bound, TRIAL_RESOURCES)  # whole trials only (WholeTrials)
    return tune.with_resources(bound, {"cpu": exp.resources.cpu, "gpu": exp.resources.gpu})


def make_tuner(plan: SweepPlan, ray_run: str, callback: MlflowTracking) -> tune.Tuner:
    """A new Tuner for the plan's trials (or its searcher's), tracked by ``callback``."""
    exp = plan.experiment
    searcher: Any = make_searcher(plan)
    res = exp.resources
    if res.workers > 1:  # whole trials: only as many as the cluster holds (run/workers.py)
        searcher = WholeTrials(searcher, cpu=res.cpu, gpu=res.gpu, workers=res.workers,
                               limit=exp.max_concurrent)
    elif exp.max_concurrent:
        searcher = ConcurrencyLimiter(searcher, max_concurrent=exp.max_concurrent)
    keep_credentials_out_of_trials()
    num_samples = len(plan.trials)  # and an adaptive searcher's budget beyond them
    if search_algorithm(plan.algorithm).needs_budget:
        num_samples += int(exp.search.num_samples or 0)
    return tune.Tuner(
        _trainable(plan),
        tune_config=tune.TuneConfig(search_alg=searcher, scheduler=_scheduler(plan),
                                    num_samples=num_samples, reuse_actors=True),
        run_config=tune.RunConfig(
            name=ray_run, **Storage.of(exp.ray.storage_path).ray_options(),  # or s3://…
            callbacks=[callback, SweepProgress(total=num_samples, metric=plan.metric,
                                               mode=plan.mode, steps=exp.train.steps,
                                               several_workers=res.workers > 1),
                       CheckpointRetention(keep=exp.ray.keep_checkpoints)],
            failure_config=tune.FailureConfig(max_failures=exp.failure.retries),
            # every checkpoint is kept as far as Tune knows, so that it never forces a
            # snapshot of the whole sweep per checkpoint; CheckpointRetention prunes them
            checkpoint_config=tune.CheckpointConfig(num_to_keep=None),
            verbose=0,
        ),
    )


def restored_tuner(plan: SweepPlan, storage: Storage, ray_run: str,
                   callback: MlflowTracking) -> tune.Tuner:
    """The Tuner saved as ``ray_run`` in ``storage`` (a folder or an object store),
    unfinished trials resumed, tracked by ``callback`` and keeping this file's
    ``ray.keep_checkpoints`` (Tune restores the callbacks it pickled: they unpickle as
    these, :mod:`~sublayer_search.search.core.rebind`)."""
    keep_credentials_out_of_trials()
    options = storage.ray_options()
    fill_checkpoint_gaps(storage.path(ray_run), filesystem=options.get("storage_filesystem"))
    retention = CheckpointRetention(keep=plan.experiment.ray.keep_checkpoints)
    with rebinding(callback, retention), moved_modules():
        return tune.Tuner.restore(storage.path(ray_run), trainable=_trainable(plan),
                                  resume_unfinished=True, resume_errored=False,
                                  restart_errored=False,
                                  storage_filesystem=options.get("storage_filesystem"))


def result_rows(results: ResultGrid, plan: SweepPlan,
                waiting: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """One row per Ray trial, from its record: name, order, seed, family, status, steps,
    the metric's last and best values (``waiting``: ids of trials that waited for
    resources when the sweep stopped)."""
    rows = []
    for res in (results[i] for i in range(len(results))):
        trial: Trial[Any] = (res.config or {})["trial"]
        last = res.metrics or {}
        status = _status(res.error, last, plan.experiment.train.steps,
                         waiting=last.get("trial_id") in waiting)
        record = replace(plan.record(trial), steps=last.get("step"),
                         final=last.get(plan.metric), best=last.get(best(plan.metric)))
        rows.append({"name": record.name, "order": record.order, "seed": record.seed,
                     "family": record.family, "status": status, "steps": record.steps,
                     plan.metric: record.final, best(plan.metric): record.best})
    return sorted(rows, key=lambda r: (str(r["family"]), str(r["name"])))


def _status(error: Any, last: dict[str, Any], steps: int, *, waiting: bool = False) -> str:
    """How a trial ended, as MLflow's tag says it: failed; waiting (for its workers'
    resources when the sweep stopped); killed (an interrupted sweep stopped it before Tune
    marked its last result ``done``); pending (never started); else diverged, stopped
    (early, by the scheduler) or finished."""
    if error:
        return str(TrialStatus.FAILED)
    if waiting:
        return TrialStatus.WAITING.value
    if not last:
        return PENDING
    if last.get("done") is False:  # Tune marks the last result of an ended trial done
        return str(TrialStatus.KILLED)
    return str(ended_status(last, steps))


def incomplete(results: ResultGrid, plan: SweepPlan) -> bool:
    """Some trial neither finished nor failed, or a grid trial never started."""
    ended = results.num_terminated + results.num_errors
    return ended < len(results) or (
        search_algorithm(plan.algorithm).plans_every_trial
        and len(results) < len(plan.trials))


class SigintWatch:
    """Did Ray Tune's SIGINT handler fire during ``fit``?

    Tune installs its own handler for the run and, on the first Ctrl-C, stops the run
    gracefully and puts back the handler it found. So: install a marker handler first;
    if the marker is back in place after ``fit``, Ctrl-C was pressed. Outside the main
    thread (no signal handlers) this reports nothing and the results decide alone.
    """

    def __enter__(self) -> SigintWatch:
        self.fired = False
        self._previous = None
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._marker)
        return self

    @staticmethod
    def _marker(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            self.fired = signal.getsignal(signal.SIGINT) is self._marker
            signal.signal(signal.SIGINT, self._previous)
