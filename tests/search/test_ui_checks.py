"""``sublayer ui`` checks its store and port before MLflow starts, and keeps MLflow quiet."""

from __future__ import annotations

import io
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import SUBLAYER, free_port, start, stop, subprocess_env, wait_for_health, wait_for_text

from sublayer_search.search.cli import ui
from sublayer_search.search.cli.main import main
from sublayer_search.spaces.exit_codes import ExitCode


@pytest.fixture
def never_started(monkeypatch):
    started: list[list[str]] = []
    monkeypatch.setattr(ui, "run_until_signal", lambda cmd, env, **_: started.append(cmd) or 0)
    yield started
    assert started == [], "the server was started"


def test_a_port_in_use_is_refused_with_a_free_one_named(never_started, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        t0 = time.monotonic()
        assert main(["ui", "--port", str(port), "--tracking-uri", "sqlite:///x.db"]) \
            == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert time.monotonic() - t0 < 5
    assert err.startswith(f"sublayer: error: --port: got {port}, expected a free TCP port")
    free = int(err.split("--port ")[-1].split(")")[0])
    assert free != port and ui.port_problem("127.0.0.1", free) is None
    assert "Traceback" not in err and not os.path.exists("x.db")


@pytest.mark.parametrize(("args", "named"), [
    (["--tracking-uri", "foo://bar"], "--tracking-uri: got 'foo://bar'"),
    (["--tracking-uri", "sqlite:////proc/nowhere/mlflow.db"], "--tracking-uri: got"),
    (["--host", "no-such-host.invalid"], "--host: got 'no-such-host.invalid'"),
])
def test_a_bad_store_or_host_is_exit_2_without_a_traceback(args, named, never_started, capsys):
    assert main(["ui", "--port", str(free_port()), *args]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert os.listdir(".") == []


@pytest.mark.parametrize(("argv", "expect"), [
    (["--tracking-uri", "foo://bar"], "--tracking-uri: got 'foo://bar', expected an MLflow "
                                      "tracking URI with one of the schemes"),
    (["--tracking-uri", "sqlite:////proc/no_such/mlflow.db"],
     "--tracking-uri: got 'sqlite:////proc/no_such/mlflow.db', expected a SQLite file in a "
     "writable folder (/proc is not writable)"),
], ids=["ui-unknown-scheme", "ui-store-in-proc"])
def test_ui_bad_store_is_exit_2_before_mlflow(argv: list[str], expect: str, tmp_path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    started: list[list[str]] = []
    monkeypatch.setattr(ui, "run_until_signal", lambda cmd, env, **_: started.append(cmd) or 0)
    assert main(["ui", "--port", "65000", *argv]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith("sublayer: error: ") and expect in err and "Traceback" not in err
    assert started == []
    assert list(tmp_path.iterdir()) == [] and os.listdir(".") == []


def test_the_real_command_with_an_unknown_scheme_prints_one_line():
    done = subprocess.run([str(SUBLAYER), "ui", "--tracking-uri", "foo://bar"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.BAD_INPUT
    assert done.stderr.count("\n") == 1 and "foo://bar" in done.stderr, done.stderr


def test_ui_help_gives_every_option_with_its_default(capsys):
    assert main(["ui", "--help"]) == ExitCode.OK
    text = " ".join(capsys.readouterr().out.split())
    assert "--tracking-uri TRACKING_URI the MLflow store to show (default: sqlite:///mlflow.db" in text
    assert "--host HOST address to listen on (default: 127.0.0.1" in text
    assert "(default: 5000" in text


def test_mlflows_noise_is_dropped_and_the_rest_passed_on(monkeypatch):
    lines = [b"[MLflow] Security middleware enabled with default settings (localhost-only). "
             b"To allow connections from other hosts, use --host 0.0.0.0 and configure ...\n",
             b"/x/fastapi_app.py:23: StarletteDeprecationWarning: starlette.middleware.wsgi is "
             b"deprecated\n",
             b"  from starlette.middleware.wsgi import WSGIResponder, build_environ\n",
             b"2026/11/26 INFO mlflow.store.db.utils: Creating initial MLflow database tables...\n",
             b"INFO:     Uvicorn running on http://127.0.0.1:5000\n",
             b"ERROR: something real\n"]
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stderr", io.TextIOWrapper(out))
    ui._relay(io.BytesIO(b"".join(lines)))
    assert out.getvalue() == lines[4] + lines[5]


@pytest.mark.slow
def test_the_real_server_says_nothing_of_0000_nor_starlette(tmp_path):
    port = free_port()
    log = tmp_path / "ui.log"
    proc = start([SUBLAYER, "ui", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                  "--port", str(port)], env=subprocess_env(tmp_path / "home"), log=log)
    try:
        wait_for_health(port, proc, log)
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read()  # noqa: S310
        # the line follows /health by up to one of the CLI's polls: wait for it, then stop
        wait_for_text(f"MLflow UI on http://127.0.0.1:{port}", proc, log)
    finally:
        stop(proc)
    text = log.read_text()
    assert "0.0.0.0" not in text and "Starlette" not in text and "Deprecat" not in text, text
    assert "Creating initial MLflow database tables" not in text
