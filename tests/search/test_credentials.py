"""Credentials as clusters give them (issue 36, point 5).

S3: the AWS chain (the environment, ``AWS_PROFILE`` and the shared credentials file, web
identity, a container's or an instance's role), checked before Ray starts against a real
S3-compatible server that checks credentials (``moto_server`` in its authenticating
mode, tests/search/s3_helpers.py): a refused key is exit 2 naming the link of the chain
that gave it. MLflow: ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` /
``MLFLOW_TRACKING_TOKEN``; a tracking URI with a password in it is refused, and never
echoed (not even inside a library's error about it).
"""

from __future__ import annotations

import datetime
import http.server
import json
import os
import pickle
import secrets
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import run_cli, scratch, subprocess_env, write_experiment
from s3_helpers import profile_env, s3_server, without_keys

from sublayer_search.analysis.store.mlflow_store import redact_text, server_problem
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.credentials import (
    CredentialError,
    aws_source,
    uri_password_problem,
)

SECRET = "Pw" + secrets.token_hex(8)  # letters and digits: written the same in every encoding
BUCKET = "sweeps"
AWS_CHAIN_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS")


@pytest.fixture
def aws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No link of the chain set: no variables, empty files, no instance metadata."""
    for name in AWS_CHAIN_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    yield tmp_path


# -- the AWS chain, resolved (no server) ---------------------------------------------------
def test_each_link_of_the_chain_is_named(aws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (aws / "credentials").write_text(f"[team]\naws_access_key_id = AKIATEAM\n"
                                     f"aws_secret_access_key = {SECRET}\n"
                                     "[half]\naws_access_key_id = AKIAHALF\n")
    with pytest.raises(CredentialError) as none:
        aws_source()
    assert "none was found" in none.value.expected and "AWS_PROFILE" in none.value.expected

    monkeypatch.setenv("AWS_PROFILE", "team")
    assert aws_source() == f"AWS_PROFILE=team (shared credentials file {aws / 'credentials'})"
    monkeypatch.setenv("AWS_PROFILE", "nobody")
    with pytest.raises(CredentialError) as missing:
        aws_source()
    assert missing.value.expected.startswith("a profile that exists (AWS_PROFILE=nobody is in "
                                             "neither the shared credentials file")
    monkeypatch.setenv("AWS_PROFILE", "half")
    with pytest.raises(CredentialError) as half:
        aws_source()
    assert "aws_secret_access_key is missing from AWS_PROFILE=half" in half.value.expected

    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENV")
    with pytest.raises(CredentialError) as env_half:
        aws_source()
    assert "(AWS_SECRET_ACCESS_KEY is not set)" in env_half.value.expected
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    assert aws_source() == "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the environment)"
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    with pytest.raises(CredentialError) as id_missing:
        aws_source()
    assert "(AWS_ACCESS_KEY_ID is not set)" in id_missing.value.expected

    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/sweeps")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(aws / "no-token"))
    with pytest.raises(CredentialError) as web:
        aws_source()
    assert ("those of web identity (AWS_ROLE_ARN=arn:aws:iam::123456789012:role/sweeps) could "
            "not be obtained") in web.value.expected
    for error in (none, missing, half, env_half, id_missing, web):
        assert SECRET not in error.value.expected


# -- a tracking URI with a password --------------------------------------------------------
@pytest.mark.parametrize(("uri", "named"), [
    (f"http://alice:{SECRET}@mlflow.example", "MLFLOW_TRACKING_USERNAME and "
                                              "MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)"),
    (f"https://alice:{SECRET}@mlflow.example/prefix", "MLFLOW_TRACKING_PASSWORD"),
    (f"postgresql+psycopg://mlflow:{SECRET}@db/mlflow", "PGPASSWORD or in ~/.pgpass"),
    (f"mysql+pymysql://mlflow:{SECRET}@db/mlflow", "?read_default_file=PATH"),
    ("http://alice@mlflow.example", None),  # a user name alone
    ("http://127.0.0.1:5000", None),
    ("sqlite:///mlflow.db", None),
    (f"postgresql://mlflow@db/mlflow?password={SECRET}", "PGPASSWORD or in ~/.pgpass"),
    (f"https://mlflow.example/?token={SECRET}", "MLFLOW_TRACKING_TOKEN"),
    ("postgresql://mlflow@db/mlflow?sslmode=require", None),
], ids=["http", "https-prefix", "postgresql", "mysql", "user-alone", "no-user", "sqlite",
        "query-password", "query-token", "query-harmless"])
# (ids: a test's name is the same in every pytest-xdist worker, and holds no secret)
def test_a_password_in_a_tracking_uri_is_refused(uri: str, named: str | None) -> None:
    problem = uri_password_problem(uri)
    if named is None:
        assert problem is None
        return
    assert problem is not None and named in problem and "tuner.pkl" in problem
    assert SECRET not in problem


def test_a_sweep_with_a_password_in_its_tracking_uri_stops_before_connecting(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """In the file or as ``--tracking-uri``: exit 2 naming the variables, the password
    masked, and the server never contacted (it would be sent the password)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        server.settimeout(0)
        port = server.getsockname()[1]
        uri = f"http://alice:{SECRET}@127.0.0.1:{port}"
        path = write_experiment(tmp_path, "secrets", orders=["sfsf"], tracking_uri=uri)
        assert main(["sweep", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (f"tracking.uri: got 'http://alice:***@127.0.0.1:{port}', expected a URI "
                "without a password") in err, err
        assert "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or " \
               "MLFLOW_TRACKING_TOKEN) instead" in err
        clean = write_experiment(tmp_path, "clean", orders=["sfsf"],
                                 tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
        assert main(["sweep", str(clean), "--tracking-uri", uri]) == 2
        out2, err2 = capsys.readouterr()
        assert f"--tracking-uri: got 'http://alice:***@127.0.0.1:{port}'" in err2, err2
        assert SECRET not in out + err + out2 + err2 and "Traceback" not in err + err2
        with pytest.raises(BlockingIOError):
            server.accept()  # nobody connected
    assert not (tmp_path / "ray_results").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_library_error_quoting_the_uri_is_masked() -> None:
    """A server that accepts the connection and never answers: MLflow's error quotes the
    request's URL, password and all (what planning printed before issue 36); the text
    that reaches a user (``analyze``, ``export`` …) has it masked."""
    assert redact_text(f"to http://a:{SECRET}@h/x and a%3A{SECRET}", f"http://a:{SECRET}@h") \
        == "to http://a:***@h/x and a%3A***"
    assert redact_text("no password here", "http://a@h") == "no password here"
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nothing ever answers
        port = silent.getsockname()[1]
        said = server_problem(f"http://alice:{SECRET}@127.0.0.1:{port}", timeout=1)
    assert said is not None and "alice:***@127.0.0.1" in said, said
    assert SECRET not in said


def test_the_tracking_callback_pickles_no_credential(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tune pickles its callbacks into ``tuner.pkl`` (and the bucket): the MLflow callback,
    its client made, holds neither the password nor the token of the environment."""
    import ray.cloudpickle

    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.tracking.callback import MlflowTracking

    token = f"tok{secrets.token_hex(8)}"
    for name, value in {"MLFLOW_TRACKING_USERNAME": "alice", "MLFLOW_TRACKING_PASSWORD": SECRET,
                        "MLFLOW_TRACKING_TOKEN": token, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
                        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                        "MLFLOW_HTTP_REQUEST_TIMEOUT": "2"}.items():
        monkeypatch.setenv(name, value)
    uri = "http://alice@127.0.0.1:5000"
    path = write_experiment(tmp_path, "pickled", orders=["sfsf"], tracking_uri=uri)
    plan = plan_sweep(load_experiment(path), str(path), check_resources=False)
    callback = MlflowTracking(tracking_uri=uri, experiment_id="1", parent_run_id="p", plan=plan)
    assert callback.client.tracking_uri == uri  # the client exists, as during a sweep
    for blob in (pickle.dumps(callback), ray.cloudpickle.dumps(callback)):
        assert b"alice@127.0.0.1:5000" in blob  # the scan reads the URI where it is kept
        assert SECRET.encode() not in blob and token.encode() not in blob


# -- against a server that checks credentials -------------------------------------------------
def _container_endpoint(key: dict[str, str]) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A container credentials endpoint (what ECS's agent or EKS pod identity serve at
    ``AWS_CONTAINER_CREDENTIALS_FULL_URI``), answering with ``key``."""

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(hours=1)
            body = json.dumps({"AccessKeyId": key["AWS_ACCESS_KEY_ID"],
                               "SecretAccessKey": key["AWS_SECRET_ACCESS_KEY"], "Token": "",
                               "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v2/credentials"


@pytest.mark.slow
def test_credentials_from_the_chain_reach_a_store_that_checks_them(
        aws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A profile in a shared credentials file (no key in the environment) and a
    container's role are accepted by a server that refuses everything else; an unknown key
    id and a wrong secret are refused, each named with the link that gave it and the
    store's answer, before Ray starts (``sublayer sweep`` exits 2, no Ray folder made)."""
    from sublayer_search.search.plan.preflight import artifact_problems, storage_problems

    with s3_server(aws, buckets=(BUCKET,), authenticate=True) as server:
        good = profile_env(server, aws / "credentials", "sweeper")
        for name, value in good.items():
            monkeypatch.setenv(name, value)
        assert os.environ.get("AWS_ACCESS_KEY_ID") is None
        assert storage_problems(f"s3://{BUCKET}/ray", "creds") == []
        assert artifact_problems(f"s3://{BUCKET}/mlflow") == []

        monkeypatch.delenv("AWS_PROFILE")  # a container's role instead
        endpoint, url = _container_endpoint(server.env)
        try:
            monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url)
            assert aws_source() == "the container's role (ECS task or EKS pod identity)"
            assert storage_problems(f"s3://{BUCKET}/ray", "creds") == []
        finally:
            endpoint.shutdown()
            monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI")

        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIA" + secrets.token_hex(8).upper())
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
        (unknown,) = storage_problems(f"s3://{BUCKET}/ray", "creds")
        assert str(unknown) == (
            f"ray.storage_path: got 's3://{BUCKET}/ray', expected credentials that can read the "
            f"bucket at {server.endpoint} (the credentials from AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY (the environment) were refused: 403 InvalidAccessKeyId: "
            "the store knows no such access key id)")

        wrong = profile_env(server, aws / "wrong-credentials", "team", secret=SECRET)
        path = write_experiment(aws, "creds", orders=["sfsf"],
                                tracking_uri=f"sqlite:///{aws}/mlflow.db",
                                ray={"storage_path": f"s3://{BUCKET}/ray"})
        with scratch("rt") as ray_tmp:  # short: a local Ray would make its folder here
            env = subprocess_env(aws / "home", **wrong, RAY_TMPDIR=str(ray_tmp))
            done = run_cli(["sweep", str(path)], env=without_keys(env),
                           log=aws / "refused.log", timeout=120)
            assert list(ray_tmp.iterdir()) == []  # Ray never started
    assert done.returncode == 2, done.stdout
    assert (f"ray.storage_path: got 's3://{BUCKET}/ray', expected credentials that can read the "
            f"bucket at {server.endpoint} (the credentials from AWS_PROFILE=team (shared "
            f"credentials file {aws / 'wrong-credentials'}) were refused: 403 "
            "SignatureDoesNotMatch: the secret key does not belong to the access key id)"
            ) in done.stdout, done.stdout
    assert SECRET not in done.stdout and "Traceback" not in done.stdout
    assert not (aws / "mlflow.db").exists()
