"""``sublayer ui``: the MLflow UI on a sweep's store, bound to 127.0.0.1 by default."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import signal
import subprocess
import sys
import threading
from typing import Any

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["server_command", "serve", "is_loopback", "exposure_warning"]


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


def serve(*, tracking_uri: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = server_command(tracking_uri=tracking_uri, host=host, port=port)
    warning = exposure_warning(host, port, tracking_uri)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    print(f"MLflow UI on http://{host}:{port} (store {redact_uri(tracking_uri)}); Ctrl-C stops it",
          flush=True)
    return run_until_signal(cmd, env=env)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)  # the group is the server's own: start_new_session=True


def run_until_signal(cmd: list[str], *, env: dict[str, str], grace: float = 10.0) -> int:
    """Run ``cmd`` in its own process group until it exits or this process is asked to stop.

    SIGINT, SIGTERM and SIGHUP are passed on to the whole group as SIGTERM (the server
    and its workers); whatever is left after ``grace`` seconds is killed, and so is any
    worker left when the server exits on its own. A stop asked for is exit status 0.
    """
    proc = subprocess.Popen(cmd, env=env, start_new_session=True)
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
        for sig, handler in previous.items():
            signal.signal(sig, handler)
