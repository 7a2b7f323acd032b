"""One trial on two data-parallel workers (``resources.workers: 2``): Ray Train inside a
real Tune sweep, gloo on the CPU, tracked as one MLflow run.

* the same trial on 2 workers (DDP, then FSDP) and in one process, same seed and global
  batch: the losses agree to float tolerance, and the 2-worker trial is one run with one
  curve; the DDP trial keeps its Ray runs in an object store (``ray.storage_path:
  s3://…``, a local ``moto_server``): its Ray Train run's checkpoints, under
  ``<storage_path>/workers``, are in the bucket and none on local disk;
* a worker SIGKILLed mid-trial: the worker group restarts from the last checkpoint and
  the trial finishes with every evaluation logged once;
* planning refuses what cannot run, naming the field, before Ray starts (among it
  ``train.parallel: fsdp`` for models that cannot be sharded).
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers import ray_train_workers, run_cli, scratch, subprocess_env, tail, write_experiment
from mlflow.tracking import MlflowClient
from s3_helpers import s3_server

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec, fit
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep

TRAIN = {"steps": 6, "batch_size": 8, "eval_every": 2, "eval_batches": 2, "device": "cpu",
         "precision": "fp32"}


def _trial_run(uri: str, name: str):
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(name)
    assert exp is not None
    runs = [r for r in client.search_runs([exp.experiment_id], max_results=100)
            if r.data.tags.get("sublayer.role") == "trial"]
    assert len(runs) == 1, [r.info.run_name for r in runs]  # one run per trial
    return client, runs[0]


def _curve(client: MlflowClient, run_id: str, key: str) -> dict[int, float]:
    points = client.get_metric_history(run_id, key)
    steps = [p.step for p in points]
    assert len(steps) == len(set(steps)), f"{key} logged twice at a step: {sorted(steps)}"
    return {p.step: p.value for p in points}


@pytest.fixture(scope="module")
def one_process() -> dict[int, dict[str, float]]:
    """step -> metrics of the trial trained in this process, on one worker: the reference
    both 2-worker trials (DDP, FSDP) must reproduce."""
    rows: list[dict[str, float]] = []
    spec = TrialSpec(model=model_preset("debug", order="sfsf", dropout=0.0),
                     data=DataConfig(name="tinyshakespeare"), train=TrainConfig(**TRAIN))
    fit(spec, lambda m, checkpoint=None: rows.append(m))
    return {int(r["step"]): r for r in rows}


def _two_workers_like_one(tmp_path: Path, name: str, one: dict[int, dict[str, float]], *,
                          storage: str | None = None, env: dict[str, str] | None = None,
                          **train: object) -> list[Path]:
    """The trial on 2 workers in a real sweep (its Ray runs in ``storage``, a local folder
    by default): one finished run whose curves are ``one``'s. Returns the checkpoint
    folders left under the sweep's HOME."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    exp_file = write_experiment(tmp_path, name, orders=["sfsf"], tracking_uri=uri,
                                train={**TRAIN, **train}, resources={"cpu": 1, "workers": 2},
                                model={"preset": "debug", "dropout": 0.0},
                                **({"ray": {"storage_path": storage}} if storage else {}))
    with scratch("sublayer-home") as home:
        log = tmp_path / "sweep.log"
        done = run_cli(["sweep", str(exp_file)], env={**subprocess_env(home), **(env or {})},
                       log=log, timeout=300)
        in_home = sorted(home.rglob("checkpoint_*"))
    assert done.returncode == 0, tail(log)
    client, run = _trial_run(uri, name)
    assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
    assert run.data.params["train.parallel"] == train.get("parallel", "ddp")
    assert run.data.params["seed"] == "0"  # the seed the reference trained with
    for key in ("train_loss", "val_loss"):
        curve = _curve(client, run.info.run_id, key)
        assert sorted(curve) == sorted(one) == [2, 4, 6], (curve, one)
        for step, value in curve.items():
            assert math.isclose(value, one[step][key], rel_tol=1e-4), (key, step, value, one)
    return in_home


@pytest.mark.slow
def test_two_workers_train_one_trial_like_one_worker(tmp_path: Path, one_process) -> None:
    """``train.parallel: ddp`` (the default): each worker trains half of every batch; the
    curve is the one of the same trial trained in one process. Its Ray runs are in an
    object store: the Ray Train run's checkpoints, under ``<storage_path>/workers``, are
    in the bucket, and none is on local disk (the sweep's folder or its HOME). (One sweep
    for both claims: each 2-worker sweep costs half a minute of CI.)"""
    with s3_server(tmp_path, buckets=("sweeps",)) as server:
        in_home = _two_workers_like_one(tmp_path, "workers2", one_process,
                                        storage="s3://sweeps/ray", env=server.env)
        stored = server.objects("sweeps")
    assert any(k.startswith("ray/workers/") and "/checkpoint_" in k for k in stored), sorted(stored)
    assert not (tmp_path / "ray_results").exists() and not list(tmp_path.rglob("checkpoint_*"))
    assert not in_home, in_home


@pytest.mark.slow
def test_two_fsdp_workers_train_one_trial_like_one_worker(tmp_path: Path, one_process) -> None:
    """``train.parallel: fsdp``: the trial's model is sharded over the two Ray Train workers;
    its curve is the one of the same trial trained in one process."""
    _two_workers_like_one(tmp_path, "fsdp2", one_process, parallel="fsdp")


@pytest.mark.slow
@pytest.mark.soak  # a killed worker (minutes); test_restart_tags.py covers the restart's tags in make test
def test_a_killed_worker_restarts_from_the_checkpoint(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    train = {**TRAIN, "steps": 400, "eval_every": 40}
    exp_file = write_experiment(tmp_path, "workerkill", orders=["sfsf"], tracking_uri=uri,
                                train=train, resources={"cpu": 1, "workers": 2},
                                failure={"retries": 2},
                                model={"preset": "debug", "dropout": 0.0})
    killed: list[int] = []

    def kill_one_worker_after_an_evaluation(home: Path, stop: threading.Event) -> None:
        client = MlflowClient(tracking_uri=uri)
        while not stop.is_set():  # a condition, not a fixed sleep: the first evaluation
            exp = client.get_experiment_by_name("workerkill") if (tmp_path / "mlflow.db").exists() else None
            runs = [] if exp is None else [
                r for r in client.search_runs([exp.experiment_id])
                if r.data.tags.get("sublayer.role") == "trial"]
            if runs and runs[0].data.metrics.get("val_loss") is not None:
                pids = ray_train_workers(home)
                if pids:
                    os.kill(pids[-1], signal.SIGKILL)
                    killed.append(pids[-1])
                    return
            time.sleep(0.5)

    with scratch("sublayer-home") as home:
        stop = threading.Event()
        killer = threading.Thread(target=kill_one_worker_after_an_evaluation, args=(home, stop))
        killer.start()
        try:
            log = tmp_path / "sweep.log"
            done = run_cli(["sweep", str(exp_file)], env=subprocess_env(home), log=log,
                           timeout=480)
        finally:
            stop.set()
            killer.join()
    assert killed, f"no worker was killed (the trial ended first?):\n{tail(log)}"
    assert done.returncode == 0, tail(log)
    client, run = _trial_run(uri, "workerkill")
    assert run.info.status == "FINISHED"
    curve = _curve(client, run.info.run_id, "val_loss")  # every evaluation, once
    assert sorted(curve) == list(range(40, 401, 40)), sorted(curve)


def _write(tmp_path: Path, **changes: object) -> Path:
    path = write_experiment(tmp_path, "badworkers", orders=["sfsf"],
                            tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", train=TRAIN,
                            resources={"cpu": 1, "workers": 2})
    doc = yaml.safe_load(path.read_text())
    for key, value in changes.items():
        if "__" not in key:  # a top-level key
            doc[key] = value
            continue
        section, field = key.split("__")
        doc[section][field] = value
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("changes", "expect"), [
    ({"train__batch_size": 7},
     "train.batch_size: got 7, expected a multiple of resources.workers (2)"),
    ({"resources__gpu": 0.5}, "resources.gpu: got 0.5, expected a whole number of GPUs per worker"),
    ({"resources__workers": 0}, "resources.workers: got 0"),
    ({"resources__workers": 3, "ray__num_cpus": 2},
     "resources.cpu: got 1.0, expected at most 0.667 CPUs per worker: 3 workers x 1 must "
     "fit the 2 CPUs"),
    ({"train__parallel": "zero3"}, "train.parallel: got 'zero3', expected one of 'ddp' or 'fsdp'"),
    ({"train__parallel": "fsdp", "model__guidance": {"mode": "hard", "blocks": ["ffn"]}},
     "train.parallel: got 'fsdp', expected ddp with model.guidance: a guidance pair reads"),
    ({"train__parallel": "fsdp", "task": "translation"},
     "train.parallel: got 'fsdp', expected ddp for task translation: FSDP shards language "
     "models only"),
    ({"train__parallel": "fsdp", "resources__workers": 1, "search": {"algorithm": "oneshot"}},
     "train.parallel: got 'fsdp', expected ddp for search.algorithm oneshot"),
])
def test_planning_refuses_what_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          changes: dict[str, object], expect: str) -> None:
    path = _write(tmp_path, **changes)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert expect in err, err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created


def test_parallel_is_not_in_the_config_hash(tmp_path: Path) -> None:
    """DDP and FSDP train the same numbers: reuse and warm start take either's runs."""
    doc = yaml.safe_load(_write(tmp_path).read_text())

    def config_hash(**train: object) -> str:
        raw = {**doc, "train": {**doc["train"], **train}}
        return plan_sweep(parse_experiment(raw), check_resources=False).config_hash

    assert config_hash() == config_hash(parallel="ddp") == config_hash(parallel="fsdp")
    assert config_hash(parallel="fsdp", lr=0.01) != config_hash(parallel="fsdp")
