"""Shared helpers for the end-to-end sweep tests: tiny experiment files, real servers.

Every process a test starts is started here in its own session and stopped here by
its id (SIGTERM, then SIGKILL for the whole process group it created), so a test
never touches Ray or MLflow processes that belong to anyone else.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
SUBLAYER = VENV_BIN / "sublayer"
RAY = VENV_BIN / "ray"
MLFLOW = VENV_BIN / "mlflow"

TINY_TRAIN = {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 2}
"""Two evaluations of a two-layer model: a trial takes about a second of compute."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def short_tempdir(prefix: str) -> Path:
    """A short path under /tmp: Ray's Unix sockets must fit in 107 characters."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A :func:`short_tempdir` removed afterwards (Ray's session logs included)."""
    path = short_tempdir(prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_experiment(folder: Path, name: str, *, orders: Sequence[str],
                     tracking_uri: str, resources: Mapping[str, float] | None = None,
                     max_concurrent: int | None = None, **extra: Any) -> Path:
    """A tiny experiment YAML (debug model, 20 steps, explicit orders, no baseline)."""
    doc: dict[str, Any] = {
        "name": name,
        "description": f"end-to-end test {name}",
        "space": {"type": "explicit", "orders": list(orders)},
        "seeds": [0],
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": dict(TINY_TRAIN),
        "resources": dict(resources or {"cpu": 1}),
        "tracking": {"uri": tracking_uri},
        "ray": {"storage_path": str(folder / "ray_results")},
    }
    if max_concurrent is not None:
        doc["max_concurrent"] = max_concurrent
    doc.update(extra)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def subprocess_env(home: Path, **overrides: str) -> dict[str, str]:
    """Environment for Ray/MLflow/sublayer subprocesses: private HOME and Ray temp dir."""
    env = dict(os.environ)
    env.update({
        "HOME": str(home),
        "RAY_TMPDIR": str(home / "raytmp"),
        # `disabled` stays for the `ray start` clusters of ray_cluster: with token auth
        # `ray start --head` does not create a token (one must be generated up front and
        # shared by every node). A local `sublayer sweep` run with this env still binds
        # 127.0.0.1 only (search/run/local_ray.py).
        "RAY_AUTH_MODE": "disabled",
        "RAY_USAGE_STATS_ENABLED": "0",
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "PYTHONPATH": str(REPO),
        "SUBLAYER_DATA_DIR": os.environ.get("SUBLAYER_DATA_DIR",
                                            str(REPO.parent / "shared" / "data")),
    })
    env.pop("RAY_ADDRESS", None)
    env.update(overrides)
    (home / "raytmp").mkdir(parents=True, exist_ok=True)
    return env


def start(cmd: Sequence[str | os.PathLike[str]], *, env: Mapping[str, str], log: Path,
          cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in a new session (its own process group), output to ``log``; in the
    test's own current folder unless ``cwd`` is given (never the working tree: a sweep's
    ``./mlruns`` would land there)."""
    with open(log, "ab") as out:
        return subprocess.Popen([str(c) for c in cmd], env=dict(env), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=cwd)


def stop(proc: subprocess.Popen[bytes], *, grace: float = 15.0) -> None:
    """SIGTERM ``proc``, SIGKILL it after ``grace`` s, then kill what is left of its group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the group is ours: start_new_session=True


def tail(path: Path, chars: int = 4000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.is_file() else f"({path} missing)"


def wait_for_health(port: int, proc: subprocess.Popen[bytes], log: Path,
                    timeout: float = 90) -> None:
    """Poll ``/health`` of a server started by ``proc`` until it answers 200."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                assert r.status == 200
                return
        except OSError:
            assert proc.poll() is None, tail(log)
            assert time.monotonic() < deadline, "the UI did not come up:\n" + tail(log)
            time.sleep(0.5)


def wait_for_text(text: str, proc: subprocess.Popen[bytes], log: Path,
                  timeout: float = 90) -> None:
    """Poll ``log`` until ``proc`` has written ``text`` to it (a line it prints once it is
    ready may follow the server's readiness by a poll)."""
    deadline = time.monotonic() + timeout
    while text not in (log.read_text(errors="replace") if log.is_file() else ""):
        assert proc.poll() is None, tail(log)
        assert time.monotonic() < deadline, f"{text!r} never came:\n" + tail(log)
        time.sleep(0.2)


def run_cli(args: Sequence[str], *, env: Mapping[str, str], log: Path,
            timeout: float) -> subprocess.CompletedProcess[str]:
    """``sublayer ARGS`` as a subprocess; its output goes to ``log`` and is returned."""
    proc = start([SUBLAYER, *args], env=env, log=log)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        raise AssertionError(
            f"sublayer {' '.join(args)} ran past {timeout} s:\n{tail(log)}") from None
    finally:
        stop(proc)
    return subprocess.CompletedProcess(list(args), proc.returncode, tail(log, 20000), "")


# -- Ray cluster -------------------------------------------------------------------------
@dataclass
class RayCluster:
    address: str
    env: dict[str, str]
    logs: list[Path]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    temp: Path | None = None
    """The nodes' Ray temp folder (``--temp-dir``): their sessions and logs."""


def _alive_nodes(address: str, env: Mapping[str, str]) -> int:
    code = (f"import ray; ray.init(address={address!r}, logging_level='ERROR', "
            "log_to_driver=False); print('NODES', sum(1 for n in ray.nodes() if n['Alive']))")
    out = subprocess.run([sys.executable, "-c", code], env=dict(env), capture_output=True,
                         text=True, timeout=60)
    for line in out.stdout.splitlines():
        if line.startswith("NODES "):
            return int(line.split()[1])
    return 0


@contextlib.contextmanager
def ray_cluster(home: Path, *, nodes: int = 2, cpus: int = 2, gpus: int = 1,
                timeout: float = 90.0, worker_env: Mapping[str, str] | None = None,
                **env_overrides: str) -> Iterator[RayCluster]:
    """A head and ``nodes - 1`` workers on 127.0.0.1, each a ``ray start --block`` we own
    (its environment: :func:`subprocess_env` with ``env_overrides``); ``worker_env`` is
    added to the workers' environment (a node set up differently)."""
    env = subprocess_env(home, **env_overrides)
    port = free_port()
    address = f"127.0.0.1:{port}"
    temp = short_tempdir("rayc")
    cluster = RayCluster(address=address, env=env, logs=[], temp=temp)
    common = [f"--num-cpus={cpus}", f"--num-gpus={gpus}", "--block", "--disable-usage-stats",
              "--node-ip-address=127.0.0.1"]
    try:
        log = home / "ray-head.log"
        cluster.logs.append(log)
        cluster.procs.append(start([RAY, "start", "--head", f"--port={port}",
                                    f"--temp-dir={temp}", "--include-dashboard=false",
                                    *common], env=env, log=log))
        for i in range(1, nodes):
            time.sleep(2.0)
            log = home / f"ray-worker{i}.log"
            cluster.logs.append(log)
            cluster.procs.append(start([RAY, "start", f"--address={address}", *common],
                                       env={**env, **(worker_env or {})}, log=log))
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            dead = [p for p in cluster.procs if p.poll() is not None]
            if dead:
                raise AssertionError("ray start exited early:\n" + "\n".join(
                    f"--- {log}\n{tail(log)}" for log in cluster.logs))
            seen = _alive_nodes(address, env)
            if seen >= nodes:
                break
            time.sleep(2.0)
        else:
            raise AssertionError(f"only {seen} of {nodes} Ray nodes came up in {timeout} s:\n"
                                 + "\n".join(f"--- {log}\n{tail(log)}" for log in cluster.logs))
        yield cluster
    finally:
        for proc in reversed(cluster.procs):
            stop(proc, grace=20.0)
        shutil.rmtree(temp, ignore_errors=True)


# -- MLflow server -----------------------------------------------------------------------
@dataclass
class MlflowServer:
    url: str
    log: Path
    proc: subprocess.Popen[bytes]


def http_json(url: str, body: Mapping[str, Any] | None = None, *, timeout: float = 30.0) -> Any:
    """GET (no body) or POST ``body`` as JSON; the decoded JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read().decode() or "{}")


def search_runs(url: str, experiment_ids: Sequence[str], filter_string: str = "") -> list[dict]:
    """Every run of the experiments matching ``filter_string``, through the REST API."""
    runs: list[dict] = []
    token = None
    while True:
        body: dict[str, Any] = {"experiment_ids": list(experiment_ids),
                                "filter": filter_string, "max_results": 1000}
        if token:
            body["page_token"] = token
        page = http_json(f"{url}/api/2.0/mlflow/runs/search", body)
        runs.extend(page.get("runs", []))
        token = page.get("next_page_token")
        if not token:
            return runs


def run_tags(run: Mapping[str, Any]) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run.get("data", {}).get("tags", [])}


@contextlib.contextmanager
def mlflow_server(folder: Path, *, timeout: float = 90.0) -> Iterator[MlflowServer]:
    """A light ``mlflow server`` (SQLite store, one worker, no job runner) on a free port."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = folder / "mlflow-server.log"
    env = subprocess_env(folder / "home", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
    proc = start([MLFLOW, "server", "--backend-store-uri", f"sqlite:///{folder / 'db.sqlite'}",
                  "--artifacts-destination", str(folder / "artifacts"),
                  "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                 env=env, log=log, cwd=folder)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"mlflow server exited with {proc.returncode}:\n{tail(log)}")
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"mlflow server not ready in {timeout} s:\n{tail(log)}")
            time.sleep(0.5)
        yield MlflowServer(url=url, log=log, proc=proc)
    finally:
        stop(proc)


def wait_while_running(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes],
                       log: Path, timeout: float = 180) -> None:
    """Poll ``ready()`` until true; fail (with the log's tail) if ``proc`` ends first or
    ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"the sweep ended ({proc.returncode}) before {what}:\n" \
                                    f"{tail(log)}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{tail(log)}"
        time.sleep(0.5)


def set_outage_limit(path: Path, seconds: float) -> None:
    """Rewrite ``tracking.outage_limit_s`` of the experiment file at ``path``."""
    doc = yaml.safe_load(path.read_text())
    doc["tracking"]["outage_limit_s"] = seconds
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


_FAIL_FAST_READS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"}


def fail_fast_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's own MLflow reads fail fast while the server is down."""
    for key, value in _FAIL_FAST_READS.items():
        monkeypatch.setenv(key, value)


def outage_env(home: Path) -> dict[str, str]:
    """A sweep driver's environment in an outage test: Tune saves its state every second,
    and MLflow's HTTP settings are the driver's own (not the test's fail-fast reads)."""
    env = subprocess_env(home, TUNE_GLOBAL_CHECKPOINT_S="1")
    for key in _FAIL_FAST_READS:
        env.pop(key, None)
    return env


def ray_train_workers(home: Path) -> list[int]:
    """Pids of the Ray Train worker processes of a test alive now (their HOME is the test's)."""
    mark = f"HOME={home}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"RayTrainWorker" in (entry / "cmdline").read_bytes() and \
                    mark in (entry / "environ").read_bytes().split(b"\0"):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def sweep_command(*args: str) -> list[str]:
    """``sublayer ARGS`` through this interpreter (no console script on PATH needed)."""
    return [sys.executable, "-c",
            "import sys; from sublayer_search.search.cli.main import main; sys.exit(main())",
            *args]
