"""``sublayer ui``: the MLflow UI on a sweep's store, bound to 127.0.0.1 by default."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

__all__ = ["server_command", "serve"]


def server_command(*, tracking_uri: str, host: str = "127.0.0.1", port: int = 5000) -> list[str]:
    """The light ``mlflow server`` command line (one worker, no job execution)."""
    exe = shutil.which("mlflow") or os.path.join(os.path.dirname(sys.executable), "mlflow")
    return [exe, "server", "--backend-store-uri", tracking_uri, "--host", host,
            "--port", str(port), "--workers", "1"]


def serve(*, tracking_uri: str, host: str = "127.0.0.1", port: int = 5000) -> int:
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
           "MLFLOW_DISABLE_TELEMETRY": "true"}
    cmd = server_command(tracking_uri=tracking_uri, host=host, port=port)
    print(f"MLflow UI on http://{host}:{port} (store {tracking_uri}); Ctrl-C stops it", flush=True)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0
