"""task: mad: the proxy's sweep plans, refuses bad input before anything starts, trains
with Ray Tune, records in MLflow and is analysed like any sweep."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from sublayer_search.search.cli.main import main
from sublayer_search.spaces.exit_codes import ExitCode

REPO = Path(__file__).resolve().parents[2]


def _debug(tmp_path: Path, **changes) -> Path:
    doc = yaml.safe_load((REPO / "configs" / "mad_debug.yaml").read_text())
    doc.update(tracking={"uri": f"sqlite:///{tmp_path}/mlflow.db"},
               ray={"storage_path": str(tmp_path / "ray_results")})
    for key, value in changes.items():
        section, _, field = key.partition("__")
        if field:
            doc[section] = {**doc.get(section, {}), field: value}
        else:
            doc[section] = value
    path = tmp_path / "mad.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_the_dry_run_says_what_a_trial_trains(tmp_path, capsys) -> None:
    assert main(["sweep", str(_debug(tmp_path)), "--dry-run"]) == 0
    captured = capsys.readouterr()
    assert "8 trial(s); metric mad_acc; nothing was run" in captured.out
    assert "checkpoints: none (task mad trials start again" in captured.out
    assert "data.protocol: reduced: 2 setting(s), one per task (in_context_recall, " \
           "memorization)" in captured.err
    assert not (tmp_path / "mlflow.db").exists()


def test_the_full_protocol_is_counted_before_it_runs(tmp_path, capsys) -> None:
    path = _debug(tmp_path, data={"protocol": "full", "tasks": ["memorization"]})
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "data.protocol: full: 6 settings of memorization, 36 runs" in capsys.readouterr().err


@pytest.mark.parametrize(("changes", "message"), [
    ({"data__tasks": ["recall"]}, "data.tasks: got ['recall'], expected distinct task names"),
    ({"data__name": "tinyshakespeare"}, "data.name"),
    ({"model__context": 64}, "model.context: got 64, expected no value here: each MAD task"),
    ({"data__train_samples": 0}, "data.train_samples: got 0, expected a positive integer"),
    ({"train__parallel": "fsdp", "resources": {"cpu": 1, "workers": 2}},
     "a proxy model is small"),
])
def test_bad_input_is_refused_before_anything_starts(tmp_path, capsys, changes, message) -> None:
    assert main(["sweep", str(_debug(tmp_path, **changes))]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


@pytest.mark.slow
def test_a_proxy_sweep_records_scores_per_task_and_the_report_weighs_it(tmp_path) -> None:
    """The proxy sweep alone, then against a language-model sweep of the same orders in
    the same store (one test: each sweep runs once)."""
    from helpers import write_experiment

    proxy = _debug(tmp_path)
    assert main(["sweep", str(proxy)]) == 0
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("mad_debug")
    runs = [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("sublayer.role") == "trial"]
    assert len(runs) == 8
    for run in runs:
        m = run.data.metrics
        assert 0 <= m["acc_in_context_recall"] <= 1 and 0 <= m["acc_memorization"] <= 1
        assert m["mad_acc"] == pytest.approx((m["acc_in_context_recall"]
                                              + m["acc_memorization"]) / 2)
        history = client.get_metric_history(run.info.run_id, "mad_acc")
        assert sorted(h.step for h in history) == [10, 20]  # one report per setting
    orders = yaml.safe_load(proxy.read_text())["space"]["orders"]
    lm = write_experiment(tmp_path, "lm_twin", orders=orders,
                          tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                          baseline={"order": "sfsf", "seeds": 2})
    assert main(["sweep", str(lm)]) == 0
    out = tmp_path / "report"
    assert main(["analyze", "--experiment", "lm_twin", "--proxy", "mad_debug",
                 "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    summary = (out / "tables" / "proxy_trust_summary.csv").read_text()
    rows = {line.split(",")[0]: line.split(",") for line in summary.splitlines()[1:]}
    assert -1 <= float(rows["kendall_tau"][1]) <= 1 and rows["kendall_tau"][5] == "7"
    assert 0 <= float(rows["top5_recall"][1]) <= 1 and float(rows["compute_ratio"][1]) > 0
    assert (out / "figures" / "proxy_trust.png").exists()
    assert "How far the proxy ranks like the language models" in \
        (out / "report.html").read_text()
    # proxy first: the language models of the proxy's 3 best orders only, and the baseline
    scores = {r.data.params["order"]: r.data.metrics["final_mad_acc"] for r in runs
              if r.data.tags.get("sublayer.baseline") != "true"}
    best = sorted(scores, key=lambda o: (-scores[o], o))[:3]
    staged = write_experiment(tmp_path, "lm_staged", orders=orders,
                              tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                              baseline={"order": "sfsf", "seeds": 2},
                              search={"proxy": {"experiment": "mad_debug", "top_k": 3}})
    assert main(["sweep", str(staged)]) == 0
    trained = client.search_runs([client.get_experiment_by_name("lm_staged").experiment_id])
    trained = [r.data.params["order"] for r in trained
               if r.data.tags.get("sublayer.role") == "trial"]
    assert sorted(trained) == sorted([*best, "sfsf", "sfsf"])
    out = tmp_path / "staged_report"
    assert main(["analyze", "--experiment", "lm_staged", "--proxy", "mad_debug",
                 "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    compute = (out / "tables" / "proxy_compute.csv").read_text()
    assert "end to end,6," in compute and "language models trained,4," in compute
    assert "agreement" in (out / "report.html").read_text()


@pytest.mark.parametrize(("argv", "message"), [
    (["--paper", "press2020", "--proxy", "mad_debug"], "--proxy: got 'mad_debug' with --paper"),
    (["--paper", "mini_press2020", "--proxy", "mad_debug"],
     "--proxy: got 'mad_debug' with --paper mini_press2020, expected it with --experiment"),
    (["--experiment", "nope", "--proxy", "mad_debug"], "nope"),
])
def test_a_proxy_the_report_cannot_use_is_named(tmp_path, capsys, argv, message) -> None:
    from mlflow.tracking import MlflowClient as Client

    Client(f"sqlite:///{tmp_path}/mlflow.db").search_experiments()  # an empty store
    assert main(["analyze", *argv, "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
                 "--out", str(tmp_path / "out")]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize(("search", "message"), [
    ({"proxy": {"experiment": "nope"}},
     "search.proxy.experiment: got 'nope', expected the name of a proxy sweep's MLflow"),
    ({"algorithm": "optuna", "num_samples": 3, "proxy": {"experiment": "x"}},
     "search.proxy: got 'x', expected no proxy stage with search.algorithm optuna"),
    ({"proxy": {"experiment": "x", "top_k": 0}}, "search.proxy.top_k"),
])
def test_a_proxy_stage_that_cannot_run_is_refused_before_ray(tmp_path, capsys, search,
                                                             message) -> None:
    from helpers import write_experiment
    from mlflow.tracking import MlflowClient as Client

    Client(f"sqlite:///{tmp_path}/mlflow.db").search_experiments()  # the store exists
    path = write_experiment(tmp_path, "staged", orders=["sfsf", "ssff"],
                            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", search=search)
    assert main(["sweep", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "ray_results").exists()


def test_a_proxy_sweep_takes_no_proxy_stage_and_the_dry_run_names_the_pick(tmp_path, capsys):
    path = _debug(tmp_path, search={"proxy": {"experiment": "other"}})
    assert main(["sweep", str(path), "--dry-run"]) == ExitCode.BAD_INPUT
    assert "no proxy stage in a proxy sweep (task: mad)" in capsys.readouterr().err
    from helpers import write_experiment

    lm = write_experiment(tmp_path, "staged", orders=["ssff", "sffs", "fssf"],
                          tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                          search={"proxy": {"experiment": "mad_debug", "top_k": 2}})
    assert main(["sweep", str(lm), "--dry-run"]) == 0
    assert "search.proxy: when the sweep starts, only the 2 of these 3 orders that " \
           "mad_debug scores best (mad_acc) train" in capsys.readouterr().out


@pytest.mark.slow
def test_a_shipped_studys_orders_scored_by_a_proxy_sweep_are_weighed(tmp_path) -> None:
    """--paper hybrid_mini --proxy: seven of the study's orders, scored at debug size."""
    from sublayer_search.analysis.store.study_export import builtin_export

    trials = builtin_export("hybrid_mini").trials
    orders = sorted(set(trials.loc[~trials["baseline"].astype(bool), "order"]))[:7]
    path = _debug(tmp_path, space={"type": "explicit", "orders": orders},
                  baseline={"enabled": False}, data={"tasks": ["compression"],
                                                     "train_samples": 32, "test_samples": 16},
                  train={"steps": 4, "batch_size": 4, "eval_batch_size": 16})
    assert main(["sweep", str(path)]) == 0
    out = tmp_path / "report"
    assert main(["analyze", "--paper", "hybrid_mini", "--proxy", "mad_debug", "--tracking-uri",
                 f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    table = (out / "tables" / "proxy_trust_orders.csv").read_text().splitlines()
    assert len(table) == 8 and {line.split(",")[0] for line in table[1:]} == set(orders)
