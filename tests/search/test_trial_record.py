"""One trial record both ways: for every task, each planned trial's record, written by the
real tracking callback into a real SQLite store, reads back equal (``from_mlflow``); and
its run holds exactly the params and tags the previous release wrote (the frozen runs of
``tests/analysis/fixtures/previous_release.json``), but what the record adds."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from record_helpers import TASKS, planned, reported, write_runs

from sublayer_search.analysis.store.trial_record import TrialRecord, outcome_to_mlflow
from sublayer_search.spaces.records import Tag, TrialStatus

FIXTURE = json.loads((Path(__file__).parents[1] / "analysis" / "fixtures"
                      / "previous_release.json").read_text())
_ADDED = {"multi_objective": {"objectives": "val_bpc,params"}}
"""Params the record writes that the previous release did not."""
_ADDED_TAGS = {"oneshot": ("sublayer.oneshot_rank", "sublayer.oneshot_estimate")}
"""Tags the previous release's one-shot stage two wrote through a callback of its own, not
the plain one the fixture's runs were written with."""
_VOLATILE = ("mlflow.source.", "mlflow.user", "mlflow.parentRunId", "sublayer.git_commit",
             "version.")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("records")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    out = {}
    for task in TASKS:
        plan, trials = planned(task, folder, uri)
        client, exp_id, parent = write_runs(plan, trials, uri)
        runs = {r.info.run_name: r for r in client.search_runs(
            [exp_id], "tags.`sublayer.role` = 'trial'")}
        out[task] = (plan, trials, parent, runs)
    return out


@pytest.mark.parametrize("task", sorted(TASKS))
def test_a_planned_record_comes_back_from_mlflow_equal(written: dict, task: str) -> None:
    plan, trials, parent, runs = written[task]
    assert sorted(runs) == sorted(t.name for t in trials)
    for i, trial in enumerate(trials):
        value = reported(plan, i, plan.experiment.train.steps)[plan.metric]
        expected = replace(plan.record(trial), parent_run_id=parent, trial_id=f"t{i:03d}",
                           status=TrialStatus.FINISHED, steps=plan.experiment.train.steps,
                           final=value, best=value)
        got = TrialRecord.from_mlflow(runs[trial.name])
        assert got == expected, trial.name
        assert got.planned() == plan.record(trial)


def test_the_records_carry_what_each_task_adds(written: dict) -> None:
    def records(task: str) -> list[TrialRecord]:
        return [TrialRecord.from_mlflow(r) for r in written[task][3].values()]

    assert {r.metric for r in records("translation")} == {"val_bleu"}
    assert all(r.encoder_order and r.decoder_order for r in records("translation"))
    assert all(r.subset and r.codes and r.subset_size for r in records("iot")
               if not r.baseline)
    assert {r.guidance for r in records("guided")} >= {"none", "sg-kq", "hg-kq+ffn.qk.w1w2"}
    ranked = [r for r in records("oneshot") if r.oneshot_rank is not None]
    assert ranked and all(math.isfinite(r.oneshot_estimate or math.nan) for r in ranked)
    assert {r.objectives for r in records("multi_objective")} == {("val_bpc", "params")}
    assert all(r.objectives == () for r in records("lm"))


@pytest.mark.parametrize("task", sorted(TASKS))
def test_runs_hold_the_names_and_values_the_previous_release_wrote(written: dict,
                                                                    task: str) -> None:
    old = {r["name"]: r for r in FIXTURE["experiments"][f"record-{task}"]["runs"]
           if r["parent"]}
    _, _, _, runs = written[task]
    assert sorted(old) == sorted(runs)
    for name, run in runs.items():
        assert run.data.params == {**old[name]["params"], **_ADDED.get(task, {})}, name
        tags = {k: v for k, v in run.data.tags.items() if not k.startswith(_VOLATILE)}
        assert {k: v for k, v in tags.items() if k not in _ADDED_TAGS.get(task, ())} \
            == old[name]["tags"], name
        if "oneshot_rank" in run.data.params:
            assert all(tags[k] == run.data.params[k.removeprefix("sublayer.")]
                       for k in _ADDED_TAGS["oneshot"])


def test_without_mlflow_a_record_reads_back_what_it_wrote() -> None:
    record = TrialRecord(name="sandwich3_1@seed0", order="ssfsff", seed=0, space="sandwich",
                         family="sandwich", baseline=False, metric="val_bpc", k=1, n_s=3,
                         n_f=3, n_c=0, units=9.0, params=1234, settings={"train.lr": "0.003"},
                         status=TrialStatus.STOPPED, steps=40, final=1.5, best=1.25)
    params, tags, metrics = record.to_mlflow()
    assert params["k"] == "1" and tags[Tag.FAMILY] == "sandwich" and tags[Tag.BASELINE] == "false"
    assert metrics == {"final_val_bpc": 1.5, "best_val_bpc": 1.25}
    run = SimpleNamespace(info=SimpleNamespace(run_id="r", run_name=record.name,
                                               status="FINISHED", end_time=None),
                          data=SimpleNamespace(params=params, tags=tags, metrics=metrics))
    assert TrialRecord.from_mlflow(run) == record


def test_a_run_without_a_metric_param_has_no_final_rather_than_a_guessed_one() -> None:
    run = SimpleNamespace(info=SimpleNamespace(run_id="r", run_name="x", status="FAILED",
                                               end_time=None),
                          data=SimpleNamespace(params={"order": "sf"}, tags={},
                                               metrics={"val_bpc": 2.0, "final_val_bpc": 2.0}))
    record = TrialRecord.from_mlflow(run)
    assert record.metric is None and record.final is None and record.best is None
    assert record.status == TrialStatus.FAILED and record.latest["val_bpc"] == 2.0


def test_an_ending_writes_its_status_steps_and_a_finite_final_value_only() -> None:
    tags, metrics = outcome_to_mlflow(metric="val_bleu", status=TrialStatus.FINISHED,
                                      steps=8, final_value=12.5)
    assert tags == {Tag.STATUS: "finished", Tag.STEPS: "8"}
    assert metrics == {"final_val_bleu": 12.5}
    _, metrics = outcome_to_mlflow(metric="val_bleu", status=TrialStatus.DIVERGED, steps=3,
                                   final_value=math.nan)
    assert metrics == {}
