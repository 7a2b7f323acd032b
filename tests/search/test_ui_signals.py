"""``sublayer ui`` passes SIGTERM/SIGINT on to ``mlflow server`` and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest
from helpers import SUBLAYER, free_port, start, stop, subprocess_env, tail, wait_for_health

pytestmark = pytest.mark.slow


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_sublayer_ui_stops_the_server_and_its_workers(tmp_path: Path,
                                                                   sig: int) -> None:
    port = free_port()
    log = tmp_path / "ui.log"
    below: set[int] = set()
    proc = start([SUBLAYER, "ui", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                  "--port", str(port)], env=subprocess_env(tmp_path), log=log)
    try:
        wait_for_health(port, proc, log)
        below = _descendants(proc.pid)
        assert below, "sublayer ui runs mlflow server as a child process"
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0, tail(log)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not [p for p in below if _alive(p)], f"left alive: {below}\n{tail(log)}"
        assert _port_free(port), f"port {port} still taken:\n{tail(log)}"
    finally:
        stop(proc)
        for pid in below | _descendants(proc.pid):  # the server has a session of its own
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
