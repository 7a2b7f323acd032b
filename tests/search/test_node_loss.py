"""A worker node of a real two-node Ray cluster dies while a trial runs on it.

Two ``ray start --block`` nodes on 127.0.0.1 (2 CPUs each); two trials that each ask
for 2 CPUs, so one runs on each node. Once the worker node's trial has evaluated (and
checkpointed), the test SIGKILLs that node's whole process group (raylet and its
workers). With ``failure.retries: 2`` Ray restarts the trial from its last checkpoint
on the head node once that is free; MLflow keeps ONE run for it, tagged with the
restart count (``sublayer.restarts``) and the new node, and the sweep finishes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers import SUBLAYER, ray_cluster, scratch, start, stop, tail, write_experiment
from mlflow.tracking import MlflowClient

pytestmark = [pytest.mark.slow, pytest.mark.soak]  # a node's death, minutes

ORDERS = ["sfsf", "ssff"]
TRAIN = {"steps": 240, "batch_size": 8, "eval_every": 40, "eval_batches": 2}
NAME = "node_loss"


def _head_node_id(address: str, env: dict[str, str]) -> str:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print('HEAD', next(n['NodeID'] for n in ray.nodes() "
            "if 'node:__internal_head__' in n['Resources']))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    heads = [line.split()[1] for line in out.stdout.splitlines() if line.startswith("HEAD ")]
    assert heads, out.stderr[-3000:]
    return heads[0]


def _trials(uri: str) -> list:
    with contextlib.suppress(Exception):  # the store is created by the driver
        client = MlflowClient(uri)
        exp = client.get_experiment_by_name(NAME)
        if exp is not None:
            return client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'trial'")
    return []


def _kill_node(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a node as if its machine were gone: its ``ray start``, the raylet and every
    process below them. Killing the process group is not enough: Ray's workers can lead
    process groups of their own, and an orphaned trial actor may go on reporting (CI saw a
    victim finish with no restart)."""
    root = psutil.Process(proc.pid)
    every = [*root.children(recursive=True), root]  # listed before any dies (no reparenting)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    for p in every:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(every, timeout=30)


def test_trial_on_a_lost_worker_node_continues_on_the_other_node(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_experiment(tmp_path, NAME, orders=ORDERS, tracking_uri=uri, train=TRAIN,
                            resources={"cpu": 2}, max_concurrent=2, failure={"retries": 2})
    log = tmp_path / "sweep.log"
    with scratch("sublayer-home") as home, ray_cluster(home, nodes=2, cpus=2, gpus=0) as cluster:
        head = _head_node_id(cluster.address, cluster.env)
        env = {**cluster.env, "TUNE_GLOBAL_CHECKPOINT_S": "1"}
        driver = start([SUBLAYER, "sweep", str(path), "--address", cluster.address], env=env,
                       log=log)
        try:
            deadline = time.monotonic() + 240
            victim = None
            while victim is None:
                assert driver.poll() is None, f"the sweep ended early:\n{tail(log)}"
                assert time.monotonic() < deadline, f"no trial evaluated on the worker:\n{tail(log)}"
                time.sleep(0.5)
                client = MlflowClient(uri)
                for run in _trials(uri):
                    node = run.data.tags.get("ray.node_id")
                    if node and node != head and client.get_metric_history(run.info.run_id,
                                                                           "val_loss"):
                        victim = run
            # an evaluation in MLflow: its checkpoint was saved first (tune.report) and the
            # driver knows it; the kill comes at once, while the trial still trains
            _kill_node(cluster.procs[1])
            evals = len(client.get_metric_history(victim.info.run_id, "val_loss"))
            assert client.get_run(victim.info.run_id).info.status == "RUNNING" and \
                evals < TRAIN["steps"] // TRAIN["eval_every"], "the trial ended before the kill"
            driver.wait(timeout=300)
        finally:
            stop(driver)
        assert driver.returncode == 0, f"sweep failed ({driver.returncode}):\n{tail(log)}"

    runs = _trials(uri)
    assert sorted(r.info.run_name for r in runs) == sorted(f"{o}@seed0" for o in ORDERS), \
        [r.info.run_name for r in runs]  # one run per trial: no second run for the restart
    by_name = {r.info.run_name: r for r in runs}
    moved = by_name[victim.info.run_name]
    other = next(r for r in runs if r.info.run_name != victim.info.run_name)
    for run in runs:
        assert run.info.status == "FINISHED", (run.info.run_name, run.data.tags)
        assert run.data.tags["sublayer.status"] == "finished"
    assert moved.info.run_id == victim.info.run_id
    assert moved.data.tags.get("sublayer.restarts") == "1", sorted(
        f"{k}={v}" for k, v in moved.data.tags.items() if k.startswith(("sublayer.", "ray.")))
    assert "sublayer.restarts" not in other.data.tags
    assert moved.data.tags["ray.node_id"] == head, "the restarted trial is not tagged with the " \
                                                   "node it finished on"
    every = TRAIN["eval_every"]
    assert int(moved.data.tags["sublayer.resumed_from_step"]) >= every  # from its checkpoint
    client = MlflowClient(uri)
    steps = sorted(m.step for m in client.get_metric_history(moved.info.run_id, "val_loss"))
    assert steps == list(range(every, TRAIN["steps"] + 1, every)), steps  # each once
