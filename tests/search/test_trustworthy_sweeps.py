"""Sweeps whose answers can be trusted: early stopping that says so, baselines never
stopped, reuse that reports what it did, explicit sandwiches counted as sandwiches."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep

TINY_TRAIN = {"steps": 30, "batch_size": 8, "eval_every": 10, "eval_batches": 2, "lr": 0.003}


def _write(tmp_path: Path, name: str, **overrides: object) -> Path:
    doc: dict[str, object] = {
        "name": name, "space": {"type": "explicit", "orders": ["ssff"]}, "seeds": [0],
        "baseline": {"enabled": False}, "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"}, "train": dict(TINY_TRAIN),
        "resources": {"cpu": 1}, "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    doc.update(overrides)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_explicit_orders_that_are_sandwiches_carry_the_family(tmp_path):
    path = _write(tmp_path, "explicit", space={"type": "explicit",
                                               "orders": ["s^2 (sf)^2 f^2", "sfsffs", "ssffsf"]})
    plan = plan_sweep(load_experiment(path), check_resources=False)
    by_order = {t.order: t for t in plan.trials}
    sandwich = by_order["sssfsfff"]
    assert sandwich.family == "sandwich" and sandwich.params["k"] == 2
    assert plan.row(sandwich)["k"] == 2 and plan.row(sandwich)["family"] == "sandwich"
    for order in ("sfsffs", "ssffsf"):  # not sandwiches: stay explicit, no k
        assert by_order[order].family == "explicit" and "k" not in by_order[order].params


@pytest.fixture(scope="module")
def local_ray():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def _children(tmp_path: Path, experiment_id: str, parent_id: str) -> dict[str, object]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([experiment_id],
                              filter_string=f"tags.mlflow.parentRunId = '{parent_id}'")
    return {r.info.run_name: r for r in runs}


@pytest.mark.slow
def test_asha_stops_candidates_only_and_studies_keep_them_apart(local_ray, tmp_path):
    from sublayer_search.analysis.store import runs as analysis_runs
    from sublayer_search.analysis.store.frame import with_stopped
    from sublayer_search.analysis.studies.distribution import distribution
    from sublayer_search.search.run.sweep import run_sweep

    path = _write(tmp_path, "asha", space={"type": "permutations", "n_s": 2, "n_f": 2, "count": 6},
                  baseline={"seeds": 3}, max_concurrent=1,
                  scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2})
    plan = plan_sweep(load_experiment(path), str(path))
    outcome = run_sweep(plan)
    runs = _children(tmp_path, outcome.experiment_id, outcome.parent_run_id)
    assert len(runs) == len(plan.trials) == 8  # sfsf is the baseline order: merged into it
    tags = {name: r.data.tags for name, r in runs.items()}  # type: ignore[attr-defined]
    stopped = {n for n, t in tags.items() if t["sublayer.status"] == "stopped"}
    assert stopped, "ASHA stopped no trial: the test must see one stopped"
    for name in stopped:
        assert int(tags[name]["sublayer.steps"]) < 30 and tags[name]["sublayer.baseline"] == "false"
    # the sweep's closing table says the same as MLflow (it used to say "running")
    assert {r["name"] for r in outcome.trials if r["status"] == "stopped"} == stopped
    assert {r["status"] for r in outcome.trials} <= {"stopped", "finished"}
    for name, t in tags.items():
        if t["sublayer.baseline"] == "true":  # never stopped early
            assert t["sublayer.status"] == "finished" and t["sublayer.steps"] == "30", name

    frame = analysis_runs.load("asha", f"sqlite:///{tmp_path}/mlflow.db")
    assert set(frame.loc[frame["status"] == "stopped", "name"]) == stopped
    assert (frame.loc[frame["status"] == "stopped", "steps"] < 30).all()
    info = distribution(frame)
    assert set(info.stopped["name"]) == stopped  # a group of their own
    assert not set(info.models["name"]) & stopped  # never counted with trained ones
    included = distribution(with_stopped(frame))  # explicit option: at their last value
    assert set(included.models["name"]) >= stopped and included.stopped.empty


@pytest.mark.slow
def test_full_reuse_finishes_and_reuse_across_experiments_copies_runs(local_ray, tmp_path,
                                                                      capsys, monkeypatch):
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.store import runs as analysis_runs
    from sublayer_search.search.cli.main import main

    monkeypatch.chdir(tmp_path)
    first = _write(tmp_path, "origin", reuse=True)
    assert main(["sweep", str(first)]) == 0
    capsys.readouterr()
    assert main(["sweep", str(first)]) == 0  # every trial reused: not "interrupted"
    out, err = capsys.readouterr()
    assert "1 trial(s) reused" in out and "interrupted" not in err
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    origin = client.get_experiment_by_name("origin")
    parents = client.search_runs([origin.experiment_id], "tags.`sublayer.role` = 'sweep'")
    assert [p.info.status for p in parents] == ["FINISHED", "FINISHED"]

    # another experiment, same content key (order, seed, resolved settings): copied in
    other = _write(tmp_path, "elsewhere", reuse="store")
    assert main(["sweep", str(other)]) == 0
    assert "1 trial(s) reused" in capsys.readouterr().out
    elsewhere = client.get_experiment_by_name("elsewhere")
    (parent,) = client.search_runs([elsewhere.experiment_id], "tags.`sublayer.role` = 'sweep'")
    (copy,) = _children(tmp_path, elsewhere.experiment_id, parent.info.run_id).values()
    source_id = copy.data.tags["sublayer.reused_from"]  # type: ignore[attr-defined]
    source = client.get_run(source_id)
    assert source.info.experiment_id == origin.experiment_id
    assert copy.data.params == source.data.params  # type: ignore[attr-defined]
    assert copy.data.metrics["final_val_bpc"] == source.data.metrics["final_val_bpc"]  # type: ignore[attr-defined]
    history = client.get_metric_history(copy.info.run_id, "val_loss")  # type: ignore[attr-defined]
    assert sorted(m.step for m in history) == [10, 20, 30]
    frame = analysis_runs.load("elsewhere", f"sqlite:///{tmp_path}/mlflow.db")
    assert list(frame["name"]) == ["ssff@seed0"] and list(frame["status"]) == ["finished"]
    assert os.path.isdir(tmp_path / "ray")


@pytest.mark.slow
def test_analyze_reports_table7_from_logged_checkpoints(local_ray, tmp_path, capsys):
    import pandas as pd

    from sublayer_search.search.cli.main import main
    from sublayer_search.search.run.sweep import run_sweep

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    path = _write(tmp_path, "table7", space={"type": "sandwich", "n": 2, "k": [1]},
                  baseline={"seeds": 2}, tracking={"uri": uri, "log_checkpoints": True})
    run_sweep(plan_sweep(load_experiment(path), str(path)))
    out = tmp_path / "report"
    assert main(["analyze", "--experiment", "table7", "--tracking-uri", uri, "--out", str(out),
                 "--no-attach"]) == 0
    table = pd.read_csv(out / "tables" / "table7_attention_distance.csv")
    assert list(table["pair"]) == ["baseline vs baseline", "baseline vs sandwich"]
    assert list(table["n"]) == [1, 2] and (table["mean"] > 0).all()
    html = (out / "report.html").read_text()
    assert "Table 7: attention distance" in html and "validation tokens of tinyshakespeare" in html

    plain = _write(tmp_path, "nockpt", space={"type": "sandwich", "n": 2, "k": [1]},
                   baseline={"seeds": 2}, tracking={"uri": uri})
    run_sweep(plan_sweep(load_experiment(plain), str(plain)))
    out2 = tmp_path / "report2"
    assert main(["analyze", "--experiment", "nockpt", "--tracking-uri", uri, "--out", str(out2),
                 "--no-attach"]) == 0
    assert "no finished trial of this sweep logged a checkpoint" in (out2 / "report.html").read_text()
    assert not (out2 / "tables" / "table7_attention_distance.csv").exists()


@pytest.mark.slow
def test_analyze_pools_two_real_sweeps(local_ray, tmp_path):
    import pandas as pd

    from sublayer_search.search.cli.main import main
    from sublayer_search.search.run.sweep import run_sweep

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    for name, order in (("pool_a", "ssff"), ("pool_b", "sffs")):
        path = _write(tmp_path, name, space={"type": "explicit", "orders": [order]},
                      seeds=[0, 1], baseline={"seeds": 2},
                      train={**TINY_TRAIN, "steps": 10, "eval_every": 10})
        run_sweep(plan_sweep(load_experiment(path), str(path)))
    out = tmp_path / "pooled"
    assert main(["analyze", "--experiment", "pool_a", "--experiment", "pool_b",
                 "--tracking-uri", uri, "--out", str(out), "--no-attach"]) == 0
    seeds = pd.read_csv(next((out / "tables").glob("*seeds*.csv")))
    assert {"ssff", "sffs"} <= set(seeds.astype(str).stack())  # both sweeps' orders
    assert {"p_adjusted", "seeds_for_80_power", "verdict"} <= set(seeds.columns)
    html = (out / "report.html").read_text()
    assert "pool_a" in html and "pool_b" in html
