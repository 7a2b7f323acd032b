"""Readers of the deployment files (docker/) shared by tests/test_deployment.py and
tests/test_kuberay.py: the Dockerfile's facts, the KubeRay documents, docker/README.md's
commands, and the command-line parsers (``ray start``, ``mlflow server``, ``sublayer``)
that the files' command lines must satisfy."""

from __future__ import annotations

import configparser
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from sublayer_search.search.cli.main import build_parser
from sublayer_search.search.plan.experiment import load_experiment

__all__ = ["REPO", "DOCKER", "SECRET_NAME", "dockerfile", "ray_start", "mlflow_server_params",
           "sublayer_sweep", "config_in_repo", "manifests", "readme_commands",
           "created_secrets", "matches", "admits", "mlflow_container", "env_of",
           "secret_ref", "auth_ini"]

REPO = Path(__file__).resolve().parents[1]
DOCKER = REPO / "docker"
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|KEY", re.I)


def dockerfile() -> dict[str, Any]:
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
        "user": [arg for op, arg in steps if op == "USER"][-1:],
        "runs": [arg for op, arg in steps if op == "RUN"],
        "volumes": [arg for op, arg in steps if op == "VOLUME"],
    }


def ray_start(args: list[str]) -> dict[str, Any]:
    from ray.scripts.scripts import start

    return start.make_context("ray start", list(args)).params


def mlflow_server_params(args: list[str]) -> dict[str, Any]:
    from mlflow.cli import server

    return server.make_context("mlflow server", list(args)).params


def sublayer_sweep(args: list[str]) -> Any:
    parsed = build_parser().parse_args(args)
    assert parsed.command == "sweep"
    return parsed


def config_in_repo(path: str, workdir: str) -> Path:
    """The repository file that the image has at ``path`` (under its WORKDIR)."""
    rel = Path(path).relative_to(workdir)
    assert rel.parts[0] == "configs", path
    found = REPO / rel
    assert found.is_file(), f"{path}: no {rel} in the repository"
    load_experiment(str(found))  # a valid experiment file
    return found


def manifests() -> dict[str, dict[str, Any]]:
    """``kind/name`` -> document, over every file of docker/kuberay."""
    docs = {}
    for path in sorted((DOCKER / "kuberay").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            key = f"{doc['kind']}/{doc['metadata']['name']}"
            assert key not in docs, f"{path.name}: {key} is defined twice"
            docs[key] = doc
    return docs


def readme_commands() -> list[list[str]]:
    """The command lines of docker/README.md's ```bash blocks, split as the shell would
    (continuation lines joined, comments dropped)."""
    text = (DOCKER / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = " ".join(blocks).replace("\\\n", " ").splitlines()
    return [shlex.split(ln, comments=True) for ln in lines if ln.strip()]


def created_secrets() -> dict[str, dict[str, str]]:
    """The Secrets docker/README.md makes (``kubectl create secret generic NAME
    --from-literal=KEY=VALUE …``): name -> {key: the value as written}."""
    made: dict[str, dict[str, str]] = {}
    for cmd in readme_commands():
        if cmd[:4] != ["kubectl", "create", "secret", "generic"]:
            continue
        literals = [a.removeprefix("--from-literal=") for a in cmd[5:]
                    if a.startswith("--from-literal=")]
        assert cmd[4] not in made, f"the Secret {cmd[4]} is made twice"
        made[cmd[4]] = dict(lit.split("=", 1) for lit in literals)
    return made


def matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A label selector (``matchLabels``) against a pod's or namespace's labels."""
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def admits(policy: dict[str, Any], port: int, *, namespace: dict[str, str],
           pod: dict[str, str], same_namespace: bool) -> bool:
    """Kubernetes' rule: a connection to ``port`` from a pod (its labels, its namespace's
    labels) is admitted when a rule's ``from`` has a peer that matches it and its ``ports``
    the port (a rule without ``ports``: every port). A peer with only a podSelector means
    pods of the policy's namespace; with only a namespaceSelector every pod of those
    namespaces; with both, both must match."""
    for rule in policy["spec"]["ingress"]:
        if "ports" in rule and not any(p["port"] == port for p in rule["ports"]):
            continue
        for peer in rule["from"]:
            ns_ok = (matches(peer["namespaceSelector"], namespace)
                     if "namespaceSelector" in peer else same_namespace)
            if ns_ok and matches(peer.get("podSelector", {}), pod):
                return True
    return False


def mlflow_container(docs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The MLflow server's container of docker/kuberay/mlflow.yaml."""
    return docs["Deployment/sublayer-mlflow"]["spec"]["template"]["spec"]["containers"][0]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A container's ``env`` entries by name."""
    return {e["name"]: e for e in container.get("env", [])}


def secret_ref(container: dict[str, Any], name: str) -> tuple[str, str]:
    """(Secret, key) of the variable ``name`` of a container."""
    ref = env_of(container)[name]["valueFrom"]["secretKeyRef"]
    return ref["name"], ref["key"]


def auth_ini(docs: dict[str, dict[str, Any]]) -> tuple[str, configparser.ConfigParser]:
    """The path MLflow reads its basic-auth settings from, and those settings (the
    ConfigMap key mounted there)."""
    pod = docs["Deployment/sublayer-mlflow"]["spec"]["template"]["spec"]
    mlflow = mlflow_container(docs)
    path = env_of(mlflow)["MLFLOW_AUTH_CONFIG_PATH"]["value"]
    mount = next(m for m in mlflow["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    data = docs[f"ConfigMap/{volume['configMap']['name']}"]["data"]
    ini = configparser.ConfigParser()
    ini.read_string(data[path.removeprefix(mount["mountPath"] + "/")])
    return path, ini
