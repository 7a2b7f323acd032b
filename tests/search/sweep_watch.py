"""Watching a running sweep from a test: its trials in the MLflow store (read-only until
the driver made it) and Tune's saved experiment state."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import wait_while_running


def wait_for_trials(driver: subprocess.Popen[bytes], db: Path, experiment: str,
                    ready: Callable[[Any, list[Any]], bool], what: str, *, log: Path,
                    timeout: float = 300) -> Any:
    """Poll a running sweep's SQLite store ``db`` until ``ready(client, trial runs of
    experiment)``; fail if the driver ends first. Returns the MLflow client."""
    from mlflow.tracking import MlflowClient

    found: list[Any] = []

    def check() -> bool:
        # only once the driver has created the store (a run is in it): a client opening a
        # store mid-creation races the driver's schema migration
        if not found and store_has_runs(db):
            found.append(MlflowClient(f"sqlite:///{db}"))
        return bool(found) and ready(found[0], trial_runs(found[0], experiment))

    wait_while_running(what, check, driver, log, timeout)
    return found[0]


def tune_saved_since(storage: Path, since: float) -> bool:
    """Tune saved its experiment state (``experiment_state-*.json``, what ``--resume``
    reads) under ``storage`` after ``since`` (a ``time.time()``)."""
    return any(p.stat().st_mtime > since for p in storage.rglob("experiment_state-*.json"))


def trial_runs(client: Any, experiment: str) -> list[Any]:
    """The trial runs of MLflow experiment ``experiment`` (none before it exists)."""
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], filter_string="tags.`sublayer.role` = 'trial'")


def store_has_runs(db: Path) -> bool:
    """The sweep's SQLite store exists and holds a run (read-only: nothing is created; a
    client opening a store mid-creation races the driver's schema migration)."""
    import sqlite3
    from contextlib import closing

    if not db.exists():
        return False
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            return con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] > 0
    except sqlite3.Error:  # not created yet (no table), or locked mid-migration
        return False
