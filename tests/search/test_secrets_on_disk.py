"""Nothing secret on disk (issue 36, point 6).

A real sweep with a login on both sides: a real ``mlflow server --app-name basic-auth``
(the sweep signs in with ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``) and
a real S3-compatible server that checks keys (``moto_server`` in its authenticating
mode) as ``ray.storage_path`` and ``tracking.artifact_location``, its key given as a
profile of a shared credentials file. One trial finishes, one fails (errors written).
Then every file the sweep wrote is searched for the password and the secret key: every
object of the bucket (Ray's state: ``tuner.pkl``, ``experiment_state-*.json``, trial
results and errors, checkpoints; MLflow's artifacts), Ray's private temp folder (read
while the sweep runs: the sweep removes it at the end), MLflow's store, HOME, the
working folder, the servers' logs, and everything the sweep printed, a refused run's
included. Found as written, base64 (a basic-auth header) or URL-encoded, none may be.
"""

from __future__ import annotations

import secrets
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers import (
    MLFLOW,
    SUBLAYER,
    free_port,
    run_cli,
    scratch,
    start,
    stop,
    subprocess_env,
    tail,
    write_experiment,
)
from s3_helpers import S3Server, profile_env, s3_server, without_keys
from secret_scan import TempWatch, secret_patterns

pytestmark = pytest.mark.slow

BUCKET = "sweeps"
USER = "admin"  # MLflow's basic-auth admin: its password is set on the server's first start
AUTH_CONFIG = """[mlflow]
default_permission = READ
database_uri = sqlite:///basic_auth.db
admin_username = admin
authorization_function = mlflow.server.auth:authenticate_request_basic_auth
auth_cache_ttl_seconds = 600
"""
"""MLflow's own ``basic_auth.ini`` with a password check cached per (user, password): each
check is a PBKDF2 hash (~0.5 s of a CPU), and a sweep makes hundreds of requests. The
admin's password is given as ``MLFLOW_AUTH_ADMIN_PASSWORD``, so no file holds it."""
WRITTEN_HERE = ("credentials", "refused.yaml")
"""Files this test writes with a secret in them: the profile's, the refused experiment."""


def _wait_for_health(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None, f"mlflow server exited ({proc.returncode}):\n{tail(log)}"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        assert time.monotonic() < deadline, f"mlflow server not ready:\n{tail(log)}"
        time.sleep(0.5)


def test_a_sweep_with_logins_writes_no_secret_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    password = "Pw" + secrets.token_hex(12)
    marker = f"canary-{secrets.token_hex(8)}"  # must be found: the search reads what it should
    with scratch("sod") as folder:
        store = folder / "mlflow"
        store.mkdir()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server_log = store / "server.log"
        (store / "auth.ini").write_text(AUTH_CONFIG)
        mlflow = start([MLFLOW, "server", "--app-name", "basic-auth", "--backend-store-uri",
                        f"sqlite:///{store / 'db.sqlite'}", "--artifacts-destination",
                        str(store / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
                        "--workers", "1"],
                       env=subprocess_env(folder / "mlflow-home",
                                          MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false",
                                          MLFLOW_AUTH_CONFIG_PATH=str(store / "auth.ini"),
                                          MLFLOW_AUTH_ADMIN_PASSWORD=password,
                                          MLFLOW_FLASK_SERVER_SECRET_KEY=secrets.token_hex(16)),
                       log=server_log, cwd=store)  # its user database: ./basic_auth.db
        try:
            with s3_server(folder, buckets=(BUCKET,), authenticate=True) as s3:
                _wait_for_health(url, mlflow, server_log)
                patterns = secret_patterns({"the MLflow password": password,
                                      "the AWS secret key": s3.env["AWS_SECRET_ACCESS_KEY"]})
                watch = TempWatch(folder / "rt", patterns)
                printed = _sweep(folder, url, password, marker, s3, watch)
                stored = {f"object {k}": v for k, v in s3.objects(BUCKET).items()}
                for name, value in {"MLFLOW_TRACKING_USERNAME": USER,
                                    "MLFLOW_TRACKING_PASSWORD": password}.items():
                    monkeypatch.setenv(name, value)
                runs = _trial_runs(url)
        finally:
            stop(mlflow)
        files = {f"file {p.relative_to(folder)}": p.read_bytes() for p in folder.rglob("*")
                 if p.is_file() and not p.is_symlink() and p.name not in WRITTEN_HERE}

    # the search reached what it had to: Ray's state, its logs, MLflow's store, the errors
    run = stored["object ray/secrets.latest"].decode().strip()
    pickled = stored[f"object ray/{run}/tuner.pkl"]
    assert marker.encode() in pickled and url.encode() in pickled  # the plan and the URI
    assert any(k.startswith(f"object ray/{run}/experiment_state-") for k in stored), sorted(stored)
    assert any(k.endswith("/error.pkl") for k in stored), sorted(stored)
    assert any("/checkpoint_" in k for k in stored) and any(
        k.startswith("object mlflow/") and marker.encode() in v for k, v in stored.items())
    assert marker.encode() in files["file mlflow/db.sqlite"]
    assert "file mlflow/basic_auth.db" in files, sorted(files)
    assert any("/logs/" in f for f in watch.files) and len(watch.files) >= 10, watch.files
    assert sorted((r.info.run_name, r.info.status) for r in runs) == [
        ("sfsf@seed0", "FINISHED"), ("ssff@seed0", "FAILED")]
    assert "failed on purpose" in next(r for r in runs if r.info.status == "FAILED"
                                       ).data.tags["sublayer.error"]
    leaks = sorted(watch.leaks) + [f"{name} in {where}" for name, pattern in patterns.items()
                                   for where, blob in {**printed, **stored, **files}.items()
                                   if pattern in blob]
    assert leaks == [], f"secrets written: {leaks}"


def _sweep(folder: Path, url: str, password: str, marker: str, s3: S3Server,
           watch: TempWatch) -> dict[str, bytes]:
    """Run the sweep (``watch`` reading Ray's temp folder meanwhile), then one whose
    tracking URI holds the password (refused); what each printed."""
    work = folder / "work"  # where the sweep runs: ./mlruns and the like would land here
    work.mkdir()
    watch.root.mkdir()  # short: Ray's socket paths; the sweep's private folder goes here
    env = without_keys(subprocess_env(
        folder / "home", **profile_env(s3, folder / "aws" / "credentials", "sweeps"),
        MLFLOW_TRACKING_USERNAME=USER, MLFLOW_TRACKING_PASSWORD=password,
        RAY_TMPDIR=str(watch.root), SUBLAYER_FAIL_TRIALS="ssff@seed0"))
    tracking = {"uri": url, "log_checkpoints": True, "artifact_location": f"s3://{BUCKET}/mlflow"}
    path = write_experiment(work, "secrets", orders=["sfsf", "ssff"], tracking_uri=url,
                            description=marker, tracking=tracking, failure={"tolerate": True},
                            ray={"storage_path": f"s3://{BUCKET}/ray"})
    log = folder / "sweep.log"
    watch.start()
    proc = start([SUBLAYER, "sweep", str(path)], env=env, log=log, cwd=work)
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

    refused_uri = url.replace("http://", f"http://{USER}:{password}@")
    refused = write_experiment(work, "refused", orders=["sfsf"], tracking_uri=refused_uri,
                               ray={"storage_path": f"s3://{BUCKET}/ray"})
    done = run_cli(["sweep", str(refused)], env=env, log=folder / "refused.log", timeout=120)
    assert done.returncode == 2 and "MLFLOW_TRACKING_PASSWORD" in done.stdout, done.stdout
    return {"printed by the sweep": log.read_bytes(),
            "printed by the refused sweep": (folder / "refused.log").read_bytes()}


def _trial_runs(url: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(url)
    exp = client.get_experiment_by_name("secrets")
    assert exp is not None
    return client.search_runs([exp.experiment_id], filter_string="tags.`sublayer.role` = 'trial'")
