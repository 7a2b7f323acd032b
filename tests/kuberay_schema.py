"""The fields of the Kubernetes objects that docker/kuberay relies on, as JSON schemas.

Types follow KubeRay's CRDs (ray.io/v1 RayCluster and RayJob; ray-project/kuberay,
ray-operator/config/crd/bases) and the Kubernetes API reference (core/v1 ConfigMap,
Secret, Service, ServiceAccount, PersistentVolumeClaim; apps/v1 Deployment;
networking.k8s.io/v1 NetworkPolicy and Ingress). Used by tests/test_deployment.py:
:data:`SCHEMAS` holds one schema per (apiVersion, kind).
"""

from __future__ import annotations

from typing import Any

_STR = {"type": "string", "minLength": 1}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_KEY = {"type": "string", "pattern": r"^[-._a-zA-Z0-9]+$"}  # a ConfigMap/Secret data key
_KEYED_STR_MAP = {"type": "object", "propertyNames": _KEY, "additionalProperties": {"type": "string"}}
_LABELS = {"type": "object", "additionalProperties": {"type": "string"}}
_SELECTOR = {  # metav1.LabelSelector (matchLabels only here)
    "type": "object",
    "additionalProperties": False,
    "properties": {"matchLabels": _LABELS},
}
_SECRET_KEY_REF = {
    "type": "object",
    "required": ["name", "key"],
    "additionalProperties": False,
    "properties": {"name": _STR, "key": _KEY, "optional": {"type": "boolean"}},
}
_ENV = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],
        "oneOf": [{"required": ["value"]}, {"required": ["valueFrom"]}],
        "properties": {
            "name": _STR,
            "value": {"type": "string"},
            "valueFrom": {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "properties": {"secretKeyRef": _SECRET_KEY_REF},
            },
        },
    },
}
_ENV_FROM = {
    "type": "array",
    "items": {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {
            "secretRef": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {"name": _STR, "optional": {"type": "boolean"}},
            }
        },
    },
}
_CONTAINER = {
    "type": "object",
    "required": ["name", "image"],
    "properties": {"image": {"type": "string"}, "env": _ENV, "envFrom": _ENV_FROM},
}
_VOLUME = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": _STR,
        "configMap": {"type": "object", "required": ["name"]},
        "persistentVolumeClaim": {"type": "object", "required": ["claimName"]},
    },
}
_POD = {
    "type": "object",
    "required": ["spec"],
    "properties": {
        "metadata": {"type": "object", "properties": {"labels": _LABELS}},
        "spec": {
            "type": "object",
            "required": ["containers"],
            "properties": {
                "containers": {"type": "array", "minItems": 1, "items": _CONTAINER},
                "initContainers": {"type": "array", "items": _CONTAINER},
                "volumes": {"type": "array", "items": _VOLUME},
                "serviceAccountName": _STR,
                "automountServiceAccountToken": {"type": "boolean"},
            },
        },
    },
}
_META = {"type": "object", "required": ["name"], "properties": {"labels": _LABELS}}


def _object(api: str, kind: str, spec: dict[str, Any] | None = None,
            **fields: dict[str, Any]) -> dict[str, Any]:
    """A schema of one kind: its apiVersion, kind and metadata, ``spec`` when given."""
    required = ["apiVersion", "kind", "metadata", *(["spec"] if spec else [])]
    props: dict[str, Any] = {"apiVersion": {"const": api}, "kind": {"const": kind},
                             "metadata": _META, **fields}
    if spec:
        props["spec"] = spec
    return {"type": "object", "required": required, "properties": props}


RAYCLUSTER_SCHEMA = _object("ray.io/v1", "RayCluster", {
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
                "required": ["groupName", "replicas", "minReplicas", "maxReplicas",
                             "rayStartParams", "template"],
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
})
RAYJOB_SCHEMA = _object("ray.io/v1", "RayJob", {
    "type": "object",
    "required": ["entrypoint", "clusterSelector"],
    "not": {"required": ["rayClusterSpec"]},  # runs on the RayCluster above
    "properties": {
        "entrypoint": {"type": "string"},
        "clusterSelector": _STR_MAP,
        "submitterPodTemplate": _POD,
    },
})
_PEER = {  # a NetworkPolicyPeer: pods by label, namespaces by label, or both (AND)
    "type": "object",
    "minProperties": 1,
    "additionalProperties": False,
    "properties": {"podSelector": _SELECTOR, "namespaceSelector": _SELECTOR},
}
_PORT = {
    "type": "object",
    "required": ["port"],
    "properties": {"protocol": {"enum": ["TCP", "UDP", "SCTP"]},
                   "port": {"type": ["integer", "string"]}},
}
NETWORKPOLICY_SCHEMA = _object("networking.k8s.io/v1", "NetworkPolicy", {
    "type": "object",
    "required": ["podSelector", "policyTypes", "ingress"],
    "properties": {
        "podSelector": _SELECTOR,
        "policyTypes": {"type": "array", "items": {"enum": ["Ingress", "Egress"]}},
        "ingress": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["from"],  # an empty `from` would admit every source; no
                                       # `ports`: every port (of the sources named)
                "additionalProperties": False,
                "properties": {
                    "from": {"type": "array", "minItems": 1, "items": _PEER},
                    "ports": {"type": "array", "minItems": 1, "items": _PORT},
                },
            },
        },
    },
})
INGRESS_SCHEMA = _object("networking.k8s.io/v1", "Ingress", {
    "type": "object",
    "required": ["ingressClassName", "rules", "tls"],
    "properties": {
        "ingressClassName": _STR,
        "tls": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["hosts", "secretName"],
            "properties": {"hosts": {"type": "array", "items": _STR}, "secretName": _STR}}},
        "rules": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["host", "http"],
            "properties": {"host": _STR, "http": {
                "type": "object", "required": ["paths"],
                "properties": {"paths": {"type": "array", "minItems": 1, "items": {
                    "type": "object", "required": ["path", "pathType", "backend"],
                    "properties": {
                        "pathType": {"enum": ["Exact", "Prefix", "ImplementationSpecific"]},
                        "backend": {"type": "object", "required": ["service"], "properties": {
                            "service": {"type": "object", "required": ["name", "port"],
                                        "properties": {"name": _STR, "port": {
                                            "type": "object", "required": ["number"],
                                            "properties": {"number": {"type": "integer"}}}}}}},
                    }}}}}}}},
    },
})
SECRET_SCHEMA = _object("v1", "Secret", None, type={"const": "Opaque"},
                        stringData={**_KEYED_STR_MAP, "minProperties": 1})
CONFIGMAP_SCHEMA = _object("v1", "ConfigMap", None, data={**_KEYED_STR_MAP, "minProperties": 1})
SERVICEACCOUNT_SCHEMA = _object("v1", "ServiceAccount", None,
                                automountServiceAccountToken={"type": "boolean"})
DEPLOYMENT_SCHEMA = _object("apps/v1", "Deployment", {
    "type": "object",
    "required": ["selector", "template"],
    "properties": {"replicas": {"type": "integer", "minimum": 0}, "selector": _SELECTOR,
                   "template": _POD},
})
SERVICE_SCHEMA = _object("v1", "Service", {
    "type": "object",
    "required": ["selector", "ports"],
    "properties": {"type": {"enum": ["ClusterIP", "NodePort", "LoadBalancer"]},
                   "selector": _LABELS, "ports": {"type": "array", "minItems": 1, "items": _PORT}},
})
PVC_SCHEMA = _object("v1", "PersistentVolumeClaim", {
    "type": "object",
    "required": ["accessModes", "resources"],
    "properties": {"accessModes": {"type": "array", "minItems": 1, "items": {
        "enum": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"]}}},
})
SCHEMAS: dict[tuple[str, str], dict[str, Any]] = {
    (s["properties"]["apiVersion"]["const"], s["properties"]["kind"]["const"]): s
    for s in (RAYCLUSTER_SCHEMA, RAYJOB_SCHEMA, NETWORKPOLICY_SCHEMA, INGRESS_SCHEMA,
              SECRET_SCHEMA, CONFIGMAP_SCHEMA, SERVICEACCOUNT_SCHEMA, DEPLOYMENT_SCHEMA,
              SERVICE_SCHEMA, PVC_SCHEMA)
}
"""(apiVersion, kind) -> the schema every such document of docker/kuberay must match."""


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in ("initContainers", "containers"):
                found.extend(node[key] if isinstance(node.get(key), list) else [])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(doc)
    return found


def pod_specs(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The pod templates of a document by role: ``head``, ``worker:<group>``, ``submitter``
    (RayCluster, RayJob) or ``pod`` (Deployment)."""
    spec = doc.get("spec", {})
    if doc["kind"] == "RayCluster":
        pods = {"head": spec["headGroupSpec"]["template"]["spec"]}
        pods.update({f"worker:{g['groupName']}": g["template"]["spec"]
                     for g in spec["workerGroupSpecs"]})
        return pods
    if doc["kind"] == "RayJob":
        return {"submitter": spec["submitterPodTemplate"]["spec"]}
    if doc["kind"] == "Deployment":
        return {"pod": spec["template"]["spec"]}
    return {}
