"""The KubeRay pods as an operator reads them (docker/kuberay, docker/Dockerfile).

Every pod passes Kubernetes' "restricted" Pod Security level (a non-root user, no
privilege escalation, no capabilities, the runtime's seccomp profile, only volume types it
allows), and the image is built for that user (a fixed UID that owns the folders it
writes). Every container runs a pinned image (a version tag, or a digest) with a pull
policy. The NetworkPolicy of the Ray cluster admits only its own pods (every port), the
RayJob's submitter and the KubeRay operator (the head's job API). Each Ray pod's
/dev/shm is a memory volume larger than the object store it is told to keep there. The
Ray pods sign in to MLflow as a user that is no admin; MLflow caches checked logins.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from deploy_helpers import (
    REPO,
    admits,
    auth_ini,
    dockerfile,
    manifests,
    ray_start,
)
from kuberay_schema import containers, pod_specs
from test_kuberay import CLUSTER, JOB, MLFLOW

RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}
GIB = 2**30


def _pods() -> dict[str, dict[str, Any]]:
    docs = manifests()
    return {f"{key} {role}": pod for key, doc in docs.items()
            for role, pod in pod_specs(doc).items()}


def _quantity(text: str) -> int:
    """A Kubernetes memory quantity (``16Gi``, ``512Mi``, ``2147483648``) in bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", str(text))
    assert m, text
    return int(m[1]) * {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": GIB, "Ti": 2**40}[m[2]]


def test_every_pod_meets_the_restricted_pod_security_level():
    image_user = dockerfile()["user"]
    assert image_user == ["10001:10001"], image_user  # numeric: runAsNonRoot can verify it
    uid, gid = (int(x) for x in image_user[0].split(":"))
    pods = _pods()
    assert len(pods) == 4, list(pods)  # head, GPU workers, submitter, MLflow
    for name, pod in pods.items():
        sc = pod["securityContext"]
        assert sc["runAsNonRoot"] is True and sc["runAsUser"] == uid, name
        assert sc["runAsGroup"] == gid and sc["seccompProfile"]["type"] == "RuntimeDefault", name
        assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
        for volume in pod.get("volumes", []):
            assert set(volume) - {"name"} <= RESTRICTED_VOLUMES, (name, volume)
        for c in pod.get("initContainers", []) + pod["containers"]:
            csc = c["securityContext"]
            assert csc["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert csc["capabilities"]["drop"] == ["ALL"] and "add" not in csc["capabilities"]
            assert not csc.get("privileged") and csc.get("runAsUser", uid) != 0
            assert not c.get("ports") or all(p.get("hostPort") is None for p in c["ports"])


def test_the_image_is_built_for_that_user():
    image = dockerfile()
    uid, gid = image["user"][0].split(":")
    made = " ".join(image["runs"])
    assert f"groupadd --gid {gid} " in made and f"useradd --uid {uid} --gid {gid} " in made
    # the folders it writes (the volumes; KubeRay mounts /results and /cache, MLflow
    # /mlartifacts) are its own
    (volumes,) = image["volumes"]
    folders = re.findall(r'"(/[^"]+)"', volumes)
    assert {"/results", "/cache", "/mlartifacts"} <= set(folders)
    chown = re.search(rf"chown {uid}:{gid} ((?:/\S+ ?)+)", made)
    assert chown and set(folders) <= set(chown[1].split()), made
    assert "HOME=/home/" in image["env"]  # pip, torch and Ray caches land in its home


def test_every_container_runs_a_pinned_image_with_a_pull_policy():
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    tag = dockerfile()["tag"]
    name, _, ref = tag.partition(":")
    assert ref.startswith(version + "-") and ref not in ("gpu", "latest"), tag
    for key, doc in manifests().items():
        for c in containers(doc):
            image = c["image"]
            digest = re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", image)
            assert digest or image.rsplit("/", 1)[-1] == tag, (key, image)
            assert c["imagePullPolicy"] == ("IfNotPresent" if not digest else c["imagePullPolicy"])
            assert c["imagePullPolicy"] in ("IfNotPresent", "Always"), (key, c["name"])


def test_the_ray_cluster_admits_only_its_pods_the_submitter_and_the_operator():
    docs = manifests()
    policy = docs["NetworkPolicy/sublayer-ray"]
    cluster = docs[CLUSTER]["metadata"]["name"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {"ray.io/cluster": cluster}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    here = {"kubernetes.io/metadata.name": "sweeps"}
    head = {"ray.io/cluster": cluster, "ray.io/node-type": "head"}
    worker = {"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "gpu"}
    submitter = docs[JOB]["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    operator_ns = {"kubernetes.io/metadata.name": "ray-system"}
    operator = {"app.kubernetes.io/name": "kuberay-operator"}
    mlflow = docs[f"Deployment/{MLFLOW}"]["spec"]["template"]["metadata"]["labels"]
    for port in (6379, 8265, 10001, 10002, 52365, 44217):  # GCS, job API, workers, ...
        for peer in (head, worker):
            assert admits(policy, port, namespace=here, pod=peer, same_namespace=True), port
    for ns, pod, same in ((here, submitter, True), (operator_ns, operator, False)):
        assert admits(policy, 8265, namespace=ns, pod=pod, same_namespace=same), pod
        assert not admits(policy, 6379, namespace=ns, pod=pod, same_namespace=same), pod
    refused = [(here, {"app": "notebook"}), (here, mlflow), (here, {}),
               (here, {"ray.io/cluster": "someone-else", "ray.io/node-type": "head"}),
               ({"kubernetes.io/metadata.name": "other"}, head),
               ({"kubernetes.io/metadata.name": "other"}, submitter),
               ({"kubernetes.io/metadata.name": "other"}, operator)]
    for ns, pod in refused:
        for port in (6379, 8265, 10002):
            assert not admits(policy, port, namespace=ns, pod=pod,
                              same_namespace=ns is here), (ns, pod, port)


def test_each_ray_pod_has_a_dev_shm_larger_than_its_object_store():
    cluster = manifests()[CLUSTER]["spec"]
    groups = {"head": cluster["headGroupSpec"],
              **{f"worker:{g['groupName']}": g for g in cluster["workerGroupSpecs"]}}
    for role, group in groups.items():
        params = ray_start(["--block", *(f"--{k}={v}" for k, v in group["rayStartParams"].items())])
        store = params["object_store_memory"]
        assert store and store >= GIB, role  # set, not Ray's guess from the node's memory
        pod = group["template"]["spec"]
        (container,) = pod["containers"]
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/shm"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        shm = _quantity(volume["emptyDir"]["sizeLimit"])
        assert volume["emptyDir"]["medium"] == "Memory", role
        limit = _quantity(container["resources"]["limits"]["memory"])
        # room above the store (torch data loading, NCCL), and the rest of the pod's memory
        # (a memory volume counts against the limit) for the trial itself
        assert store + GIB <= shm <= limit // 2, (role, store, shm, limit)


def test_mlflow_caches_checked_logins():
    path, ini = auth_ini(manifests())
    ttl = int(ini["mlflow"]["auth_cache_ttl_seconds"])
    assert 0 < ttl <= 300, ttl  # on, and a changed password applies within minutes


@pytest.mark.parametrize("key", ["auth_cache_ttl_seconds"])
def test_mlflow_reads_the_cache_setting_as_written(tmp_path: Path, key: str) -> None:
    _, ini = auth_ini(manifests())
    with (tmp_path / "basic_auth.ini").open("w") as f:
        ini.write(f)
    read = subprocess.run(
        [sys.executable, "-c", "from mlflow.server.auth.config import read_auth_config as r; "
                               f"print(r().{key})"],
        env={**os.environ, "MLFLOW_AUTH_CONFIG_PATH": str(tmp_path / "basic_auth.ini")},
        capture_output=True, text=True, timeout=120)
    assert read.returncode == 0, read.stderr[-2000:]
    assert int(read.stdout.split()[-1]) == int(ini["mlflow"][key])
