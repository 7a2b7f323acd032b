"""The KubeRay manifests (docker/kuberay) agree with the image, the CLI, each other and the
Secrets docker/README.md makes; MLflow demands a login and only the Ray pods and the
ingress controller may reach it.

Every document is checked against a JSON schema of its kind (tests/kuberay_schema.py), its
command lines against the real parsers. The NetworkPolicy is evaluated with Kubernetes'
rules against the pods KubeRay makes and against others. The MLflow server of
mlflow.yaml runs for real in test_kuberay_mlflow.py; the pods' security, image, network
policy and /dev/shm are checked in test_kuberay_pods.py.
"""

from __future__ import annotations

import re
import shlex
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import pytest
from deploy_helpers import (
    SECRET_NAME,
    admits,
    auth_ini,
    config_in_repo,
    created_secrets,
    dockerfile,
    env_of,
    manifests,
    matches,
    mlflow_container,
    mlflow_server_params,
    ray_start,
    secret_ref,
    sublayer_sweep,
)
from kuberay_schema import SCHEMAS, SECRET_SCHEMA, containers, pod_specs

from sublayer_search.search.plan.storage import ENDPOINT_ENV

CLUSTER, JOB, MLFLOW = "RayCluster/sublayer-search", "RayJob/press2020-sandwich", "sublayer-mlflow"
MLFLOW_LOGIN = {"MLFLOW_TRACKING_USERNAME": ("sublayer-mlflow-ray", "username"),  # no admin
                "MLFLOW_TRACKING_PASSWORD": ("sublayer-mlflow-ray", "password")}
ADMIN = {"MLFLOW_AUTH_ADMIN_USERNAME": ("sublayer-mlflow-auth", "username"),
         "MLFLOW_AUTH_ADMIN_PASSWORD": ("sublayer-mlflow-auth", "password")}
S3_SECRET = "sublayer-s3"
AWS_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")  # the AWS chain's own names


def _env_from(container: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["secretRef"] for e in container.get("envFrom", [])]


def test_every_document_matches_the_schema_of_its_kind():
    docs = manifests()
    kinds = {(d["apiVersion"], d["kind"]) for d in docs.values()}
    assert {("networking.k8s.io/v1", "NetworkPolicy"), ("ray.io/v1", "RayCluster"),
            ("ray.io/v1", "RayJob")} <= kinds
    for key, doc in docs.items():
        schema = SCHEMAS.get((doc["apiVersion"], doc["kind"]))
        assert schema is not None, f"{key}: no schema for {doc['apiVersion']} {doc['kind']}"
        jsonschema.validate(doc, schema)
    with pytest.raises(jsonschema.ValidationError):  # the schemas are not vacuous
        policy = docs[f"NetworkPolicy/{MLFLOW}"]
        jsonschema.validate({**policy, "spec": {**policy["spec"], "ingress": [{"ports": [
            {"port": 5000}]}]}}, SCHEMAS[("networking.k8s.io/v1", "NetworkPolicy")])


def test_kuberay_manifests_match_the_image_and_ray():
    image, docs = dockerfile(), manifests()
    cluster = docs[CLUSTER]
    assert cluster["spec"]["rayVersion"] == image["ray"]
    for doc in docs.values():
        for container in containers(doc):
            assert container["image"].rsplit("/", 1)[-1] == image["tag"], container["name"]
    spec = cluster["spec"]
    params = [spec["headGroupSpec"]["rayStartParams"]]
    params += [g["rayStartParams"] for g in spec["workerGroupSpecs"]]
    for p in params:  # KubeRay passes each as --key=value to `ray start`
        ray_start(["--block", *(f"--{k}={v}" for k, v in p.items())])
    assert spec["headGroupSpec"]["rayStartParams"]["num-gpus"] == "0"
    for group in spec["workerGroupSpecs"]:
        for container in group["template"]["spec"]["containers"]:
            limits, requests = container["resources"]["limits"], container["resources"]["requests"]
            assert (
                int(limits["nvidia.com/gpu"]) >= 1
                and requests["nvidia.com/gpu"] == limits["nvidia.com/gpu"]
            )


def test_the_rayjob_runs_a_sublayer_sweep_of_a_shipped_config():
    image, docs = dockerfile(), manifests()
    job = docs[JOB]["spec"]
    assert job["clusterSelector"] == {"ray.io/cluster": docs[CLUSTER]["metadata"]["name"]}
    steps = [shlex.split(step) for step in job["entrypoint"].split("&&")]
    assert steps[0][0] == "cd" and steps[1][:2] == ["sublayer", "sweep"]
    head = pod_specs(docs[CLUSTER])["head"]
    mounts = {m["mountPath"] for c in head["containers"] for m in c["volumeMounts"]}
    assert steps[0][1] in mounts  # the driver's ray_results land on the shared volume
    args = sublayer_sweep(steps[1][1:])
    config_in_repo(args.file, image["workdir"])
    assert args.address == "auto"
    target = urlsplit(args.tracking_uri)
    assert target.username is None and target.password is None  # the login: env, not URI
    service = docs[f"Service/{target.hostname}"]
    assert target.port in [p["port"] for p in service["spec"]["ports"]]
    server = mlflow_server_params(mlflow_container(docs)["args"])
    assert target.netloc in server["allowed_hosts"].split(",")
    labels = docs[f"Deployment/{target.hostname}"]["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    uri = server["backend_store_uri"]
    assert uri.startswith("postgresql://") and ":" not in urlsplit(uri).netloc.split("@")[0]
    assert set(re.findall(r"\$\((\w+)\)", uri)) <= set(env_of(mlflow_container(docs)))  # $(VAR) expanded


def test_mlflow_demands_a_login_set_up_from_the_secret():
    docs = manifests()
    mlflow = mlflow_container(docs)
    server = mlflow_server_params(mlflow["args"])
    assert server["app_name"] == "basic-auth"  # every request but /health needs a user
    assert mlflow["readinessProbe"]["httpGet"]["path"] == "/health"
    _, ini = auth_ini(docs)
    section = ini["mlflow"]
    assert section["authorization_function"].endswith(":authenticate_request_basic_auth")
    assert "admin_password" not in section  # the admin's password comes from the Secret
    env = env_of(mlflow)
    users = urlsplit(section["database_uri"])  # users live in the tracking database
    assert users.password is None
    assert (users.scheme, users.hostname, users.username, users.path) == (
        "postgresql", env["PGHOST"]["value"], env["PGUSER"]["value"],
        "/" + env["PGDATABASE"]["value"])
    admin = {n: secret_ref(mlflow, n) for n in (
        "MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_AUTH_ADMIN_PASSWORD",
        "MLFLOW_FLASK_SERVER_SECRET_KEY")}
    assert {n: admin[n] for n in ADMIN} == ADMIN
    assert not set(ADMIN.values()) & set(MLFLOW_LOGIN.values())  # the Ray pods' is another


def test_the_network_policy_admits_only_the_ray_pods_and_the_ingress_controller():
    docs = manifests()
    policy = docs[f"NetworkPolicy/{MLFLOW}"]
    pod_labels = docs[f"Deployment/{MLFLOW}"]["spec"]["template"]["metadata"]["labels"]
    assert matches(policy["spec"]["podSelector"], pod_labels)  # it guards the MLflow pod
    assert policy["spec"]["podSelector"]["matchLabels"]  # and not every pod of the namespace
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    port = int(mlflow_container(docs)["ports"][0]["containerPort"])
    cluster = docs[CLUSTER]["metadata"]["name"]
    here = {"kubernetes.io/metadata.name": "sweeps"}
    # the labels KubeRay puts on the pods of a RayCluster
    head = {"ray.io/cluster": cluster, "ray.io/node-type": "head", "ray.io/is-ray-node": "yes"}
    worker = {"ray.io/cluster": cluster, "ray.io/node-type": "worker", "ray.io/group": "gpu"}
    ingress_ns = {"kubernetes.io/metadata.name": "ingress-nginx"}
    controller = {"app.kubernetes.io/name": "ingress-nginx"}
    admitted = [(here, head, True), (here, worker, True), (ingress_ns, controller, False)]
    refused = [
        (here, {"app": "notebook"}, True),  # any other pod of the namespace
        (here, {"ray.io/cluster": "someone-else", "ray.io/node-type": "head"}, True),
        (here, {}, True),
        ({"kubernetes.io/metadata.name": "other"}, head, False),  # Ray's labels elsewhere
        ({"kubernetes.io/metadata.name": "monitoring"}, controller, False),
    ]
    for ns, pod, same in admitted:
        assert admits(policy, port, namespace=ns, pod=pod, same_namespace=same), (ns, pod)
        assert not admits(policy, port + 1, namespace=ns, pod=pod, same_namespace=same)
    for ns, pod, same in refused:
        assert not admits(policy, port, namespace=ns, pod=pod, same_namespace=same), (ns, pod)
    # the UI's way in: the ingress names the Service, and MLflow answers to its host
    ingress = docs[f"Ingress/{MLFLOW}"]["spec"]
    server = mlflow_server_params(mlflow_container(docs)["args"])
    service = docs[f"Service/{MLFLOW}"]["spec"]
    for rule in ingress["rules"]:
        assert rule["host"] in server["allowed_hosts"].split(",")
        assert any(rule["host"] in tls["hosts"] for tls in ingress["tls"])  # the password
        for path in rule["http"]["paths"]:  # crosses the network in TLS only
            backend = path["backend"]["service"]
            assert backend["name"] == MLFLOW
            assert backend["port"]["number"] in [p["port"] for p in service["ports"]]


def test_secrets_come_from_secret_refs_that_the_readme_makes():
    docs, made = manifests(), created_secrets()
    assert not [k for k in docs if k.startswith("Secret/")]  # no secret in a file
    refs, optional = set(), set()
    for key, doc in docs.items():
        for container in containers(doc):
            for env in container.get("env", []):
                if SECRET_NAME.search(env["name"]) or env["name"].endswith("USERNAME"):
                    assert "value" not in env, f"{key}: {env['name']} is a literal"
                    ref = env["valueFrom"]["secretKeyRef"]
                    refs.add((env["name"], ref["name"], ref["key"]))
            optional.update(r["name"] for r in _env_from(container) if r.get("optional"))
            assert all(r.get("optional") for r in _env_from(container))
    assert refs == {
        ("RAY_AUTH_TOKEN", "sublayer-ray-auth", "auth_token"),
        ("PGPASSWORD", "sublayer-postgres", "password"),
        ("MLFLOW_AUTH_ADMIN_USERNAME", "sublayer-mlflow-auth", "username"),
        ("MLFLOW_AUTH_ADMIN_PASSWORD", "sublayer-mlflow-auth", "password"),
        ("MLFLOW_FLASK_SERVER_SECRET_KEY", "sublayer-mlflow-auth", "flask_secret_key"),
        ("RAY_MLFLOW_USERNAME", "sublayer-mlflow-ray", "username"),  # the init container
        ("RAY_MLFLOW_PASSWORD", "sublayer-mlflow-ray", "password"),  # makes that user
        *((name, *ref) for name, ref in MLFLOW_LOGIN.items()),
    }
    for _, name, key in refs:  # every Secret key a pod needs is made by the README
        assert key in made.get(name, {}), f"docker/README.md makes no {name} with key {key}"
    assert optional == {S3_SECRET}
    # the S3 Secret holds the variables the sweep reads (search/plan/storage.py)
    assert set(made[S3_SECRET]) == {ENDPOINT_ENV, *AWS_KEYS}
    for name, data in made.items():  # what `kubectl create secret generic` makes of them
        jsonschema.validate({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                             "metadata": {"name": name}, "stringData": data}, SECRET_SCHEMA)


def test_ray_pods_get_the_mlflow_login_and_s3_settings_and_the_submitter_neither():
    docs = manifests()
    pods = {**pod_specs(docs[CLUSTER]), **pod_specs(docs[JOB])}
    assert {"head", "submitter"} < set(pods) and any(p.startswith("worker:") for p in pods)
    accounts = {k.split("/", 1)[1]: d for k, d in docs.items() if k.startswith("ServiceAccount/")}
    for role, pod in pods.items():
        (container,) = pod["containers"]
        s3 = [r["name"] for r in _env_from(container)]
        login = {n: secret_ref(container, n) for n in MLFLOW_LOGIN if n in env_of(container)}
        assert secret_ref(container, "RAY_AUTH_TOKEN") == ("sublayer-ray-auth", "auth_token")
        if role == "submitter":  # it only hands the entrypoint to the head's job API
            assert not s3 and not login, role
            continue
        assert s3 == [S3_SECRET], role
        assert login == MLFLOW_LOGIN, role
        # IRSA / web identity: the pods run as a ServiceAccount of these manifests
        account = accounts[pod["serviceAccountName"]]
        assert account["automountServiceAccountToken"] is False
    assert _env_from(mlflow_container(docs)) == [{"name": S3_SECRET, "optional": True}]


def test_every_volume_and_config_a_pod_mounts_is_defined():
    docs = manifests()
    defined = {tuple(k.split("/", 1)) for k in docs}
    for key, doc in docs.items():
        for pod in pod_specs(doc).values():
            for volume in pod.get("volumes", []):
                if "persistentVolumeClaim" in volume:
                    claim = volume["persistentVolumeClaim"]["claimName"]
                    assert ("PersistentVolumeClaim", claim) in defined, f"{key}: {claim}"
                if "configMap" in volume:
                    assert ("ConfigMap", volume["configMap"]["name"]) in defined, key
            names = {v["name"] for v in pod.get("volumes", [])}
            for container in pod["containers"]:
                assert {m["name"] for m in container.get("volumeMounts", [])} <= names, key
    assert docs["PersistentVolumeClaim/sublayer-shared"]["spec"]["accessModes"] == [
        "ReadWriteMany"]
