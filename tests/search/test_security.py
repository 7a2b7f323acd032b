"""A local sweep's Ray listens on loopback only, with token auth and private temp files;
``sublayer ui`` warns when it is bound beyond loopback."""

from __future__ import annotations

import ipaddress
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers import scratch, write_experiment


def _loopback(ip: str) -> bool:
    addr = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(addr, "ipv4_mapped", None)
    return bool(addr.is_loopback or (mapped is not None and mapped.is_loopback))


@dataclass
class Observed:
    """What a thread saw while the sweep ran."""

    listeners: dict[tuple[str, int], str] = field(default_factory=dict)
    """(address, port) -> name of the listening process."""
    folders: dict[str, int] = field(default_factory=dict)
    """Private folder of the local Ray -> its mode bits."""
    sessions: set[str] = field(default_factory=set)
    token_auth: set[bool] = field(default_factory=set)
    """Was the driver in token auth mode at each poll?"""
    outcome: Any = None
    home: Path | None = None


class _Watch(threading.Thread):
    """Poll the listening sockets of this process, its children and the Ray processes."""

    def __init__(self, seen: Observed) -> None:
        super().__init__(daemon=True)
        self.seen, self.done = seen, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.poll()

    def poll(self) -> None:
        import ray
        from ray._raylet import AuthenticationMode, get_authentication_mode

        from sublayer_search.search.run.local_ray import private_dir

        me = psutil.Process()
        procs = {p.pid: p for p in [me, *me.children(recursive=True)]}
        folder = private_dir()
        if folder is not None:  # Ray processes that left our process tree, if any
            for p in psutil.process_iter(["cmdline"]):
                if any(str(folder) in arg for arg in p.info["cmdline"] or []):
                    procs[p.pid] = p
            try:
                self.seen.folders[str(folder)] = stat.S_IMODE(folder.stat().st_mode)
                node = ray._private.worker.global_worker.node
                self.seen.sessions.add(node.get_session_dir_path())
                self.seen.token_auth.add(get_authentication_mode() == AuthenticationMode.TOKEN)
            except (OSError, AttributeError):
                pass
        for proc in procs.values():
            try:
                conns, name = proc.net_connections(kind="inet"), proc.name()
            except psutil.Error:
                continue
            for conn in conns:
                if conn.status == psutil.CONN_LISTEN:
                    self.seen.listeners[(conn.laddr.ip, conn.laddr.port)] = name


@pytest.fixture(scope="module")
def watched_sweep(tmp_path_factory):
    """A real local sweep of two tiny trials (fresh HOME, no auth settings), watched."""
    import ray
    from ray._raylet import AuthenticationTokenLoader, Config

    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.run.sweep import run_sweep

    assert not ray.is_initialized(), "another test left Ray running"
    folder = tmp_path_factory.mktemp("security")
    seen = Observed(home=folder / "home")
    seen.home.mkdir()
    path = write_experiment(folder, "secure", orders=["sfsf", "ssff"],
                            tracking_uri=f"sqlite:///{folder}/mlflow.db")
    plan = plan_sweep(load_experiment(path), str(path))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", str(seen.home))  # the token must land here
        for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
                     "RAY_TMPDIR"):
            mp.delenv(name, raising=False)
        AuthenticationTokenLoader.instance().reset_cache()
        watch = _Watch(seen)
        watch.start()
        try:
            seen.outcome = run_sweep(plan)
        finally:
            watch.done.set()
            watch.join(timeout=10)
    Config.initialize("")  # back to the session's auth settings for later tests
    AuthenticationTokenLoader.instance().reset_cache()
    return seen


@pytest.mark.slow
def test_a_local_sweep_listens_on_loopback_only_with_token_auth(watched_sweep):
    seen = watched_sweep
    assert [t["status"] for t in seen.outcome.trials] == ["finished", "finished"]
    names = set(seen.listeners.values())
    assert {"gcs_server", "raylet"} <= names, f"no Ray listener seen: {seen.listeners}"
    exposed = {k: v for k, v in seen.listeners.items() if not _loopback(k[0])}
    assert not exposed, f"listening beyond loopback: {exposed}"
    token = seen.home / ".ray" / "auth_token"
    assert token.is_file() and len(token.read_text().strip()) == 64
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    assert seen.token_auth == {True}


@pytest.mark.slow
def test_a_local_sweep_keeps_ray_temp_files_private(watched_sweep):
    seen = watched_sweep
    assert seen.folders and set(seen.folders.values()) == {0o700}, seen.folders
    assert seen.sessions
    for session in seen.sessions:
        assert any(session.startswith(f + os.sep) for f in seen.folders), session
        assert not session.startswith("/tmp/ray/")
        assert len(session) < 80  # Ray's Unix sockets below it stay under 107 characters
    assert not any(Path(f).exists() for f in seen.folders), "private folder left behind"


# -- sublayer ui -------------------------------------------------------------------------
@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.1.1", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.5", False), ("myhost", False),
])
def test_is_loopback(host, loopback):
    from sublayer_search.search.cli.ui import exposure_warning, is_loopback

    assert is_loopback(host) is loopback
    assert (exposure_warning(host, 5000, "sqlite:///x.db") is None) is loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_sublayer_ui_warns_beyond_loopback_and_keeps_serving(host, monkeypatch, capsys):
    """The CLI path up to starting the server (recorded here instead of run)."""
    from sublayer_search.search.cli import ui
    from sublayer_search.search.cli.main import main

    started: list[list[str]] = []
    monkeypatch.setattr(ui, "run_until_signal", lambda cmd, env, **_: started.append(cmd) or 0)
    assert main(["ui", "--host", host, "--port", "5999", "--tracking-uri", "sqlite:///x.db"]) == 0
    err = capsys.readouterr().err
    assert started and started[0][started[0].index("--host") + 1] == host
    if host == "0.0.0.0":
        assert "WARNING" in err and "NO authentication" in err and "0.0.0.0:5999" in err
    else:
        assert "WARNING" not in err


@pytest.mark.slow
def test_sublayer_ui_on_all_interfaces_warns_from_the_real_command(tmp_path):
    """The real ``sublayer ui`` process prints the warning before MLflow starts."""
    import time

    from helpers import SUBLAYER, free_port, start, stop, subprocess_env, tail

    log = tmp_path / "ui.log"
    with scratch("sublayer-home") as home:
        proc = start([SUBLAYER, "ui", "--host", "0.0.0.0", "--port", str(free_port()),
                      "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"],
                     env=subprocess_env(home), log=log)
        try:
            deadline = time.monotonic() + 30
            while "NO authentication" not in tail(log) and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            stop(proc)
    assert "WARNING: the MLflow UI on 0.0.0.0:" in tail(log), tail(log)
