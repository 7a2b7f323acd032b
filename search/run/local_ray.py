"""The local Ray of a sweep: loopback only, token auth, a private temp folder.

A plain ``ray.init()`` on Linux gives the node the machine's network address, and then
the GCS server, the raylet, the runtime-env agent and every worker listen on all
interfaces; with ``RAY_AUTH_MODE=disabled`` anyone who can reach the host can join the
cluster and run code. Its session folder under ``/tmp/ray`` is world-readable and holds
logs that may contain the environment (cloud credentials included). So a local sweep:

* runs the node on 127.0.0.1. Ray turns a loopback ``_node_ip_address`` back into the
  network address unless "cluster mode" is off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``,
  read once at import, hence the patched constant); with the node on 127.0.0.1 Ray's
  servers bind 127.0.0.1 only (the dashboard agent and its metrics port, when
  ``ray[default]`` is installed, follow the node address too);
* keeps token auth on: ``RAY_AUTH_MODE=token`` unless the user chose a mode; the token
  is ``$HOME/.ray/auth_token``, created 0600 here if missing (Ray would write it 0644);
* keeps Ray's temp folder inside a fresh 0700 folder, removed by :func:`shutdown_ray`;
  one left by a driver that was killed (SIGKILL, a crash) is removed by the next local
  start (:func:`remove_stale`): it names its driver's process id, and that one is gone.

Joining a cluster (``--address``) does none of this: that cluster's settings apply.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import ray

__all__ = ["LOOPBACK", "start_local_ray", "shutdown_ray", "private_dir", "remove_stale"]

LOOPBACK = "127.0.0.1"
_CLUSTER_MODE_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_private: list[Path] = []
log = logging.getLogger(__name__)


def private_dir() -> Path | None:
    """The 0700 folder holding the running local Ray's temp files (None if not ours)."""
    return _private[-1] if _private else None


def _token_auth() -> None:
    """Token auth unless the user set ``RAY_AUTH_MODE``; a missing default token is made 0600."""
    mode = os.environ.get("RAY_AUTH_MODE")
    if mode is None:
        os.environ["RAY_AUTH_MODE"] = mode = "token"
        from ray._raylet import Config  # type: ignore[attr-defined]  # not in the stub

        Config.initialize("")  # the driver's RayConfig cached the mode when ray was imported
    if mode.lower() != "token":
        log.warning("RAY_AUTH_MODE=%s: the local Ray runs without authentication (still on "
                    "127.0.0.1 only)", mode)
        return
    if os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return
    token = Path.home() / ".ray" / "auth_token"
    token.parent.mkdir(mode=0o700, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32))  # Ray's own format: 256 random bits in hex


@contextlib.contextmanager
def _loopback_node() -> Iterator[None]:
    """Cluster mode off while Ray starts: the node (and so every server) gets 127.0.0.1."""
    from ray._private import ray_constants

    saved_env, saved_const = os.environ.get(_CLUSTER_MODE_ENV), ray_constants.ENABLE_RAY_CLUSTER
    os.environ[_CLUSTER_MODE_ENV] = "0"  # inherited by the Ray processes started now
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = saved_const
        if saved_env is None:
            os.environ.pop(_CLUSTER_MODE_ENV, None)
        else:
            os.environ[_CLUSTER_MODE_ENV] = saved_env


PREFIX = "sublayer-ray-"
OWNER_FILE = "driver.pid"
"""In a private folder: the process id of the driver that made it."""
_SESSION_PID = re.compile(r"^session_.*_(\d+)$")  # Ray's session folder ends with the driver pid
UNOWNED_GRACE_S = 600.0
"""A folder naming no driver (killed while it was being made) is removed after this."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _driver(folder: Path) -> int | None:
    """The process id of the driver that made ``folder`` (None if it names none)."""
    try:
        return int((folder / OWNER_FILE).read_text().strip())
    except (OSError, ValueError):
        pass
    with contextlib.suppress(OSError):
        for session in (folder / "ray").iterdir():
            if match := _SESSION_PID.match(session.name):
                return int(match[1])
    return None


def remove_stale(base: str | os.PathLike[str]) -> list[Path]:
    """Remove this user's private folders under ``base`` whose driver is no longer running."""
    removed: list[Path] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for folder in Path(base).glob(PREFIX + "*"):
            try:
                info = folder.lstat()
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            pid = _driver(folder)
            if pid == os.getpid() or (pid is not None and _alive(pid)):
                continue
            if pid is None and now - info.st_mtime < UNOWNED_GRACE_S:
                continue  # perhaps being made right now
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


MAX_BASE = 24
"""Longest parent folder for the private one: ``<base>/sublayer-ray-XXXXXXXX/ray/session_<date>_<pid>/sockets/plasma_store`` must fit in 107 bytes."""


def start_local_ray(*, num_cpus: int | None, num_gpus: int | None) -> Path:
    """Start a local Ray bound to loopback with token auth; return its private folder."""
    base = os.environ.get("RAY_TMPDIR") or ("/tmp" if os.path.isdir("/tmp") else None)
    if base is None or len(base) > MAX_BASE:  # Ray's Unix sockets: 107 bytes in all
        base = "/tmp" if os.path.isdir("/tmp") else None
    removed = remove_stale(base or tempfile.gettempdir())
    if removed:
        log.info("removed %d folder(s) of local Rays whose driver had died: %s", len(removed),
                 ", ".join(map(str, removed)))
    folder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=base))  # 0700
    try:
        (folder / OWNER_FILE).write_text(str(os.getpid()))
        _token_auth()
        with _loopback_node():
            ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False,
                     log_to_driver=False, logging_level=logging.WARNING,
                     _node_ip_address=LOOPBACK, _temp_dir=str(folder / "ray"))
        node = ray._private.worker.global_worker.node
        if node.node_ip_address != LOOPBACK:
            raise RuntimeError(f"local Ray came up on {node.node_ip_address}, not {LOOPBACK}")
        for path in (folder / "ray", Path(node.get_session_dir_path())):
            os.chmod(path, 0o700)  # Ray makes its folders 0777; the parent is 0700 anyway
    except BaseException:
        if ray.is_initialized():
            ray.shutdown()
        shutil.rmtree(folder, ignore_errors=True)
        raise
    _private.append(folder)
    return folder


def shutdown_ray() -> None:
    """``ray.shutdown()``, then remove the private folder of a Ray we started."""
    ray.shutdown()
    while _private:
        shutil.rmtree(_private.pop(), ignore_errors=True)
