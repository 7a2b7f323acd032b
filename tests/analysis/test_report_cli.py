"""Reports and the `sublayer analyze` entry point (run_analyze)."""

from __future__ import annotations

import argparse

import pytest
from analysis_helpers import NO_BASELINE, SWEEP, frame, trial

from sublayer_search.analysis import AnalysisError, experiment_report
from sublayer_search.analysis.cli import add_arguments, main, run_analyze


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))



def test_paper_report_files_and_key_numbers(tmp_path, capsys):
    assert run_analyze(_args("--paper", "press2020", "--out", str(tmp_path))) == 0
    html = (tmp_path / "report.html").read_text()
    assert "7 of 20" in html and "4 of 20" in html and "18.19" in html and "18.12" in html
    assert "}}" not in html and "0.001289" in html and "&lt;NA&gt;" not in html  # published Table 7 shown inline
    for stem in ("table1_distribution", "table2_halves", "table1_position_map", "sandwich",
                 "sandwich16_6_seeds"):
        assert (tmp_path / "figures" / f"{stem}.png").stat().st_size > 1000
        assert (tmp_path / "figures" / f"{stem}.svg").exists()
        assert f"figures/{stem}.svg" in html
    for name in ("press2020_table1", "table1_halves_means", "sandwich_statements",
                 "press2020_attention_distances", "press2020_wikitext103_test"):
        assert (tmp_path / "tables" / f"{name}.csv").exists()
    # baseline lines are named in the figure legends
    svg = (tmp_path / "figures" / "sandwich.svg").read_text()
    assert "average baseline" in svg and "best baseline" in svg
    assert "report.html" in capsys.readouterr().out


def test_experiment_report_on_hand_frame(tmp_path):
    f = frame(trial("sfsf", 10.0, baseline=True, seed=0), trial("sfsf", 12.0, baseline=True,
              seed=1), trial("ssff", 9.0, k=1, seed=0), trial("ssff", 9.5, k=1, seed=1),
              trial("fsfs", 13.0))
    rep = experiment_report(f, tmp_path, title="hand")
    names = {p.name for p in rep.figures}
    assert {"sweep_distribution.png", "sweep_halves.svg", "sandwich.png",
            "sweep_seeds.svg"} <= names
    assert rep.numbers["Fig. 2/3: Sweep, every model against the baseline seeds: at least as "
                       "good as the average baseline"] == "2 of 3"
    with pytest.raises(AnalysisError, match="no finished baseline"):
        experiment_report(frame(trial("ssff", 9.0)), tmp_path / "x", title="no baseline")


def test_analyze_experiment_writes_and_attaches(mlflow_store, tmp_path, capsys):
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.store import runs

    out = tmp_path / "report"
    code = run_analyze(_args("--experiment", SWEEP, "--tracking-uri", mlflow_store,
                             "--out", str(out), "--history"))
    assert code == 0, capsys.readouterr().err
    html = (out / "report.html").read_text()
    assert "status failed" in html and "status diverged" in html and "status killed" in html
    assert (out / "figures" / "history.png").exists()
    assert (out / "tables" / "trials.csv").read_text().count("\n") == 9
    parent = runs.find_sweep_run(SWEEP, mlflow_store)
    client = MlflowClient(tracking_uri=mlflow_store)
    attached = {a.path for a in client.list_artifacts(parent, "analysis")}
    assert "analysis/report.html" in attached and "analysis/figures" in attached


def test_analyze_bad_input_exit_2(mlflow_store, tmp_path, capsys):
    code = run_analyze(_args("--experiment", "missing", "--tracking-uri", mlflow_store,
                             "--out", str(tmp_path)))
    err = capsys.readouterr().err
    assert code == 2 and "unknown experiment 'missing'" in err and SWEEP in err
    code = run_analyze(_args("--experiment", NO_BASELINE, "--tracking-uri", mlflow_store,
                             "--out", str(tmp_path), "--no-attach"))
    assert code == 2 and "no finished baseline" in capsys.readouterr().err
    code = run_analyze(_args("--experiment", SWEEP, "--tracking-uri", mlflow_store,
                             "--out", str(tmp_path), "--metric", "val_bleu", "--no-attach"))
    assert code == 2 and "unknown metric 'val_bleu'" in capsys.readouterr().err
    # a namespace built elsewhere with both or neither source
    ns = argparse.Namespace(experiment=None, paper=None, out=str(tmp_path))
    assert run_analyze(ns) == 2
    ns = argparse.Namespace(experiment=None, paper="press2099", out=str(tmp_path))
    assert run_analyze(ns) == 2 and "unknown paper" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse: exactly one source is required
        main(["--out", str(tmp_path)])
    assert exc.value.code == 2
