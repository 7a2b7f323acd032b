"""Runs the previous release wrote still load: the frozen runs of every task
(``fixtures/previous_release.json``, made by ``fixtures/make_previous_release.py`` on that
release) are written into a fresh SQLite store and read with today's reader, which must
give the frame that release read from them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import Metric, Param
from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store import runs as analysis_runs
from sublayer_search.analysis.store.trial_record import ROUTING_ARTIFACT, TrialRecord

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "previous_release.json").read_text())
EXPERIMENTS = sorted(FIXTURE["experiments"])


def _restore(client: MlflowClient, name: str) -> dict[str, str]:
    """The experiment's runs written again (parents first); old run id -> new run id."""
    exp_id = client.create_experiment(name)
    ids: dict[str, str] = {}
    runs = FIXTURE["experiments"][name]["runs"]
    for run in sorted(runs, key=lambda r: r["parent"] is not None):
        tags = dict(run["tags"])
        if run["parent"]:
            tags["mlflow.parentRunId"] = ids[run["parent"]]
        made = client.create_run(exp_id, run_name=run["name"], tags=tags)
        run_id = ids[run["run_id"]] = made.info.run_id
        params = [Param(k, v) for k, v in run["params"].items()]
        for i in range(0, len(params), 100):
            client.log_batch(run_id, params=params[i:i + 100])
        metrics = [Metric(k, value, 0, step) for k, points in run["metrics"].items()
                   for value, step in points]
        client.log_batch(run_id, metrics=metrics)
        for path, text in run["artifacts"].items():
            client.log_text(run_id, text, path)
        client.set_terminated(run_id, status=run["status"])
    return ids


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    uri = f"sqlite:///{tmp_path_factory.mktemp('previous') / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    for name in EXPERIMENTS:
        _restore(client, name)
    return uri


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_the_previous_releases_runs_give_the_frame_they_gave(store: str, name: str) -> None:
    frame = analysis_runs.load(name, store)
    names = dict(zip(frame["run_id"], frame["name"], strict=True))
    frame["run_id"] = [names[r] for r in frame["run_id"]]
    got = json.loads(frame.drop(columns=["parent_run_id", "end_ms", "start_ms"]).to_json(
        orient="records"))  # the times are of this restore
    assert got == FIXTURE["experiments"][name]["frame"]


def test_the_previous_releases_iot_runs_keep_their_routing_matrix(store: str) -> None:
    routing = analysis_runs.load_routing("record-iot", store)
    written = [r for r in FIXTURE["experiments"]["record-iot"]["runs"]
               if ROUTING_ARTIFACT in r["artifacts"]]
    assert len(written) == 2 and len(routing) == len(written)
    assert set(routing["bleu"]) == {10.5}


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_each_previous_trial_run_reads_as_a_record_of_its_metric(store: str, name: str) -> None:
    client = MlflowClient(tracking_uri=store)
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id], "tags.`sublayer.role` = 'trial'")
    assert runs
    for run in runs:
        record: Any = TrialRecord.from_mlflow(run)
        assert record.metric == run.data.params["metric"]
        assert record.final == run.data.metrics[f"final_{record.metric}"]
        assert record.order == run.data.params["order"] and record.status == "finished"
