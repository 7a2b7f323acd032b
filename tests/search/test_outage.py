"""The MLflow server goes away mid-sweep: nothing the sweep measured is lost.

A real ``mlflow server`` (SQLite store) tracks a three-trial sweep. The test stops it
(SIGTERM) while trials train:

1. with ``tracking.outage_limit_s: 3`` the driver buffers, retries, gives up after the
   limit and exits 75 with a message naming ``--resume``; what it could not write is
   kept in the Ray run folder (``tracking_backlog.jsonl``);
2. the server comes back, the limit is raised to 120 s and ``--resume`` runs; the test
   stops the server again while that run trains and starts it after a while: the
   driver rides this outage out and the sweep ends with exit 0.

Afterwards every trial has one run, every evaluation once, and a final status.

A second test SIGKILLs the driver during an outage: what it had buffered is in the
backlog file already (a journal kept through the outage), and ``--resume`` writes it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import (
    SUBLAYER,
    fail_fast_reads,
    outage_env,
    scratch,
    set_outage_limit,
    start,
    stop,
    tail,
    wait_while_running,
    write_experiment,
)
from mlflow.tracking import MlflowClient
from postgres_helpers import tracking_server
from sweep_watch import tune_saved_since

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "fsfs"]
# long enough that no trial can finish inside the first outage (limit 3 s; the driver gives
# up about 6 s after the stop): at 160 steps every trial finished in it once the models got
# faster, and the resumed sweep had nothing left to train when the test stopped the server
TRAIN = {"steps": 2400, "batch_size": 8, "eval_every": 120, "eval_batches": 2}
NAME = "outage"


def _points(url: str) -> dict[str, list[int]]:
    """run name -> val_loss steps, read from the server ({} while it is down)."""
    try:
        client = MlflowClient(url)
        exp = client.get_experiment_by_name(NAME)
        if exp is None:
            return {}
        runs = client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'trial'")
        return {r.info.run_name: sorted(m.step for m in
                                        client.get_metric_history(r.info.run_id, "val_loss"))
                for r in runs}
    except Exception:  # the server is starting or stopping
        return {}


def _experiment(folder: Path, url: str, *, outage_limit_s: float) -> Path:
    """The three-trial sweep tracked by the server at ``url``."""
    path = write_experiment(folder, NAME, orders=ORDERS, tracking_uri=url, train=TRAIN,
                            max_concurrent=len(ORDERS),
                            ray={"storage_path": str(folder / "ray"), "num_cpus": len(ORDERS)})
    set_outage_limit(path, outage_limit_s)
    return path


def _run(path: Path, env: dict[str, str], log: Path, *extra: str) -> subprocess.Popen[bytes]:
    return start([SUBLAYER, "sweep", str(path), *extra], env=env, log=log)


@pytest.mark.soak  # minutes of 2400-step trials through two outages
def test_mlflow_outage_is_buffered_and_resume_completes_training_and_logging(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_fast_reads(monkeypatch)  # the driver keeps MLflow's defaults (outage_env)
    with scratch("sublayer-home") as home, \
            tracking_server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "mlflow") as server:
        path = _experiment(tmp_path, server.url, outage_limit_s=3)
        env = outage_env(home)

        # 1. an outage past the limit: the sweep stops, exit 75, the backlog is kept
        log1 = tmp_path / "first.log"
        driver = _run(path, env, log1)
        try:
            wait_while_running("a trial evaluated", lambda: any(_points(server.url).values()),
                               driver, log1)
            server.stop()
            driver.wait(timeout=180)
        finally:
            stop(driver)
        first = log1.read_text(errors="replace")
        assert driver.returncode == 75, first[-4000:]
        assert "outage_limit_s" in first and "--resume" in first, first[-4000:]
        assert " killed, " in first, first[-4000:]  # the progress line: not finished, not stopped
        ray_run = (tmp_path / "ray" / f"{NAME}.latest").read_text().strip()
        backlog = tmp_path / "ray" / ray_run / "tracking_backlog.jsonl"
        assert backlog.is_file() and backlog.read_text().strip(), "no backlog was kept"

        # 2. the server is back; --resume rides out a second, shorter outage
        server.start()
        before = _points(server.url)
        set_outage_limit(path, 120)
        log2 = tmp_path / "resume.log"
        resumed = _run(path, env, log2, "--resume")
        try:
            wait_while_running("the resumed sweep logged more", lambda: sum(map(len, _points(
                server.url).values())) > sum(map(len, before.values())), resumed, log2)
            # down until the driver has met the outage (a write failed: it buffers), so the
            # test never depends on whether a write fell into a fixed pause (CI: none did)
            server.stop()
            wait_while_running("the driver buffered a write", lambda: "buffering and retrying" in
                               log2.read_text(errors="replace"), resumed, log2)
            time.sleep(1.0)
            server.start()
            resumed.wait(timeout=240)
        finally:
            stop(resumed)
        second = log2.read_text(errors="replace")
        assert resumed.returncode == 0, second[-4000:]
        assert "buffering and retrying" in second and "MLflow is back" in second, second[-4000:]
        assert not backlog.exists(), "the backlog was written but not removed"

        _every_evaluation_once(server.url)


def _every_evaluation_once(url: str) -> None:
    """Every trial has one finished run holding each evaluation once; the sweep is closed."""
    client = MlflowClient(url)
    exp = client.get_experiment_by_name(NAME)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id], max_results=100)
    assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
    parents = [r for r in runs if r.data.tags.get("sublayer.role") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
    assert sorted(r.info.run_name for r in children) == sorted(f"{o}@seed0" for o in ORDERS)
    every = TRAIN["eval_every"]
    points = _points(url)
    for run in children:  # every evaluation once, a final status and final metric
        assert run.info.status == "FINISHED", (run.info.run_name, run.data.tags)
        assert run.data.tags["sublayer.status"] == "finished"
        assert "final_val_bpc" in run.data.metrics
        assert points[run.info.run_name] == list(range(every, TRAIN["steps"] + 1, every)), \
            run.info.run_name


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.is_file() else 0


@pytest.mark.soak  # minutes of 2400-step trials through two outages
def test_a_driver_killed_mid_outage_keeps_its_backlog_on_disk_and_resume_writes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL to the driver while MLflow is down: the evaluations it had buffered are in
    the journal (the backlog file), not lost with the process; ``--resume`` writes them and
    finishes the sweep, each evaluation once. Without the journal the trials, restored from
    checkpoints newer than those evaluations, would never report them again."""
    fail_fast_reads(monkeypatch)
    with scratch("sublayer-home") as home, \
            tracking_server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "mlflow") as server:
        path = _experiment(tmp_path, server.url, outage_limit_s=120)
        env = outage_env(home)
        log = tmp_path / "killed.log"
        driver = _run(path, env, log)
        try:
            wait_while_running("a trial evaluated", lambda: any(_points(server.url).values()),
                               driver, log)
            server.stop()
            wait_while_running("the driver buffered a write", lambda: "buffering and retrying" in
                               log.read_text(errors="replace"), driver, log)
            ray_run = (tmp_path / "ray" / f"{NAME}.latest").read_text().strip()
            journal = tmp_path / "ray" / ray_run / "tracking_backlog.jsonl"
            first = _lines(journal)
            assert first > 0, "the outage's first failure wrote no journal"
            wait_while_running("evaluations made during the outage",
                               lambda: _lines(journal) >= first + 3, driver, log, timeout=60)
            seen = time.time()  # Tune snapshots its state each second: then it knows them
            wait_while_running("Tune saved the experiment", lambda: tune_saved_since(
                tmp_path / "ray", seen), driver, log, timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(driver.pid, signal.SIGKILL)  # the driver dies first, as on a crash
            driver.wait()
            stop(driver)  # then what it started (raylet, workers)
        assert journal.is_file() and _lines(journal) >= first + 3, tail(log)

        server.start()
        resumed = _run(path, env, tmp_path / "resume.log", "--resume")
        try:
            resumed.wait(timeout=300)
        finally:
            stop(resumed)
        assert resumed.returncode == 0, tail(tmp_path / "resume.log")
        assert not journal.exists(), "the journal was replayed but not removed"
        _every_evaluation_once(server.url)


def test_closing_the_sweep_rides_out_an_outage(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The sweep ended while MLflow was down (CI saw this): its parent run is closed once the
    server is back; an outage past the limit raises TrackingOutage, naming --resume."""
    import threading

    from sublayer_search.search.run.sweep import _close
    from sublayer_search.search.tracking.buffer import TrackingOutage

    fail_fast_reads(monkeypatch)
    with tracking_server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "mlflow") as server:
        client = MlflowClient(server.url)
        exp_id = client.create_experiment("closing")
        parent = client.create_run(exp_id).info.run_id
        child = client.create_run(exp_id, tags={"mlflow.parentRunId": parent}).info.run_id
        backlog = tmp_path / "backlog.jsonl"

        server.stop()
        with pytest.raises(TrackingOutage, match="--resume"):
            _close(client, exp_id, parent, "FINISHED", 1.0, backlog)

        closer = threading.Thread(target=_close,
                                  args=(client, exp_id, parent, "FINISHED", 120.0, backlog))
        closer.start()
        time.sleep(2.0)
        assert closer.is_alive(), "the close returned while the server was down"
        server.start()
        closer.join(timeout=120)
        assert not closer.is_alive()
        assert client.get_run(parent).info.status == "KILLED"  # a child was left RUNNING
        assert client.get_run(child).info.status == "KILLED"
        assert client.get_run(child).data.tags["sublayer.status"] == "killed"


def test_opening_the_sweep_rides_out_an_outage(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow went away between the preflight and the sweep's first writes: opening the
    sweep's run waits for the server and then makes one parent run (a retry finds what a
    failed attempt made); an outage past the limit raises TrackingOutage."""
    import threading

    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.run.sweep import _open
    from sublayer_search.search.tracking.buffer import TrackingOutage, ride_out
    from sublayer_search.spaces.records import Tag

    fail_fast_reads(monkeypatch)
    with tracking_server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "mlflow") as server:
        path = write_experiment(tmp_path, "opening", orders=["sfsf"], tracking_uri=server.url)
        plan = plan_sweep(load_experiment(path), str(path), check_resources=False)
        backlog = tmp_path / "backlog.jsonl"
        attempts: list[bool] = []

        def opened(retry: bool):
            attempts.append(retry)
            return _open(server.url, plan, "opening-run", resume=retry)

        server.stop()
        with pytest.raises(TrackingOutage, match="the sweep's MLflow run was opened"):
            ride_out("the sweep's MLflow run was opened", opened, limit_s=1.0, backlog=backlog)
        assert attempts[0] is False and all(attempts[1:]) and len(attempts) >= 2

        got: list = []
        opener = threading.Thread(target=lambda: got.append(ride_out(
            "the sweep's MLflow run was opened", opened, limit_s=120.0, backlog=backlog)))
        opener.start()
        time.sleep(2.0)
        assert opener.is_alive(), "the sweep's run was opened while the server was down"
        server.start()
        opener.join(timeout=120)
        assert not opener.is_alive() and got
        client, exp_id, parent_id = got[0]
        runs = MlflowClient(server.url).search_runs([exp_id])
        assert [r.info.run_id for r in runs] == [parent_id]  # one parent run, not one a try
        assert runs[0].data.tags[Tag.RAY_RUN] == "opening-run"
