"""The write buffer on its own: order, backoff, the outage limit, a backlog on disk."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE

from sublayer_search.search.tracking.buffer import WriteBuffer, is_transient


class Store:
    """Writes ops to a list; ``down`` makes every write fail like a stopped server."""

    def __init__(self) -> None:
        self.written: list[int] = []
        self.down = False

    def apply(self, op: dict[str, Any]) -> None:
        if self.down:
            raise MlflowException("API request to http://127.0.0.1:5000/api/2.0/mlflow/runs/"
                                  "log-batch failed with exception Max retries exceeded")
        self.written.append(op["n"])


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.01)


def test_an_outage_delays_writes_in_order_and_loses_none() -> None:
    store, clock = Store(), Clock()
    buf = WriteBuffer(store.apply, limit_s=60, max_ops=100, clock=clock)
    buf.submit({"n": 0})
    store.down = True
    for n in range(1, 6):
        buf.submit({"n": n})
        clock.now += 0.1
    assert store.written == [0] and len(buf) == 5 and buf.outage_since is not None
    assert buf.retries < 5  # backoff: not one attempt per write
    store.down = False
    clock.now += 10
    assert buf.pump() is True
    assert store.written == [0, 1, 2, 3, 4, 5] and buf.outage_since is None


def test_an_outage_past_the_limit_is_overdue_and_the_backlog_survives(tmp_path: Path) -> None:
    store, clock = Store(), Clock()
    buf = WriteBuffer(store.apply, limit_s=5, max_ops=100, clock=clock)
    store.down = True
    buf.submit({"n": 1})
    buf.submit({"n": 2})
    assert not buf.overdue
    assert buf.drain(sleep=clock.sleep) is False  # gives up after the limit, not before
    assert buf.overdue and 5 < clock.now < 5 + 10.5
    buf.save(tmp_path / "backlog.jsonl")
    assert len(buf) == 0

    fresh = WriteBuffer(store.apply, limit_s=5, max_ops=100, clock=clock)
    fresh.ops.append({"n": 3})  # written after the backlog, never before it
    assert fresh.load(tmp_path / "backlog.jsonl") == 2
    store.down = False
    assert fresh.drain(sleep=clock.sleep) is True
    assert store.written == [1, 2, 3]


def test_too_many_buffered_writes_are_overdue_too() -> None:
    store, clock = Store(), Clock()
    buf = WriteBuffer(store.apply, limit_s=600, max_ops=3, clock=clock)
    store.down = True
    for n in range(4):
        buf.submit({"n": n})
    assert buf.overdue and len(buf) == 4


def test_a_permanent_error_is_raised_not_buffered() -> None:
    def bad(op: dict[str, Any]) -> None:
        raise MlflowException("Changing param values is not allowed",
                              error_code=INVALID_PARAMETER_VALUE)

    buf = WriteBuffer(bad, limit_s=60, max_ops=10)
    with pytest.raises(MlflowException):
        buf.submit({"n": 1})
    assert not is_transient(ValueError("no"))
    assert is_transient(ConnectionRefusedError())
    assert is_transient(MlflowException("(sqlite3.OperationalError) database is locked"))


def _journal(path: Path) -> list[int]:
    return [json.loads(line)["n"] for line in path.read_text().splitlines()]


def test_the_journal_holds_every_unwritten_op_while_the_outage_lasts(tmp_path: Path) -> None:
    """A driver killed mid-outage loses nothing: the journal is the backlog at every moment
    of the outage, a fresh buffer (the resumed sweep) replays it, and it goes once written."""
    store, clock = Store(), Clock()
    journal = tmp_path / "run" / "backlog.jsonl"
    buf = WriteBuffer(store.apply, limit_s=60, max_ops=100, clock=clock, journal=journal)
    buf.submit({"n": 0})
    assert not journal.exists()  # no outage, no file
    store.down = True
    buf.submit({"n": 1})
    assert _journal(journal) == [1]  # the first failure writes it
    for n in (2, 3):
        buf.submit({"n": n})  # queued while down: appended before submit returns
        clock.now += 0.1
    assert _journal(journal) == [1, 2, 3] and store.written == [0]

    # "killed" here: the buffer is dropped; a resumed sweep loads the journal first
    resumed = WriteBuffer(store.apply, limit_s=60, max_ops=100, clock=clock, journal=journal)
    assert resumed.load(journal) == 3
    store.down = False
    assert resumed.drain(sleep=clock.sleep) is True
    assert store.written == [0, 1, 2, 3]

    # the original buffer recovering on its own removes the journal
    clock.now += 60
    assert buf.pump() is True and not journal.exists()


def test_a_short_recovery_keeps_the_journal_until_every_op_is_written(tmp_path: Path) -> None:
    store, clock = Store(), Clock()
    journal = tmp_path / "backlog.jsonl"
    buf = WriteBuffer(store.apply, limit_s=60, max_ops=100, clock=clock, journal=journal)
    store.down = True
    buf.submit({"n": 1})
    buf.submit({"n": 2})
    store.down = False
    clock.now += 1

    def up_for_one_write(op: dict[str, Any]) -> None:
        store.apply(op)
        store.down = True

    buf.apply = up_for_one_write
    assert buf.pump() is False  # op 1 written, op 2 failed: the outage goes on
    assert store.written == [1] and len(buf) == 1
    assert _journal(journal) == [1, 2]  # op 1 still listed: ops are safe to apply twice
    buf.apply, store.down = store.apply, False
    clock.now += 10
    assert buf.pump() is True and store.written == [1, 2] and not journal.exists()
