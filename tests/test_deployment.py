"""The deployment files agree with the image, the CLI and each other.

docker/compose.yaml is parsed (yaml.safe_load) and checked against docker/Dockerfile
(image tag, Ray version, working folder, copied configs), the `sublayer`, `ray start` and
`mlflow server` command-line parsers, and `docker-compose config` (the Debian
docker-compose; it validates the file without a Docker engine). docker/README.md's
commands name the files and the CLI as they are. The KubeRay manifests:
tests/test_kuberay.py.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tomllib
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from deploy_helpers import (
    DOCKER,
    REPO,
    SECRET_NAME,
    config_in_repo,
    dockerfile,
    mlflow_server_params,
    ray_start,
    readme_commands,
    sublayer_sweep,
)

REQUIRED_VAR = re.compile(r"^\$\{(?P<var>[A-Z_][A-Z0-9_]*):\?[^}]+\}$")  # ${VAR:?message}
LOOPBACK_DEFAULT = "${BIND_ADDRESS:-127.0.0.1}:"


def test_the_image_holds_every_package_and_the_configs():
    image = dockerfile()
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    copied = {src for src, *_ in image["copies"]}
    assert set(dirs.values()) | {"configs", "pyproject.toml"} <= copied
    assert "SUBLAYER_DATA_DIR=/data" in image["env"] and "SUBLAYER_CACHE_DIR=/cache" in image["env"]
    assert image["tag"] == "sublayer-search:0.1.0-cu128"


# -- docker compose --------------------------------------------------------------------
def _compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_services_run_the_image_and_the_right_commands():
    image, doc = dockerfile(), _compose()
    svc = doc["services"]
    for name in ("head", "worker", "mlflow"):
        assert svc[name]["image"] == image["tag"], name
        assert svc[name]["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    head, worker = ray_start(svc["head"]["command"][2:]), ray_start(svc["worker"]["command"][2:])
    assert svc["head"]["command"][:2] == svc["worker"]["command"][:2] == ["ray", "start"]
    assert head["head"] and head["block"] and worker["block"] and not worker["head"]
    assert worker["address"] == f"head:{head['port']}"
    assert head["num_gpus"] == 0 and head["num_cpus"] == 0  # trials go to the GPU workers
    devices = svc["worker"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    for name in ("head", "worker"):
        assert svc[name]["working_dir"] == "/results"
        assert any(v.endswith(":/results") for v in svc[name]["volumes"])


def test_compose_mlflow_runs_on_postgres_with_a_persistent_artifact_volume():
    svc, volumes = _compose()["services"], _compose()["volumes"]
    cmd = svc["mlflow"]["command"]
    assert cmd[:2] == ["mlflow", "server"]
    params = mlflow_server_params(cmd[2:])
    uri = urlsplit(params["backend_store_uri"])
    pg = svc["postgres"]["environment"]
    assert (uri.scheme, uri.hostname, uri.port) == ("postgresql", "postgres", 5432)
    assert uri.password is None  # the password comes as PGPASSWORD, never in the URI
    assert (uri.username, uri.path) == (pg["POSTGRES_USER"], "/" + pg["POSTGRES_DB"])
    assert svc["mlflow"]["environment"]["PGPASSWORD"] == pg["POSTGRES_PASSWORD"]
    assert svc["mlflow"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert f"mlflow:{params['port']}" in params["allowed_hosts"]  # the name trials use
    assert svc["mlflow"]["ports"] == [f"{LOOPBACK_DEFAULT}{params['port']}:{params['port']}"]
    artifacts = f"mlartifacts:{params['artifacts_destination']}"
    assert artifacts in svc["mlflow"]["volumes"] and "mlartifacts" in volumes
    assert "pgdata:/var/lib/postgresql/data" in svc["postgres"]["volumes"] and "pgdata" in volumes


def _env_items(env: Any) -> list[tuple[str, Any]]:
    return list(env.items()) if isinstance(env, dict) else [tuple(e.split("=", 1)) for e in env]


def test_compose_takes_secrets_from_the_environment_and_binds_loopback():
    svc = _compose()["services"]
    secret_vars = set()
    for name, service in svc.items():
        for key, value in _env_items(service.get("environment", {})):
            if SECRET_NAME.search(key):
                match = REQUIRED_VAR.match(str(value))
                assert match, f"{name}.{key} must be ${{VAR:?...}} from the environment: {value}"
                secret_vars.add(match["var"])
        for port in service.get("ports", []):
            assert port.startswith(LOOPBACK_DEFAULT), f"{name}: {port}"
        assert "secrets" not in service  # no secret files
    assert secret_vars == {"POSTGRES_PASSWORD", "RAY_AUTH_TOKEN"}
    assert "ports" not in svc["postgres"]  # the database is reachable from the services only


def _docker_compose() -> list[str]:
    if exe := shutil.which("docker-compose"):
        return [exe]
    if (exe := shutil.which("docker")) and subprocess.run(
        [exe, "compose", "version"], capture_output=True
    ).returncode == 0:
        return [exe, "compose"]
    pytest.fail(
        "docker-compose is required to validate docker/compose.yaml and was not "
        "found; install it with `apt-get install -y docker-compose` (`make test` "
        "does this: .ci/test-deps.sh)"
    )


def _compose_config(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("POSTGRES_PASSWORD", "RAY_AUTH_TOKEN", "BIND_ADDRESS")
    }
    return subprocess.run(
        [*_docker_compose(), "-f", str(DOCKER / "compose.yaml"), "config"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**clean, **env},
    )


def test_docker_compose_config_accepts_the_file_and_demands_the_secrets():
    pw, token = secrets.token_hex(8), secrets.token_hex(16)
    out = _compose_config(POSTGRES_PASSWORD=pw, RAY_AUTH_TOKEN=token)
    assert out.returncode == 0, out.stderr
    svc = yaml.safe_load(out.stdout)["services"]
    assert svc["mlflow"]["environment"]["PGPASSWORD"] == pw
    assert svc["worker"]["environment"]["RAY_AUTH_TOKEN"] == token
    published = [p for s in svc.values() for p in s.get("ports", [])]
    assert published and all(str(p).startswith("127.0.0.1:") for p in published), published
    opened = _compose_config(POSTGRES_PASSWORD=pw, RAY_AUTH_TOKEN=token, BIND_ADDRESS="0.0.0.0")
    assert opened.returncode == 0 and "0.0.0.0:5000:5000" in opened.stdout  # the opt-out
    missing = _compose_config(RAY_AUTH_TOKEN=token)
    assert missing.returncode != 0 and "POSTGRES_PASSWORD" in missing.stderr
    assert "POSTGRES_PASSWORD" not in missing.stdout


# -- the README's commands -------------------------------------------------------------
def test_the_readme_commands_match_the_files_and_the_cli():
    image, commands = dockerfile(), readme_commands()
    sweeps = [c for c in commands if "sublayer" in c]
    assert len(sweeps) >= 2
    for command in sweeps:  # run in the head container of compose.yaml
        at = command.index("sublayer")
        assert command[:at] == ["docker", "compose", "-f", "docker/compose.yaml", "exec", "head"]
        parsed = sublayer_sweep(command[at + 1 :])
        config_in_repo(parsed.file, image["workdir"])
        assert parsed.tracking_uri == "http://mlflow:5000" and parsed.address == "auto"
    applied = [c[-1] for c in commands if c[:3] == ["kubectl", "apply", "-f"]]
    assert set(applied) == {f"docker/kuberay/{p.name}" for p in (DOCKER / "kuberay").glob("*.yaml")}
    order = [path.rsplit("/", 1)[-1] for path in applied]  # what each needs exists first
    assert order.index("storage.yaml") < order.index("mlflow.yaml") \
        < order.index("raycluster.yaml") < order.index("rayjob.yaml")
    first = next(i for i, c in enumerate(commands) if c[:2] == ["kubectl", "apply"])
    assert all(i < first for i, c in enumerate(commands) if c[:3] == ["kubectl", "create", "secret"])
    built = [c for c in commands if c[:2] == ["docker", "build"]]
    assert built and all(c[c.index("-t") + 1].rsplit("/", 1)[-1] == image["tag"] for c in built)
