"""The deployment files agree with the image, the CLI and each other.

docker/compose.yaml and docker/kuberay/*.yaml are parsed (yaml.safe_load) and checked
against docker/Dockerfile (image tag, Ray version, working folder, copied configs), the
`sublayer`, `ray start` and `mlflow server` command-line parsers, a JSON schema of the
KubeRay fields they rely on, and `docker-compose config` (the Debian docker-compose;
it validates the file without a Docker engine).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
import yaml
from kuberay_schema import RAYCLUSTER_SCHEMA, RAYJOB_SCHEMA, containers

from sublayer_search.search.cli.main import build_parser
from sublayer_search.search.plan.experiment import load_experiment

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|KEY", re.I)
REQUIRED_VAR = re.compile(r"^\$\{(?P<var>[A-Z_][A-Z0-9_]*):\?[^}]+\}$")  # ${VAR:?message}
LOOPBACK_DEFAULT = "${BIND_ADDRESS:-127.0.0.1}:"


# -- the image -------------------------------------------------------------------------
def _dockerfile() -> dict[str, Any]:
    text = (DOCKER / "Dockerfile").read_text()
    lines = re.sub(r"\\\n\s*", " ", text).splitlines()
    steps = [ln.split(None, 1) for ln in lines if ln.strip() and not ln.startswith("#")]
    tag = re.search(r"docker build -f docker/Dockerfile -t (\S+) \.", text)
    ray = re.search(r'"ray\[[a-z,]+\]==([0-9.]+)"', text)
    assert tag and ray, "the Dockerfile names its tag and pins ray"
    return {
        "tag": tag[1],
        "ray": ray[1],
        "workdir": [arg for op, arg in steps if op == "WORKDIR"][-1],
        "copies": [arg.split() for op, arg in steps if op == "COPY"],
        "env": " ".join(arg for op, arg in steps if op == "ENV"),
    }


def test_the_image_holds_every_package_and_the_configs():
    image = _dockerfile()
    dirs = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    copied = {src for src, *_ in image["copies"]}
    assert set(dirs.values()) | {"configs", "pyproject.toml"} <= copied
    assert "SUBLAYER_DATA_DIR=/data" in image["env"] and "SUBLAYER_CACHE_DIR=/cache" in image["env"]
    assert image["tag"] == "sublayer-search:gpu"


# -- command lines ---------------------------------------------------------------------
def _ray_start(args: list[str]) -> dict[str, Any]:
    from ray.scripts.scripts import start

    return start.make_context("ray start", list(args)).params


def _mlflow_server(args: list[str]) -> dict[str, Any]:
    from mlflow.cli import server

    return server.make_context("mlflow server", list(args)).params


def _sublayer_sweep(args: list[str]) -> Any:
    parsed = build_parser().parse_args(args)
    assert parsed.command == "sweep"
    return parsed


def _config_in_repo(path: str, workdir: str) -> Path:
    """The repository file that the image has at ``path`` (under its WORKDIR)."""
    rel = Path(path).relative_to(workdir)
    assert rel.parts[0] == "configs", path
    found = REPO / rel
    assert found.is_file(), f"{path}: no {rel} in the repository"
    load_experiment(str(found))  # a valid experiment file
    return found


# -- docker compose --------------------------------------------------------------------
def _compose() -> dict[str, Any]:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def test_compose_services_run_the_image_and_the_right_commands():
    image, doc = _dockerfile(), _compose()
    svc = doc["services"]
    for name in ("head", "worker", "mlflow"):
        assert svc[name]["image"] == image["tag"], name
        assert svc[name]["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}
    head, worker = _ray_start(svc["head"]["command"][2:]), _ray_start(svc["worker"]["command"][2:])
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
    params = _mlflow_server(cmd[2:])
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


# -- KubeRay ---------------------------------------------------------------------------
def _manifests() -> dict[str, dict[str, Any]]:
    """``kind/name`` -> document, over every file of docker/kuberay."""
    docs = {}
    for path in sorted((DOCKER / "kuberay").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            docs[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return docs


def test_kuberay_manifests_match_the_schema_the_image_and_ray():
    image, docs = _dockerfile(), _manifests()
    cluster, job = docs["RayCluster/sublayer-search"], docs["RayJob/press2020-sandwich"]
    jsonschema.validate(cluster, RAYCLUSTER_SCHEMA)
    jsonschema.validate(job, RAYJOB_SCHEMA)
    assert cluster["spec"]["rayVersion"] == image["ray"]
    for doc in docs.values():
        for container in containers(doc):
            assert container["image"].rsplit("/", 1)[-1] == image["tag"], container["name"]
    spec = cluster["spec"]
    params = [spec["headGroupSpec"]["rayStartParams"]]
    params += [g["rayStartParams"] for g in spec["workerGroupSpecs"]]
    for p in params:  # KubeRay passes each as --key=value to `ray start`
        _ray_start(["--block", *(f"--{k}={v}" for k, v in p.items())])
    assert spec["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    for group in spec["workerGroupSpecs"]:
        for container in group["template"]["spec"]["containers"]:
            limits, requests = container["resources"]["limits"], container["resources"]["requests"]
            assert (
                int(limits["nvidia.com/gpu"]) >= 1
                and requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"]
            )


def _head(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return docs["RayCluster/sublayer-search"]["spec"]["headGroupSpec"]["template"]["spec"]


def test_the_rayjob_runs_a_sublayer_sweep_of_a_shipped_config():
    image, docs = _dockerfile(), _manifests()
    job = docs["RayJob/press2020-sandwich"]["spec"]
    assert job["clusterSelector"] == {"ray.io/cluster": "sublayer-search"}
    steps = [shlex.split(step) for step in job["entrypoint"].split("&&")]
    assert steps[0][0] == "cd" and steps[1][:2] == ["sublayer", "sweep"]
    mounts = {m["mountPath"] for c in _head(docs)["containers"] for m in c["volumeMounts"]}
    assert steps[0][1] in mounts  # the driver's ray_results land on the shared volume
    args = _sublayer_sweep(steps[1][1:])
    _config_in_repo(args.file, image["workdir"])
    assert args.address == "auto"
    target = urlsplit(args.tracking_uri)
    service = docs[f"Service/{target.hostname}"]
    assert target.port in [p["port"] for p in service["spec"]["ports"]]
    mlflow = docs[f"Deployment/{target.hostname}"]["spec"]["template"]["spec"]["containers"][0]
    server = _mlflow_server(mlflow["args"])
    assert target.netloc in server["allowed_hosts"].split(",")
    assert (
        service["spec"]["selector"].items()
        <= docs[f"Deployment/{target.hostname}"]["spec"]["template"]["metadata"]["labels"].items()
    )
    uri = server["backend_store_uri"]
    assert uri.startswith("postgresql://") and ":" not in urlsplit(uri).netloc.split("@")[0]
    names = {e["name"] for e in mlflow["env"]}
    assert set(re.findall(r"\$\((\w+)\)", uri)) <= names  # Kubernetes expands $(VAR)


def test_kuberay_secrets_come_from_secret_refs_and_volumes_exist():
    docs = _manifests()
    refs = set()
    for key, doc in docs.items():
        for container in containers(doc):
            for env in container.get("env", []):
                if SECRET_NAME.search(env["name"]):
                    assert "value" not in env, f"{key}: {env['name']} is a literal"
                    ref = env["valueFrom"]["secretKeyRef"]
                    refs.add((env["name"], ref["name"], ref["key"]))
    assert refs == {
        ("RAY_AUTH_TOKEN", "sublayer-ray-auth", "auth_token"),
        ("PGPASSWORD", "sublayer-postgres", "password"),
    }
    claims = {
        name.split("/", 1)[1]: doc
        for name, doc in docs.items()
        if name.startswith("PersistentVolumeClaim/")
    }
    for key, doc in docs.items():
        text = yaml.safe_dump(doc)
        for claim in re.findall(r"claimName: (\S+)", text):
            assert claim in claims, f"{key} mounts {claim}, which storage.yaml does not define"
    assert claims["sublayer-shared"]["spec"]["accessModes"] == ["ReadWriteMany"]


# -- the README's commands -------------------------------------------------------------
def _readme_commands() -> list[list[str]]:
    text = (DOCKER / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = " ".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(ln, comments=True) for ln in lines if ln.strip()]


def test_the_readme_commands_match_the_files_and_the_cli():
    image, commands = _dockerfile(), _readme_commands()
    sweeps = [c for c in commands if "sublayer" in c]
    assert len(sweeps) >= 2
    for command in sweeps:  # run in the head container of compose.yaml
        at = command.index("sublayer")
        assert command[:at] == ["docker", "compose", "-f", "docker/compose.yaml", "exec", "head"]
        parsed = _sublayer_sweep(command[at + 1 :])
        _config_in_repo(parsed.file, image["workdir"])
        assert parsed.tracking_uri == "http://mlflow:5000" and parsed.address == "auto"
    applied = {c[-1] for c in commands if c[:3] == ["kubectl", "apply", "-f"]}
    assert applied == {f"docker/kuberay/{p.name}" for p in (DOCKER / "kuberay").glob("*.yaml")}
    built = [c for c in commands if c[:2] == ["docker", "build"]]
    assert built and all(c[c.index("-t") + 1].rsplit("/", 1)[-1] == image["tag"] for c in built)
