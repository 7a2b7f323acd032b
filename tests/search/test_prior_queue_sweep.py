"""A grid sweep with ``search.prior`` starts its trials in the prior's queue: baseline
seeds first, then the candidates best-predicted first; ``--resume`` keeps that order.

The order is read back from MLflow (each trial's run start time), on a real sweep that
is interrupted with Ctrl-C after its first candidate reported and then resumed.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import sweep_command
from sweep_watch import trial_runs, wait_for_trials

GIVEN = ["ffss", "sffs", "ssff"]  # the space's order: the prior predicts the reverse


def _experiment(tmp_path: Path) -> Path:
    doc = {
        "name": "queue",
        "space": {"type": "explicit", "orders": GIVEN},
        "baseline": {"seeds": 1},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": 200, "batch_size": 64, "eval_every": 40, "eval_batches": 2},
        "resources": {"cpu": 1},
        "max_concurrent": 1,
        "search": {"prior": "press2020"},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 1},
    }
    path = tmp_path / "queue.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _planned_queue(path: Path) -> list[str]:
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep

    plan = plan_sweep(load_experiment(path), str(path), check_resources=False)
    assert plan.prior is not None and plan.prior.weight > 0
    return [t.name for t in plan.trials], [t.order for t in plan.trials]


ENV = {"TUNE_GLOBAL_CHECKPOINT_S": "1"}


def test_the_dry_run_shows_the_priors_queue(tmp_path):
    path = _experiment(tmp_path)
    names, orders = _planned_queue(path)
    assert orders == ["sfsf", "ssff", "sffs", "ffss"]  # baseline, then best-predicted first
    env = {**os.environ, **ENV, "HOME": str(tmp_path)}
    dry = subprocess.run(sweep_command("sweep", str(path), "--dry-run"), cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    table = [line.split()[0] for line in dry.stdout.splitlines() if "@seed" in line]
    assert table == names
    assert "weight 0.4" in dry.stdout and "queue: baseline seeds first" in dry.stdout


@pytest.mark.slow
@pytest.mark.soak
def test_the_sweep_starts_trials_in_the_priors_order_and_resume_keeps_it(tmp_path):
    path = _experiment(tmp_path)
    names, _ = _planned_queue(path)
    env = {**os.environ, **ENV, "HOME": str(tmp_path)}
    log = tmp_path / "driver.err"
    with log.open("w") as stderr:
        driver = subprocess.Popen(sweep_command("sweep", str(path)), cwd=tmp_path, env=env,
                                  stdout=subprocess.DEVNULL, stderr=stderr,
                                  start_new_session=True)
    try:
        client = wait_for_trials(driver, tmp_path / "mlflow.db", "queue", lambda c, runs: any(
            r.info.run_name == names[1] and r.info.status == "RUNNING"
            and c.get_metric_history(r.info.run_id, "val_loss") for r in runs),
            "the first candidate reported", log=log)
        driver.send_signal(signal.SIGINT)
        driver.wait(timeout=180)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
    assert driver.returncode == 130, log.read_text()[-3000:]
    started = [r.info.run_name for r in sorted(trial_runs(client, "queue"),
                                                key=lambda r: r.info.start_time)]
    assert started == names[:len(started)] and len(started) < len(names)

    resumed = subprocess.run(sweep_command("sweep", str(path), "--resume"), cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    runs = sorted(trial_runs(client, "queue"), key=lambda r: r.info.start_time)
    assert [r.info.run_name for r in runs] == names
    assert all(r.info.status == "FINISHED" for r in runs)
