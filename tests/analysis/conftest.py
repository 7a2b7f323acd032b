"""Fixtures for the analysis tests: hand-made trial frames and a small MLflow store
written with MlflowClient following the contract's conventions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from analysis_helpers import NO_BASELINE, SWEEP

from spaces.cost import units
from spaces.order import counts

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

# --- a small MLflow store -------------------------------------------------------------

_CHILDREN = [
    # name, order, family, k, seed, baseline, sublayer.status, run status, final or None
    ("interleaved4@seed0", "sfsfsfsf", "baseline", None, 0, True, "finished", "FINISHED", 10.0),
    ("interleaved4@seed1", "sfsfsfsf", "baseline", None, 1, True, "finished", "FINISHED", 12.0),
    ("sandwich4_1@seed0", "ssfsfsff", "sandwich", 1, 0, False, "finished", "FINISHED", 9.0),
    ("sandwich4_1@seed1", "ssfsfsff", "sandwich", 1, 1, False, "finished", "FINISHED", 9.5),
    ("sandwich4_3@seed0", "ssssffff", "sandwich", 3, 0, False, "finished", "FINISHED", 13.0),
    ("sandwich4_2@seed0", "sssfsfff", "sandwich", 2, 0, False, "failed", "FAILED", None),
    ("sandwich4_2@seed1", "sssfsfff", "sandwich", 2, 1, False, "diverged", "FINISHED", None),
    ("sandwich4_0@seed0", "sfsfsfsf", "sandwich", 0, 0, False, None, "KILLED", None),
]


def _child(client, exp_id: str, parent_id: str, spec: tuple, index: int) -> str:
    from mlflow.entities import Metric, Param, RunTag

    name, order, family, k, seed, baseline, status, run_status, final = spec
    tags = {
        "mlflow.parentRunId": parent_id,
        "sublayer.role": "trial",
        "sublayer.space": "sandwich",
        "sublayer.family": family,
        "sublayer.baseline": "true" if baseline else "false",
        "ray.trial_id": f"t{index:03d}",
    }
    if status is not None:
        tags["sublayer.status"] = status
    run = client.create_run(exp_id, run_name=name, tags=tags)
    n = counts(order)
    params = {
        "order": order, "n_s": n["s"], "n_f": n["f"], "n_c": 0, "units": units(order),
        "params": 1000 * n["s"] + 2000 * n["f"], "flops_per_token": 123, "space": "sandwich",
        "seed": seed, "candidate": name.split("@")[0], "config_hash": "abc", "metric": "val_ppl",
        "model.d_model": 32,
    }
    if k is not None:
        params["k"] = k
    now = int(time.time() * 1000)
    metrics = []
    if final is not None:
        curve = [final + 3.0, final + 1.0, final]
        metrics += [Metric("val_ppl", v, now, step) for step, v in zip((10, 20, 30), curve, strict=True)]
        metrics += [Metric("train_loss", 5.0 - step / 10, now, step) for step in (10, 20, 30)]
        metrics.append(Metric("final_val_ppl", final, now, 30))
        if index != 0:  # run 0 lacks best_val_ppl: the loader takes it from the history
            metrics.append(Metric("best_val_ppl", final, now, 30))
    client.log_batch(
        run.info.run_id,
        metrics=metrics,
        params=[Param(key, str(value)) for key, value in params.items()],
        tags=[RunTag("note", "test")],
    )
    client.set_terminated(run.info.run_id, status=run_status)
    return run.info.run_id


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite MLflow store with one sandwich sweep (parent + 8 trials) and one sweep
    without baseline; returns its tracking URI."""
    from mlflow.tracking import MlflowClient

    root: Path = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp_id = client.create_experiment(SWEEP, artifact_location=(root / "artifacts").as_uri())
    parent = client.create_run(exp_id, run_name=SWEEP, tags={"sublayer.role": "sweep"})
    for i, spec in enumerate(_CHILDREN):
        _child(client, exp_id, parent.info.run_id, spec, i)
    client.set_terminated(parent.info.run_id, status="FINISHED")

    exp2 = client.create_experiment(NO_BASELINE,
                                    artifact_location=(root / "artifacts2").as_uri())
    parent2 = client.create_run(exp2, run_name=NO_BASELINE, tags={"sublayer.role": "sweep"})
    for i, spec in enumerate(_CHILDREN[2:5]):
        _child(client, exp2, parent2.info.run_id, spec, i + 1)
    return uri
