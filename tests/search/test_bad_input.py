"""Bad experiment files and orders: exit status 2, a message that says where and what,
and nothing started or written (no MLflow store, no Ray storage, no Ray processes).

Every case runs the real CLI entry point in-process (``search.cli.main.main``) with the
working directory in ``tmp_path`` and the file's tracking URI and Ray storage pointing
there too, so anything the command wrongly created would show up. The bad files
themselves are catalogued in ``bad_input_cases.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import ray
import yaml
from bad_input_cases import (
    CASES,
    N_GPUS,
    Bad,
    Mutation,
    _base,
    _case_id,
    _do,
    _empty_corpus_dirs,
    _set,
    check_bad_sweep,
)
from bad_input_limits import LIMIT_CASES

from sublayer_search.search.cli.main import main


def _ray_descendants() -> list[str]:
    """Ray processes (raylet, gcs_server, …) started by this test process."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline()) or proc.name()
        except psutil.Error:
            continue
        if "raylet" in cmd or "gcs_server" in cmd or "ray" in proc.name():
            out.append(cmd)
    return out


@pytest.fixture
def untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[set[str]], None]:
    """cwd = tmp_path; afterwards check that nothing was created and Ray never started."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    before = _ray_descendants()
    assert not ray.is_initialized()

    def check(allowed: set[str]) -> None:
        created = {p.name for p in tmp_path.iterdir()} - allowed
        assert created == set(), f"bad input created {created}"
        assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray").exists()
        assert not ray.is_initialized()
        assert _ray_descendants() == before

    return check


def _write(tmp_path: Path, spoil: Mutation) -> Path:
    cfg = _base(tmp_path)
    got = spoil(cfg, tmp_path)
    path = tmp_path / "experiment.yaml"
    path.write_text(got if isinstance(got, str) else yaml.safe_dump(cfg, sort_keys=False))
    return path


ALL_CASES = [*CASES, *LIMIT_CASES]


@pytest.mark.parametrize("case", ALL_CASES, ids=[_case_id(c) for c in ALL_CASES])
def test_bad_experiment_exits_2(case: Bad, tmp_path: Path, untouched: Callable[[set[str]], None],
                                capsys: pytest.CaptureFixture[str]) -> None:
    check_bad_sweep(_write(tmp_path, case.spoil), tmp_path, case.expect, capsys, untouched,
                    case.within)


DRY_RUN_CASES = [c for c in LIMIT_CASES if c.id in (
    "huge-permutation-space", "steps-absurd", "download-yes", "description-beyond-mlflow-tag",
    "model-problems-together", "train-config-as-sweep")]


@pytest.mark.parametrize("case", DRY_RUN_CASES, ids=[c.id for c in DRY_RUN_CASES])
def test_bad_experiment_exits_2_in_a_dry_run_too(case: Bad, tmp_path: Path,
                                                 untouched: Callable[[set[str]], None],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    check_bad_sweep(_write(tmp_path, case.spoil), tmp_path, case.expect, capsys, untouched,
                    case.within, dry_run=True)


def test_good_base_file_passes(tmp_path: Path, untouched: Callable[[set[str]], None],
                               capsys: pytest.CaptureFixture[str]) -> None:
    """The unspoilt base is valid, so each case above fails for its own reason only."""
    path = _write(tmp_path, lambda cfg, tmp: None)
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "5 trial(s)" in capsys.readouterr().out
    untouched({"experiment.yaml"})


def test_missing_file(tmp_path: Path, untouched: Callable[[set[str]], None],
                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "nope.yaml"
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1 problem(s)" in err
    assert f"got '{path}', expected an existing experiment YAML file\n" in err  # no guess
    untouched(set())


def test_a_misspelt_file_names_the_nearest_one(tmp_path: Path,
                                               untouched: Callable[[set[str]], None],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "configs").mkdir()  # untouched made tmp_path the working folder
    (tmp_path / "configs" / "quickstart.yaml").write_text("name: x\n")
    for given in ("configs/quickstrat.yaml", "config/quickstart.yaml"):
        assert main(["sweep", given]) == 2
        err = capsys.readouterr().err
        assert f"got '{given}', expected an existing experiment YAML file (did you mean " \
               "'configs/quickstart.yaml'?)" in err, err
    assert main(["train", "--order", "sfsf", "--data", "tinyshakespeare", "--config",
                 "configs/quickstart.yml"]) == 2
    assert "(did you mean 'configs/quickstart.yaml'?)" in capsys.readouterr().err
    untouched({"configs"})


def _downloadable_but_absent(cfg: dict[str, Any], tmp_path: Path) -> None:
    _empty_corpus_dirs(cfg, tmp_path)
    cfg["data"]["download"] = True


def test_a_corpus_that_cannot_be_downloaded_fails_before_ray(
        tmp_path: Path, untouched: Callable[[set[str]], None], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not on disk, download allowed, but unreachable: the driver tries the download while
    it plans, so the sweep stops with exit 2 instead of failing every trial."""
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", f"http://127.0.0.1:{port}")
    path = _write(tmp_path, _downloadable_but_absent)
    before = {p.name for p in tmp_path.iterdir()}
    assert main(["sweep", str(path), "--dry-run"]) == 0  # planning only: a note, no download
    err = capsys.readouterr().err
    assert "note: data.name: tinyshakespeare is not on disk here; the sweep downloads it" in err
    assert not any((tmp_path / "empty_cache").rglob("input.txt"))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "data.name: got 'tinyshakespeare', expected an available corpus" in err, err
    assert f"download of http://127.0.0.1:{port}/input.txt failed" in err, err
    assert not any((tmp_path / "empty_cache").rglob("input.txt"))  # nothing half-written
    untouched(before)


def test_all_problems_reported_at_once(tmp_path: Path, untouched: Callable[[set[str]], None],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Cross-field problems (spaces, model, resources, search) come in one message."""
    path = _write(tmp_path, _do(
        _set("space.k", [0, 4]), _set("model", {"preset": "debug", "d_model": 30, "n_heads": 4}),
        _set("resources.gpu", N_GPUS + 1), _set("scheduler", {"type": "asha", "metric": "foo"}),
        _set("search", {"algorithm": "optuna"})))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 5 problem(s)" in err
    for fragment in ("model.d_model: got 30", "space.k[1]: got 4", "resources.gpu: got",
                     "scheduler.metric: got 'foo'", "search.num_samples: got None"):
        assert f"  - {fragment}" in err, err
    untouched({"experiment.yaml"})


def test_all_shape_problems_reported_at_once(tmp_path: Path,
                                             untouched: Callable[[set[str]], None],
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Type and unknown-key problems of different sections come in one message."""
    path = _write(tmp_path, _do(_set("train.lr", "fast"), _set("resources.cpu", "two"),
                                _set("colour", "blue"), _set("seeds", "x"),
                                _set("scheduler", {"type": "hyperband"})))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 5 problem(s)" in err
    for fragment in ("train.lr: got 'fast'", "resources.cpu: got 'two'", "colour: unknown key",
                     "seeds: got 'x'", "scheduler.type: got 'hyperband'"):
        assert f"  - {fragment}" in err, err
    untouched({"experiment.yaml"})


# -- sublayer train / sublayer spaces sample ------------------------------------------------
@pytest.mark.parametrize(("argv", "expect"), [
    (["--order", "sfx", "--data", "tinyshakespeare"],
     ("invalid order 'sfx': position 2: unknown symbol 'x'",)),
    (["--order", "(sf", "--data", "tinyshakespeare"],
     ("invalid order '(sf': position 0: unbalanced parenthesis",)),
    (["--order", "s^0 f", "--data", "tinyshakespeare"],
     ("invalid order 's^0 f': position 2: exponent 0",)),
    (["--order", "scf", "--data", "tinyshakespeare"],
     ("position 1: 'c' is not allowed in an order for kind 'lm'",)),
    (["--order", "", "--data", "tinyshakespeare"], ("position 0: empty order",)),
    (["--order", "s^2000", "--data", "tinyshakespeare"], ("longer than 1024 sublayers",)),
    (["--order", "sfsf", "--data", "shakespeare-full"],
     ("data.name: got 'shakespeare-full', expected one of tinyshakespeare",)),
    (["--order", "sfsf"], ("data.name: got None, expected a corpus name (--data NAME)",)),
    (["--order", "sfsf", "--data", "tinyshakespeare", "--preset", "huge"],
     ("model.preset: got 'huge'",)),
    (["--order", "sfsf", "--data", "tinyshakespeare", "--steps", "many"],
     ("argument --steps: invalid int value: 'many'",)),
], ids=["unknown-symbol", "unbalanced", "zero-exponent", "c-in-lm", "empty", "too-long",
        "unknown-corpus", "no-corpus", "unknown-preset", "steps-not-int"])
def test_bad_train_invocation(argv: list[str], expect: tuple[str, ...], tmp_path: Path,
                              untouched: Callable[[set[str]], None],
                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", *argv, "--checkpoint-dir", str(tmp_path / "ckpt")]) == 2
    out, err = capsys.readouterr()
    for fragment in expect:
        assert fragment in err, err
    assert "Traceback" not in err and "step" not in out
    untouched(set())


def test_train_with_bad_config_file(tmp_path: Path, untouched: Callable[[set[str]], None],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({"model": {"d_model": 32}, "train": {"lr": "fast"}}))
    assert main(["train", "--order", "sfsf", "--data", "tinyshakespeare",
                 "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: 1 problem(s)" in err and "train.lr: got 'fast', expected a number" in err
    untouched({"train.yaml"})


@pytest.mark.parametrize(("argv", "expect"), [
    (["sandwich", "n=4", "k=[5]"], "k[0]: got 5, expected an integer in 0..3"),
    (["sandwich", "n=4", "k=[-1]"], "k[0]: got -1, expected an integer in 0..3"),
    (["sandwich", "n"], "space argument 'n': expected NAME=VALUE"),
    (["zigzag", "n=4"], "name: got 'zigzag', expected one of budgeted, budgeted_kinds, explicit"),
    (["permutations", "n_s=2", "count=3"], "n_f: got None, expected a value: 'n_f' is required"),
    (["budgeted", "budget_units=3", "count=9"], "count: got 9, expected at most 3"),
    (["explicit", "orders=[sfx]"], "orders[0]: got 'sfx', expected a valid lm order (position 2"),
], ids=["k-too-big", "k-negative", "no-equals", "unknown-space", "missing-arg", "budget-count",
        "explicit"])
def test_bad_spaces_sample(argv: list[str], expect: str, tmp_path: Path,
                           untouched: Callable[[set[str]], None],
                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spaces", "sample", *argv]) == 2
    out, err = capsys.readouterr()
    assert expect in err and out == "", err
    untouched(set())


def test_base_cases_are_distinct() -> None:
    ids = [_case_id(c) for c in CASES]
    assert len(ids) == len(set(ids)) and len(ids) >= 30
