"""A Slurm job near its time limit: USR1 stops the sweep cleanly, the job requeues
itself, and the requeued job resumes the sweep (submitit's requeue dance).

The batch script runs with the stand-ins of test_slurm_template.py on a one-node job (a
real Ray head on 127.0.0.1, a real sweep). Once the first trial has finished and the
second has evaluated (checkpointed) at least once, the test sends USR1 to the batch
shell, as ``#SBATCH --signal=B:USR1@300`` would: the stand-in ``scontrol`` must record
``requeue JOBID``. Then the same script runs again as Slurm restarts a requeued job
(same SLURM_JOB_ID, SLURM_RESTART_COUNT=1): every trial ends FINISHED exactly once, the
one finished before the signal untouched (same MLflow run, same end time), the
interrupted one continued from its checkpoint (each evaluation logged once).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest
from helpers import free_port, scratch, tail, write_experiment
from mlflow.tracking import MlflowClient
from test_slurm_template import job_env, kill_leftovers, run_job, standins, start_job

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff"]
STEPS, EVERY = 160, 20  # the second trial is still training when the signal lands
NAMES = [f"{order}@seed0" for order in ORDERS]


def _trials(db: Path) -> list:
    """The sweep's trial runs (none while the driver is still creating its store)."""
    if not db.exists():
        return []
    try:  # read-only: a client opening a store mid-creation races the driver's migration
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as con:
            if con.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0:
                return []
    except sqlite3.Error:
        return []
    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name("slurm_requeue")
    return [] if exp is None else client.search_runs(
        [exp.experiment_id], filter_string="tags.`sublayer.role` = 'trial'")


def _ready(db: Path) -> bool:
    """The first trial finished and the second has evaluated (so checkpointed)."""
    runs = {r.info.run_name: r for r in _trials(db)}
    if runs.get(NAMES[0]) is None or runs[NAMES[0]].info.status != "FINISHED":
        return False
    second = runs.get(NAMES[1])
    return second is not None and second.info.status == "RUNNING" and bool(
        MlflowClient(f"sqlite:///{db}").get_metric_history(second.info.run_id, "val_loss"))


def test_usr1_requeues_the_job_and_the_requeued_job_resumes_the_sweep(tmp_path):
    db = tmp_path / "mlflow.db"
    exp = write_experiment(tmp_path, "slurm_requeue", orders=ORDERS, tracking_uri=f"sqlite:///{db}",
                           resources={"cpu": 1}, max_concurrent=1,
                           train={"steps": STEPS, "batch_size": 8, "eval_every": EVERY,
                                  "eval_batches": 2})
    bin_dir = standins(tmp_path)
    log = tmp_path / "sublayer.log"  # --open-mode=append: both runs write to it
    job_id = f"{os.getpid()}4"
    job_dir = tmp_path / f"sublayer-{job_id}"
    with scratch("sublayer-home") as home:
        env = job_env(home, tmp_path, bin_dir, exp, job_id, STANDIN_NODES="node-a",
                      SLURM_JOB_NODELIST="node-a", SLURM_JOB_NUM_NODES="1",
                      SUBLAYER_RAY_TEMP_DIR=str(home / "rt"))
        job = start_job("sublayer-cpu.sbatch", env, log, tmp_path)
        try:
            deadline = time.monotonic() + 240
            while not _ready(db):
                assert job.poll() is None, f"the job ended ({job.returncode}):\n{tail(log)}"
                assert time.monotonic() < deadline, "no trial finished:\n" + tail(log)
                time.sleep(0.5)
            os.kill(job.pid, signal.SIGUSR1)  # Slurm: --signal=B:USR1@300
            code = job.wait(timeout=180)
        finally:
            kill_leftovers(job, home)
        text = log.read_text()
        assert code == 0, f"the job ended {code}:\n{tail(log)}"
        assert "USR1: the job's time limit is near" in text, tail(log)
        assert (tmp_path / "scontrol.log").read_text() == f"requeue {job_id}\n", tail(log)
        before = {r.info.run_name: r for r in _trials(db)}
        assert before[NAMES[0]].info.status == "FINISHED", tail(log)
        assert before[NAMES[1]].info.status == "KILLED", tail(log)  # stopped cleanly
        assert not (home / "rt").exists()

        # Slurm starts the requeued job again: same job id, SLURM_RESTART_COUNT=1
        env.update(SLURM_RESTART_COUNT="1", RAY_PORT=str(free_port()))
        code = run_job("sublayer-cpu.sbatch", env, log, tmp_path, home, timeout=240)
    text = log.read_text()
    assert code == 0, f"the requeued job ended {code}:\n{tail(log)}"
    assert "restart 1 of job" in text and "resuming its sweep (--resume)" in text, tail(log)
    assert (tmp_path / "scontrol.log").read_text() == f"requeue {job_id}\n"  # once only

    after = _trials(db)
    assert sorted(r.info.run_name for r in after) == NAMES, [r.info.run_name for r in after]
    assert all(r.info.status == "FINISHED" for r in after), [r.info.status for r in after]
    by_name = {r.info.run_name: r for r in after}
    done = by_name[NAMES[0]]  # finished before the signal: not trained again
    assert (done.info.run_id, done.info.end_time) == (before[NAMES[0]].info.run_id,
                                                      before[NAMES[0]].info.end_time)
    resumed = by_name[NAMES[1]]  # the same run, continued from its checkpoint
    assert resumed.info.run_id == before[NAMES[1]].info.run_id
    assert int(resumed.data.tags["sublayer.resumed_from_step"]) >= EVERY
    client = MlflowClient(f"sqlite:///{db}")
    steps = [m.step for m in client.get_metric_history(resumed.info.run_id, "val_loss")]
    assert sorted(steps) == list(range(EVERY, STEPS + 1, EVERY))  # every evaluation, once
    parents = client.search_runs([resumed.info.experiment_id],
                                 filter_string="tags.`sublayer.role` = 'sweep'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    # each run of the job left its Ray logs in the job's folder
    assert len(list((job_dir / "ray-logs" / "node-a").glob("session_*/logs"))) == 2
