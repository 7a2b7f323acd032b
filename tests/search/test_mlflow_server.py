"""A sweep tracked over HTTP by a real ``mlflow server``, read back by REST and a browser.

The test starts a light MLflow server (SQLite store, one worker), runs
``sublayer sweep --tracking-uri http://…`` against it, finds the parent and child
runs through ``POST /api/2.0/mlflow/runs/search``, and loads the experiment's run
list (sorted by the final metric, which shows child runs flat) in headless Chromium:
the rendered page must name every trial. A screenshot is
kept under ``$SUBLAYER_TEST_ARTIFACTS`` (or the test's tmp_path).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.parse
from pathlib import Path

import pytest
from helpers import (
    http_json,
    mlflow_server,
    run_cli,
    run_tags,
    scratch,
    search_runs,
    subprocess_env,
    tail,
    write_experiment,
)

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "fsfs"]
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
                  "--disable-dev-shm-usage", "--virtual-time-budget=10000"]


def _chromium() -> str:
    for name in CHROMIUM_CANDIDATES:
        found = shutil.which(name) if not os.path.isabs(name) else (name if os.access(name, os.X_OK)
                                                                     else None)
        if found:
            return found
    pytest.fail("headless Chromium is required for the MLflow UI check and was not found "
                f"(tried {', '.join(CHROMIUM_CANDIDATES)}); install it with "
                "`apt-get install -y chromium` (`make test` does this: .ci/test-deps.sh)")


def _browse(chromium: str, url: str, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *extra, url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90,
                          env={**os.environ, "HOME": str(profile)})


def _artifacts_dir(tmp_path: Path) -> Path:
    root = os.environ.get("SUBLAYER_TEST_ARTIFACTS")
    folder = Path(root) if root else tmp_path / "test-artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_sweep_over_http_is_listed_by_rest_api_and_ui(tmp_path: Path) -> None:
    chromium = _chromium()  # fail fast, before anything is started
    unused = tmp_path / "must-not-be-used.db"
    with mlflow_server(tmp_path) as server, scratch("sublayer-home") as home:
        exp_file = write_experiment(tmp_path, "http_tracked", orders=ORDERS,
                                    tracking_uri=f"sqlite:///{unused}", max_concurrent=2)
        log = tmp_path / "sweep.log"
        env = subprocess_env(home)
        done = run_cli(["sweep", str(exp_file), "--tracking-uri", server.url], env=env, log=log,
                       timeout=110)
        assert done.returncode == 0, f"sweep failed ({done.returncode}):\n{tail(log)}"
        assert not unused.exists(), "the sweep ignored --tracking-uri"

        # -- REST API ----------------------------------------------------------------
        found = http_json(f"{server.url}/api/2.0/mlflow/experiments/get-by-name"
                          "?experiment_name=http_tracked")
        exp_id = found["experiment"]["experiment_id"]
        parents = search_runs(server.url, [exp_id], "tags.`sublayer.role` = 'sweep'")
        assert len(parents) == 1, parents
        parent = parents[0]
        parent_id = parent["info"]["run_id"]
        assert parent["info"]["status"] == "FINISHED"
        children = search_runs(server.url, [exp_id], f"tags.mlflow.parentRunId = '{parent_id}'")
        names = sorted(c["info"]["run_name"] for c in children)
        assert names == sorted(f"{o}@seed0" for o in ORDERS)
        for child in children:
            tags = run_tags(child)
            assert tags["sublayer.role"] == "trial"
            assert tags["sublayer.status"] == "finished"
            assert child["info"]["status"] == "FINISHED"
            metrics = {m["key"] for m in child["data"].get("metrics", [])}
            assert {"train_loss", "val_loss", "val_bpc", "final_val_bpc"} <= metrics, metrics
            history = http_json(f"{server.url}/api/2.0/mlflow/metrics/get-history"
                                f"?run_id={child['info']['run_id']}&metric_key=val_loss")
            assert sorted(m["step"] for m in history["metrics"]) == [10, 20]
        artifacts = http_json(f"{server.url}/api/2.0/mlflow/artifacts/list?run_id={parent_id}")
        assert {"experiment.yaml", "trials.csv"} <= {f["path"] for f in artifacts.get("files", [])}

        # -- the UI in a real browser -------------------------------------------------
        # Sorted by a metric, the runs table lists child runs flat; in the default order
        # (start time) they are folded under their collapsed parent and not rendered.
        order = urllib.parse.urlencode({"orderByKey": "metrics.`final_val_bpc`",
                                        "orderByAsc": "true"})
        page = f"{server.url}/#/experiments/{exp_id}/runs?{order}"
        dom = _browse(chromium, page, tmp_path / "chromium-dom", "--dump-dom")
        assert dom.returncode == 0, dom.stderr[-3000:]
        missing = [n for n in names if n not in dom.stdout]
        assert not missing, (f"the MLflow UI at {page} does not list {missing}; page text starts "
                             f"{dom.stdout[:2000]!r}")

        shot = _artifacts_dir(tmp_path) / "mlflow_ui_runs.png"
        shot.unlink(missing_ok=True)
        taken = _browse(chromium, page, tmp_path / "chromium-shot", f"--screenshot={shot}",
                        "--window-size=1400,900", "--hide-scrollbars")
        assert taken.returncode == 0, taken.stderr[-3000:]
        assert shot.is_file(), f"no screenshot written: {taken.stderr[-3000:]}"
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert shot.stat().st_size > 10_000, f"screenshot {shot} is only {shot.stat().st_size} B"
