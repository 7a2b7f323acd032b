"""Bad command-line input of ``spaces sample``, ``train``, ``analyze`` and ``ui``: exit
status 2, a message naming the argument, the value and what was expected, no traceback,
nothing created. And an unexpected internal error: exit status 1, one line naming a
private log file that holds the traceback.

Every case runs ``search.cli.main.main`` in-process with the working directory in
``tmp_path``, so anything a command wrongly created (an ``mlflow.db``, a folder) shows up.
"""

from __future__ import annotations

import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import ray
import yaml

from sublayer_search.search.cli.main import main

Check = Callable[[set[str]], None]


@pytest.fixture
def untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Check:
    """cwd = tmp_path; afterwards check that nothing but ``allowed`` is there, no MLflow
    store anywhere under it, and Ray never started."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert not ray.is_initialized()

    def check(allowed: set[str]) -> None:
        created = {p.name for p in tmp_path.iterdir()} - allowed
        assert created == set(), f"bad input created {created}"
        assert not list(tmp_path.rglob("mlflow.db")) and not (tmp_path / "ray").exists()
        assert not ray.is_initialized()

    return check


def _bad(argv: list[str], capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    """Run ``sublayer argv``: exit 2, every fragment in stderr, no traceback, no output."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err and "internal error" not in err and out == "", err
    return err


# -- 1. sublayer spaces sample NAME=VALUE ---------------------------------------------------
@pytest.mark.parametrize(("arg", "name", "expect"), [
    ("k=[1", "k", "got '[1'"),
    ("k=[1,", "k", "got '[1,'"),
    ("n={", "n", "got '{'"),
    ("n=", "n", "got an empty value"),
    ("n=  ", "n", "got an empty value"),
    ("n=@x", "n", "got '@x'"),
    ("k=*a", "k", "got '*a' (found undefined alias"),
    ("k=!!python/name:os.system", "k", "could not determine a constructor"),
    ("k=" + "[" * 3000, "k", "nested too deeply"),
], ids=["open-list", "open-list-comma", "open-map", "empty", "blank", "at-sign", "alias",
        "python-tag", "deep"])
def test_malformed_space_argument(arg: str, name: str, expect: str, untouched: Check,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    err = _bad(["spaces", "sample", "sandwich", "n=4", arg], capsys,
               f"space argument {name!r}: ", expect, "expected ", "e.g. n=16")
    assert err.count("\n") == 1, err  # one line
    untouched(set())


def test_space_argument_without_a_name(untouched: Check,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    _bad(["spaces", "sample", "sandwich", "=4"], capsys,
         "space argument '=4': got no NAME, expected NAME=VALUE")
    untouched(set())


# -- 2. sublayer train: --resume-from, --checkpoint-dir, --config -----------------------------
_TRAIN = ["train", "--order", "sfsf", "--data", "tinyshakespeare", "--preset", "debug",
          "--steps", "2", "--eval-every", "1"]


def _files(tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "empty").mkdir()


@pytest.mark.parametrize(("argv", "expect"), [
    (["--resume-from", "missing"], "--resume-from: got 'missing', expected a checkpoint folder "
                                   "containing state.pt (there is no such folder)"),
    (["--resume-from", "empty"], "--resume-from: got 'empty', expected a checkpoint folder "
                                 "containing state.pt (it has no state.pt)"),
    (["--resume-from", "a_file"], "--resume-from: got 'a_file', expected a checkpoint folder "
                                  "containing state.pt (it is a file)"),
    (["--checkpoint-dir", "a_file"], "--checkpoint-dir: got 'a_file', expected a folder to "
                                     "write checkpoints in (it is an existing file)"),
    (["--checkpoint-dir", "a_file/sub/ckpt"], "--checkpoint-dir: got 'a_file/sub/ckpt', "
                                              "expected a folder to write checkpoints in ("),
], ids=["resume-missing", "resume-empty-folder", "resume-file", "ckpt-is-file",
        "ckpt-under-file"])
def test_bad_train_paths(argv: list[str], expect: str, tmp_path: Path, untouched: Check,
                         capsys: pytest.CaptureFixture[str]) -> None:
    _files(tmp_path)
    err = _bad([*_TRAIN, *argv], capsys, "command line: 1 problem(s)", expect)
    if "/" in argv[-1]:
        assert f"{tmp_path / 'a_file'} is a file)" in err, err
    untouched({"a_file", "empty"})
    assert list((tmp_path / "empty").iterdir()) == []


def _deep(n: int) -> bytes:
    return ("model: " + "[" * n + "]" * n + "\n").encode()


@pytest.mark.parametrize(("content", "expect"), [
    ("model: {d_model: 32}\n".encode("utf-16"), "expected a UTF-8 text file"),
    ("model: {d_model: 32}\n".encode("utf-16-be"), "expected a UTF-8 text file"),
    ("# café\nmodel: {}\n".encode("latin-1"), "that is not UTF-8"),
    (b"model: {}\n\x00\n", "got 'a NUL byte', expected a UTF-8 text file"),
    (_deep(5000), "expected a flatter YAML document"),
    (_deep(40), "expected a flatter YAML document"),
    (b"- model\n- train\n", "got 'list', expected a YAML mapping"),
    (b"just words\n", "got 'str', expected a YAML mapping"),
    (b"model: [unclosed\n", "expected well-formed YAML"),
], ids=["utf16", "utf16-no-bom", "latin1", "nul", "recursion", "deep", "list", "scalar",
        "broken-yaml"])
def test_bad_train_config_file(content: bytes, expect: str, tmp_path: Path, untouched: Check,
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.yaml"
    path.write_bytes(content)
    _bad([*_TRAIN, "--config", str(path)], capsys, f"--config {path}: 1 problem(s)", expect)
    untouched({"train.yaml"})


@pytest.mark.parametrize("name", ["missing.yaml", "a_folder"])
def test_train_config_that_is_no_file(name: str, tmp_path: Path, untouched: Check,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a_folder").mkdir()
    _bad([*_TRAIN, "--config", name], capsys,
         f"--config {name}: 1 problem(s)", f"got {name!r}, expected an existing YAML file")
    untouched({"a_folder"})


def test_train_config_problems_name_the_file(tmp_path: Path, untouched: Check,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump({"train": {"lr": "fast"}, "colour": "blue"}))
    _bad([*_TRAIN, "--config", str(path)], capsys, f"--config {path}: 2 problem(s)",
         "train.lr: got 'fast'", "colour")
    untouched({"train.yaml"})


# -- 3. sublayer analyze: --out, --tracking-uri, no store -----------------------------------
def _stores(tmp_path: Path) -> dict[str, bytes]:
    import sqlite3

    (tmp_path / "a_file").write_text("not a folder\n")
    (tmp_path / "notes.db").write_text("not a database\n")
    (tmp_path / "blank.db").write_bytes(b"")
    (tmp_path / "store_dir").mkdir()
    con = sqlite3.connect(tmp_path / "other.db")
    con.execute("CREATE TABLE things (x)")
    con.commit()
    con.close()
    return {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}


@pytest.mark.parametrize(("argv", "expect"), [
    (["--paper", "press2020", "--out", "a_file"],
     "--out: got 'a_file', expected a folder for the report (it is an existing file)"),
    (["--paper", "zhu2021", "--out", "a_file/report"],
     "--out: got 'a_file/report', expected a folder for the report (it cannot be created: "),
    (["--paper", "press2020", "--out", "a_file/a/b"], "a_file is a file)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///other.db", "--out", "a_file"],
     "--out: got 'a_file'"),
    (["--experiment", "X", "--tracking-uri", "", "--out", "r"],
     "--tracking-uri: got '', expected an MLflow tracking URI"),
    (["--experiment", "X", "--tracking-uri", "foo://bar", "--out", "r"],
     "--tracking-uri: got 'foo://bar', expected a tracking URI MLflow can store runs at"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///notes.db", "--out", "r"],
     "(notes.db is not an SQLite database)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///blank.db", "--out", "r"],
     "(blank.db is not an SQLite database)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///other.db", "--out", "r"],
     "(other.db is an SQLite database without MLflow's tables)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///store_dir", "--out", "r"],
     "(store_dir is a folder)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///absent.db", "--out", "r"],
     "(no MLflow database at absent.db)"),
    (["--experiment", "X", "--tracking-uri", "sqlite:///a_file/x.db", "--out", "r"],
     "no MLflow database at a_file/x.db"),
    (["--experiment", "X", "--tracking-uri", "a_file", "--out", "r"],
     "--tracking-uri: got 'a_file', expected an MLflow store folder (a_file is a file"),
    (["--experiment", "X", "--tracking-uri", "file:///no/such/store", "--out", "r"],
     "(no MLflow store at /no/such/store)"),
    (["--paper", "press2020", "--out", "/proc/no_such/report"],  # issue 30: root may "write" it
     "--out: got '/proc/no_such/report', expected a folder for the report (it cannot be "
     "created: /proc is not writable)"),  # one cause, not ": No such file or directory"
    (["--paper", "press2020", "--out", "/proc"],
     "--out: got '/proc', expected a folder for the report (it is not writable)"),
], ids=["out-file", "out-under-file", "out-deep-under-file", "out-file-experiment",
        "uri-empty", "uri-foreign-scheme", "uri-text-file", "uri-empty-file", "uri-other-sqlite",
        "uri-folder-as-sqlite", "uri-absent", "uri-under-file", "uri-file-as-folder",
        "uri-absent-folder", "out-under-proc", "out-proc"])
def test_bad_analyze_invocation(argv: list[str], expect: str, tmp_path: Path,
                                untouched: Check, capsys: pytest.CaptureFixture[str]) -> None:
    before = _stores(tmp_path)
    _bad(["analyze", *argv], capsys, "sublayer analyze: error: ", expect)
    untouched(set(before) | {"store_dir"})
    assert {n: (tmp_path / n).read_bytes() for n in before} == before  # nothing rewritten
    assert list((tmp_path / "store_dir").iterdir()) == []


def test_analyze_without_a_store_creates_none(tmp_path: Path, untouched: Check,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """No --tracking-uri and no store: MLflow's default (./mlflow.db) is not created."""
    err = _bad(["analyze", "--experiment", "X", "--out", "report"], capsys,
               "--tracking-uri not given", "no MLflow database at ", "give --tracking-uri")
    assert str(tmp_path / "mlflow.db") in err
    untouched(set())


def test_analyze_names_the_experiment_it_looked_for(tmp_path: Path, untouched: Check,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: a store that is not there, or one without the experiment: both name it."""
    _bad(["analyze", "--experiment", "no-such-sweep", "--out", "report"], capsys,
         "(looking for experiment 'no-such-sweep')")
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{tmp_path / 'runs.db'}").create_experiment("real-sweep")
    _bad(["analyze", "--experiment", "no-such-sweep", "--tracking-uri",
          f"sqlite:///{tmp_path / 'runs.db'}", "--out", "report"], capsys,
         "unknown experiment 'no-such-sweep'", "'real-sweep'")
    untouched({"runs.db"})


def test_analyze_default_store_from_environment(tmp_path: Path, untouched: Check,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    _bad(["analyze", "--experiment", "X", "--out", "report"], capsys,
         "--tracking-uri not given, and MLflow's store ($MLFLOW_TRACKING_URI)",
         "no MLflow database at ")
    untouched(set())


# -- 4. sublayer ui --port / --tracking-uri ---------------------------------------------------
@pytest.fixture
def no_server(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, object]]:
    """``ui.serve`` records its arguments instead of starting ``mlflow server``."""
    from sublayer_search.search.cli import ui

    calls: list[dict[str, object]] = []

    def serve(**kwargs: object) -> int:
        calls.append(kwargs)
        return 0

    monkeypatch.setattr(ui, "serve", serve)
    return calls


@pytest.mark.parametrize("port", ["99999", "65536", "0", "-1", "abc", "", "5000.5"])
def test_ui_bad_port(port: str, no_server: list[dict[str, object]], untouched: Check,
                     capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["ui", f"--port={port}"])
    err = capsys.readouterr().err
    assert code == 2 and no_server == []
    assert f"argument --port: got {port!r}, expected a TCP port number in 1..65535" in err, err
    assert "Traceback" not in err
    untouched(set())


@pytest.mark.parametrize("uri", ["", "   "])
def test_ui_empty_tracking_uri(uri: str, no_server: list[dict[str, object]], untouched: Check,
                               capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", f"--tracking-uri={uri}"]) == 2 and no_server == []
    err = capsys.readouterr().err
    assert f"argument --tracking-uri: got {uri!r}, expected an MLflow tracking URI" in err, err
    untouched(set())


def test_ui_good_port_reaches_the_server(no_server: list[dict[str, object]]) -> None:
    assert main(["ui", "--port", "65535"]) == 0 and main(["ui", "--port", "1"]) == 0
    assert [c["port"] for c in no_server] == [65535, 1]


# -- 5. unexpected internal errors ------------------------------------------------------------
@pytest.fixture
def log_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """tempfile.gettempdir() -> a fresh folder; the logs go to <it>/sublayer-errors."""
    root = tmp_path_factory.mktemp("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root / "sublayer-errors"


def _raise(exc: BaseException) -> Callable[..., object]:
    def boom(*args: object, **kwargs: object) -> object:
        raise exc

    return boom


def _internal(argv: list[str], capsys: pytest.CaptureFixture[str], log_dir: Path,
              what: str) -> str:
    """Exit 1, one stderr line naming the log file, which holds the traceback."""
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 1, err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith(f"sublayer: internal error: {what} (details in {log_dir}/"), err
    logs = sorted(log_dir.glob("*.log"))
    assert len(logs) == 1 and str(logs[0]) in err
    text = logs[0].read_text()
    assert "Traceback (most recent call last)" in text and what in text
    assert " ".join(argv) in text.splitlines()[0]
    assert stat.S_IMODE(logs[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(log_dir.stat().st_mode) & 0o077 == 0
    return text


def test_internal_error_in_spaces_sample(log_dir: Path, untouched: Check,
                                         monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from sublayer_search.spaces import registry

    monkeypatch.setattr(registry, "expand", _raise(RuntimeError("boom")))
    text = _internal(["spaces", "sample", "sandwich", "n=4"], capsys, log_dir,
                     "RuntimeError: boom")
    assert "in boom" in text  # the frame that raised
    untouched(set())


def test_internal_error_in_train(log_dir: Path, untouched: Check,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    from sublayer_search.search.cli import train as train_cli

    monkeypatch.setattr(train_cli, "build_spec", _raise(ZeroDivisionError("division by zero")))
    _internal(_TRAIN, capsys, log_dir, "ZeroDivisionError: division by zero")
    untouched(set())


def test_internal_error_in_analyze_shows_first_line(log_dir: Path, untouched: Check,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from sublayer_search.analysis.report import build as report

    monkeypatch.setattr(report, "paper_report", _raise(RuntimeError("first\nsecond line")))
    text = _internal(["analyze", "--paper", "press2020", "--out", "r"], capsys, log_dir,
                     "RuntimeError: first")
    assert "second line" in text
    untouched(set())


def test_bad_input_and_interrupts_keep_their_status(log_dir: Path, untouched: Check,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from sublayer_search.spaces import registry

    monkeypatch.setattr(registry, "expand", _raise(KeyboardInterrupt()))
    assert main(["spaces", "sample", "sandwich", "n=4"]) == 130
    assert "sublayer: interrupted" in capsys.readouterr().err
    monkeypatch.setattr(registry, "expand", _raise(ValueError("n: got 0, expected 1..512")))
    _bad(["spaces", "sample", "sandwich", "n=0"], capsys, "n: got 0, expected 1..512")
    assert not log_dir.exists()
    untouched(set())


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("command", [
    ["analyze", "--experiment", "X", "--out", "r"],
    ["export", "X", "--out", "r"],
    ["replay", "X"],
], ids=["analyze", "export", "replay"])
def test_an_unreachable_tracking_server_is_named_at_once(
        command: list[str], tmp_path: Path, untouched: Check,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A server that refuses connections: exit 2 in seconds (MLflow's own retries took
    minutes), naming --tracking-uri, the URI and why; nothing written."""
    uri = f"http://127.0.0.1:{_closed_port()}"
    _bad([*command, "--tracking-uri", uri], capsys,
         f"--tracking-uri: got '{uri}', expected a reachable MLflow server (no answer on "
         f"127.0.0.1:{uri.rsplit(':', 1)[1]} within 5 s: Connection refused)")
    untouched(set())
