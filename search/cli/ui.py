"""``sublayer ui``: the MLflow UI on a sweep's store, bound to 127.0.0.1 by default.

Before MLflow starts: the store URI must be one MLflow can serve and the port must be
free (else exit 2 naming ``--tracking-uri`` / ``--port``, and a free port to use). The
server's own noise is dropped from its output: its advice to bind 0.0.0.0 (the opposite
of this command's default), Starlette's deprecation warning and the database set-up lines.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from typing import Any

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["server_command", "serve", "is_loopback", "exposure_warning", "port_problem",
           "NOISE"]

NOISE = (b"Security middleware enabled with default settings",  # "use --host 0.0.0.0"
         b"StarletteDeprecationWarning", b"from starlette.middleware.wsgi import",
         b"Creating initial MLflow database tables", b"Updating database tables",
         b"Registry store URI not provided")
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
    return [exe, "server", "--backend-store-uri", tracking_uri, "--host", host,
            "--port", str(port), "--workers", "1"]


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
    from sublayer_search.search.plan.preflight import tracking_problems
    from sublayer_search.search.plan.problems import Problem

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
    print(f"MLflow UI on http://{host}:{port} (store {redact_uri(tracking_uri)}); Ctrl-C stops it",
          flush=True)
    return run_until_signal(cmd, env=env)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _relay(stream: Any) -> None:
    """Pass the server's stderr on, line by line, without the :data:`NOISE` lines."""
    out = sys.stderr.buffer if hasattr(sys.stderr, "buffer") else None
    with contextlib.suppress(OSError, ValueError):
        for line in iter(stream.readline, b""):
            if any(n in line for n in NOISE):
                continue
            if out is not None:
                out.write(line)
                out.flush()
            else:
                sys.stderr.write(line.decode(errors="replace"))


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group is the server's own: start_new_session=True


def run_until_signal(cmd: list[str], *, env: dict[str, str], grace: float = 10.0) -> int:
    """Run ``cmd`` in its own process group until it exits or this process is asked to stop.

    SIGINT, SIGTERM and SIGHUP are passed on to the whole group as SIGTERM (the server
    and its workers); whatever is left after ``grace`` seconds is killed, and so is any
    worker left when the server exits on its own. A stop asked for is exit status 0.
    """
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stderr=subprocess.PIPE)
    relay = threading.Thread(target=_relay, args=(proc.stderr,), daemon=True)
    relay.start()
    asked: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        asked.append(signum)
        _kill_group(proc, signal.SIGTERM)

    main = threading.current_thread() is threading.main_thread()
    previous = {sig: signal.signal(sig, forward) for sig in STOP_SIGNALS} if main else {}
    try:
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
        relay.join(timeout=2)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
