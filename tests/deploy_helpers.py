"""Readers of the deployment files (docker/) shared by tests/test_deployment.py and
tests/test_kuberay.py: the Dockerfile's facts, the KubeRay documents, docker/README.md's
commands, and the command-line parsers (``ray start``, ``mlflow server``, ``sublayer``)
that the files' command lines must satisfy."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from sublayer_search.search.cli.main import build_parser
from sublayer_search.search.plan.experiment import load_experiment

__all__ = ["REPO", "DOCKER", "SECRET_NAME", "dockerfile", "ray_start", "mlflow_server_params",
           "sublayer_sweep", "config_in_repo", "manifests", "readme_commands",
           "created_secrets"]

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
