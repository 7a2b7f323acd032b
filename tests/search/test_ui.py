"""``sublayer ui`` serves the MLflow UI of a store on 127.0.0.1."""

from __future__ import annotations

import sys
import urllib.request

import pytest
from helpers import free_port, start, stop, subprocess_env, wait_for_health, wait_for_text

pytestmark = pytest.mark.slow


def test_sublayer_ui_serves_the_store(tmp_path):
    from mlflow.tracking import MlflowClient

    db = f"sqlite:///{tmp_path}/mlflow.db"
    MlflowClient(db).create_experiment("ui-check")
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from sublayer_search.search.cli.main import main; sys.exit(main())",
           "ui", "--tracking-uri", db, "--port", str(port)]
    log = tmp_path / "ui.log"
    proc = start(cmd, env=subprocess_env(tmp_path), log=log)
    try:
        wait_for_health(port, proc, log)
        body = urllib.request.urlopen(  # noqa: S310 - loopback only
            f"http://127.0.0.1:{port}/api/2.0/mlflow/experiments/search?max_results=10",
            timeout=10).read().decode()
        assert "ui-check" in body
        wait_for_text(f"MLflow UI on http://127.0.0.1:{port}", proc, log)  # where to look
    finally:
        stop(proc)
