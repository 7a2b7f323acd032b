"""The MLflow server of docker/kuberay/mlflow.yaml, for real: its arguments, its basic-auth
settings and its environment, with SQLite in place of PostgreSQL. Its init container makes
the Ray pods' user (no admin) from that user's Secret; then the server answers 401 without
a login, the Ray pods' login may track runs but not make users, and the admin's may."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from base64 import b64encode
from pathlib import Path
from typing import Any

import pytest
from deploy_helpers import (
    auth_ini,
    created_secrets,
    env_of,
    manifests,
    mlflow_container,
    mlflow_server_params,
    secret_ref,
)
from kuberay_schema import pod_specs
from test_kuberay import CLUSTER, MLFLOW, MLFLOW_LOGIN


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _status(url: str, login: tuple[str, str] | None = None) -> int:
    request = urllib.request.Request(url)
    if login:
        request.add_header("Authorization", "Basic " + b64encode(":".join(login).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _replace(args: list[str], **values: str) -> list[str]:
    out = list(args)
    for flag, value in values.items():
        out[out.index("--" + flag.replace("_", "-")) + 1] = value
    return out


@pytest.mark.slow
def test_the_mlflow_server_of_the_manifest_refuses_requests_without_the_login(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    docs = manifests()
    mlflow = mlflow_container(docs)
    port = _free_port()
    made = created_secrets()  # the users as the README makes them
    secret = {"username": made["sublayer-mlflow-auth"]["username"],
              "password": secrets.token_urlsafe(18), "flask_secret_key": secrets.token_hex(16)}
    ray_user = {"username": made["sublayer-mlflow-ray"]["username"],
                "password": secrets.token_urlsafe(18)}
    # the ConfigMap's settings, with SQLite in place of the PostgreSQL server
    ini_path, ini = auth_ini(docs)
    ini["mlflow"]["database_uri"] = f"sqlite:///{tmp_path / 'users.db'}"
    with (tmp_path / "basic_auth.ini").open("w") as f:
        ini.write(f)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "AWS_"))}
    env["HOME"] = str(tmp_path)
    for name, var in env_of(mlflow).items():
        if "value" in var:
            env[name] = var["value"]
        elif var["valueFrom"]["secretKeyRef"]["name"] == "sublayer-mlflow-auth":
            env[name] = secret[var["valueFrom"]["secretKeyRef"]["key"]]
    assert env["MLFLOW_AUTH_CONFIG_PATH"] == ini_path
    env["MLFLOW_AUTH_CONFIG_PATH"] = str(tmp_path / "basic_auth.ini")
    _make_ray_user(docs, env, ray_user, tmp_path)  # the init container, before the server
    server = mlflow_server_params(mlflow["args"])
    args = _replace(mlflow["args"], backend_store_uri=f"sqlite:///{tmp_path / 'runs.db'}",
                    artifacts_destination=str(tmp_path / "artifacts"), host="127.0.0.1",
                    port=str(port), workers="1",
                    allowed_hosts=f"{server['allowed_hosts']},127.0.0.1:{port}")
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "server.log").open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", *args], env=env,
                                cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while _status_or_none(f"{url}/health") != 200:  # the readiness probe: no login
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        api = f"{url}/api/2.0/mlflow/experiments/search?max_results=1"
        assert _status(api) == 401  # no login: refused
        assert _status(api, (secret["username"], "wrong")) == 401
        assert _status(api, (secret["username"], secret["password"])) == 200
        # the Ray head's environment (raycluster.yaml): MLflow's client signs in with it
        from mlflow import MlflowClient
        from mlflow.exceptions import MlflowException

        monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        with pytest.raises(MlflowException, match="401"):
            MlflowClient(url).create_experiment("anonymous")
        (head,) = pod_specs(docs[CLUSTER])["head"]["containers"]
        for name in MLFLOW_LOGIN:  # the Ray pods' user, which the init container made
            assert secret_ref(head, name)[0] == "sublayer-mlflow-ray"
            monkeypatch.setenv(name, ray_user[secret_ref(head, name)[1]])
        run = MlflowClient(url).create_run(MlflowClient(url).create_experiment("k8s"))
        assert run.info.lifecycle_stage == "active"
        # no admin: it may not make users (the admin may)
        made_user = f"{url}/api/2.0/mlflow/users/create"
        body = {"username": "someone", "password": secrets.token_urlsafe(18)}
        assert _post(made_user, body, (ray_user["username"], ray_user["password"])) == 403
        assert _post(made_user, body, (secret["username"], secret["password"])) == 200
        log = (tmp_path / "server.log").read_text()
        assert secret["password"] not in log and ray_user["password"] not in log
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _make_ray_user(docs: dict[str, dict[str, Any]], server_env: dict[str, str],
                   ray_user: dict[str, str], folder: Path) -> None:
    """Run the MLflow pod's init container (its command, its environment, the script of the
    ConfigMap it mounts) against the users' database of ``server_env``'s settings."""
    pod = docs[f"Deployment/{MLFLOW}"]["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (mount,) = init["volumeMounts"]
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    files = docs[f"ConfigMap/{volume['configMap']['name']}"]["data"]
    command = list(init["command"])
    script = command[1].removeprefix(mount["mountPath"] + "/")
    (folder / script).write_text(files[script])
    command[0:2] = [sys.executable, str(folder / script)]
    env = {k: v for k, v in server_env.items() if not k.startswith(("MLFLOW_AUTH_ADMIN", "PG"))}
    for name, var in env_of(init).items():
        if "valueFrom" in var and var["valueFrom"]["secretKeyRef"]["name"] == "sublayer-mlflow-ray":
            env[name] = ray_user[var["valueFrom"]["secretKeyRef"]["key"]]
    assert not set(env_of(init)) & {"MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD"}
    for _ in range(2):  # idempotent: a second start of the pod sets the same user again
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
    assert ray_user["password"] not in done.stdout + done.stderr


def _post(url: str, body: dict[str, str], login: tuple[str, str]) -> int:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    request.add_header("Authorization", "Basic " + b64encode(":".join(login).encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _status_or_none(url: str) -> int | None:
    try:
        return _status(url)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return None
