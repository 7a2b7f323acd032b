"""SIGKILL the driver of a running sweep, then ``sublayer sweep --resume`` finishes it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from helpers import sweep_command, wait_while_running
from sweep_watch import trial_runs, tune_saved_since, wait_for_trials

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "fsfs"]
STEPS, EVERY = 400, 40  # long enough that the trial after the first is still running at the kill


def _experiment(tmp_path: Path) -> Path:
    doc = {
        "name": "resume",
        "space": {"type": "explicit", "orders": ORDERS},
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": STEPS, "batch_size": 64, "eval_every": EVERY, "eval_batches": 2},
        "resources": {"cpu": 1},
        "max_concurrent": 1,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 1},
    }
    path = tmp_path / "resume.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


_cli, _children = sweep_command, trial_runs


def _wait_for(driver: subprocess.Popen, tmp_path: Path, ready, what: str):
    """Poll the sweep's MLflow store until ``ready(client, trial runs)``; return the client."""
    return wait_for_trials(driver, tmp_path / "mlflow.db", "resume", ready, what,
                           log=tmp_path / "driver.err", timeout=240)


def _evaluated(client, run, times: int = 1) -> bool:
    return run.info.status == "RUNNING" and \
        len(client.get_metric_history(run.info.run_id, "val_loss")) >= times


def _run_and_kill(tmp_path: Path, path: Path, env: dict[str, str]):
    """Start the sweep, SIGKILL its driver once one trial finished and the next one
    has evaluated twice; return the MLflow client."""
    with (tmp_path / "driver.err").open("w") as stderr:
        driver = subprocess.Popen(_cli("sweep", str(path)), cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=stderr,
                                  start_new_session=True)
    try:
        client = _wait_for(driver, tmp_path, lambda c, runs: any(
            r.info.status == "FINISHED" for r in runs) and any(_evaluated(c, r, 2) for r in runs),
            "a trial finished and the next one evaluated twice")
        seen = time.time()  # Tune snapshots the experiment after that checkpoint (every 1 s)
        wait_while_running("Tune saved the experiment", lambda: tune_saved_since(
            tmp_path / "ray", seen), driver, tmp_path / "driver.err", timeout=120)
    finally:
        os.kill(driver.pid, signal.SIGKILL)  # the driver dies first, as on a crash
        driver.wait()
        try:  # then what it had started (raylet, workers): nothing else is touched
            os.killpg(driver.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return client


def _describe(runs) -> str:
    return "\n".join(f"{r.info.run_name} {r.info.status} {r.data.tags.get('sublayer.status')} "
                     f"{r.data.tags.get('sublayer.error', '')[-600:]}" for r in runs)


def _resume_and_check(tmp_path: Path, path: Path, env: dict[str, str], client) -> None:
    before = {r.info.run_name: r for r in _children(client, "resume")}
    done_before = {n: r.info.end_time for n, r in before.items() if r.info.status == "FINISHED"}
    interrupted_names = [n for n, r in before.items() if r.info.status == "RUNNING"
                         and client.get_metric_history(r.info.run_id, "val_loss")]
    assert done_before and len(interrupted_names) == 1, _describe(before.values())

    resumed = subprocess.run(_cli("sweep", str(path), "--resume"), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    after = _children(client, "resume")
    names = [r.info.run_name for r in after]
    assert sorted(names) == sorted(f"{o}@seed0" for o in ORDERS)  # each trial exactly once
    report = _describe(after) + "\n--- resumed driver ---\n" + resumed.stderr[-3000:]
    assert all(r.info.status == "FINISHED" for r in after), report
    assert {r.data.tags["sublayer.status"] for r in after} == {"finished"}, report
    by_name = {r.info.run_name: r for r in after}
    for name, end in done_before.items():  # finished trials were not trained again
        assert by_name[name].info.end_time == end
    interrupted = by_name[interrupted_names[0]]
    assert int(interrupted.data.tags["sublayer.resumed_from_step"]) >= EVERY
    steps = [m.step for m in client.get_metric_history(interrupted.info.run_id, "val_loss")]
    assert sorted(steps) == list(range(EVERY, STEPS + 1, EVERY))  # every evaluation, once
    parents = client.search_runs([after[0].info.experiment_id],
                                 filter_string="tags.`sublayer.role` = 'sweep'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"


@pytest.mark.soak  # a killed driver resumed (minutes); the Ctrl-C resume below covers --resume in make test
def test_resume_after_sigkill_finishes_the_sweep_without_duplicates(tmp_path):
    path = _experiment(tmp_path)
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1", "HOME": str(tmp_path)}
    client = _run_and_kill(tmp_path, path, env)
    _resume_and_check(tmp_path, path, env, client)


@pytest.mark.soak  # minutes; tests/search/test_checkpoint_gaps.py covers the gap filling in make test
def test_resume_when_the_snapshot_names_a_checkpoint_ray_had_deleted(tmp_path):
    """Ray deletes checkpoint N when it registers N+1, then snapshots: a kill in
    between leaves a snapshot naming N, which no longer exists (ray-project/ray#27790).
    Moving each trial's newest checkpoint one index up recreates that state exactly."""
    path = _experiment(tmp_path)
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1", "HOME": str(tmp_path)}
    client = _run_and_kill(tmp_path, path, env)
    run_dir = tmp_path / "ray" / (tmp_path / "ray" / "resume.latest").read_text().strip()
    moved = 0
    for trial in (p for p in run_dir.iterdir() if p.is_dir()):
        ckpts = sorted(trial.glob("checkpoint_*"))
        if ckpts:
            newest = ckpts[-1]
            index = int(newest.name.split("_")[1])
            newest.rename(trial / f"checkpoint_{index + 1:06d}")
            moved += 1
    assert moved >= 2  # the finished trial and the interrupted one
    _resume_and_check(tmp_path, path, env, client)


def test_ctrl_c_stops_the_sweep_as_killed_and_resume_finishes_it(tmp_path):
    """SIGINT (Ctrl-C) to the driver: Ray stops gracefully, the parent run and the
    interrupted trial end KILLED (never RUNNING), and ``--resume`` finishes the sweep."""
    path = _experiment(tmp_path)
    env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1", "HOME": str(tmp_path)}
    log = tmp_path / "driver.err"
    with log.open("w") as stderr:  # a file, not a pipe nobody reads while we poll
        driver = subprocess.Popen(_cli("sweep", str(path)), cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=stderr,
                                  start_new_session=True)
    try:
        client = _wait_for(driver, tmp_path, lambda c, runs: any(_evaluated(c, r) for r in runs),
                           "a trial reported")
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=180)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    err = log.read_text()
    assert driver.returncode == 130, err[-3000:]
    # one resume command, the product's; Tune's own Tuner.restore advice is not shown
    assert err.count("--resume") == 1 and "Tuner.restore" not in err, err[-3000:]
    assert re.search(rf"continue it with: \S+ sweep {re.escape(str(path))} --resume\n", err), \
        err[-3000:]
    runs = _children(client, "resume")
    assert runs and not any(r.info.status == "RUNNING" for r in runs), _describe(runs)
    killed = [r for r in runs if r.info.status == "KILLED"]
    assert len(killed) == 1 and killed[0].data.tags["sublayer.status"] == "killed", _describe(runs)
    parents = client.search_runs([runs[0].info.experiment_id],
                                 filter_string="tags.`sublayer.role` = 'sweep'")
    assert len(parents) == 1 and parents[0].info.status == "KILLED"

    resumed = subprocess.run(_cli("sweep", str(path), "--resume"), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    after = _children(client, "resume")
    assert sorted(r.info.run_name for r in after) == sorted(f"{o}@seed0" for o in ORDERS)
    assert all(r.info.status == "FINISHED" for r in after), _describe(after)
    parents = client.search_runs([after[0].info.experiment_id],
                                 filter_string="tags.`sublayer.role` = 'sweep'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"

    # resumed once more, the finished sweep says so at once and starts no Ray (local Ray
    # writes ~/.ray/auth_token in a fresh HOME when it starts)
    home = tmp_path / "fresh-home"
    home.mkdir()
    again = subprocess.run(_cli("sweep", str(path), "--resume"), cwd=tmp_path,
                           env={**env, "HOME": str(home)}, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already ran to its end" in again.stderr and "nothing to resume" in again.stderr
    assert "starting Ray" not in again.stderr and not (home / ".ray").exists()
