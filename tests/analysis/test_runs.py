"""runs.load on a small SQLite MLflow store written with MlflowClient."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import NO_BASELINE, SWEEP

from sublayer_search.analysis import TRIAL_COLUMNS, AnalysisError
from sublayer_search.analysis.store import runs


def test_load_one_row_per_trial(mlflow_store):
    t = runs.load(SWEEP, mlflow_store)
    assert list(t.columns[: len(TRIAL_COLUMNS)]) == list(TRIAL_COLUMNS)
    assert len(t) == 8  # the parent sweep run is not a trial
    by = t.set_index("name")
    base = by.loc["interleaved4@seed0"]
    assert bool(base["baseline"]) and base["family"] == "baseline" and base["space"] == "sandwich"
    assert base["final"] == 10.0 and base["best"] == 10.0  # best from the history
    assert base["order"] == "sfsfsfsf" and base["n_s"] == 4 and base["units"] == 12.0
    sw = by.loc["sandwich4_1@seed1"]
    assert (sw["k"], sw["seed"], sw["metric"], sw["status"]) == (1, 1, "val_ppl", "finished")
    assert not bool(sw["baseline"]) and sw["candidate"] == "sandwich4_1"
    assert by["k"].isna().sum() == 2  # the baselines have no k
    assert by.loc["sandwich4_2@seed0", "status"] == "failed"
    assert np.isnan(by.loc["sandwich4_2@seed0", "final"])
    assert by.loc["sandwich4_2@seed1", "status"] == "diverged"
    # no sublayer.status tag: falls back to the MLflow run status
    assert by.loc["sandwich4_0@seed0", "status"] == "killed"
    assert t.attrs["experiment"] == SWEEP


def test_load_with_history(mlflow_store):
    t, h = runs.load(SWEEP, mlflow_store, history=True)
    assert list(h.columns) == ["run_id", "key", "step", "value"]
    rid = t.loc[t["name"] == "sandwich4_1@seed0", "run_id"].iloc[0]
    curve = h[(h["run_id"] == rid) & (h["key"] == "val_ppl")]
    assert curve["step"].tolist() == [10, 20, 30]
    assert curve["value"].tolist() == [12.0, 10.0, 9.0]
    assert set(h["run_id"]) <= set(t["run_id"])
    only = runs.load_history(SWEEP, mlflow_store, keys=["train_loss"])
    assert set(only["key"]) == {"train_loss"}


def test_unknown_experiment_lists_available(mlflow_store):
    with pytest.raises(AnalysisError) as err:
        runs.load("nope", mlflow_store)
    text = str(err.value)
    assert "unknown experiment 'nope'" in text and SWEEP in text and NO_BASELINE in text
    assert isinstance(err.value, ValueError)


def test_missing_database_is_an_error_not_a_new_store(tmp_path):
    path = tmp_path / "absent.db"
    with pytest.raises(AnalysisError, match="no MLflow database"):
        runs.load("x", f"sqlite:///{path}")
    assert not path.exists()


def test_find_sweep_run(mlflow_store):
    from mlflow.tracking import MlflowClient

    run_id = runs.find_sweep_run(SWEEP, mlflow_store)
    run = MlflowClient(tracking_uri=mlflow_store).get_run(run_id)
    assert run.data.tags["sublayer.role"] == "sweep"
    assert SWEEP in runs.experiment_names(mlflow_store)
