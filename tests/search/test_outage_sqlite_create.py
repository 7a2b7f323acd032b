"""A driver killed while MLflow creates a new SQLite store leaves no half-made store.

MLflow creates its tables one migration at a time; a process killed halfway left a file
that every later start refused ("table … already exists"; found by
``benchmarks/resume_soak.py``). ``ensure_store`` builds the store in a private file
and links it into place, so the store is whole or absent.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from sublayer_search.search.tracking.runs import ensure_store

pytestmark = pytest.mark.slow  # three Python processes that import MLflow and Ray

CREATE = ("import sys; from sublayer_search.search.tracking.runs import ensure_store; "
          "ensure_store(sys.argv[1])")


def _kill_while_creating(uri: str, folder: Path, delay: float) -> bool:
    """Start a store creation, SIGKILL it ``delay`` s after its first file appears;
    True when it was still at work then."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.Popen([sys.executable, "-c", CREATE, uri], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and not any(folder.iterdir()):
            assert time.monotonic() < deadline, "the store creation never started"
            time.sleep(0.01)
        time.sleep(delay)
        midway = proc.poll() is None
        proc.kill()
    finally:
        proc.wait()
    return midway


@pytest.mark.parametrize("delay", [0.2, 0.3, 0.45])
def test_a_kill_during_store_creation_leaves_a_usable_store_or_none(tmp_path: Path,
                                                                    delay: float) -> None:
    """Without the private file, kills 0.3 s into MLflow's creation broke the store here
    ("duplicate column name: step"); the delays span that window."""
    db = tmp_path / "store" / "mlflow.db"
    db.parent.mkdir()
    uri = f"sqlite:///{db}"
    assert _kill_while_creating(uri, db.parent, delay), \
        "the creation had ended before the kill: the test proved nothing"
    assert not db.exists()  # no half-made store under the real name
    client = ensure_store(uri)  # never "table … already exists" or "duplicate column"
    exp_id = client.create_experiment("after_the_kill")
    assert MlflowClient(uri).get_experiment(exp_id).name == "after_the_kill"
    assert sorted(p.name for p in db.parent.iterdir()) == ["mlflow.db"]  # no litter left
