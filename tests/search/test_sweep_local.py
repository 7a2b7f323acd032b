"""End-to-end sweeps of tiny models on one local Ray instance, tracked in MLflow/SQLite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sublayer_search.search.core.injected_failure import FAIL_ENV
from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep

pytestmark = pytest.mark.slow

TINY_TRAIN = {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 2, "lr": 0.003}
INJECTED_FAILURE = "fssf@seed7"


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """One Ray instance for every sweep in this module (workers inherit the fault list)."""
    import ray

    os.environ[FAIL_ENV] = INJECTED_FAILURE
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()
    os.environ.pop(FAIL_ENV, None)


def write_experiment(tmp_path: Path, name: str, **overrides) -> Path:
    doc = {
        "name": name,
        "space": {"type": "permutations", "n_s": 2, "n_f": 2, "count": 2},
        "seeds": [0],
        "baseline": {"seeds": 2},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": dict(TINY_TRAIN),
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    doc.update(overrides)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def run(path: Path):
    from sublayer_search.search.run.sweep import run_sweep

    plan = plan_sweep(load_experiment(path), str(path))
    return plan, run_sweep(plan)


def children(tmp_path: Path, outcome):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([outcome.experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'")
    return client, {r.info.run_name: r for r in runs}


def test_grid_sweep_over_two_spaces_tracks_every_trial(local_ray, tmp_path):
    path = write_experiment(tmp_path, "grid", space=[
        {"type": "permutations", "n_s": 2, "n_f": 2, "count": 2, "seed": 1},
        {"type": "sandwich", "n": 2, "k": [0, 1]},
    ])
    plan, outcome = run(path)
    client, runs = children(tmp_path, outcome)
    # sandwich2_0 is the baseline order: merged into the baseline trial of seed 0
    assert set(runs) == {t.name for t in plan.trials}
    assert len(runs) == len(plan.trials) >= 4
    parent = client.get_run(outcome.parent_run_id)
    assert parent.info.status == "FINISHED" and parent.data.tags["sublayer.role"] == "sweep"
    artifacts = {a.path for a in client.list_artifacts(outcome.parent_run_id)}
    assert {"experiment.yaml", "trials.csv"} <= artifacts
    for name, run_ in runs.items():
        trial = next(t for t in plan.trials if t.name == name)
        p, tags = run_.data.params, run_.data.tags
        assert run_.info.status == "FINISHED" and tags["sublayer.status"] == "finished"
        assert p["order"] == trial.order and p["seed"] == str(trial.seed)
        assert p["n_s"] == "2" and p["n_f"] == "2" and float(p["units"]) == 6.0
        assert int(p["params"]) > 0 and int(p["flops_per_token"]) > 0
        assert p["train.lr"] == "0.003" and p["model.d_model"] == "32" and len(p["config_hash"]) == 12
        assert tags["sublayer.baseline"] == str(trial.baseline).lower()
        assert tags["sublayer.family"] == ("baseline" if trial.baseline else trial.space)
        assert tags["ray.trial_id"] and tags["sublayer.git_commit"]
        assert tags["version.torch"] != "absent"
        history = client.get_metric_history(run_.info.run_id, "val_loss")
        assert sorted(m.step for m in history) == [10, 20]
        for key in ("train_loss", "val_bpc", "lr", "tokens_per_s", "final_val_bpc",
                    "best_val_bpc"):
            assert key in run_.data.metrics, key
    base = runs["interleaved2@seed0"]
    assert base.data.params["k"] == "0" and base.data.tags["sublayer.baseline"] == "true"
    assert {r.data.params["config_hash"] for r in runs.values()} == {plan.config_hash}
    # Tune keeps every checkpoint (no snapshot forced per checkpoint); the sweep's own
    # retention leaves each finished trial its newest one
    trial_dirs = [d for d in (tmp_path / "ray").glob("*/*") if d.is_dir() and any(d.glob("checkpoint_*"))]
    assert len(trial_dirs) == len(runs)
    assert all(len(list(d.glob("checkpoint_*"))) == 1 for d in trial_dirs)

    # `sublayer analyze` end to end on this sweep: files written and attached to the parent
    from sublayer_search.search.cli.main import main

    out = tmp_path / "report"
    assert main(["analyze", "--experiment", "grid", "--tracking-uri",
                 f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "interleaved2" in html or "baseline" in html
    assert list((out / "figures").glob("*.png")) and list((out / "figures").glob("*.svg"))
    assert list((out / "tables").glob("*.csv"))
    attached = {a.path for a in client.list_artifacts(outcome.parent_run_id, "analysis")}
    assert "analysis/report.html" in attached


def test_budgeted_and_explicit_spaces(local_ray, tmp_path):
    path = write_experiment(tmp_path, "budget", space=[
        {"type": "budgeted", "budget_units": 6, "count": 2, "seed": 3},
        {"type": "explicit", "orders": ["s^2 f^2", "sffs"]},
    ], baseline={"enabled": False})
    plan, outcome = run(path)
    _, runs = children(tmp_path, outcome)
    assert len(runs) == len(plan.trials) == 4
    spaces = {r.data.tags["sublayer.space"] for r in runs.values()}
    assert spaces == {"budgeted", "explicit"}
    assert all(float(r.data.params["units"]) == 6.0 for r in runs.values())
    assert {"ssff@seed0", "sffs@seed0"} <= set(runs)


def test_optuna_search_over_the_sandwich_coefficient(local_ray, tmp_path):
    path = write_experiment(tmp_path, "optuna", space={"type": "sandwich", "n": 3},
                            search={"algorithm": "optuna", "num_samples": 3, "seed": 0},
                            baseline={"seeds": 1}, seeds=[0, 1])
    plan, outcome = run(path)
    _, runs = children(tmp_path, outcome)
    assert len(runs) == 4  # one baseline seed + 3 proposals
    proposed = [r for r in runs.values() if r.data.tags["sublayer.family"] == "sandwich"]
    assert len(proposed) == 3
    assert all(0 <= int(r.data.params["k"]) <= 2 for r in proposed)
    pairs = [(r.data.params["order"], r.data.params["seed"]) for r in runs.values()]
    assert len(set(pairs)) == len(pairs)
    assert all(r.info.status == "FINISHED" for r in runs.values())


def test_evolution_keeps_the_budget_and_never_repeats(local_ray, tmp_path):
    path = write_experiment(tmp_path, "evo", space={"type": "permutations", "n_s": 3, "n_f": 3,
                                                   "count": 3, "seed": 2},
                            search={"algorithm": "evolution", "num_samples": 5, "population": 2,
                                    "sample_size": 2},
                            baseline={"enabled": False})
    plan, outcome = run(path)
    _, runs = children(tmp_path, outcome)
    assert len(runs) == 5
    orders = [r.data.params["order"] for r in runs.values()]
    assert len(set(orders)) == 5
    assert all(float(r.data.params["units"]) == 9.0 for r in runs.values())
    assert any(r.data.tags["sublayer.space"] == "evolution" for r in runs.values())


def test_failed_and_diverged_trials_are_recorded_and_the_sweep_goes_on(local_ray, tmp_path):
    # sfsf diverges (SGD at a huge rate, no clipping); fssf raises on every attempt.
    path = write_experiment(tmp_path, "faults", space={"type": "explicit", "orders": ["sfsf", "fssf"]},
                            seeds=[7], baseline={"enabled": False}, failure={"retries": 1},
                            train={**TINY_TRAIN, "optimizer": "sgd", "lr": 1.0e6, "clip_norm": None})
    plan, outcome = run(path)
    client, runs = children(tmp_path, outcome)
    assert set(runs) == {"sfsf@seed7", INJECTED_FAILURE}
    diverged, failed = runs["sfsf@seed7"], runs[INJECTED_FAILURE]
    assert diverged.data.tags["sublayer.status"] == "diverged" and diverged.info.status == "FAILED"
    assert "val_loss" in diverged.data.metrics
    assert failed.data.tags["sublayer.status"] == "failed" and failed.info.status == "FAILED"
    assert "failed on purpose" in failed.data.tags["sublayer.error"]
    assert failed.data.tags["sublayer.attempts"] == "2"  # the first try and one retry
    assert client.get_run(outcome.parent_run_id).info.status == "FINISHED"
    statuses = {row["name"]: row["status"] for row in outcome.trials}
    assert statuses == {"sfsf@seed7": "diverged", INJECTED_FAILURE: "failed"}


def test_asha_closes_every_run(local_ray, tmp_path):
    path = write_experiment(tmp_path, "asha", space={"type": "sandwich", "n": 2, "k": [1]},
                            baseline={"seeds": 3}, max_concurrent=1,
                            train={**TINY_TRAIN, "steps": 30},
                            scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2})
    plan, outcome = run(path)
    _, runs = children(tmp_path, outcome)
    assert len(runs) == 4
    assert all(r.info.status == "FINISHED" for r in runs.values())
    assert {r.data.tags["sublayer.status"] for r in runs.values()} <= {"finished", "stopped"}


def test_reuse_takes_finished_trials_from_mlflow(local_ray, tmp_path):
    first = write_experiment(tmp_path, "reuse", space={"type": "explicit", "orders": ["ssff"]},
                             baseline={"enabled": False}, seeds=[0], reuse=True)
    _, outcome1 = run(first)
    again = write_experiment(tmp_path, "reuse", space={"type": "explicit", "orders": ["ssff"]},
                             baseline={"enabled": False}, seeds=[0, 1], reuse=True)
    _, outcome2 = run(again)
    assert outcome2.reused == 1
    assert [row["name"] for row in outcome2.trials] == ["ssff@seed1"]  # only the new seed trained
    client, runs1 = children(tmp_path, outcome1)
    _, runs2 = children(tmp_path, outcome2)
    assert set(runs1) == {"ssff@seed0"} and set(runs2) == {"ssff@seed1"}
    parent = client.get_run(outcome2.parent_run_id)
    assert parent.data.tags["sublayer.reused_trials"] == "1"
    assert "reused_trials.tsv" in {a.path for a in client.list_artifacts(outcome2.parent_run_id)}


def test_translation_sweep_over_iot_subsets(local_ray, tmp_path):
    import json

    path = write_experiment(
        tmp_path, "iot", task="translation",
        space={"type": "iot_subsets", "stack": "decoder", "size": 2, "mode": "paper", "layers": 1},
        baseline={"seeds": 1},
        model={"preset": "debug", "dropout": 0.0},
        data={"name": "multi30k", "vocab_size": 400, "max_train_pairs": 3000,
              "max_train_tokens": 30},
        train={**TINY_TRAIN, "batch_size": 16},
        translation={"beam": 1, "max_len": 20, "eval_sentences": 16})
    plan, outcome = run(path)
    client, runs = children(tmp_path, outcome)
    assert set(runs) == {"transformer1@seed0", "iot46@seed0"}
    assert plan.metric == "val_bleu" and plan.mode == "max"
    iot, base = runs["iot46@seed0"], runs["transformer1@seed0"]
    for r in (iot, base):
        assert r.info.status == "FINISHED" and r.data.tags["sublayer.status"] == "finished"
        assert r.data.params["task"] == "translation" and r.data.params["metric"] == "val_bleu"
        assert "val_bleu" in r.data.metrics and "final_val_bleu" in r.data.metrics
        assert sorted(m.step for m in client.get_metric_history(r.info.run_id, "val_loss")) == [10, 20]
    assert base.data.params["decoder_order"] == "scf" and base.data.params["encoder_order"] == "sf"
    assert iot.data.params["subset"] == "46" and iot.data.params["codes"] == "4,6"
    assert int(iot.data.params["params"]) == int(base.data.params["params"]) + 2 * 32  # N·d
    shares = {k: v for k, v in iot.data.metrics.items() if k.startswith("route_share_")}
    assert set(shares) == {"route_share_4", "route_share_6"}
    assert sum(shares.values()) == pytest.approx(1.0)
    local = client.download_artifacts(iot.info.run_id, "routing_bleu.json", str(tmp_path))
    matrix = json.loads(Path(local).read_text())
    assert set(matrix) <= {"4", "6"} and all(set(row) == {"4", "6"} for row in matrix.values())

    # the IOT analysis on these runs: routing shares and the routing matrix figures
    from sublayer_search.search.cli.main import main

    out = tmp_path / "iot-report"
    assert main(["analyze", "--experiment", "iot", "--tracking-uri",
                 f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    figures = {p.name for p in (out / "figures").glob("*.png")}
    assert {"iot_route_shares.png", "iot_routing_bleu.png"} <= figures


def test_attention_distance_between_two_trained_trials(local_ray, tmp_path):
    """Table 7 on real trained models: checkpoints logged to MLflow, attention captured."""
    import torch

    from sublayer_search.analysis import attention_distance, distance_table
    from sublayer_search.models.data import DataConfig, load_corpus
    from sublayer_search.search.tracking.attention import run_attention

    path = write_experiment(tmp_path, "attn", space={"type": "explicit", "orders": ["sfsf", "ssff"]},
                            baseline={"enabled": False},
                            tracking={"uri": f"sqlite:///{tmp_path}/mlflow.db",
                                      "log_checkpoints": True})
    _, outcome = run(path)
    _, runs = children(tmp_path, outcome)
    valid = load_corpus(DataConfig(name="tinyshakespeare")).valid
    idx = torch.as_tensor(valid[:2 * 32].astype("int64")).view(2, 32)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    a = run_attention(runs["sfsf@seed0"].info.run_id, tracking_uri=uri, idx=idx)
    b = run_attention(runs["ssff@seed0"].info.run_id, tracking_uri=uri, idx=idx)
    assert len(a) == len(b) == 2 and a[0].shape == (2, 2, 32, 32)
    assert attention_distance(a, a) == 0.0
    assert attention_distance(a, b) > 0.0
    assert attention_distance(a, b) == pytest.approx(attention_distance(b, a))
    table = distance_table({"sfsf": a, "ssff": b})
    assert table.shape[0] >= 1
