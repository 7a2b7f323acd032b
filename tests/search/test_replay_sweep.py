"""A real ASHA sweep, replayed from MLflow with the same settings: the same stop decisions.

The sweep runs one trial at a time (``max_concurrent: 1``), so the order in which its
results reach ASHA — and so every decision — is fixed by the trial order; the replay
reads that order back from the MLflow timestamps.
"""

from __future__ import annotations

import pytest
import yaml
from helpers import scratch

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep

pytestmark = pytest.mark.slow

TRAIN = {"steps": 40, "batch_size": 8, "eval_every": 10, "eval_batches": 2, "lr": 0.003}


@pytest.fixture(scope="module")
def asha_sweep():
    """(tracking URI, plan, outcome) of a finished 6-trial ASHA sweep (5 candidates + baseline)."""
    import ray

    from sublayer_search.search.run.sweep import run_sweep

    with scratch("replay") as folder:
        doc = {
            "name": "replayed",
            "space": {"type": "explicit", "orders": ["ssff", "sffs", "fssf", "ffss", "fsfs"]},
            "seeds": [0], "baseline": {"seeds": 1},  # sfsf: the baseline, never stopped
            "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
            "train": TRAIN, "resources": {"cpu": 1}, "max_concurrent": 1,
            "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
            "tracking": {"uri": f"sqlite:///{folder}/mlflow.db"},
            "ray": {"storage_path": str(folder / "ray")},
        }
        path = folder / "replayed.yaml"
        path.write_text(yaml.safe_dump(doc))
        plan = plan_sweep(load_experiment(path), str(path))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        try:
            outcome = run_sweep(plan)
        finally:
            ray.shutdown()
        yield f"sqlite:///{folder}/mlflow.db", plan, outcome


def test_replay_makes_the_live_asha_decisions(asha_sweep):
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.replay.engine import SchedulerSettings, replay
    from sublayer_search.search.replay.store import load_sweep

    uri, plan, outcome = asha_sweep
    # Ray's own last result of each trial: a trial ASHA stopped ended before the last step
    live = {r["name"]: int(r["steps"]) for r in outcome.trials if r["steps"] < TRAIN["steps"]}
    assert live, f"the live sweep stopped nothing, so agreement would prove little: {outcome.trials}"

    sweep = load_sweep(MlflowClient(tracking_uri=uri), "replayed", scheduler_metric="val_loss")
    assert sweep.stopped == live  # what MLflow recorded (status STOPPED, sublayer.steps)
    assert sweep.recorded_scheduler == "asha" and (sweep.steps, sweep.eval_every) == (40, 10)
    assert len(sweep.curves) == len(plan.trials) == 6
    spec = plan.experiment.scheduler  # the live sweep's settings, in steps
    settings = SchedulerSettings(name="asha", max_t=plan.experiment.train.steps,
                                 grace_period=spec.grace_period * plan.experiment.train.eval_every,
                                 reduction_factor=spec.reduction_factor, metric=spec.metric,
                                 mode=spec.mode)
    report = replay(sweep.curves, settings)
    assert report.stopped == live  # same trials, stopped at the same step
    baseline = [t for t in report.trials if t.baseline]
    assert len(baseline) == 1 and baseline[0].survived
    assert report.truncated == ()  # nothing the replay kept had been stopped live
    full = 6 * TRAIN["steps"]
    assert report.compute_fraction == pytest.approx(
        (full - sum(TRAIN["steps"] - s for s in live.values())) / full)


def test_replay_command_reports_compute_topk_and_regret(asha_sweep, capsys, tmp_path):
    from sublayer_search.search.cli.main import main

    uri, _, outcome = asha_sweep
    assert main(["replay", "replayed", "--tracking-uri", uri, "--metric", "val_loss",
                 "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    stopped = [r["name"] for r in outcome.trials if r["steps"] < TRAIN["steps"]]
    assert f"{len(stopped)} trial(s) stopped" in out
    assert "top-2 by final val_bpc:" in out and "regret" in out
    for name in stopped:
        assert any(line.startswith(name) and line.split()[3].isdigit()
                   for line in out.splitlines()), name

    figure = tmp_path / "grid.png"
    assert main(["replay", "replayed", "--tracking-uri", uri, "--grid", "--figure",
                 str(figure)]) == 0
    out = capsys.readouterr().out
    assert figure.stat().st_size > 10_000
    rows = [line for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert len(rows) == 3 * 3  # grace 1..3 evaluations (of 4) x factors 2, 3, 4


@pytest.mark.parametrize(("argv", "expected"), [
    (["replay", "nope"], "experiment: got 'nope', expected an MLflow experiment"),
    (["replay", "replayed", "--grace-period", "5"], "--grace-period: got 5, expected at most 4"),
    (["replay", "replayed", "--metric", "bleu"], "--metric: got 'bleu', expected a metric"),
    (["replay", "replayed", "--figure", "x.png"], "--figure: got 'x.png' without --grid"),
])
def test_replay_bad_input_on_a_real_store(asha_sweep, capsys, argv, expected):
    from sublayer_search.search.cli.main import main

    assert main([*argv, "--tracking-uri", asha_sweep[0]]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
