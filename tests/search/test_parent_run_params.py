"""A retry of the sweep's start-up finds the parent run a failed attempt made, params or not.

``open_sweep_run`` creates the parent run, then logs its params: two requests. An outage
between them leaves a run without params, which the retry (resume semantics) finds. The
state that failure leaves is built here with real requests to a real SQLite store.
"""

from __future__ import annotations

from pathlib import Path

from helpers import write_experiment
from mlflow.tracking import MlflowClient

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.tracking.runs import ensure_store, open_sweep_run
from sublayer_search.spaces.records import Role, Tag

EXPECTED = {"search", "scheduler", "trials_planned", "config_hash", "source"}


def test_a_retry_logs_the_params_the_failed_attempt_left_out(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_experiment(tmp_path, "params", orders=["sfsf", "ssff"], tracking_uri=uri)
    plan = plan_sweep(load_experiment(path), str(path))
    client = ensure_store(uri)
    exp_id = client.create_experiment(plan.experiment.experiment_name)
    # what the failed attempt left: the run with its tags, no params
    made = client.create_run(exp_id, tags={Tag.ROLE: Role.SWEEP.value, Tag.RAY_RUN: "ray-run"})
    client.log_param(made.info.run_id, "search", plan.experiment.search.algorithm)  # some

    found_exp, parent = open_sweep_run(client, plan, "ray-run", resume=True)

    assert (found_exp, parent) == (exp_id, made.info.run_id)  # the same run, not a second
    run = MlflowClient(uri).get_run(parent)
    assert EXPECTED <= set(run.data.params)
    assert run.data.params["trials_planned"] == str(len(plan.trials)) == "2"
    assert run.data.params["config_hash"] == plan.config_hash
    assert run.info.status == "RUNNING"
    assert len(client.search_runs([exp_id])) == 1


def test_a_fresh_start_logs_every_param(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_experiment(tmp_path, "fresh", orders=["sfsf"], tracking_uri=uri)
    plan = plan_sweep(load_experiment(path), str(path))
    client = ensure_store(uri)
    exp_id, parent = open_sweep_run(client, plan, "ray-run", resume=False)
    run = client.get_run(parent)
    assert EXPECTED <= set(run.data.params)
    again = open_sweep_run(client, plan, "ray-run", resume=True)  # nothing missing: no error
    assert again == (exp_id, parent)
