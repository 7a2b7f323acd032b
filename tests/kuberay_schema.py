"""The fields of KubeRay's custom resources that docker/kuberay relies on, as JSON schemas.

Types follow KubeRay's CRDs (ray.io/v1 RayCluster and RayJob; ray-project/kuberay,
ray-operator/config/crd/bases). Used by tests/test_deployment.py.
"""

from __future__ import annotations

from typing import Any

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_ENV = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "oneOf": [{"required": ["value"]}, {"required": ["valueFrom"]}],
    },
}
_CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {"image": {"type": "string"}, "env": _ENV},
}
_POD = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {"containers": {"type": "array", "minItems": 1, "items": _CONTAINER}},
        }
    },
}
_META = {"type": "object", "required": ["name"]}
# The fields these manifests rely on, with the types of KubeRay's CRDs (ray.io/v1
# RayCluster and RayJob in ray-project/kuberay, ray-operator/config/crd/bases).
RAYCLUSTER_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayCluster"},
        "metadata": _META,
        "spec": {
            "type": "object",
            "required": ["rayVersion", "headGroupSpec", "workerGroupSpecs"],
            "properties": {
                "rayVersion": {"type": "string"},
                "headGroupSpec": {
                    "type": "object",
                    "required": ["rayStartParams", "template"],
                    "properties": {"rayStartParams": _STR_MAP, "template": _POD},
                },
                "workerGroupSpecs": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": [
                            "groupName",
                            "replicas",
                            "minReplicas",
                            "maxReplicas",
                            "rayStartParams",
                            "template",
                        ],
                        "properties": {
                            "groupName": {"type": "string"},
                            "replicas": {"type": "integer", "minimum": 0},
                            "minReplicas": {"type": "integer", "minimum": 0},
                            "maxReplicas": {"type": "integer", "minimum": 1},
                            "rayStartParams": _STR_MAP,
                            "template": _POD,
                        },
                    },
                },
            },
        },
    },
}
RAYJOB_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "ray.io/v1"},
        "kind": {"const": "RayJob"},
        "metadata": _META,
        "spec": {
            "type": "object",
            "required": ["entrypoint", "clusterSelector"],
            "not": {"required": ["rayClusterSpec"]},  # runs on the RayCluster above
            "properties": {
                "entrypoint": {"type": "string"},
                "clusterSelector": _STR_MAP,
                "submitterPodTemplate": _POD,
            },
        },
    },
}


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(
                node.get("containers", []) if isinstance(node.get("containers"), list) else []
            )
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found
