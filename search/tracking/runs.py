"""MLflow tracking, written by the driver only, in batches.

One parent run per sweep (tag ``sublayer.role=sweep``), one child run per trial
(tags ``mlflow.parentRunId`` and ``sublayer.role=trial``). Ray's own
``MLflowLoggerCallback`` makes one HTTP call per metric key; this callback makes one
``log_batch`` call per report.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlflow.entities import Param
from mlflow.tracking import MlflowClient
from ray.tune.result import AUTO_RESULT_KEYS

from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.tracking.values import chunks
from sublayer_search.spaces.records import Role, Tag, TrialStatus

__all__ = ["open_sweep_run", "close_sweep", "finished_sweep_run", "finished_trials", "ensure_store",
           "environment_tags", "PLACEMENT_KEYS", "metrics_of"]

PLACEMENT_KEYS = ("node_id", "node_ip", "gpu_ids", "resumed_from_step", "device",
                  "device_name", "device_count")
"""What the trainable adds to each report about where the trial runs (tags, not metrics)."""
_NOT_METRICS = frozenset({*AUTO_RESULT_KEYS, *PLACEMENT_KEYS, "step", "done", "trial_id",
                          "experiment_tag", "should_checkpoint", "experiment_id"})
ROLE, STATUS, STORAGE = Tag.ROLE, Tag.STATUS, Tag.RAY_RUN
log = logging.getLogger(__name__)


def metrics_of(result: dict[str, Any]) -> dict[str, float]:
    """Every numeric metric the trainer reported (Ray's own fields and placement left out)."""
    return {k: float(v) for k, v in result.items()
            if k not in _NOT_METRICS and isinstance(v, int | float) and not isinstance(v, bool)}


def _create_sqlite(path: Path) -> bool:
    """Create a new SQLite store whole or not at all: MLflow builds its tables in a private
    file that is then linked into place (a driver killed halfway through MLflow's table
    creation left a file that every later start refused: "table … already exists")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob(f".{path.name}.*.part*"):  # of a process killed meanwhile
        pid = stale.name.removeprefix(f".{path.name}.").split(".")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.unlink(missing_ok=True)
    if path.exists():
        return False
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    part.unlink(missing_ok=True)
    MlflowClient(tracking_uri=f"sqlite:///{part}").search_experiments(max_results=1)
    try:
        os.link(part, path)  # atomic, and never over a store another process just made
        return True
    except FileExistsError:  # made meanwhile: by another sweep, whole; or by `mlflow ui` …
        return False
    finally:
        for left in (part, part.with_name(part.name + "-journal")):
            left.unlink(missing_ok=True)


STORE_WAIT_S = 120.0
"""How long the driver waits, at most, for another process to finish making a new store."""
STORE_QUIET_S = 10.0
"""An error that stands while the store's files have not changed for this long is the
store's own (an old schema to upgrade, a broken file), not a race: it is raised."""


def _signature(path: Path) -> tuple[tuple[int, int], ...]:
    """(size, mtime) of the store and its journal / WAL files: changes while anyone writes."""
    found = []
    for name in (path.name, f"{path.name}-journal", f"{path.name}-wal"):
        try:
            info = (path.parent / name).stat()
            found.append((info.st_size, info.st_mtime_ns))
        except OSError:
            found.append((-1, -1))
    return tuple(found)


def _schema_head() -> str | None:
    """The newest schema revision of the installed MLflow (its alembic migrations' head)."""
    import mlflow.store
    from alembic.script import ScriptDirectory

    try:
        folder = Path(mlflow.store.__file__).parent / "db_migrations"
        return ScriptDirectory(str(folder)).get_current_head()
    except Exception:  # noqa: BLE001 -- a layout this MLflow does not have: no waiting
        return None


def _revision(path: Path) -> str | None:
    """The store's schema revision, read without MLflow (so without migrating anything)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True,
                                                timeout=1.0)) as db:
            row = db.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:  # no table yet, or locked by the process making it
        return None
    return str(row[0]) if row else None


def _wait_for_schema(path: Path, wait_s: float, quiet_s: float) -> None:
    """Wait, reading only, until a store another process made is at MLflow's newest schema,
    or its files stop changing (then MLflow's own answer stands): two processes that
    migrate one SQLite store at once can break it for both."""
    head = _schema_head()
    start = changed = time.monotonic()
    last = _signature(path)
    while head is not None and _revision(path) != head:
        now, seen = time.monotonic(), _signature(path)
        if seen != last:
            last, changed = seen, now
        if now - changed > quiet_s or now - start > wait_s:
            return
        time.sleep(0.05)


def ensure_store(uri: str, *, wait_s: float = STORE_WAIT_S,
                 quiet_s: float = STORE_QUIET_S) -> MlflowClient:
    """A client whose store exists (a new SQLite file is created here, once, by the driver).

    Another process that opens the same new store at that moment (``mlflow ui``, a second
    sweep, a notebook) would make MLflow create or migrate its tables twice at once, and the
    loser gets any of "table … already exists", "duplicate column", an alembic error or
    "out-of-date database schema", or the store is left broken. So a store this call did
    not make is first only read until it is at MLflow's newest schema; then, while the
    store's files keep changing, the open is retried, for ``wait_s`` at most. An error that
    stands once they have been quiet for ``quiet_s`` is raised as it is.
    """
    path = Path(uri.removeprefix("sqlite:///")).expanduser().resolve() \
        if uri.startswith("sqlite:///") else None
    if path is not None and not _create_sqlite(path):  # made by someone else: let them finish
        _wait_for_schema(path, wait_s, quiet_s)
    start = time.monotonic()
    last, changed, pause = None, start, 0.05
    while True:
        try:
            client = MlflowClient(tracking_uri=uri)
            client.search_experiments(max_results=1)
            return client
        except Exception:  # MLflow's and SQLAlchemy's, of any kind while racing
            if path is None:
                raise
            now, seen = time.monotonic(), _signature(path)
            if seen != last:
                last, changed = seen, now
            if now - changed > quiet_s or now - start > wait_s:
                raise
            log.info("the MLflow store %s is being made by another process; waiting", path)
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


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


def _experiment_id(client: MlflowClient, plan: SweepPlan) -> str:
    """The sweep's MLflow experiment, created with ``tracking.artifact_location`` when new;
    an existing one keeps its own (MLflow cannot move it): a different one is refused."""
    exp = plan.experiment
    wanted = exp.tracking.artifact_location
    found = client.get_experiment_by_name(exp.experiment_name)
    if found is None:
        return client.create_experiment(exp.experiment_name, artifact_location=wanted)
    if wanted is not None and found.artifact_location.rstrip("/") != wanted.rstrip("/"):
        raise ExperimentError(plan.source, [Problem(
            "tracking.artifact_location", wanted,
            f"the artifact location of the existing MLflow experiment {exp.experiment_name!r}, "
            f"{found.artifact_location} (MLflow cannot move it: name a new tracking.experiment)")])
    return str(found.experiment_id)


def open_sweep_run(client: MlflowClient, plan: SweepPlan, ray_run: str,
                   *, resume: bool) -> tuple[str, str]:
    """(experiment id, parent run id): reused on ``--resume``, created otherwise.

    A reused run gets whichever of the sweep's params it lacks: an attempt that created
    the run and then failed before logging them (an outage between the two requests)
    leaves a run that the retry finds."""
    exp = plan.experiment
    exp_id = _experiment_id(client, plan)
    params = [Param("source", plan.source), Param("search", exp.search.algorithm),
              Param("scheduler", exp.scheduler.type), Param("trials_planned", str(len(plan.trials))),
              Param("config_hash", plan.config_hash)]
    if resume:
        runs = client.search_runs([exp_id], filter_string=f"tags.`{STORAGE}` = '{ray_run}' and "
                                  f"tags.`{ROLE}` = '{Role.SWEEP}'", max_results=1)
        if runs:
            run_id = runs[0].info.run_id
            missing = [p for p in params if p.key not in runs[0].data.params]
            if missing:
                client.log_batch(run_id, params=missing)
            client.update_run(run_id, status="RUNNING")
            return exp_id, run_id
    tags = {ROLE: Role.SWEEP.value, STORAGE: ray_run, Tag.NOTE: exp.description,
            Tag.SEARCH: exp.search.algorithm, Tag.METRIC: plan.metric,
            **environment_tags()}
    run = client.create_run(exp_id, run_name=exp.name, tags=tags)
    client.log_batch(run.info.run_id, params=params)
    return exp_id, run.info.run_id


def finished_sweep_run(uri: str, plan: SweepPlan, ray_run: str) -> Any | None:
    """The MLflow parent run of Ray run ``ray_run`` when it ended FINISHED (every trial
    ended: nothing to resume); None when it did not, or the store cannot say (it is not
    created, or unreachable: resuming is what rides out an outage)."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).expanduser().is_file():
        return None
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(plan.experiment.experiment_name)
        runs = [] if exp is None else client.search_runs(
            [exp.experiment_id], max_results=1,
            filter_string=f"tags.`{STORAGE}` = '{ray_run}' and tags.`{ROLE}` = '{Role.SWEEP}'")
    except Exception:  # noqa: BLE001 - not known: resume as usual, which says what is wrong
        return None
    return runs[0] if runs and runs[0].info.status == "FINISHED" else None


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
    for chunk in chunks(params):
        client.log_batch(new_id, params=chunk)
    history = [m for key in source.data.metrics for m in client.get_metric_history(run_id, key)]
    for chunk in chunks(history, 1000):
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
