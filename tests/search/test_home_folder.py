"""A ``$HOME`` that does not exist is named with exit status 2 before Ray or MLflow start,
never created; a command that keeps nothing under ``$HOME`` does not ask for one."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import REPO, SUBLAYER, scratch

from sublayer_search.models.data.config import DataConfig
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.preflight import home_problems
from sublayer_search.spaces.exit_codes import ExitCode

_HOME_SETTINGS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS",
                  "SUBLAYER_CACHE_DIR")
"""The settings that move what a sweep keeps under ``$HOME`` elsewhere: all unset here."""


@pytest.fixture
def no_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A missing HOME with a short path: error messages shorten long values, and tmp_path's
    length varies (pytest-N, an xdist worker's folder)."""
    with scratch("nohome-") as base:
        home = base / "no" / "home"
        for name in _HOME_SETTINGS:
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(home))
        yield home


def test_a_sweep_with_a_missing_home_is_exit_2_naming_it(tmp_path: Path, no_home: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([str(SUBLAYER), "sweep", str(REPO / "configs" / "quickstart.yaml")],
                          cwd=work, env=dict(os.environ), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == ExitCode.BAD_INPUT, done.stderr
    assert f"HOME: got '{no_home}', expected an existing, writable folder" in done.stderr
    assert "Ray's auth token and the corpus cache go under it" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert list(work.iterdir()) == []  # no mlflow.db, no ray_results
    assert not no_home.parent.exists()  # named, not created


def test_train_with_a_missing_home_is_exit_2(no_home: Path, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["train", "--order", "sfsf", "--data", "tinyshakespeare", "--preset", "debug",
                 "--steps", "2"])
    err = capsys.readouterr().err
    assert code == ExitCode.BAD_INPUT, err
    assert f"HOME: got '{no_home}'" in err and "the corpus cache goes under it" in err
    assert not no_home.parent.exists()


def test_home_is_asked_for_only_when_something_goes_under_it(
        no_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = DataConfig(name="tinyshakespeare")
    assert [p.path for p in home_problems(data, local_ray=True)] == ["HOME"]
    assert [p.path for p in home_problems(None, local_ray=True)] == ["HOME"]  # Ray's token
    monkeypatch.setenv("SUBLAYER_CACHE_DIR", str(tmp_path / "cache"))
    assert home_problems(data, local_ray=False) == []  # a cluster's own auth
    for name, value in [("RAY_AUTH_MODE", "disabled"), ("RAY_AUTH_TOKEN_PATH", "/x/token")]:
        with monkeypatch.context() as env:
            env.setenv(name, value)
            assert home_problems(data, local_ray=True) == []
    monkeypatch.delenv("SUBLAYER_CACHE_DIR")
    assert home_problems(DataConfig(name="tinyshakespeare", cache_dir=str(tmp_path)),
                         local_ray=False) == []


def test_a_home_that_is_a_file_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _HOME_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.write_text("")
    monkeypatch.setenv("HOME", str(home))
    (problem,) = home_problems(None, local_ray=True)
    assert f"{home} is a file, not a folder; Ray's auth token goes under it" in str(problem)


def test_an_existing_home_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _HOME_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert home_problems(DataConfig(name="tinyshakespeare"), local_ray=True) == []
    assert list(tmp_path.iterdir()) == []  # a check: nothing written
