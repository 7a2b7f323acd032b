"""The supernet run's MLflow writes, buffered through an outage like the trials' writes.

Stage 1 can train for hours; an MLflow server that goes away meanwhile must not stop it.
Every write of the supernet run (a learning-curve point, the ranking files, the final
tags and status) is a JSON-able op in a :class:`~.tracking_buffer.WriteBuffer` whose
journal is ``supernet_backlog.jsonl`` in the sweep's Ray run folder:

- during training the driver pumps the buffer; an outage past
  ``tracking.outage_limit_s`` stops stage 1 (its checkpoint is kept) with
  :class:`~.tracking_buffer.TrackingOutage`, exit 75, and ``--resume`` replays the file;
- the journal is on disk for the whole outage, so a driver killed meanwhile loses nothing;
- a curve point is written once: steps the run already holds are skipped on replay.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, RunTag
from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.search.tracking.buffer import TrackingOutage, WriteBuffer, short_http_retries
from sublayer_search.search.tracking.runs import metrics_of

__all__ = ["SupernetWrites", "JOURNAL"]

JOURNAL = "supernet_backlog.jsonl"
"""In the sweep's Ray run folder: the supernet run's unwritten MLflow writes."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class SupernetWrites:
    """The supernet run's writes, in order, riding out MLflow outages."""

    def __init__(self, client: MlflowClient, run_id: str, *, limit_s: float, max_ops: int,
                 journal: Path) -> None:
        self.client, self.run_id, self.journal = client, run_id, journal
        short_http_retries()  # each request fails fast: the buffer rides the outage out
        history = client.get_metric_history(run_id, "val_loss")
        self.written = max((m.step for m in history), default=-1)
        """The last curve step the run holds."""
        self.buffer = WriteBuffer(self._apply, limit_s=limit_s, max_ops=max_ops,
                                  journal=journal)
        loaded = self.buffer.load(journal)  # what a stopped or killed stage 1 left, first
        steps = [int(op["step"]) for op in self.buffer.ops if op["op"] == "curve"]
        self.submitted = max([self.written, *steps])
        """The last curve step queued (written or not)."""
        if loaded:
            self.flush()

    # -- making ops ------------------------------------------------------------------
    def curve(self, row: dict[str, Any]) -> bool:
        """Queue an evaluation of the supernet (a row of its task); False if its step is
        already queued or written (a resumed task sends the steps up to its checkpoint)."""
        step = int(row.get("step", 0))
        if step <= self.submitted:
            return False
        self.submitted = step
        self._submit({"op": "curve", "step": step, "time": _now_ms(),
                      "metrics": metrics_of(row)})
        return True

    def text(self, text: str, name: str) -> None:
        self._submit({"op": "text", "text": text, "file": name})

    def table(self, columns: dict[str, list[Any]], name: str) -> None:
        self._submit({"op": "table", "columns": columns, "file": name})

    def tags(self, tags: dict[str, str], metrics: dict[str, float] | None = None,
             step: int = 0) -> None:
        self._submit({"op": "tags", "tags": tags, "metrics": metrics or {}, "step": step,
                      "time": _now_ms()})

    def end(self, status: str) -> None:
        self._submit({"op": "end", "status": status})

    def _submit(self, op: dict[str, Any]) -> None:
        self.buffer.submit(op)
        self.check()

    # -- the outage --------------------------------------------------------------------
    def check(self) -> None:
        """Write what can be written now; past the outage limit save the backlog and raise
        :class:`TrackingOutage` (stage 1 stops; ``--resume`` continues it)."""
        self.buffer.pump()
        if self.buffer.overdue:
            raise self._outage()

    def flush(self) -> None:
        """Block until every op is written (or raise :class:`TrackingOutage`)."""
        if not self.buffer.drain():
            raise self._outage()
        self.journal.unlink(missing_ok=True)

    def _outage(self) -> TrackingOutage:
        buf, held = self.buffer, len(self.buffer)
        buf.save(self.journal)
        return TrackingOutage(
            f"MLflow at {redact_uri(self.client.tracking_uri)} was unreachable for "
            f"{buf.outage_s:.0f} s "
            f"(tracking.outage_limit_s = {buf.limit_s:g}; last error: {buf.last_error}); "
            f"stage 1 stopped (its supernet checkpoint is kept) and kept {held} unwritten "
            f"MLflow write(s) of its run in {self.journal}", self.journal)

    # -- applying ops (in order, by the buffer) ----------------------------------------
    def _apply(self, op: dict[str, Any]) -> None:
        kind = op["op"]
        if kind == "curve":
            if op["step"] <= self.written:
                return
            self.client.log_batch(self.run_id, metrics=[
                Metric(k, v, op["time"], op["step"]) for k, v in op["metrics"].items()])
            self.written = op["step"]
        elif kind == "text":
            self.client.log_text(self.run_id, op["text"], op["file"])
        elif kind == "table":
            files = {a.path for a in self.client.list_artifacts(self.run_id)}
            if op["file"] not in files:  # log_table appends to a table already there
                self.client.log_table(self.run_id, op["columns"], op["file"])
        elif kind == "tags":
            self.client.log_batch(
                self.run_id, tags=[RunTag(k, v) for k, v in op["tags"].items()],
                metrics=[Metric(k, v, op["time"], op["step"]) for k, v in op["metrics"].items()])
        elif kind == "end":
            self.client.set_terminated(self.run_id, status=op["status"])
        else:
            raise ValueError(f"unknown supernet write {kind!r}")
