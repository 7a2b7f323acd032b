"""``sublayer export`` on a real tiny ASHA sweep: the export is what MLflow holds, replays
to the same decisions as the store, and serves as the searchers' tabular oracle."""

from __future__ import annotations

import importlib.util
import json

import pandas as pd
import pytest
import yaml
from helpers import REPO, scratch

from sublayer_search.search.cli.main import main

TRAIN = {"steps": 40, "batch_size": 8, "eval_every": 10, "eval_batches": 2, "lr": 0.003}
NAME = "exported"
pytestmark = pytest.mark.slow  # one real sweep: ~45 s on a busy 2-core machine


@pytest.fixture(scope="module")
def sweep():
    """(tracking URI, export folder) of a finished 6-trial ASHA sweep (one trial at a time:
    its decisions are fixed by the trial order, as in test_replay_sweep)."""
    import ray

    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.run.sweep import run_sweep

    with scratch("export") as folder:
        uri = f"sqlite:///{folder}/mlflow.db"
        doc = {
            "name": NAME,
            "space": {"type": "explicit", "orders": ["ssff", "sffs", "fssf", "ffss", "fsfs"]},
            "seeds": [0], "baseline": {"seeds": 1},
            "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
            "train": TRAIN, "resources": {"cpu": 1}, "max_concurrent": 1,
            "scheduler": {"type": "asha", "grace_period": 1, "reduction_factor": 2},
            "tracking": {"uri": uri}, "ray": {"storage_path": str(folder / "ray")},
        }
        path = folder / f"{NAME}.yaml"
        path.write_text(yaml.safe_dump(doc))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
        try:
            run_sweep(plan_sweep(load_experiment(path), str(path)))
        finally:
            ray.shutdown()
        yield uri, folder / "export"


@pytest.fixture(scope="module")
def exported(sweep):
    uri, out = sweep
    assert main(["export", NAME, "--out", str(out), "--tracking-uri", uri]) == 0
    return out


def test_export_writes_what_mlflow_holds(sweep, exported, capsys):
    from sublayer_search.analysis.store import runs
    from sublayer_search.analysis.store.frame import HISTORY_COLUMNS
    from sublayer_search.analysis.store.study_export import read_export

    uri, _ = sweep
    assert sorted(p.name for p in exported.iterdir()) == [
        f"{NAME}_curves.csv", f"{NAME}_meta.json", f"{NAME}_trials.csv"]
    got = read_export(exported, NAME)
    trials, history = runs.load(NAME, uri, history=True)
    # end_ms: the run's end in the loaded frame (replays keep the latest), the last
    # final_<metric> stamp in the export; start_ms: the run's start in both
    pd.testing.assert_frame_equal(got.trials.drop(columns=["start_ms", "end_ms"]),
                                  trials.drop(columns=["start_ms", "end_ms"]))
    assert list(got.trials["start_ms"]) == list(trials["start_ms"])
    pd.testing.assert_frame_equal(got.history[list(HISTORY_COLUMNS)], history)
    assert (got.trials["start_ms"] < got.trials["end_ms"]).all()
    meta = got.meta
    assert (meta["metric"], meta["mode"], meta["scheduler"]) == ("val_bpc", "min", "asha")
    assert (meta["train"]["steps"], meta["train"]["eval_every"]) == (40, 10)
    assert yaml.safe_load(meta["experiment_yaml"])["name"] == NAME
    assert meta["versions"]["torch"] and meta["wall_s"] > 0 and len(meta["sweeps"]) == 1
    assert sum(meta["statuses"].values()) == len(trials) == 6


def test_replay_from_the_export_is_the_replay_from_mlflow(sweep, exported, capsys):
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.store.study_export import read_export
    from sublayer_search.search.recorded.from_export import sweep_from_export
    from sublayer_search.search.replay.store import load_sweep

    uri, _ = sweep
    store = load_sweep(MlflowClient(tracking_uri=uri), NAME, scheduler_metric="val_loss")
    assert store.stopped, "ASHA stopped nothing: agreement would prove little"
    assert sweep_from_export(read_export(exported, NAME), scheduler_metric="val_loss") == store

    capsys.readouterr()
    outputs = []
    for source in (["replay", NAME, "--tracking-uri", uri],
                   ["replay", "--export", str(exported / f"{NAME}_meta.json")]):
        for extra in (["--metric", "val_loss", "--top-k", "2"], ["--grid"]):
            assert main([*source, *extra]) == 0
            outputs.append(capsys.readouterr().out)
    assert outputs[:2] == outputs[2:]
    assert "trial(s) stopped" in outputs[0] and "top-2 by final val_bpc" in outputs[0]


def test_an_export_is_the_searchers_oracle(sweep, exported, capsys):
    from sublayer_search.analysis.store import runs
    from sublayer_search.search.recorded.oracle import OrderTable

    finished = runs.load(NAME, sweep[0]).query("status == 'finished'")
    assert not finished.empty
    table = OrderTable.from_export(exported)
    assert (table.metric, table.mode) == ("val_bpc", "min")
    assert table.values == finished.groupby("order")["final"].mean().to_dict()
    assert OrderTable.from_csv(exported / f"{NAME}_trials.csv").values == table.values

    spec = importlib.util.spec_from_file_location(
        "searcher_oracle", REPO / "benchmarks" / "searcher_oracle.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--export", str(exported), "--only-given", "--seeds", "2", "--json"]) == 0
    (result,) = json.loads(capsys.readouterr().out)  # one space (explicit) with its baseline
    assert result["orders"] == len(table.values)
    assert set(result["searchers"]) == {"random", "tpe", "surrogate", "evolution", "prior",
                                        "evo-prior", "queue-prior"}
    assert result["left_out"] == ["exported/explicit"]  # itself: never its own prior
    assert "press2020/table1" in result["prior"]


def test_passwords_in_uris_of_the_yaml_are_masked():
    from sublayer_search.search.tracking.export import masked

    text = "tracking: {uri: 'postgresql://me:s3cr:t@db:5432/x'}\nlink: https://host/a:b@c\n"
    assert masked(text) == "tracking: {uri: 'postgresql://me:***@db:5432/x'}\n" \
        "link: https://host/a:b@c\n"


@pytest.mark.parametrize(("argv", "expected"), [
    (["export", "nope", "--out", "{tmp}/x"], "unknown experiment 'nope'"),
    (["export", "empty", "--out", "{tmp}/x"], "'empty' has no trial runs"),
    (["export", NAME, "--out", "{tmp}/file"], "--out: got '{tmp}/file', expected a folder"),
    (["export", NAME, "--out", "{tmp}/x", "--name", "a b"], "export name: got 'a b'"),
    (["replay", "--tracking-uri", "{uri}"], "EXPERIMENT: got none, expected"),
    (["replay", NAME, "--export", "{tmp}"], "EXPERIMENT/--export: got"),
    (["replay", "--export", "{tmp}/x"], "export: got '{tmp}/x', expected a folder of exports"),
    (["replay", "--builtin", "nope"], "built-in study: got 'nope'"),
    (["replay", "--name", "x", "--builtin", "nope"], "--name: got 'x' without --export"),
])
def test_bad_input_is_one_line_and_exit_2(sweep, tmp_path, capsys, argv, expected):
    from mlflow.tracking import MlflowClient

    uri, _ = sweep
    client = MlflowClient(tracking_uri=uri)
    if client.get_experiment_by_name("empty") is None:
        client.create_experiment("empty")
    (tmp_path / "file").write_text("")
    args = [a.format(tmp=tmp_path, uri=uri) for a in argv]
    if args[0] == "export":
        args += ["--tracking-uri", uri]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert expected.format(tmp=tmp_path) in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
