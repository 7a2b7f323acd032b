"""Whole multi-worker trials: Tune runs only the trials whose workers the cluster holds.

* a real Ray cluster of fake GPUs (``ray start --num-cpus=8 --num-gpus=4``) and four
  trials of 2 workers x 1 GPU: Tune runs exactly 2 trials at a time (their MLflow runs,
  opened when Tune starts a trial and closed when it ends, overlap 2 at most), the
  others stay pending, and both running trials' workers are up at once; the loop trains
  on the CPU (no CUDA here) with gloo;
* the count is the cluster's worker slots (per node, the scarcest resource) over the
  workers of a trial, recounted when a resumed sweep restores its searcher;
* ``resources.gpu`` > 1 is refused, named, anywhere (the loop drives one device).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import ray
import yaml
from helpers import ray_cluster, ray_train_workers, run_cli, scratch, tail, write_experiment
from mlflow.tracking import MlflowClient

from sublayer_search.search.cli.main import main
from sublayer_search.search.run.workers import WholeTrials, whole_trials
from sublayer_search.search.searchers.grid_searcher import GridSearcher

ORDERS = ["sfsf", "fsfs", "ssff", "ffss"]
# device cpu: the fake GPUs are held for scheduling, and torch here has no CUDA (with
# `auto` a trial holding a GPU that torch cannot see is refused: models/optim.require_gpu)
TRAIN = {"steps": 4, "batch_size": 8, "eval_every": 2, "eval_batches": 2, "precision": "fp32",
         "device": "cpu"}


@pytest.mark.parametrize(("nodes", "cpu", "gpu", "workers", "trials"), [
    ([{"CPU": 8, "GPU": 4}], 1, 1, 2, 2),  # the cluster: 4 GPUs, 2 x 1 GPU
    ([{"CPU": 4, "GPU": 2}, {"CPU": 4, "GPU": 2}], 1, 1, 2, 2),  # the same on two nodes
    ([{"CPU": 4, "GPU": 8}] * 4, 1, 1, 8, 2),  # 4 nodes x 8 GPUs, CPU-bound: 16 slots
    ([{"CPU": 64}, {"CPU": 4, "GPU": 8}], 2, 1, 2, 1),  # a CPU-only head holds no GPU worker
    ([{"CPU": 8, "GPU": 4}], 1, 1, 3, 1),  # 4 slots: one trial of 3, never a part of one
    ([{"CPU": 3}, {"CPU": 3}], 1, 0, 4, 1),  # CPU workers: 6 slots, 1 trial of 4
    ([{"CPU": 8}], 0.1, 0, 2, 40),  # fractions of a CPU count whole (80 slots)
    ([{"CPU": 8, "GPU": 1}], 1, 1, 2, 0),  # not one trial: check_cluster refuses it first
])
def test_whole_trials_counts_what_the_nodes_hold(nodes: list[dict[str, float]], cpu: float,
                                                  gpu: float, workers: int, trials: int) -> None:
    assert whole_trials(nodes, cpu, gpu, workers) == trials


def _write(tmp_path: Path, name: str, **extra: object) -> Path:
    return write_experiment(tmp_path, name, orders=ORDERS,
                            tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", train=TRAIN,
                            resources={"workers": 2, "gpu": 1, "cpu": 1}, **extra)


@pytest.mark.parametrize("workers", [1, 2])
def test_more_than_one_gpu_per_worker_is_refused(tmp_path: Path, workers: int,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Refused on a machine with GPUs too (``ray.num_gpus``) and with ``--dry-run``."""
    path = _write(tmp_path, "twogpus", ray={"storage_path": str(tmp_path / "ray_results"),
                                            "num_gpus": 8})
    doc = yaml.safe_load(path.read_text())
    doc["resources"] = {"workers": workers, "gpu": 2, "cpu": 1}
    path.write_text(yaml.safe_dump(doc))
    for args in (["sweep", str(path)], ["sweep", "--dry-run", str(path)]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert ("resources.gpu: got 2.0, expected at most 1 per worker: the training loop "
                "drives one device per worker; ask for more workers instead") in err, err
        assert "Traceback" not in err
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.slow
def test_a_resumed_sweep_recounts_the_cluster() -> None:
    """The searcher's saved state holds the old count; restored, it counts this cluster."""
    searcher = GridSearcher([], metric="val_loss", mode="min")
    try:
        ray.init(num_cpus=8, num_gpus=4, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        before = WholeTrials(searcher, cpu=1, gpu=1, workers=2)
        capped = WholeTrials(searcher, cpu=1, gpu=1, workers=2, limit=1)
        state = before.get_state()
        ray.shutdown()
        ray.init(num_cpus=8, num_gpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        after = WholeTrials(searcher, cpu=1, gpu=1, workers=2)
        after.max_concurrent = 99  # as unpickled from an old tuner.pkl
        after.set_state(state)
    finally:
        ray.shutdown()
    assert (before.max_concurrent, capped.max_concurrent) == (2, 1)
    assert state["max_concurrent"] == 2 and after.max_concurrent == 1


def _most_at_once(spans: list[tuple[int, int]]) -> int:
    """The most intervals [start, end) open at one instant."""
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


@pytest.mark.slow
def test_four_gpus_run_two_trials_of_two_workers_at_a_time(tmp_path: Path) -> None:
    path = _write(tmp_path, "whole")
    seen: list[int] = []

    def count_workers(home: Path, stop: threading.Event) -> None:
        while not stop.is_set():  # a sample every 0.2 s for as long as the sweep runs
            seen.append(len(ray_train_workers(home)))
            time.sleep(0.2)

    with scratch("sublayer-home") as home, ray_cluster(home, nodes=1, cpus=8, gpus=4) as cluster:
        stop = threading.Event()
        counter = threading.Thread(target=count_workers, args=(home, stop))
        counter.start()
        started = time.monotonic()
        try:
            log = tmp_path / "sweep.log"
            done = run_cli(["sweep", "--address", cluster.address, str(path)], env=cluster.env,
                           log=log, timeout=540)
        finally:
            stop.set()
            counter.join()
        took = time.monotonic() - started
    assert done.returncode == 0, tail(log)
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    exp = client.get_experiment_by_name("whole")
    assert exp is not None
    runs = [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("sublayer.role") == "trial"]
    assert len(runs) == len(ORDERS), [r.info.run_name for r in runs]
    assert {r.info.status for r in runs} == {"FINISHED"}, [r.info.status for r in runs]
    # a trial's MLflow run opens when Tune starts it and closes when it ends: never more
    # than the 2 trials whose workers the 4 GPUs hold at once (the 8 CPUs would hold 4),
    # and 2 together at some point
    spans = [(r.info.start_time, r.info.end_time) for r in runs]
    assert _most_at_once(spans) == 2, sorted(spans)
    # both running trials train together: their 2 x 2 workers are up at the same time
    assert max(seen) == 4, (max(seen), took)
