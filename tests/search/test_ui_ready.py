"""``sublayer ui`` says its URL once the server answers, and not before; a server that
never answers (or exits first) is one error line, not a URL that leads nowhere."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import SUBLAYER, free_port, stop, subprocess_env

from sublayer_search.search.cli import ui
from sublayer_search.spaces.exit_codes import ExitCode


def _lines(stream, into: queue.Queue[str | None]) -> None:
    for raw in iter(stream.readline, b""):
        into.put(raw.decode(errors="replace"))
    into.put(None)


@pytest.mark.slow
def test_the_url_is_printed_once_the_server_answers(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen([str(SUBLAYER), "ui", "--tracking-uri",
                             f"sqlite:///{tmp_path}/mlflow.db", "--port", str(port)],
                            env=subprocess_env(tmp_path / "home"), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, cwd=tmp_path)
    seen: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_lines, args=(proc.stdout, seen), daemon=True)
    reader.start()
    out: list[str] = []
    try:
        deadline = time.monotonic() + 180
        while not any("MLflow UI on http://" in line for line in out):
            line = seen.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, f"sublayer ui ended ({proc.wait()}):\n{''.join(out)}"
            out.append(line)
        # the moment the URL is said, it answers: one request, no retry
        url = out[-1].split("MLflow UI on ")[1].split()[0]
        assert url == f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{url}/health", timeout=5) as resp:  # noqa: S310
            assert resp.status == 200
    finally:
        stop(proc)
        reader.join(timeout=10)
    while not seen.empty():
        out.append(seen.get() or "")
    text = "".join(out)
    assert text.count("MLflow UI on") == 1, text
    assert "Registry store URI not provided" not in text, text
    assert "Backend store URI not provided" not in text, text
    assert "GET /health" not in text, text  # the readiness probe's access lines


def test_the_store_is_named_as_the_registry_too() -> None:
    cmd = ui.server_command(tracking_uri="sqlite:///x.db")
    assert cmd[cmd.index("--registry-store-uri") + 1] == "sqlite:///x.db"


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_on_ready_is_called_only_once_the_url_answers() -> None:
    """A server that listens after 1 s: ``on_ready`` finds it answering, then stops it."""
    port = free_port()
    url = ui.health_url("127.0.0.1", port)
    heard: list[bool] = []

    def on_ready() -> None:
        heard.append(ui.answers(url))
        os.kill(os.getpid(), signal.SIGTERM)  # as Ctrl-C would: passed on, exit status 0

    serve = ("import time, http.server; time.sleep(1); http.server.ThreadingHTTPServer("
             f"('127.0.0.1', {port}), http.server.SimpleHTTPRequestHandler).serve_forever()")
    code = ui.run_until_signal(_python(serve), env=dict(os.environ), ready_url=url,
                               on_ready=on_ready)
    assert code == ExitCode.OK and heard == [True]  # a 404 is an answer too


def test_a_server_that_exits_first_is_an_error_line(capfd: pytest.CaptureFixture[str]) -> None:
    called: list[int] = []
    t0 = time.monotonic()
    code = ui.run_until_signal(_python("import sys; print('boom', file=sys.stderr); sys.exit(3)"),
                               env=dict(os.environ), on_ready=lambda: called.append(1),
                               ready_url=ui.health_url("127.0.0.1", free_port()))
    err = capfd.readouterr().err
    assert code == 3 and called == [] and time.monotonic() - t0 < 30
    assert "boom" in err and "mlflow server exited with status 3 before it answered" in err


def test_a_server_that_never_answers_is_stopped(capfd: pytest.CaptureFixture[str]) -> None:
    called: list[int] = []
    port = free_port()
    code = ui.run_until_signal(_python("import time; time.sleep(60)"), env=dict(os.environ),
                               ready_url=ui.health_url("127.0.0.1", port), ready_timeout=1.0,
                               on_ready=lambda: called.append(1), grace=5.0)
    err = capfd.readouterr().err
    assert code == ExitCode.FAILED and called == []
    assert f"did not answer on http://127.0.0.1:{port}/health within 1 s; stopped it" in err


@pytest.mark.parametrize(("host", "url"), [
    ("127.0.0.1", "http://127.0.0.1:5/health"), ("0.0.0.0", "http://127.0.0.1:5/health"),
    ("::", "http://[::1]:5/health"), ("::1", "http://[::1]:5/health"),
    ("localhost", "http://localhost:5/health"),
])
def test_the_health_url_of_a_host(host: str, url: str) -> None:
    assert ui.health_url(host, 5) == url


def test_mlflows_stdout_noise_is_dropped_too(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    lines = [b"Registry store URI not provided. Using backend store URI.\n",
             b'2026/11/27 INFO:     127.0.0.1:4 - "GET /health HTTP/1.1" 200\n',
             b'2026/11/27 INFO:     127.0.0.1:4 - "GET /ajax-api/2.0/mlflow/x HTTP/1.1" 200\n']
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    ui._relay(io.BytesIO(b"".join(lines)), "stdout")
    assert out.getvalue() == lines[2]


def test_a_stop_asked_while_it_starts_ends_it_with_status_0() -> None:
    called: list[int] = []
    before = signal.getsignal(signal.SIGTERM)

    def stop_once_handled() -> None:  # never before run_until_signal passes SIGTERM on
        deadline = time.monotonic() + 20
        while signal.getsignal(signal.SIGTERM) is before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        if signal.getsignal(signal.SIGTERM) is not before:
            os.kill(os.getpid(), signal.SIGTERM)

    timer = threading.Thread(target=stop_once_handled)
    timer.start()
    t0 = time.monotonic()
    code = ui.run_until_signal(_python("import time; time.sleep(60)"), env=dict(os.environ),
                               ready_url=ui.health_url("127.0.0.1", free_port()),
                               on_ready=lambda: called.append(1))
    timer.join()
    assert code == ExitCode.OK and called == [] and time.monotonic() - t0 < 20
