"""A password in a tracking URI (``postgresql://user:password@host/db``,
``http://user:password@host``) is never shown or logged: a sweep refuses such a URI (exit
2, the password masked; tests/search/test_credentials.py), and the commands that still
take one (``analyze``, ``export``) mask it in their messages. A real sweep whose MLflow
login comes from the environment: tests/search/test_secrets_on_disk.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from helpers import write_experiment

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.search.cli.main import main

SECRET = "s3cret-Pa55"


@pytest.mark.parametrize(("uri", "shown"), [
    (f"postgresql://mlflow:{SECRET}@db.example:5432/mlflow",
     "postgresql://mlflow:***@db.example:5432/mlflow"),
    (f"postgresql+psycopg2://mlflow:{SECRET}@10.0.0.5/mlflow?sslmode=require",
     "postgresql+psycopg2://mlflow:***@10.0.0.5/mlflow?sslmode=require"),
    (f"https://alice:{SECRET}@mlflow.example/prefix", "https://alice:***@mlflow.example/prefix"),
    ("mysql://u:p%40ss%3Aw@[::1]:3306/db", "mysql://u:***@[::1]:3306/db"),  # '@', ':' encoded
    ("http://alice@mlflow.example", "http://alice@mlflow.example"),  # no password
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ("sqlite:///runs/mlflow.db", "sqlite:///runs/mlflow.db"),
    ("", ""),
    (f"postgresql://mlflow@db.example/mlflow?password={SECRET}&sslmode=require",
     "postgresql://mlflow@db.example/mlflow?password=***&sslmode=require"),
    (f"https://mlflow.example/api?Token={SECRET}", "https://mlflow.example/api?Token=***"),
    (f"postgresql://u:{SECRET}@h/db?sslpassword={SECRET}x", "postgresql://u:***@h/db?sslpassword=***"),
    ("postgresql://u@h/db?password=", "postgresql://u@h/db?password="),  # empty: nothing hidden
])
def test_redact_uri_hides_only_the_password(uri: str, shown: str) -> None:
    assert redact_uri(uri) == shown


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_bad_input_messages_do_not_show_the_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    port = _closed_port()
    path = write_experiment(tmp_path, "secrets", orders=["sfsf"],
                            tracking_uri=f"postgresql://mlflow:{SECRET}@127.0.0.1:{port}/mlflow")
    assert main(["sweep", str(path)]) == 2
    out, err = capsys.readouterr()
    assert (f"tracking.uri: got 'postgresql://mlflow:***@127.0.0.1:{port}/mlflow', expected a "
            "URI without a password") in err and "PGPASSWORD" in err, err
    assert SECRET not in out + err

    uri = f"http://alice:{SECRET}@127.0.0.1:{port}"
    assert main(["analyze", "--experiment", "X", "--out", str(tmp_path / "r"),
                 "--tracking-uri", uri]) == 2
    out, err = capsys.readouterr()
    assert f"--tracking-uri: got 'http://alice:***@127.0.0.1:{port}'" in err
    assert SECRET not in out + err


@pytest.mark.parametrize("uri", [
    f"http://alice:{SECRET}@127.0.0.1:1",
    f"postgresql://mlflow@127.0.0.1:1/mlflow?password={SECRET}",
    f"http://127.0.0.1:1/?token={SECRET}",
], ids=["userinfo", "query-password", "query-token"])
def test_a_dry_run_refuses_what_the_sweep_refuses(
        uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The Slurm pre-check is ``--dry-run``: a secret in the tracking URI, in the file or
    as ``--tracking-uri``, stops it with exit 2 and the secret masked, as it stops a sweep."""
    monkeypatch.setenv("HOME", str(tmp_path))
    path = write_experiment(tmp_path, "dry", orders=["sfsf"], tracking_uri=uri)
    assert main(["sweep", str(path), "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert "tracking.uri: got " in err and "expected a URI without" in err, err
    assert SECRET not in out + err
    clean = write_experiment(tmp_path, "clean", orders=["sfsf"],
                             tracking_uri=f"sqlite:///{tmp_path / 'm.db'}")
    assert main(["sweep", str(clean), "--dry-run", "--tracking-uri", uri]) == 2
    out, err = capsys.readouterr()
    assert "--tracking-uri: got " in err and SECRET not in out + err, err
