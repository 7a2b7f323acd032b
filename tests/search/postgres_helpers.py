"""A real PostgreSQL server and ``mlflow server`` processes for the cluster-scale tests.

PostgreSQL comes from the Debian package (``apt-get install postgresql``; binaries in
``/usr/lib/postgresql/<version>/bin``). Each server is a fresh ``initdb`` in a private
temporary folder, listening on 127.0.0.1 and a free port only, with its Unix socket in
that folder. PostgreSQL refuses to run as root: under root the server runs as the
``postgres`` system user (or ``nobody``) through ``setpriv``, which execs, so the
process we started *is* the postmaster and we stop it by its id.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import MLFLOW, free_port, start, stop, subprocess_env, tail

PG_BIN_ENV = "SUBLAYER_PG_BIN"
"""A folder holding ``initdb`` and ``postgres`` (default: the newest Debian install)."""


def pg_bin() -> Path:
    """The folder of ``initdb`` and ``postgres``; fails the test when there is none."""
    candidates = [os.environ.get(PG_BIN_ENV, "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                         key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                         else 0, reverse=True)
    which = shutil.which("initdb")
    candidates += [str(Path(which).parent)] if which else []
    for folder in filter(None, candidates):
        if (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    pytest.fail("PostgreSQL is required for the PostgreSQL-backed MLflow tests and was not "
                "found (no initdb/postgres in $SUBLAYER_PG_BIN, /usr/lib/postgresql/*/bin or "
                "PATH): install the Debian package with `apt-get install -y postgresql` "
                "(make test does: .ci/test-deps.sh), or point SUBLAYER_PG_BIN at its bin folder")


def _unprivileged() -> tuple[list[str], int | None, int | None]:
    """(command prefix, uid, gid) to run PostgreSQL as a non-root user."""
    if os.geteuid() != 0:
        return [], None, None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            user = pwd.getpwnam(name)
            return ([shutil.which("setpriv") or "setpriv", f"--reuid={user.pw_uid}",
                     f"--regid={user.pw_gid}", "--clear-groups", "--"],
                    user.pw_uid, user.pw_gid)
    pytest.fail("running as root and neither a `postgres` nor a `nobody` user exists to run "
                "PostgreSQL as (initdb refuses root)")


@dataclass
class Postgres:
    uri: str
    """``postgresql://USER@127.0.0.1:PORT/mlflow`` (trust auth, loopback only)."""
    port: int
    folder: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def query(self, sql: str) -> list[tuple]:
        """Rows of ``sql`` run on the ``mlflow`` database (psycopg, MLflow's driver too)."""
        import psycopg

        with psycopg.connect(self.uri) as conn, conn.cursor() as cur:
            cur.execute(sql)  # type: ignore[arg-type]  # a test's own literal SQL
            return list(cur.fetchall())


@contextlib.contextmanager
def postgres_server(*, timeout: float = 60.0) -> Iterator[Postgres]:
    """initdb + postgres on 127.0.0.1:<free port>, database ``mlflow``; removed afterwards."""
    binaries = pg_bin()
    prefix, uid, gid = _unprivileged()
    folder = Path(tempfile.mkdtemp(prefix="sublayer-pg-", dir="/tmp"))
    log = folder / "postgres.log"
    log.touch()
    if uid is not None and gid is not None:
        os.chown(folder, uid, gid)
        os.chown(log, uid, gid)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "LANG": "C"}
    user = "sublayer"
    proc = None
    try:
        init = subprocess.run([*prefix, str(binaries / "initdb"), "-D", str(folder / "data"),
                               "-U", user, "--auth=trust", "-E", "UTF8", "--locale=C",
                               "--no-sync"], env=env, capture_output=True, text=True,
                              timeout=120, cwd=folder)
        assert init.returncode == 0, f"initdb failed:\n{init.stdout}\n{init.stderr}"
        port = free_port()
        proc = start([*prefix, binaries / "postgres", "-D", folder / "data", "-p", str(port),
                      "-k", folder, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                      "-c", "max_connections=200"], env=env, log=log, cwd=folder)
        uri = f"postgresql://{user}@127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while True:
            ready = subprocess.run([str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p",
                                    str(port), "-U", user, "-d", "postgres"], env=env,
                                   capture_output=True, timeout=30)
            if ready.returncode == 0:
                break
            assert proc.poll() is None, f"postgres exited with {proc.returncode}:\n{tail(log)}"
            assert time.monotonic() < deadline, f"postgres not ready in {timeout} s:\n{tail(log)}"
            time.sleep(0.3)
        made = subprocess.run([str(binaries / "psql"), f"{uri}/postgres", "-v",
                               "ON_ERROR_STOP=1", "-c", "CREATE DATABASE mlflow"], env=env,
                              capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        yield Postgres(uri=f"{uri}/mlflow", port=port, folder=folder, log=log, proc=proc)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # "fast" shutdown: SIGTERM waits for clients
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        if proc is not None:
            stop(proc)
        shutil.rmtree(folder, ignore_errors=True)


# -- an mlflow server that a test may stop and start again -------------------------------
@dataclass
class TrackingServer:
    """``mlflow server`` on a fixed port: :meth:`stop` (SIGTERM) and :meth:`start` again."""

    backend: str
    folder: Path
    port: int
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / "mlflow-server.log"

    def start(self, *, timeout: float = 120.0) -> None:
        env = subprocess_env(self.folder / "home", MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
        self.proc = start([MLFLOW, "server", "--backend-store-uri", self.backend,
                           "--artifacts-destination", str(self.folder / "artifacts"),
                           "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                          env=env, log=self.log, cwd=self.folder)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"mlflow server exited with {self.proc.returncode}:\n"
                                     f"{tail(self.log)}")
            with contextlib.suppress(urllib.error.URLError, ConnectionError, TimeoutError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return
            if time.monotonic() > deadline:
                raise AssertionError(f"mlflow server not ready in {timeout} s:\n{tail(self.log)}")
            time.sleep(0.3)

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
            self.proc = None


@contextlib.contextmanager
def tracking_server(backend: str, folder: Path) -> Iterator[TrackingServer]:
    """A light ``mlflow server`` (one worker, no job runner) on ``backend``, 127.0.0.1."""
    folder.mkdir(parents=True, exist_ok=True)
    server = TrackingServer(backend=backend, folder=folder, port=free_port())
    try:
        server.start()
        yield server
    finally:
        server.stop()
