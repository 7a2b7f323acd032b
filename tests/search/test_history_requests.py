"""Reading a store of a few hundred trial runs takes a bounded number of history requests.

``sublayer analyze``, ``export`` and ``replay`` read every metric history of every trial:
one request per run and metric would be thousands here. The store is real (SQLite, then
an ``mlflow server`` on it); what is counted is the real calls: the SQL store's history
methods, and every HTTP request MLflow's client sends to the server.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import mlflow_server
from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store import histories, runs
from sublayer_search.search.replay.store import load_sweep
from sublayer_search.spaces.records import Role, Tag

pytestmark = pytest.mark.slow

RUNS = 300
EVALS = 10
CURVES = ("val_loss", "train_loss", "lr")
ONCE = ("final_val_loss", "best_val_loss")
KEYS = len(CURVES) + len(ONCE)


def _fill(uri: str) -> str:
    """A sweep of RUNS finished trials, EVALS points of each curve; returns the experiment."""
    client = MlflowClient(uri)
    exp_id = client.create_experiment("scale")
    parent = client.create_run(exp_id, run_name="sweep")
    client.log_batch(parent.info.run_id, params=[Param("scheduler", "fifo")],
                     tags=[RunTag(Tag.ROLE, Role.SWEEP), RunTag(Tag.METRIC, "val_loss")])
    now = int(time.time() * 1000)
    for i in range(RUNS):
        run = client.create_run(exp_id, run_name=f"t{i}", tags={
            Tag.ROLE: Role.TRIAL, "mlflow.parentRunId": parent.info.run_id,
            Tag.STATUS: "finished", Tag.PARENT: parent.info.run_id})
        points = [Metric(key, 1.0 + i / RUNS + 1.0 / step, now + step, step)
                  for key in CURVES for step in range(1, EVALS + 1)]
        points += [Metric(key, 1.0 + i / RUNS + 0.1, now + EVALS + 1, EVALS) for key in ONCE]
        client.log_batch(run.info.run_id, metrics=points, params=[
            Param("order", "sf" * 4), Param("seed", str(i)), Param("metric", "val_loss"),
            Param("train.steps", str(EVALS)), Param("train.eval_every", "1")])
        client.set_terminated(run.info.run_id)
    client.set_terminated(parent.info.run_id)
    return "scale"


@pytest.fixture(scope="module")
def store() -> Any:
    # SQLite commits on a disk cost ~0.1 s each here, in memory ~0.03 s: 900 of them to fill
    memory = Path("/dev/shm")
    folder = Path(tempfile.mkdtemp(prefix="histreq", dir=memory if memory.is_dir() else None))
    try:
        uri = f"sqlite:///{folder / 'db.sqlite'}"
        yield folder, uri, _fill(uri)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _check_history(frame: Any) -> None:
    assert len(frame) == RUNS * (len(CURVES) * EVALS + len(ONCE))
    assert frame["run_id"].nunique() == RUNS
    counts = frame.groupby(["run_id", "key"]).size()
    assert set(counts.items()) >= {((frame["run_id"].iloc[0], "val_loss"), EVALS)}
    assert counts.max() == EVALS and counts.min() == 1


def test_a_database_store_reads_histories_in_bulk(store: Any, monkeypatch: Any) -> None:
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    _, uri, experiment = store
    calls: Counter[str] = Counter()
    for name in ("get_metric_history", "get_metric_history_bulk"):
        real = getattr(SqlAlchemyStore, name)

        def counted(self: Any, *args: Any, _real: Any = real, _name: str = name,
                    **kwargs: Any) -> Any:
            calls[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(SqlAlchemyStore, name, counted)
    trials, history = runs.load(experiment, uri, history=True)
    assert len(trials) == RUNS
    _check_history(history)
    assert calls["get_metric_history"] == 0
    assert calls["get_metric_history_bulk"] == KEYS * math.ceil(RUNS / histories.DB_CHUNK)
    # the same points as one run read alone
    run_id = history["run_id"].iloc[-1]
    alone = [m.value for m in MlflowClient(uri).get_metric_history(run_id, "val_loss")]
    got = history[(history["run_id"] == run_id) & (history["key"] == "val_loss")]
    assert got["value"].tolist() == alone


def test_a_server_answers_analysis_and_replay_in_a_bounded_number_of_requests(
        store: Any, monkeypatch: Any) -> None:
    import mlflow.utils.rest_utils as rest_utils

    folder, _, experiment = store
    with mlflow_server(Path(folder)) as server:
        requests: Counter[str] = Counter()
        real = rest_utils.http_request

        def counted(host_creds: Any, endpoint: str, method: str, *args: Any,
                    **kwargs: Any) -> Any:
            requests[endpoint] += 1
            return real(host_creds, endpoint, method, *args, **kwargs)

        monkeypatch.setattr(rest_utils, "http_request", counted)
        trials, history = runs.load(experiment, server.url, history=True)
        analysis = dict(requests)
        requests.clear()
        sweep = load_sweep(MlflowClient(server.url), experiment)
        replay = dict(requests)
    assert len(trials) == RUNS
    _check_history(history)
    bulk = histories.BULK_HISTORY_ENDPOINT
    chunks = math.ceil(RUNS / histories.REST_CHUNK)
    assert analysis.get(bulk) == KEYS * chunks, analysis
    assert not any(e.endswith("/metrics/get-history") for e in analysis), analysis
    # the rest: the experiment by name and one page of runs (< 1,000), plus the server check
    assert sum(analysis.values()) <= KEYS * chunks + 6, analysis
    assert len(sweep.curves) == RUNS and all(len(c.points) == EVALS for c in sweep.curves)
    assert sweep.curves[0].end is not None
    # replay: val_loss and final_val_loss (the scheduler's metric is the main one)
    assert replay.get(bulk) == 2 * chunks, replay
    assert sum(replay.values()) <= 2 * chunks + 4, replay
