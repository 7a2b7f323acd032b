"""An ordered, bounded buffer of MLflow writes that outlives a tracking-server outage.

Every write of the driver's tracking callback is a plain JSON-able *op* (a dict). The
buffer applies ops in order; when one fails with a transient error (server down,
connection refused, HTTP 5xx, "database is locked") it keeps that op and every later
one, and retries with exponential backoff. An outage that outlasts ``limit_s`` or a
backlog over ``max_ops`` makes :attr:`WriteBuffer.overdue` true: the sweep then stops
and the backlog is saved to a file, which ``--resume`` replays before anything else.

With a ``journal`` file the backlog is on disk for the whole outage, not only when the
sweep gives up: the outage's first failure writes every queued op to it, each op queued
while the outage lasts is appended (flushed and synced), and the file goes once every
op is written (ops written in a short recovery that failed again stay in it). A driver
killed mid-outage (SIGKILL, OOM, a lost head node with its disk kept) leaves the
journal, and ``--resume`` replays it like a saved backlog. Ops are safe to
apply twice, so a journal line whose op was written before the kill does no harm.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from mlflow.exceptions import MlflowException

__all__ = ["WriteBuffer", "TrackingOutage", "is_transient", "ride_out", "short_http_retries"]

T = TypeVar("T")

log = logging.getLogger(__name__)

_TRANSIENT_CODES = frozenset({"INTERNAL_ERROR", "TEMPORARILY_UNAVAILABLE",
                              "REQUEST_LIMIT_EXCEEDED", "DEADLINE_EXCEEDED"})
_TRANSIENT_WORDS = ("database is locked", "max retries exceeded", "connection", "timed out",
                    "could not connect", "server closed", "temporarily unavailable")
BACKOFF_FIRST_S, BACKOFF_MAX_S = 0.5, 10.0


class TrackingOutage(RuntimeError):
    """MLflow stayed unreachable past ``tracking.outage_limit_s``; the backlog is saved."""

    def __init__(self, message: str, backlog: Path) -> None:
        super().__init__(message)
        self.backlog = backlog


def short_http_retries() -> None:
    """MLflow's HTTP client retries a request for minutes by default: make each attempt
    short, so the buffer (not urllib3) rides out an outage. A user's own settings win."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "20")


def is_transient(exc: BaseException) -> bool:
    """Would the same write succeed later (the store is down or busy), not never?"""
    if isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        if exc.error_code in _TRANSIENT_CODES or status >= 500:
            return True
        return any(w in str(exc).lower() for w in _TRANSIENT_WORDS) and status != 400
    if isinstance(exc, OSError | TimeoutError):
        return True
    name = type(exc).__name__  # requests / urllib3 / SQLAlchemy, without importing them
    return name in {"ConnectionError", "OperationalError", "Timeout", "ReadTimeout",
                    "ConnectTimeout", "ProtocolError", "MaxRetryError", "InterfaceError"}


class WriteBuffer:
    """FIFO of ops applied by ``apply``; transient failures keep the op for a retry."""

    def __init__(self, apply: Callable[[dict[str, Any]], None], *, limit_s: float,
                 max_ops: int, clock: Callable[[], float] = time.monotonic,
                 journal: Path | None = None) -> None:
        self.apply = apply
        self.journal = journal
        """The backlog file kept up to date during an outage (see the module docstring)."""
        self.limit_s = limit_s
        self.max_ops = max_ops
        self.clock = clock
        self.ops: deque[dict[str, Any]] = deque()
        self.outage_since: float | None = None
        self.last_error = ""
        self._next_try = 0.0
        self._backoff = BACKOFF_FIRST_S
        self.retries = 0
        """Failed attempts so far (a figure for logs and tests)."""

    def __len__(self) -> int:
        return len(self.ops)

    def submit(self, op: dict[str, Any]) -> None:
        """Queue ``op`` and write what can be written now (in order); during an outage the
        op is in the journal before this returns."""
        self.ops.append(op)
        if self.outage_since is not None and self.journal is not None:
            with self.journal.open("a", encoding="utf-8") as out:
                out.write(json.dumps(op) + "\n")
                out.flush()
                os.fsync(out.fileno())
        self.pump()

    def pump(self, *, force: bool = False) -> bool:
        """Apply queued ops until one fails or none is left; True when none is left.
        During an outage this waits for the backoff unless ``force``."""
        if self.ops and not force and self.clock() < self._next_try:
            return False
        while self.ops:
            try:
                self.apply(self.ops[0])
            except Exception as exc:
                if not is_transient(exc):
                    raise
                self._failed(exc)
                return False
            self.ops.popleft()
        if self.outage_since is not None:
            log.warning("MLflow is back after %.0f s; the buffered writes are in",
                        self.clock() - self.outage_since)
            if self.journal is not None:
                self.journal.unlink(missing_ok=True)
        self.outage_since, self._backoff, self._next_try = None, BACKOFF_FIRST_S, 0.0
        return True

    def _failed(self, exc: Exception) -> None:
        now = self.clock()
        self.retries += 1
        self.last_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        if self.outage_since is None:
            self.outage_since = now
            log.warning("MLflow write failed (%s); buffering and retrying", self.last_error)
            if self.journal is not None:  # the outage's backlog on disk; submit appends
                self._write(self.journal)
        self._next_try = now + self._backoff
        self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)

    @property
    def outage_s(self) -> float:
        return 0.0 if self.outage_since is None else self.clock() - self.outage_since

    @property
    def overdue(self) -> bool:
        """The outage outlasted ``limit_s`` or the backlog outgrew ``max_ops``."""
        return bool(self.ops) and (self.outage_s > self.limit_s or len(self.ops) > self.max_ops)

    def drain(self, *, sleep: Callable[[float], None] = time.sleep) -> bool:
        """Block until every op is written or the outage is overdue; True when written."""
        while not self.pump(force=True):
            if self.overdue:
                return False
            sleep(max(0.0, min(self._next_try - self.clock(), BACKOFF_MAX_S)))
        return True

    # -- a backlog that survives the process -----------------------------------------
    def save(self, path: Path) -> None:
        """Write the queued ops to ``path`` (JSON lines, replaced atomically) and forget them."""
        self._write(path)
        self.ops.clear()

    def _write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_suffix(".part")
        with part.open("w", encoding="utf-8") as out:
            for op in self.ops:
                out.write(json.dumps(op) + "\n")
            out.flush()
            os.fsync(out.fileno())
        part.replace(path)

    def load(self, path: Path) -> int:
        """Queue the ops saved in ``path`` ahead of new ones; how many."""
        if not path.is_file():
            return 0
        saved = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        self.ops.extendleft(reversed(saved))
        return len(saved)


def ride_out(what: str, write: Callable[[bool], T], *, limit_s: float, backlog: Path,
             then: str = "") -> T:
    """``write(retry)``, riding out an MLflow outage as a buffered trial write does: a
    transient failure is retried with backoff for up to ``limit_s`` (``retry`` is True from
    the second attempt on, so that a write can find what a failed attempt left), then
    :class:`TrackingOutage` names ``what`` (and ``then``, what to do next)."""
    done: list[T] = []

    def apply(op: dict[str, Any]) -> None:
        try:
            done.append(write(op["retry"]))
        finally:
            op["retry"] = True

    buffer = WriteBuffer(apply, limit_s=limit_s, max_ops=1)
    buffer.ops.append({"retry": False})
    if buffer.drain():
        return done[0]
    raise TrackingOutage(
        f"MLflow was unreachable for {buffer.outage_s:.0f} s while {what} "
        f"(tracking.outage_limit_s = {limit_s:g}; last error: {buffer.last_error})"
        + (f"; {then}" if then else ""), backlog)
