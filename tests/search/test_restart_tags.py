"""The tracking callback counts a trial's restarts whichever way Ray restarts it.

Driven with Ray-shaped trial objects (no Ray runtime) against a real SQLite MLflow store:
Ray may call ``on_trial_recover`` (the trial's training task failed) or, when a lost
node's actor fails first, restart the trial with no callback at all; the report from the
new process is then the only sign. Either way the run gets ``sublayer.restarts`` once per
restart and the node the trial runs on next (the real lost-node sweep is
``test_node_loss.py``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import write_experiment
from mlflow.tracking import MlflowClient

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.tracking.callback import RESTARTS, MlflowTracking
from sublayer_search.search.tracking.runs import ensure_store, open_sweep_run


def _report(step: int, pid: int, node: str) -> dict:
    return {"step": step, "val_loss": 3.0 - step / 100, "pid": pid, "node_id": node,
            "node_ip": "127.0.0.1", "gpu_ids": [], "resumed_from_step": 0, "status": "running"}


@pytest.mark.parametrize("recover_callback", [True, False])
def test_restarts_are_tagged_once_each(tmp_path: Path, recover_callback: bool) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    path = write_experiment(tmp_path, "restarts", orders=["sfsf"], tracking_uri=uri)
    plan = plan_sweep(load_experiment(path), str(path))
    client = ensure_store(uri)
    exp_id, parent = open_sweep_run(client, plan, "ray-run", resume=False)
    callback = MlflowTracking(tracking_uri=uri, experiment_id=exp_id, parent_run_id=parent,
                              plan=plan)
    trial = SimpleNamespace(trial_id="t1", config={"trial": plan.trials[0]},
                            num_failures=0, last_result={})

    def report(step: int, pid: int, node: str) -> None:
        trial.last_result = _report(step, pid, node)
        callback.on_trial_result(0, [trial], trial, trial.last_result)
        callback.on_step_end(0, [trial])

    callback.on_trial_start(0, [trial], trial)
    report(10, pid=100, node="worker")
    report(20, pid=100, node="worker")  # same process: no restart
    for restart, (pid, node) in enumerate([(200, "head"), (300, "head")], start=1):
        if recover_callback:
            trial.num_failures = restart
            callback.on_trial_recover(0, [trial], trial)
        report(10 * (restart + 2), pid=pid, node=node)
        report(10 * (restart + 2) + 5, pid=pid, node=node)
        callback.buffer.drain()
        run = client.search_runs([exp_id], "tags.`sublayer.role` = 'trial'")[0]
        assert run.data.tags[RESTARTS] == str(restart)
        assert run.data.tags["ray.node_id"] == node
    callback.on_trial_complete(0, [trial], trial)
    callback.buffer.drain()
    runs = MlflowClient(uri).search_runs([exp_id], "tags.`sublayer.role` = 'trial'")
    assert len(runs) == 1 and runs[0].data.tags[RESTARTS] == "2"
