"""A real sweep with ``scheduler: {type: curve}``, replayed from MLflow: the same stops.

One trial at a time (``max_concurrent: 1``), so the order in which results reach the
scheduler is fixed; the replay reads it back from the MLflow timestamps. ``z: 0`` and ``top_k: 1`` so that
the tiny sweep stops something; the baseline seeds (trained first) are never stopped.
"""

from __future__ import annotations

import pytest
import yaml
from helpers import scratch

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep

TRAIN = {"steps": 40, "batch_size": 8, "eval_every": 10, "eval_batches": 2, "lr": 0.003}


def _doc(folder, **scheduler):
    return {
        "name": "curved",
        "space": {"type": "explicit", "orders": ["ssff", "sffs", "fssf", "ffss", "fsfs"]},
        "seeds": [0], "baseline": {"seeds": 3},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": TRAIN, "resources": {"cpu": 1}, "max_concurrent": 1,
        "scheduler": {"type": "curve", "metric": "val_loss", **scheduler},
        "tracking": {"uri": f"sqlite:///{folder}/mlflow.db"},
        "ray": {"storage_path": str(folder / "ray")},
    }


@pytest.mark.parametrize(("scheduler", "field"), [
    ({"grace_period": 5}, "scheduler.grace_period"), ({"metric": "bleu"}, "scheduler.metric"),
    ({"z": -1}, "scheduler.z"), ({"top_k": 0}, "scheduler.top_k"),
])
def test_bad_curve_settings_name_the_field(tmp_path, scheduler, field):
    from sublayer_search.search.core.problems import ExperimentError

    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(_doc(tmp_path, **scheduler)))
    with pytest.raises(ExperimentError) as got:
        plan_sweep(load_experiment(path), str(path), check_resources=False)
    assert field in str(got.value)


@pytest.mark.slow
def test_live_curve_stopping_makes_the_replayed_decisions():
    import ray
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.replay.engine import SchedulerSettings, replay
    from sublayer_search.search.replay.store import load_sweep
    from sublayer_search.search.run.sweep import run_sweep

    with scratch("curve") as folder:
        path = folder / "curved.yaml"
        path.write_text(yaml.safe_dump(_doc(folder, z=0.0, top_k=1)))
        plan = plan_sweep(load_experiment(path), str(path))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        try:
            outcome = run_sweep(plan)
        finally:
            ray.shutdown()
        live = {r["name"]: int(r["steps"]) for r in outcome.trials if r["steps"] < TRAIN["steps"]}
        assert live, f"nothing was stopped, so agreement would prove little: {outcome.trials}"
        assert not any(name.startswith("interleaved") for name in live)  # baselines whole

        sweep = load_sweep(MlflowClient(tracking_uri=f"sqlite:///{folder}/mlflow.db"), "curved",
                           scheduler_metric="val_loss")
        assert sweep.stopped == live
        spec = plan.experiment.scheduler
        report = replay(sweep.curves, SchedulerSettings(
            name="curve", max_t=TRAIN["steps"], grace_period=spec.grace_period * TRAIN["eval_every"],
            z=spec.z, top_k=spec.top_k, metric="val_loss", mode="min"))
        assert report.stopped == live and report.truncated == ()
        assert min(live.values()) >= 2 * TRAIN["eval_every"]  # never at the first evaluation
