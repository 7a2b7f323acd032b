"""The MLflow server goes away during stage 1 of a one-shot sweep (the supernet).

A real ``mlflow server`` (SQLite store) tracks the sweep; the test stops it once the
supernet run holds an evaluation. With ``tracking.outage_limit_s: 3`` the driver
buffers the supernet's evaluations, gives up after the limit, keeps them in
``supernet_backlog.jsonl`` and exits 75 naming ``--resume``; the supernet's checkpoint is
kept. With the server back, ``--resume`` writes the backlog, trains the supernet on in
the same run and runs stage 2: every evaluation of the supernet is in its run once.
"""

from __future__ import annotations

import csv
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

pytestmark = pytest.mark.slow

NAME = "outage-oneshot"
ORDERS = ["sfsf", "ssff", "ffss", "fsfs"]
STEPS, EVERY = 2400, 120  # long enough that the supernet still trains when the driver gives up


def _supernet(url: str) -> tuple[str, list[int]] | None:
    """The supernet run's id and the steps of its val_loss (None while the server is down)."""
    try:
        client = MlflowClient(url)
        exp = client.get_experiment_by_name(NAME)
        if exp is None:
            return None
        runs = client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'supernet'")
        if not runs:
            return None
        run_id = runs[0].info.run_id
        return run_id, sorted(m.step for m in client.get_metric_history(run_id, "val_loss"))
    except Exception:  # the server is starting or stopping
        return None


@pytest.mark.soak  # an outage under stage one (minutes); test_outage.py and test_oneshot.py cover its parts in make test
def test_an_outage_in_stage_one_stops_it_and_resume_loses_no_evaluation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_fast_reads(monkeypatch)
    with scratch("sublayer-home") as home, \
            tracking_server(f"sqlite:///{tmp_path / 'store.db'}", tmp_path / "mlflow") as server:
        path = write_experiment(
            tmp_path, NAME, orders=ORDERS, tracking_uri=server.url,
            train={"steps": 20, "batch_size": 8, "eval_every": EVERY, "eval_batches": 2},
            search={"algorithm": "oneshot", "top_k": 1,
                    "supernet": {"steps": STEPS, "eval_batches": 2, "tie_extra": 0}},
            ray={"storage_path": str(tmp_path / "ray"), "num_cpus": 2})
        set_outage_limit(path, 3)
        env = outage_env(home)

        # 1. the server stops while the supernet trains: exit 75, the backlog is kept
        log1 = tmp_path / "first.log"
        driver = start([SUBLAYER, "sweep", str(path)], env=env, log=log1)
        try:
            wait_while_running("the supernet evaluated",
                               lambda: bool((_supernet(server.url) or ("", []))[1]), driver, log1)
            server.stop()
            driver.wait(timeout=180)
        finally:
            stop(driver)
        first = log1.read_text(errors="replace")
        assert driver.returncode == 75, first[-4000:]
        assert "stage 1 stopped" in first and "--resume" in first, first[-4000:]
        ray_run = (tmp_path / "ray" / f"{NAME}.latest").read_text().strip()
        journal = tmp_path / "ray" / ray_run / "supernet_backlog.jsonl"
        assert journal.is_file() and '"op": "curve"' in journal.read_text(), tail(log1)

        # 2. the server is back: --resume writes the backlog, trains on, runs stage 2
        server.start()
        before = _supernet(server.url)
        assert before is not None and before[1][-1] < STEPS  # the outage cut the curve short
        set_outage_limit(path, 120)
        log2 = tmp_path / "resume.log"
        resumed = start([SUBLAYER, "sweep", str(path), "--resume"], env=env, log=log2)
        try:
            resumed.wait(timeout=300)
        finally:
            stop(resumed)
        assert resumed.returncode == 0, tail(log2)
        assert not journal.exists(), "the backlog was written but not removed"

        after = _supernet(server.url)
        assert after is not None and after[0] == before[0]  # the same run trained on
        assert after[1] == list(range(EVERY, STEPS + 1, EVERY)), after[1]  # each once
        client = MlflowClient(server.url)
        run = client.get_run(after[0])
        assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
        assert int(run.data.tags["sublayer.resumed_from_step"]) >= EVERY
        ranking = client.download_artifacts(after[0], "ranking.csv", str(tmp_path))
        with open(ranking, newline="") as fh:
            assert sorted(r["order"] for r in csv.DictReader(fh)) == sorted(ORDERS)
        exp = client.get_experiment_by_name(NAME)
        assert exp is not None
        runs = client.search_runs([exp.experiment_id], max_results=100)
        assert not [r.info.run_name for r in runs if r.info.status == "RUNNING"]
        trials = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
        assert trials and all(r.data.tags["sublayer.status"] == "finished" for r in trials)
