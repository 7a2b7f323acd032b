"""A trial restarted after ``--resume`` that waits for its workers' resources shows as
pending (waiting), not running: in the progress line, the closing table and MLflow
(issue 45, item 6). Driven with Ray-shaped trial objects against a real SQLite store,
as test_restart_tags.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import write_experiment

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.run.progress import SweepProgress, render, snapshot
from sublayer_search.search.run.tuning import result_rows
from sublayer_search.search.tracking.callback import MlflowTracking
from sublayer_search.search.tracking.runs import ensure_store, open_sweep_run
from sublayer_search.spaces.records import Tag


def _plan(tmp_path: Path, workers: int):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_experiment(tmp_path, f"waiting{workers}", orders=["sfsf", "ssff"],
                            tracking_uri=uri, resources={"cpu": 1, "workers": workers})
    return uri, plan_sweep(load_experiment(path), str(path))


def _restored(plan, tid: str, index: int) -> SimpleNamespace:
    """A trial as Tune restores it: its last result from before the interruption."""
    return SimpleNamespace(trial_id=tid, config={"trial": plan.trials[index]}, num_failures=0,
                           status="RUNNING", last_result={"step": 10, "val_loss": 2.5,
                                                          "trial_id": tid, "status": "running"})


def _run(client, exp_id: str, name: str):
    runs = client.search_runs([exp_id], f"attributes.run_name = '{name}'")
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize("workers", [2, 1])
def test_mlflow_shows_a_waiting_trial_as_scheduled_until_it_reports(tmp_path, workers) -> None:
    uri, plan = _plan(tmp_path, workers)
    client = ensure_store(uri)
    exp_id, parent = open_sweep_run(client, plan, "ray-run", resume=False)
    callback = MlflowTracking(tracking_uri=uri, experiment_id=exp_id, parent_run_id=parent,
                              plan=plan)
    trial = _restored(plan, "t1", 0)
    callback.on_trial_start(0, [trial], trial)
    callback.buffer.drain()
    run = _run(client, exp_id, plan.trials[0].name)
    if workers == 1:  # a one-worker trial holds its resources: started means training
        assert run.info.status == "RUNNING" and run.data.tags[Tag.STATUS] == "running"
        return
    assert run.info.status == "SCHEDULED" and run.data.tags[Tag.STATUS] == "waiting"
    result = {**trial.last_result, "node_id": "n", "node_ip": "127.0.0.1", "gpu_ids": "0"}
    callback.on_trial_result(0, [trial], trial, result)  # its workers are up
    callback.buffer.drain()
    run = _run(client, exp_id, plan.trials[0].name)
    assert run.info.status == "RUNNING" and run.data.tags[Tag.STATUS] == "running"
    fresh = SimpleNamespace(trial_id="t2", config={"trial": plan.trials[1]}, num_failures=0,
                            status="RUNNING", last_result={})
    callback.on_trial_start(0, [fresh], fresh)  # a new trial: nothing says it waits
    callback.buffer.drain()
    assert _run(client, exp_id, plan.trials[1].name).info.status == "RUNNING"


def test_the_progress_line_counts_waiting_trials_as_pending(tmp_path) -> None:
    _, plan = _plan(tmp_path, 2)
    lines: list[str] = []
    stream = SimpleNamespace(write=lines.append, flush=lambda: None, isatty=lambda: False)
    progress = SweepProgress(total=2, metric="val_loss", steps=20, stream=stream, tty=False,
                             several_workers=True)
    waiting, training = _restored(plan, "t1", 0), _restored(plan, "t2", 1)
    progress.on_trial_start(0, [waiting, training], waiting)
    progress.on_trial_start(0, [waiting, training], training)
    progress.on_trial_result(0, [waiting, training], training, training.last_result)
    progress.show([waiting, training], force=True)
    assert "1 running, 1 pending (1 waiting for resources), 0 failed" in lines[-1], lines
    progress.on_trial_result(0, [waiting, training], waiting, waiting.last_result)
    progress.show([waiting, training], force=True)
    assert "2 running, 0 pending, 0 failed" in lines[-1], lines


def test_snapshot_and_render_of_waiting_trials(tmp_path) -> None:
    _, plan = _plan(tmp_path, 2)
    trials = [_restored(plan, "t1", 0), _restored(plan, "t2", 1)]
    snap = snapshot(trials, total=2, metric="val_loss", mode="min", elapsed=1.0, steps=20,
                    waiting={"t1"})
    assert (snap.running, snap.pending, snap.waiting) == (1, 1, 1)
    assert "(1 waiting for resources)" in render(snap)


def test_the_closing_table_says_waiting(tmp_path) -> None:
    _, plan = _plan(tmp_path, 2)
    results = [SimpleNamespace(config={"trial": plan.trials[i]}, error=None,
                               metrics=_restored(plan, f"t{i}", i).last_result) for i in (0, 1)]
    rows = {r["name"]: r["status"] for r in result_rows(results, plan, {"t0"})}
    assert rows == {plan.trials[0].name: "waiting", plan.trials[1].name: "stopped"}
