"""``sublayer ui``: the MLflow UI on a sweep's store, bound to 127.0.0.1 by default.

Before MLflow starts: the store URI must be one MLflow can serve and the port must be
free (else exit 2 naming ``--tracking-uri`` / ``--port``, and a free port to use). The
server's own noise is dropped from its output: its advice to bind 0.0.0.0 (the opposite
of this command's default), Starlette's deprecation warning and the database set-up lines;
the registry store is named (the backend store), so MLflow does not say it was not.

``mlflow server`` takes some 20 s to answer; its URL is printed once it answers
(``/health``, polled; the access lines of these polls are dropped too), never before. A server that exits first, or does not answer within
:data:`READY_TIMEOUT_S`, is exit status 1 with a line saying so (its output above).
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["server_command", "serve", "is_loopback", "exposure_warning", "port_problem",
           "NOISE", "health_url", "answers", "READY_TIMEOUT_S"]

NOISE = (b"Security middleware enabled with default settings",  # "use --host 0.0.0.0"
         b"StarletteDeprecationWarning", b"from starlette.middleware.wsgi import",
         b"Creating initial MLflow database tables", b"Updating database tables",
         b"Registry store URI not provided",
         b'"GET /health HTTP/1.1"')  # the access log of this command's own readiness probe
"""Lines of ``mlflow server``'s output that ``sublayer ui`` does not pass on."""


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback address (127.0.0.0/8, ::1); anything else may be reachable."""
    if host.strip().lower() == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # a host name: it may resolve to a network address
        return False
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool(addr.is_loopback or (mapped is not None and mapped.is_loopback))


def exposure_warning(host: str, port: int, tracking_uri: str) -> str | None:
    """The warning for a UI bound beyond loopback (None on loopback)."""
    if is_loopback(host):
        return None
    return (f"sublayer: WARNING: the MLflow UI on {host}:{port} has NO authentication and is "
            f"reachable from the network: anyone who can reach this host can read, change and "
            f"delete every run in {redact_uri(tracking_uri)}. Prefer the default --host 127.0.0.1 (with an "
            f"SSH tunnel for remote access) or an authenticating proxy in front of it.")


def server_command(*, tracking_uri: str, host: str = "127.0.0.1", port: int = 5000) -> list[str]:
    """The light ``mlflow server`` command line (one worker, no job execution)."""
    exe = shutil.which("mlflow") or os.path.join(os.path.dirname(sys.executable), "mlflow")
    return [exe, "server", "--backend-store-uri", tracking_uri,
            "--registry-store-uri", tracking_uri,  # else MLflow says it was not provided
            "--host", host, "--port", str(port), "--workers", "1"]


READY_TIMEOUT_S = 180.0
"""How long ``sublayer ui`` waits for ``mlflow server`` to answer (it takes ~20 s)."""
POLL_S = 0.25


def _url_host(host: str) -> str:
    bare = host.strip("[]")
    return f"[{bare}]" if ":" in bare else bare


def health_url(host: str, port: int) -> str:
    """Where this machine asks a server listening on ``host`` whether it answers (a
    wildcard address is asked on loopback)."""
    bare = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}.get(host.strip("[]"), host)
    return f"http://{_url_host(bare)}:{port}/health"


def answers(url: str, timeout: float = 2.0) -> bool:
    """Does an HTTP server answer ``url`` now (any status, no proxy)?"""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=timeout):
            return True
    except urllib.error.HTTPError:  # an answer all the same (e.g. a host it refuses)
        return True
    except (OSError, ValueError, http.client.HTTPException):
        return False


def _bindable(host: str, port: int) -> bool:
    """Can a server listen on (host, port) now? (SO_REUSEADDR as uvicorn sets it.)"""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


def port_problem(host: str, port: int) -> tuple[str, str] | None:
    """(option, why) when the server could not listen on ``host``:``port``; else None."""
    try:
        socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        return "--host", f"an address of this machine to listen on ({host!r} does not resolve: {exc})"
    if _bindable(host, port):
        return None
    if not _bindable(host, 0):
        return "--host", f"an address of this machine to listen on (cannot listen on {host})"
    free = next((p for p in range(port + 1, min(port + 100, 65536)) if _bindable(host, p)), None)
    hint = f"; {free} is free: --port {free}" if free else ""
    return "--port", f"a free TCP port ({port} is already in use on {host}{hint})"


def serve(*, tracking_uri: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    from sublayer_search.search.cli.output import bad
    from sublayer_search.search.core.problems import Problem
    from sublayer_search.search.plan.preflight import tracking_problems

    for problem in tracking_problems(tracking_uri, "--tracking-uri"):
        return bad(str(problem))
    refused = port_problem(host, port)
    if refused:
        option, why = refused
        return bad(str(Problem(option, port if option == "--port" else host, why)))
    quiet = "ignore:starlette.middleware.wsgi is deprecated"
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), quiet]))
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONWARNINGS": warnings}
    cmd = server_command(tracking_uri=tracking_uri, host=host, port=port)
    warning = exposure_warning(host, port, tracking_uri)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    shown = f"http://{_url_host(host)}:{port}"
    logging.getLogger("sublayer_search.notes").info(  # on a terminal: why nothing happens yet
        "starting the MLflow UI; its address follows once it answers (MLflow takes seconds)")

    def say_where() -> None:
        print(f"MLflow UI on {shown} (store {redact_uri(tracking_uri)}); Ctrl-C stops it",
              flush=True)

    return run_until_signal(cmd, env=env, ready_url=health_url(host, port), on_ready=say_where)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _relay(stream: Any, to: str = "stderr") -> None:
    """Pass one of the server's streams on to ``sys.<to>``, line by line, without the
    :data:`NOISE` lines (MLflow says some on stdout, uvicorn logs each request there)."""
    target = getattr(sys, to)
    out = target.buffer if hasattr(target, "buffer") else None
    with contextlib.suppress(OSError, ValueError):
        for line in iter(stream.readline, b""):
            if any(n in line for n in NOISE):
                continue
            if out is not None:
                out.write(line)
                out.flush()
            else:
                target.write(line.decode(errors="replace"))


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group is the server's own: start_new_session=True


def _await_answer(proc: subprocess.Popen[bytes], url: str, timeout: float, asked: list[int],
                  relays: list[threading.Thread]) -> int | None:
    """None once ``url`` answers; else the exit status to end with (0: a stop was asked)."""
    deadline = time.monotonic() + timeout
    name = "mlflow server"
    while not asked:
        if answers(url):
            return None
        try:
            code = proc.wait(timeout=POLL_S)
        except subprocess.TimeoutExpired:
            if time.monotonic() < deadline:
                continue
            print(f"sublayer: error: {name} did not answer on {url} within {timeout:g} s; "
                  "stopped it", file=sys.stderr, flush=True)
            _kill_group(proc, signal.SIGTERM)
            return ExitCode.FAILED
        if asked:
            break
        for relay in relays:
            relay.join(timeout=2)  # its last words first
        print(f"sublayer: error: {name} exited with status {code} before it answered on "
              f"{url} (its output is above)", file=sys.stderr, flush=True)
        return code or ExitCode.FAILED
    return ExitCode.OK


def run_until_signal(cmd: list[str], *, env: dict[str, str], grace: float = 10.0,
                     ready_url: str | None = None, on_ready: Callable[[], None] | None = None,
                     ready_timeout: float = READY_TIMEOUT_S) -> int:
    """Run ``cmd`` in its own process group until it exits or this process is asked to stop.

    With ``ready_url``, ``on_ready`` is called once that URL answers; a server that exits
    before, or does not answer within ``ready_timeout`` seconds, ends this with an error
    line (status 1, or the server's own). SIGINT, SIGTERM and SIGHUP are passed on to the
    whole group as SIGTERM (the server and its workers); whatever is left after ``grace``
    seconds is killed, and so is any worker left when the server exits on its own. A stop
    asked for is exit status 0.
    """
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    relays = [threading.Thread(target=_relay, args=(proc.stderr,), daemon=True),
              threading.Thread(target=_relay, args=(proc.stdout, "stdout"), daemon=True)]
    for relay in relays:
        relay.start()
    asked: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        asked.append(signum)
        _kill_group(proc, signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS} if main else {}
    try:
        if ready_url is not None:
            ended = _await_answer(proc, ready_url, ready_timeout, asked, relays)
            if ended is not None:
                return ended
        if on_ready is not None and not asked:
            on_ready()
        code = proc.wait()
        return ExitCode.OK if asked else code
    except BaseException:  # e.g. a KeyboardInterrupt from a handler installed by a caller
        _kill_group(proc, signal.SIGTERM)
        raise
    finally:
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _kill_group(proc, signal.SIGKILL)
            proc.wait()
        _kill_group(proc, signal.SIGKILL)  # workers that outlived the server
        for relay in relays:
            relay.join(timeout=2)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
