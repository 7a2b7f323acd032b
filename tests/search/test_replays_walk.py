"""A rerun is not new evidence (issue 46): the walk a new user takes, run, Ctrl-C, run
again, ``--resume``, run again, leaves one experiment holding every trial several times;
``sublayer analyze`` keeps one sample per content key (the latest finished, and says
so) and gives the same verdicts as one clean sweep. A sweep that would train finished
trials again says how to reuse or resume them."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml
from helpers import TINY_TRAIN, scratch, sweep_command, wait_while_running
from sweep_watch import trial_runs, wait_for_trials

pytestmark = pytest.mark.slow

ORDERS = ["ssff"]
BASELINE_SEEDS = 2
SEEDS = [0, 1]
TRIALS = BASELINE_SEEDS + len(ORDERS) * len(SEEDS)


def _experiment(folder: Path, name: str) -> Path:
    doc = {
        "name": name,
        "space": {"type": "explicit", "orders": ORDERS},
        "seeds": SEEDS,
        "baseline": {"seeds": BASELINE_SEEDS},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": dict(TINY_TRAIN),
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{folder}/mlflow.db"},
        "ray": {"storage_path": str(folder / f"ray_{name}"), "num_cpus": 2},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _sweep(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(sweep_command("sweep", *args), cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _interrupted(folder: Path, env: dict[str, str], path: Path) -> None:
    """Start the sweep and Ctrl-C it once a trial finished."""
    log = folder / "first.log"
    with log.open("w") as out:
        driver = subprocess.Popen(sweep_command("sweep", str(path)), cwd=folder, env=env,
                                  stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        wait_for_trials(driver, folder / "mlflow.db", "walk", lambda c, runs: any(
            r.info.status == "FINISHED" for r in runs), "a trial finished", log=log)
        driver.send_signal(signal.SIGINT)
        wait_while_running("the interrupted sweep ended", lambda: driver.poll() is not None,
                           driver, log, timeout=180) if driver.poll() is None else None
    finally:
        if driver.poll() is None:
            driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=60)


def _verdicts(folder: Path, env: dict[str, str], name: str) -> tuple[pd.DataFrame, str]:
    out = folder / f"report_{name}"
    done = subprocess.run(sweep_command("analyze", "--experiment", name, "--tracking-uri",
                                        f"sqlite:///{folder}/mlflow.db", "--out", str(out),
                                        "--no-attach"),
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    table = pd.read_csv(out / "tables" / "sweep_seeds.csv").set_index("order").sort_index()
    return table, done.stdout


@pytest.mark.soak  # three sweeps (minutes); test_resume.py's Ctrl-C resume and test_replay_sweep.py cover them in make test
def test_run_interrupt_run_resume_run_gives_the_verdicts_of_one_clean_sweep() -> None:
    with scratch("w46") as folder:
        env = {**os.environ, "TUNE_GLOBAL_CHECKPOINT_S": "1", "HOME": str(folder)}
        walk = _experiment(folder, "walk")
        _interrupted(folder, env, walk)
        again = _sweep(folder, env, str(walk))  # "make run" again, the obvious move
        assert "already finished in experiment 'walk'" in again.stderr, again.stderr[-3000:]
        assert "reuse: true" in again.stderr and "--resume" in again.stderr
        _sweep(folder, env, str(walk), "--resume")
        _sweep(folder, env, str(walk))
        from mlflow.tracking import MlflowClient

        runs = trial_runs(MlflowClient(f"sqlite:///{folder}/mlflow.db"), "walk")
        finished = [r for r in runs if r.info.status == "FINISHED"]
        assert len(finished) > TRIALS  # trials trained more than once
        _sweep(folder, env, str(_experiment(folder, "clean")))

        walked, said = _verdicts(folder, env, "walk")
        clean, quiet = _verdicts(folder, env, "clean")
        replays = len(finished) - TRIALS
        assert (f"{replays} earlier replay(s) left out" in said
                and "the latest finished of each is kept" in said), said
        assert "replay" not in quiet
        assert list(walked.index) == list(clean.index) == sorted(ORDERS)
        for column in ("n", "baseline_n", "verdict", "welch_verdict", "paired_verdict"):
            assert walked[column].tolist() == clean[column].tolist(), column
        assert walked["n"].tolist() == [len(SEEDS)] * len(ORDERS)
        assert set(walked["baseline_n"]) == {BASELINE_SEEDS}
