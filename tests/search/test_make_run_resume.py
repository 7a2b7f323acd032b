"""Ctrl-C on ``make run`` (SIGINT to its process group, as a terminal sends it) prints one
resume command, which works as printed in the same shell; resuming the finished sweep
again says so at once, without starting Ray."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from clone_helpers import user_clone
from helpers import wait_while_running
from sweep_watch import trial_runs, tune_saved_since, wait_for_trials

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent
DATA = Path(os.environ.get("SUBLAYER_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
CONTINUE = re.compile(r"continue it with: (.+)$", re.MULTILINE)


QUICK_TRAIN = "train: {steps: 120, batch_size: 16, lr: 0.005, warmup_steps: 10, eval_every: 30, "\
    "eval_batches: 5}"


def _shorten_quickstart(path: Path) -> None:
    """The clone's quickstart trains 120 steps a trial, not 450: what is tested is the
    interrupt and the resume command, and 10 full trials twice cost minutes of CI. Still
    10 trials, 2 at a time, so an interrupt always finds some running."""
    text = path.read_text()
    line = next(x for x in text.splitlines() if x.startswith("train: {steps: "))
    path.write_text(text.replace(line, QUICK_TRAIN))


def _interrupt_make_run(work: Path, env: dict[str, str], log: Path) -> tuple[int, str]:
    """``make run`` until a trial evaluated and Tune saved the sweep, then Ctrl-C."""
    with log.open("w") as out:  # a file, not a pipe nobody reads while we poll
        make = subprocess.Popen(["make", "run"], cwd=work, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_trials(make, work / "mlflow.db", "quickstart", lambda c, runs: any(
            c.get_metric_history(r.info.run_id, "val_loss") for r in runs),
            "a trial evaluated", log=log, timeout=900)
        seen = time.time()
        wait_while_running("Tune saved the sweep", lambda: tune_saved_since(
            work / "ray_results", seen), make, log, timeout=300)
        os.killpg(make.pid, signal.SIGINT)  # the terminal's Ctrl-C: make, sublayer, Ray
        make.wait(timeout=300)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
    return make.returncode, log.read_text()


@pytest.mark.soak  # the quickstart twice (minutes); test_resume.py's Ctrl-C resume covers --resume in make test
def test_ctrl_c_on_make_run_prints_one_resume_command_that_works(tmp_path: Path) -> None:
    work, env = user_clone(REPO, tmp_path / "user", VENV, DATA)
    _shorten_quickstart(work / "configs" / "quickstart.yaml")
    env["PWD"] = str(work)  # as the user's shell has it there
    code, out = _interrupt_make_run(work, env, tmp_path / "make.log")
    assert code != 0, out[-3000:]
    commands = CONTINUE.findall(out)
    assert commands == ["make run RESUME=1"], out[-3000:]  # one instruction, and no other
    assert "Tuner.restore" not in out and "--resume" not in out, out[-3000:]
    statuses = {line.split()[3] for line in out.splitlines()
                if re.match(r"\S+@seed\d\s+(baseline|permutations|sandwich)\s", line)}
    assert "killed" in statuses and "stopped" not in statuses, out[-3000:]
    assert re.search(r"sweep \d+/10 done: \d+ finished, [1-9] killed", out), out[-3000:]

    resumed = subprocess.run(["bash", "-c", commands[0]], cwd=work, env=env,
                             capture_output=True, text=True, timeout=1800)
    text = resumed.stdout + resumed.stderr
    assert resumed.returncode == 0, text[-3000:]
    assert "sweep 10/10 done: 10 finished" in text, text[-3000:]
    from mlflow.tracking import MlflowClient

    runs = trial_runs(MlflowClient(f"sqlite:///{work / 'mlflow.db'}"), "quickstart")
    assert len(runs) == 10 and {r.info.status for r in runs} == {"FINISHED"}
    assert {r.data.tags["sublayer.status"] for r in runs} == {"finished"}

    home = tmp_path / "fresh-home"  # local Ray writes ~/.ray/auth_token when it starts
    home.mkdir()
    again = subprocess.run(["bash", "-c", commands[0]], cwd=work, env={**env, "HOME": str(home)},
                           capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing to resume" in again.stderr and "starting Ray" not in again.stderr
    assert not (home / ".ray").exists()
