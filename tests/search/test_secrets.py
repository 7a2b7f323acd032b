"""No secret-looking environment variable reaches MLflow.

A real tiny sweep (`sublayer sweep`, Ray, MLflow on SQLite, checkpoints logged as
artifacts) runs with TOKEN / PASSWORD / SECRET / KEY variables set. Then everything is
read back from the store, through the API (experiments, runs, params, tags, metric
keys, every artifact file's contents) and as raw bytes (the database file and the
artifact folder), and searched for their values.
"""

from __future__ import annotations

import secrets
import subprocess
from pathlib import Path

import pytest
from helpers import SUBLAYER, scratch, start, stop, subprocess_env, tail, write_experiment
from s3_helpers import s3_server

pytestmark = pytest.mark.slow

SECRET_NAMES = (
    "MY_API_TOKEN",
    "DB_PASSWORD",
    "AWS_SECRET_ACCESS_KEY",
    "SOME_KEY",
    "HF_TOKEN",
    "MLFLOW_TRACKING_PASSWORD",
)


def _store_texts(uri: str, dest: Path) -> dict[str, bytes]:
    """Every piece of the store a user can read, by where it was found."""
    from mlflow.entities import ViewType
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    found: dict[str, bytes] = {}
    for exp in client.search_experiments(view_type=ViewType.ALL):
        found[f"experiment {exp.experiment_id}"] = repr((exp.name, exp.tags)).encode()
        for run in client.search_runs([exp.experiment_id], run_view_type=ViewType.ALL):
            rid = run.info.run_id
            found[f"run {rid} info"] = repr((run.info.run_name, run.info.artifact_uri)).encode()
            found[f"run {rid} params"] = repr(run.data.params).encode()
            found[f"run {rid} tags"] = repr(run.data.tags).encode()
            found[f"run {rid} metrics"] = repr(sorted(run.data.metrics)).encode()
            local = Path(client.download_artifacts(rid, "", str(dest / rid)))
            for path in sorted(p for p in local.rglob("*") if p.is_file()):
                found[f"run {rid} artifact {path.relative_to(local)}"] = path.read_bytes()
    return found


def test_secret_environment_variables_never_reach_mlflow():
    values = {name: f"{name.lower()}-{secrets.token_hex(12)}" for name in SECRET_NAMES}
    marker = f"canary-{secrets.token_hex(8)}"  # a value that must be found: the scan works
    with scratch("secrets") as folder:
        uri = f"sqlite:///{folder}/mlflow.db"
        path = write_experiment(
            folder,
            "secrets",
            orders=["sfsf"],
            tracking_uri=uri,
            description=marker,
            tracking={"uri": uri, "log_checkpoints": True},
        )
        env = subprocess_env(folder / "home", **values)
        log = folder / "sweep.log"
        # cwd=folder: MLflow's default artifact root (./mlruns) is made there
        proc = start([SUBLAYER, "sweep", str(path)], env=env, log=log, cwd=folder)
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the sweep ran past 240 s:\n{tail(log)}")
        finally:
            stop(proc)
        assert proc.returncode == 0, tail(log)
        found = _store_texts(uri, folder / "downloaded")
        raw = {
            str(p.relative_to(folder)): p.read_bytes()
            for p in [folder / "mlflow.db", *(folder / "mlruns").rglob("*")]
            if p.is_file()
        }

    artifacts = [k for k in found if " artifact " in k]
    assert any("checkpoint/" in k for k in artifacts), sorted(found)  # trial files were read
    assert any(marker.encode() in v for k, v in found.items() if k.endswith(" tags"))
    assert any(marker.encode() in found[k] for k in artifacts)  # the logged experiment file
    assert any(marker.encode() in v for v in raw.values())
    leaks = [
        (name, where)
        for name, value in values.items()
        for where, blob in [*found.items(), *raw.items()]
        if value.encode() in blob
    ]
    assert leaks == [], f"secret values found in the MLflow store: {leaks}"
    leaked_names = [
        (name, where)
        for name in SECRET_NAMES
        for where, blob in found.items()
        if name.encode() in blob
    ]
    assert leaked_names == [], f"secret variable names found in MLflow: {leaked_names}"


def test_the_object_store_secret_key_is_never_written(monkeypatch):
    """Runs and artifacts in a real S3-compatible server (``ray.storage_path`` and
    ``tracking.artifact_location`` at ``s3://``): the secret access key, read from the
    environment, is in no output of the sweep, no MLflow param, tag or artifact, no object
    of the bucket and no file under the sweep's folders (its HOME and Ray's temp included)."""
    secret = f"s3-secret-{secrets.token_hex(16)}"
    marker = f"canary-{secrets.token_hex(8)}"
    with scratch("s3secrets") as folder, \
            s3_server(folder, buckets=("sweeps",), secret=secret) as server:
        uri = f"sqlite:///{folder}/mlflow.db"
        path = write_experiment(
            folder, "s3secrets", orders=["sfsf"], tracking_uri=uri, description=marker,
            tracking={"uri": uri, "log_checkpoints": True,
                      "artifact_location": "s3://sweeps/mlflow"},
            ray={"storage_path": "s3://sweeps/ray"})
        log = folder / "sweep.log"  # the sweep's stdout and stderr
        proc = start([SUBLAYER, "sweep", str(path)], env=subprocess_env(folder / "home",
                                                                       **server.env),
                     log=log, cwd=folder)
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the sweep ran past 240 s:\n{tail(log)}")
        finally:
            stop(proc)
        assert proc.returncode == 0, tail(log)
        for key, value in server.env.items():  # this test reads the artifacts back
            monkeypatch.setenv(key, value)
        found = _store_texts(uri, folder / "downloaded")
        found.update({f"object {k}": v for k, v in server.objects("sweeps").items()})
        found.update({f"file {p.relative_to(folder)}": p.read_bytes()
                      for p in folder.rglob("*") if p.is_file() and not p.is_symlink()})

    assert any(k.startswith("object ray/") and "/checkpoint_" in k for k in found), sorted(found)
    assert any(k.startswith("object mlflow/") and "checkpoint/" in k for k in found)
    assert any(marker.encode() in v for k, v in found.items() if k.startswith("object mlflow/"))
    assert b"Traceback" not in found["file sweep.log"]
    leaks = [where for where, blob in found.items() if secret.encode() in blob]
    assert leaks == [], f"the secret access key was written to: {leaks}"
