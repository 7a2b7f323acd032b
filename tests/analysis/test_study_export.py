"""Exports (``analysis.store.study_export``): the loaded frames written as three flat files and
read back unchanged, a report from them, clear errors for broken ones, package data."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path

import pandas as pd
import pytest
from analysis_helpers import SWEEP

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.report.build import experiment_report
from sublayer_search.analysis.store import runs, study_export
from sublayer_search.analysis.store.frame import HISTORY_COLUMNS
from sublayer_search.analysis.store.study_export import (
    BUILTIN_EXPORTS,
    StudyExport,
    builtin_export,
    export_files,
    open_export,
    read_export,
    write_export,
)

REPO = Path(__file__).resolve().parents[2]


def _timed(trials: pd.DataFrame) -> pd.DataFrame:
    out = trials.copy()
    out["start_ms"] = pd.array([1000 * i for i in range(len(out))], dtype="Int64")
    out["end_ms"] = pd.array([1000 * i + 500 for i in range(len(out))], dtype="Int64")
    return out


@pytest.fixture(scope="module")
def loaded(mlflow_store):
    trials, history = runs.load(SWEEP, mlflow_store, history=True)
    history = history.assign(time_ms=pd.array(range(len(history)), dtype="Int64"))
    return _timed(trials), history


@pytest.fixture
def written(loaded, tmp_path) -> Path:
    trials, history = loaded
    write_export(trials, history, {"experiment": SWEEP, "metric": "val_ppl"}, tmp_path, "demo")
    return tmp_path


def test_a_read_export_is_the_loaded_frame(loaded, written):
    trials, history = loaded
    got = read_export(written, "demo")
    pd.testing.assert_frame_equal(got.trials, trials)  # dtypes too: all-empty columns come back
    pd.testing.assert_frame_equal(got.history[list(HISTORY_COLUMNS)],
                                  history[list(HISTORY_COLUMNS)])
    assert got.history["time_ms"].tolist() == history["time_ms"].tolist()
    names = dict(zip(trials["run_id"], trials["name"], strict=True))
    assert got.history["name"].tolist() == [names[r] for r in history["run_id"]]
    assert got.meta["statuses"] == {"diverged": 1, "failed": 1, "finished": 5, "killed": 1}
    assert got.meta["format"] == 1 and got.meta["trials"] == 8 and got.metric == "val_ppl"
    header = (written / "demo_trials.csv").read_text().splitlines()[0].split(",")
    assert "steps" in trials.columns and "steps" not in header  # all empty: left out


def test_a_report_runs_on_a_read_export(written, tmp_path):
    got = read_export(written, "demo")
    report = experiment_report(got.trials, tmp_path / "report", title="demo",
                               history=got.history)
    assert report.numbers["Trials: trials"] == 8
    assert report.numbers["Trials: baseline"].startswith("11 ± 1.4 (n=2)")
    assert (tmp_path / "report" / "figures" / "history.png").stat().st_size > 1000


def test_open_export_takes_a_folder_or_a_meta_file(written):
    by_file = open_export(written / "demo_meta.json")
    assert isinstance(by_file, StudyExport) and by_file.name == "demo"
    assert len(open_export(written).trials) == 8  # the folder's only export
    write_export(by_file.trials, by_file.history, by_file.meta, written, "again")
    with pytest.raises(AnalysisError, match="holds again, demo, expected one export"):
        open_export(written)
    with pytest.raises(AnalysisError, match="expected a folder of exports"):
        open_export(written / "nowhere")


def _broken(folder: Path, file: str, text: str | None) -> str:
    path = folder / file
    if text is None:
        path.unlink()
    else:
        path.write_text(text)
    with pytest.raises(AnalysisError) as caught:
        read_export(folder, "demo")
    return str(caught.value)


def test_a_broken_export_names_the_file_and_what_is_missing(written):
    meta = json.loads((written / "demo_meta.json").read_text())
    trials_csv = (written / "demo_trials.csv").read_text()
    message = _broken(written, "demo_trials.csv", trials_csv.replace("status", "state", 1))
    assert "demo_trials.csv: missing column(s) status" in message
    (written / "demo_trials.csv").write_text(trials_csv)
    assert "demo_meta.json: format 2, expected 1" in _broken(
        written, "demo_meta.json", json.dumps({**meta, "format": 2}))
    assert "demo_meta.json: not JSON" in _broken(written, "demo_meta.json", "{")
    message = _broken(written, "demo_curves.csv", None)
    assert "missing demo_curves.csv" in message and "sublayer export" in message
    with pytest.raises(AnalysisError, match="expected an existing folder"):
        read_export(written / "absent", "demo")
    with pytest.raises(AnalysisError, match="export name: got 'a/b'"):
        read_export(written, "a/b")


def test_write_export_needs_the_trial_times(loaded, tmp_path):
    trials, history = loaded
    with pytest.raises(AnalysisError, match="missing column.s. start_ms, end_ms"):
        write_export(trials.drop(columns=["start_ms", "end_ms"]), history, {}, tmp_path, "x")
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_the_package_data_globs_ship_every_export_file():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = conf["tool"]["setuptools"]["package-data"]["sublayer_search.analysis"]
    for path in export_files("analysis/data", "mini_press2020"):
        relative = f"data/{path.name}"
        assert any(fnmatch.fnmatch(relative, g) for g in globs), (relative, globs)


def test_builtin_exports_are_the_shipped_meta_files(loaded, tmp_path, monkeypatch):
    shipped = sorted(p.name.removesuffix("_meta.json")
                     for p in (REPO / "analysis" / "data").glob("*_meta.json"))
    assert list(BUILTIN_EXPORTS) == shipped
    for name in shipped:  # each shipped export reads and validates
        assert not builtin_export(name).trials.empty
    with pytest.raises(AnalysisError, match="built-in study: got 'nope', expected (one of|a shipped study)"):
        builtin_export("nope")
    trials, history = loaded  # a package data folder holding an export
    write_export(trials, history, {"metric": "val_ppl"}, tmp_path, "shipped")
    monkeypatch.setattr(study_export, "_data", lambda: tmp_path)
    monkeypatch.setattr(study_export, "BUILTIN_EXPORTS", study_export._builtin_names())
    assert study_export.BUILTIN_EXPORTS == ("shipped",)
    got = open_export("shipped")  # not a path here: the built-in one
    pd.testing.assert_frame_equal(got.trials, trials)
    assert "package data" in got.trials.attrs["source"]
