"""No AWS secret in Ray's logs when the keys are in the environment (issue 45, point 1).

The most common S3 setup: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY`` and
``AWS_SESSION_TOKEN`` in the driver's environment. Ray Tune copies them into every trial
actor's runtime env, and the runtime-env agent of a cluster started with ``ray start``
logs that env in plain text (``session_*/logs/runtime_env_agent.log``), the folder the
Slurm job copies to the shared file system and a KubeRay pod keeps. The sweep takes them
out of what Tune hands the trials; the nodes read their own environment (here, as the
Slurm job's ``--export=ALL`` gives them, the same keys).

A real sweep on a real ``ray start`` node, with Ray's state and MLflow's artifacts in an
S3-compatible server: every file of the node's temp folder (read while the sweep runs and
after), every object of the bucket, every file under the test's folder and everything
the sweep printed is searched for the secret key and the session token, as written,
base64 and URL-encoded. The search must find the agent's log of the trials' runtime env,
so that it reads where the leak was.
"""

from __future__ import annotations

import ast
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    SUBLAYER,
    ray_cluster,
    scratch,
    start,
    stop,
    subprocess_env,
    tail,
    write_experiment,
)
from s3_helpers import s3_server
from secret_scan import TempWatch, leaks_in, secret_patterns

from sublayer_search.search.run.tuning import CREDENTIAL_ENV

pytestmark = pytest.mark.slow

BUCKET = "sweeps"


def test_tune_would_copy_these_variables() -> None:
    """The names the sweep takes out are the ones Ray Tune copies (a Ray upgrade that
    renames its list fails here, not silently in a cluster's logs). Ray's list is read in
    a fresh process: a sweep run in this one has already taken the names out."""
    show = ("from ray.tune.execution import class_cache; from sublayer_search.search.run."
            "tuning import keep_credentials_out_of_trials as keep; "
            "print(sorted(class_cache.ENV_VARS_TO_PROPAGATE)); keep(); "
            "print(sorted(class_cache.ENV_VARS_TO_PROPAGATE))")
    out = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    before, after = (set(ast.literal_eval(line)) for line in out[-2:])
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} <= before
    assert after == before - CREDENTIAL_ENV and "RAY_CHDIR_TO_TRIAL_DIR" in after


def test_environment_keys_reach_no_file_of_a_ray_cluster() -> None:
    with scratch("srl") as folder:
        with s3_server(folder, buckets=(BUCKET,)) as s3:
            keys = {**s3.env, "AWS_SESSION_TOKEN": "tok" + secrets.token_hex(20)}
            patterns = secret_patterns({
                "the AWS secret key": keys["AWS_SECRET_ACCESS_KEY"],
                "the AWS session token": keys["AWS_SESSION_TOKEN"]})
            with ray_cluster(folder / "node-home", nodes=1, cpus=2, gpus=0, **keys) as cluster:
                assert cluster.temp is not None
                watch = TempWatch(cluster.temp, patterns)
                printed = _sweep(folder, keys, cluster.address, watch)
            stored = {f"object {k}": v for k, v in s3.objects(BUCKET).items()}
        files = {f"file {p.relative_to(folder)}": p.read_bytes() for p in folder.rglob("*")
                 if p.is_file() and not p.is_symlink()}

    agent_logs = [f for f in watch.files if f.endswith("runtime_env_agent.log")]
    assert agent_logs, sorted(watch.files)  # the search read the agent's log …
    assert any(k.startswith("object ray/") and k.endswith("tuner.pkl") for k in stored), stored
    assert any(k.startswith("object mlflow/") for k in stored), sorted(stored)
    leaks = sorted(watch.leaks) + leaks_in({**printed, **stored, **files}, patterns)
    assert leaks == [], f"secrets written: {leaks}"


def test_web_identity_reaches_no_file(tmp_path: Path) -> None:
    """Credentials by web identity (``AWS_ROLE_ARN`` and a token file, as EKS gives a pod):
    MLflow's artifacts go to S3 with keys botocore fetches from STS (the same server), and
    the token is written nowhere, nor is the Ray token the local Ray authenticates with
    (``RAY_AUTH_TOKEN``); a local Ray's temp folder is read while it runs. (Ray's
    state stays in a folder: pyarrow asks AWS's own STS for web identity, which a test
    server cannot stand in for.)"""
    import boto3

    with scratch("swi") as folder:
        with s3_server(folder) as s3:
            token = "eyJ" + secrets.token_hex(24)
            (folder / "token").write_text(token)
            keys = {k: v for k, v in s3.env.items() if not k.startswith("AWS_SECRET")
                    and k != "AWS_ACCESS_KEY_ID"}
            keys.update(AWS_ROLE_ARN="arn:aws:iam::123456789012:role/sweeps",
                        AWS_WEB_IDENTITY_TOKEN_FILE=str(folder / "token"),
                        AWS_CONFIG_FILE=str(folder / "none"),
                        AWS_SHARED_CREDENTIALS_FILE=str(folder / "none"))
            env_before = dict(os.environ)
            try:  # the bucket, made with the role's own keys (moto keeps one per account)
                os.environ.update(keys)
                for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"):
                    os.environ.pop(name, None)
                session = boto3.Session()
                assert session.get_credentials().method == "assume-role-with-web-identity"
                client = session.client("s3", endpoint_url=s3.endpoint)
                client.create_bucket(Bucket=BUCKET)
            finally:
                os.environ.clear()
                os.environ.update(env_before)
            ray_token = secrets.token_hex(32)  # Ray's token auth, as a Slurm job hands it out
            patterns = secret_patterns({"the web identity token": token,
                                        "the Ray token": ray_token})
            (folder / "rt").mkdir()
            watch = TempWatch(folder / "rt", patterns)
            printed = _sweep(folder, {**keys, "RAY_TMPDIR": str(folder / "rt"),
                                      "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": ray_token},
                             None, watch,
                             unset=("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"),
                             ray_storage=None)
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
            stored = {f"object {o['Key']}": client.get_object(Bucket=BUCKET, Key=o["Key"])[
                "Body"].read() for page in pages for o in page.get("Contents", [])}
        files = {f"file {p.relative_to(folder)}": p.read_bytes() for p in folder.rglob("*")
                 if p.is_file() and not p.is_symlink() and p.name != "token"}

    assert any(k.startswith("object mlflow/") for k in stored) and watch.files, sorted(stored)
    assert any(k.endswith("tuner.pkl") for k in files), sorted(files)
    leaks = sorted(watch.leaks) + leaks_in({**printed, **stored, **files}, patterns)
    assert leaks == [], f"secrets written: {leaks}"


def _sweep(folder: Path, keys: dict[str, str], address: str | None, watch: TempWatch,
           unset: tuple[str, ...] = (), ray_storage: str | None = f"s3://{BUCKET}/ray",
           ) -> dict[str, bytes]:
    """A two-trial sweep (on the cluster at ``address``, else a local Ray), ``keys`` in
    its environment and ``unset`` not; Ray's state in ``ray_storage`` (else a folder)."""
    work = folder / "work"
    work.mkdir()
    env = subprocess_env(folder / "home", **keys)
    for name in unset:
        env.pop(name, None)
    tracking = {"uri": f"sqlite:///{work / 'mlflow.db'}", "log_checkpoints": True,
                "artifact_location": f"s3://{BUCKET}/mlflow"}
    path = write_experiment(work, "envkeys", orders=["sfsf", "ssff"],
                            tracking_uri=tracking["uri"], tracking=tracking,
                            **({"ray": {"storage_path": ray_storage}} if ray_storage else {}))
    log = folder / "sweep.log"
    watch.start()
    proc = start([SUBLAYER, "sweep", str(path), *(["--address", address] if address else [])],
                 env=env, log=log, cwd=work)
    try:
        proc.wait(timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the sweep ran past 240 s:\n{tail(log)}")
    finally:
        stop(proc)
        watch.stop.set()
        watch.join()
    watch.scan()
    assert proc.returncode == 0, tail(log)
    return {"printed by the sweep": log.read_bytes()}
