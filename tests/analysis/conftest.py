"""Fixtures for the analysis tests: hand-made trial frames and a small MLflow store
written with MlflowClient following the contract's conventions."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from analysis_helpers import NO_BASELINE, SWEEP

from sublayer_search.spaces.cost import units
from sublayer_search.spaces.order import counts

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


# --- a small MLflow store of a translation / IOT sweep ---------------------------------

_DEC = {1: "scf", 2: "fsc", 4: "csf", 6: "fcs"}
_ROUTING = {  # (subset, seed) -> routing_bleu.json
    ("46", 0): {"4": {"4": 30.0, "6": 25.0}, "6": {"4": 20.0, "6": 28.0}},
    ("46", 1): {"4": {"4": 32.0, "6": 27.0}, "6": {"4": 22.0, "6": 18.0}},
    ("146", 0): {"1": {"1": 10.0, "4": 12.0, "6": 9.0}, "4": {"1": 20.0, "4": 25.0, "6": 21.0},
                 "6": {"1": 15.0, "4": 14.0, "6": 16.0}},
}
_TRANSLATION_CHILDREN = [
    # name, family, subset, side, k, seed, status, final BLEU, route shares {code: share}
    ("transformer@seed0", "baseline", None, None, None, 0, "finished", 20.0, None),
    ("transformer@seed1", "baseline", None, None, None, 1, "finished", 21.0, None),
    ("transformer@seed2", "baseline", None, None, None, 2, "finished", 22.0, None),
    ("iot46@seed0", "iot_subsets", "46", None, None, 0, "finished", 22.0, {4: 0.6, 6: 0.4}),
    ("iot46@seed1", "iot_subsets", "46", None, None, 1, "finished", 23.0, {4: 0.7, 6: 0.3}),
    ("iot146@seed0", "iot_subsets", "146", None, None, 0, "finished", 24.0,
     {1: 0.2, 4: 0.5, 6: 0.3}),
    ("iot1246@seed0", "iot_subsets", "1246", None, None, 0, "failed", None, None),
    ("sandwich_dec1@seed0", "sandwich", None, "decoder", 1, 0, "finished", 21.5, None),
    ("sandwich_enc1@seed0", "sandwich", None, "encoder", 1, 0, "finished", 20.5, None),
]


def _translation_child(client, exp_id: str, parent_id: str, spec: tuple, index: int) -> str:
    import json

    from mlflow.entities import Metric, Param

    name, family, subset, side, k, seed, status, final, shares = spec
    space = {"baseline": "iot_subsets"}.get(family, family)
    tags = {"mlflow.parentRunId": parent_id, "sublayer.role": "trial", "sublayer.space": space,
            "sublayer.family": family, "sublayer.baseline": str(family == "baseline").lower(),
            "sublayer.status": status, "ray.trial_id": f"x{index:03d}"}
    run = client.create_run(exp_id, run_name=name, tags=tags)
    first = int(subset[0]) if subset else 1
    order = _DEC[first] * 2
    params = {"task": "translation", "metric": "val_bleu", "order": order, "seed": seed,
              "space": space, "candidate": name.split("@")[0], "encoder_order": "sfsf",
              "decoder_order": order}
    if subset:
        params.update(subset=subset, subset_size=len(subset), stack="decoder",
                      codes=",".join(subset))
    if side:
        params.update(side=side, k=k)
    now = int(time.time() * 1000)
    metrics = []
    if final is not None:
        for step, v in ((10, final - 2.0), (20, final)):
            metrics.append(Metric("val_bleu", v, now, step))
            metrics.append(Metric("val_loss", 3.0 - step / 20, now, step))
        metrics += [Metric("final_val_bleu", final, now, 20),
                    Metric("best_val_bleu", final, now, 20)]
    for code, share in (shares or {}).items():
        metrics += [Metric(f"route_share_{code}", 1.0 / len(shares), now, 10),
                    Metric(f"route_share_{code}", share, now, 20)]
    client.log_batch(run.info.run_id, metrics=metrics,
                     params=[Param(key, str(value)) for key, value in params.items()])
    if (subset, seed) in _ROUTING:
        client.log_text(run.info.run_id, json.dumps(_ROUTING[subset, seed]), "routing_bleu.json")
    client.set_terminated(run.info.run_id, status="FINISHED" if final is not None else "FAILED")
    return run.info.run_id


@pytest.fixture(scope="session")
def translation_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A SQLite MLflow store with a translation sweep (3 baseline seeds, IOT subsets
    {4,6} x 2 seeds and {1,4,6} with routing_bleu.json artifacts, a failed {1,2,4,6},
    decoder/encoder sandwiches k=1) and one without baseline; returns its tracking URI."""
    from analysis_helpers import TRANSLATION_NO_BASELINE, TRANSLATION_SWEEP
    from mlflow.tracking import MlflowClient

    root: Path = tmp_path_factory.mktemp("mlflow-iot")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    for name, specs in ((TRANSLATION_SWEEP, _TRANSLATION_CHILDREN),
                        (TRANSLATION_NO_BASELINE, _TRANSLATION_CHILDREN[3:5])):
        exp_id = client.create_experiment(name, artifact_location=(root / name).as_uri())
        parent = client.create_run(exp_id, run_name=name, tags={"sublayer.role": "sweep"})
        for i, spec in enumerate(specs):
            _translation_child(client, exp_id, parent.info.run_id, spec, i)
        client.set_terminated(parent.info.run_id, status="FINISHED")
    return uri
