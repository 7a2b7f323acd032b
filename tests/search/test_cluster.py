"""A sweep on a real two-node Ray cluster (127.0.0.1) with fractional fake GPUs.

Two ``ray start --block`` processes (a head and a worker, 2 CPUs and 1 fake GPU each)
form the cluster; ``sublayer sweep --address`` runs four trials that each ask for one
CPU and half a GPU, so every node holds two trials that share its GPU 0.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import ray_cluster, run_cli, scratch, tail, write_experiment
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "ffss", "fsfs"]
# Longer than the other tests' 20 steps on purpose: Tune reuses a finished trial's actor
# for a trial whose own actor is still starting (``reuse_actors=True``), so if one node's
# trials ended before the other node's actors were up (actor start-up is 8-15 s on two
# busy cores), every trial would run on one node. ~300 steps keep the trials running
# past that start-up skew; the model is still the two-layer debug one.
# device cpu: the fake GPUs are held for scheduling only (torch here has no CUDA)
TRAIN = {"steps": 300, "batch_size": 8, "eval_every": 150, "eval_batches": 2, "device": "cpu"}


def _overlap(a: object, b: object) -> bool:
    ia, ib = a.info, b.info  # type: ignore[attr-defined]
    return ia.start_time < ib.end_time and ib.start_time < ia.end_time


def test_sweep_shares_fractional_gpus_across_two_nodes(tmp_path: Path) -> None:
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    exp_file = write_experiment(tmp_path, "cluster_gpu_share", orders=ORDERS, tracking_uri=uri,
                                resources={"cpu": 1, "gpu": 0.5}, max_concurrent=4, train=TRAIN)
    with scratch("sublayer-home") as home, ray_cluster(home, nodes=2, cpus=2, gpus=1) as cluster:
        log = tmp_path / "sweep.log"
        done = run_cli(["sweep", str(exp_file), "--address", cluster.address], env=cluster.env,
                       log=log, timeout=240)  # the node data check adds a worker start per node
        assert done.returncode == 0, f"sweep failed ({done.returncode}):\n{tail(log)}"

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cluster_gpu_share")
    assert exp is not None, f"no MLflow experiment written:\n{tail(log)}"
    runs = client.search_runs([exp.experiment_id], max_results=100)
    parents = [r for r in runs if r.data.tags.get("sublayer.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FINISHED"
    assert sorted(r.info.run_name for r in children) == sorted(f"{o}@seed0" for o in ORDERS)
    for run in children:
        tags = run.data.tags
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert run.info.status == "FINISHED", (run.info.run_name, run.info.status, tags)
        assert tags["sublayer.status"] == "finished"
        assert tags.get("ray.node_id"), f"{run.info.run_name}: no ray.node_id tag ({tags})"
        assert tags.get("ray.node_ip"), f"{run.info.run_name}: no ray.node_ip tag"
        # half a GPU each: Ray hands every trial exactly one (fake) GPU id
        assert tags.get("ray.gpu_ids") in {"0"}, (run.info.run_name, tags.get("ray.gpu_ids"))
        assert "final_val_bpc" in run.data.metrics
        assert run.info.end_time is not None and run.info.end_time > run.info.start_time

    nodes = {r.data.tags["ray.node_id"] for r in children}
    assert len(nodes) == 2, f"trials ran on {len(nodes)} node(s), expected both: {nodes}"

    sharing = [
        (a.info.run_name, b.info.run_name)
        for a, b in itertools.combinations(children, 2)
        if a.data.tags["ray.node_id"] == b.data.tags["ray.node_id"]
        and a.data.tags["ray.gpu_ids"] == b.data.tags["ray.gpu_ids"]
        and _overlap(a, b)
    ]
    assert sharing, "no two trials held the same GPU of the same node at the same time: " + str(
        [(r.info.run_name, r.data.tags["ray.node_id"][:8], r.data.tags["ray.gpu_ids"],
          r.info.start_time, r.info.end_time) for r in children])
