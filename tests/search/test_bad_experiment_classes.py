"""Classes of bad experiment files a tester found getting past validation: each is now
caught where the input enters, before Ray starts or anything is written.

Every case: the real CLI in-process, exit status 2, the field named with the value and
what was expected, no traceback, nothing created and no Ray started (``untouched``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from bad_input_cases import N_GPUS, Bad, _base, _do, _set, check_bad_sweep
from test_bad_input import untouched  # noqa: F401  # the fixture

from sublayer_search.search.cli.main import MAX_TRIALS, main

Spoil = Callable[[dict[str, Any], Path], "dict[str, Any] | str | bytes | None"]


def _bytes(data: bytes) -> Spoil:
    return lambda cfg, tmp: data


def _corpus(content: bytes) -> Spoil:
    """Tiny Shakespeare replaced by ``content`` in a data folder of the test."""

    def spoil(cfg: dict[str, Any], tmp: Path) -> None:
        folder = tmp / "corpora" / "tinyshakespeare"
        folder.mkdir(parents=True)
        (folder / "input.txt").write_bytes(content)
        cfg["data"] = {"name": "tinyshakespeare", "data_dir": str(tmp / "corpora")}

    return spoil


def _file(name: str, then: Spoil) -> Spoil:
    def spoil(cfg: dict[str, Any], tmp: Path) -> Any:
        (tmp / name).write_text("not a folder, not a database\n")
        return then(cfg, tmp)

    return spoil


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


ANCHORS = "\n".join(["name: bombs", 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol"]']
                    + [f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]"
                       for p, c in zip("abcdef", "bcdefg", strict=True)]
                    + ["space: *g", "model: *g", "data: {name: tinyshakespeare}"])

CASES = [
    # failures that used to pass validation and fail in every trial
    Bad("space-empty-list", _set("space", []), ("space: got [], expected a non-empty list",)),
    Bad("corpus-binary", _corpus(b"to be\x00or not\xff\xfe"),
        ("data.name: got 'tinyshakespeare', expected a UTF-8 text corpus", "binary file")),
    Bad("corpus-latin1", _corpus("naïve café".encode("latin-1")),
        ("expected a UTF-8 text corpus", "not UTF-8 text (byte 0xef at offset 2")),
    Bad("device-cuda-without-gpu", _set("train.device", "cuda"),
        ("train.device: got 'cuda', expected auto or cpu: this machine has no CUDA GPU",))
    if N_GPUS == 0 else Bad("device-cuda-without-gpu", _set("resources.gpu", N_GPUS + 1),
                            ("resources.gpu",)),
    # checks that used to happen after Ray started or files were written
    Bad("tracking-unknown-scheme", _set("tracking.uri", "foo://bar"),
        ("tracking.uri: got 'foo://bar', expected an MLflow tracking URI with one of the "
         "schemes sqlite://",)),
    Bad("tracking-empty", _set("tracking.uri", ""), ("tracking.uri: got '', expected",)),
    Bad("tracking-not-a-database", _file("notes.db", _set("tracking.uri", "sqlite:///notes.db")),
        ("tracking.uri: got 'sqlite:///notes.db', expected a SQLite database",)),
    Bad("tracking-under-a-file", _file("blocker", _set("tracking.uri",
                                                       "sqlite:///blocker/mlflow.db")),
        ("tracking.uri: got 'sqlite:///blocker/mlflow.db', expected a SQLite file in a "
         "writable folder", "is a file, not a folder")),
    Bad("storage-path-is-a-file", _file("results", _set("ray.storage_path", "results")),
        ("ray.storage_path: got 'results', expected a folder (this is a file)",)),
    Bad("name-too-long", _set("name", "n" * 101),
        ("name: got 'nnnn", "expected a string of at most 100 characters")),
    Bad("asha-grace-beyond-steps", _set("scheduler", {"type": "asha", "grace_period": 5}),
        ("scheduler.grace_period: got 5, expected at most 1 (the evaluations of a trial",)),
    Bad("search-metric-never-reported", _set("search.metric", "val_accuracy"),
        ("search.metric: got 'val_accuracy', expected a metric the trials report: best_val_bpc",)),
    Bad("address-unreachable", lambda cfg, tmp: _set("ray.address",
                                                     f"127.0.0.1:{_closed_port()}")(cfg, tmp),
        # issue 30: the file's ray.address is named, not --address
        ("ray.address: got '127.0.0.1:", "expected a reachable Ray cluster (no answer within 5 s")),
    Bad("tracking-server-unreachable", lambda cfg, tmp: _set(
        "tracking.uri", f"http://127.0.0.1:{_closed_port()}")(cfg, tmp),
        ("tracking.uri: got 'http://127.0.0.1:", "expected a reachable MLflow server (no answer "
         "on 127.0.0.1:", "within 5 s: Connection refused)")),
    Bad("tracking-database-unreachable", lambda cfg, tmp: _set(
        "tracking.uri", f"postgresql://mlflow@127.0.0.1:{_closed_port()}/mlflow")(cfg, tmp),
        ("tracking.uri: got 'postgresql://mlflow@127.0.0.1:", "expected a reachable database "
         "server",)),
    Bad("tracking-port-malformed", _set("tracking.uri", "http://127.0.0.1:99999"),
        ("tracking.uri: got 'http://127.0.0.1:99999', expected SCHEME://HOST[:PORT]/… with a "
         "port from 1 to 65535",)),
    Bad("address-malformed", _set("ray.address", "head-node"),
        ("ray.address: got 'head-node', expected HOST:PORT, ray://HOST:PORT or auto",)),
    # bad input that used to be accepted silently
    Bad("weight-decay-inf", _set("train.weight_decay", float("inf")),
        ("train.weight_decay: got inf, expected a finite number >= 0",)),
    Bad("clip-norm-inf", _set("train.clip_norm", float("inf")),
        ("train.clip_norm: got inf, expected a finite positive number or null",)),
    Bad("steps-quoted-number", _set("train.steps", "100"),
        ("train.steps: got '100', expected an integer, not a string",)),
    Bad("steps-bool", _set("train.steps", True),
        ("train.steps: got True, expected an integer, not true/false",)),
    Bad("cpu-quoted-number", _set("resources.cpu", "1"),
        ("resources.cpu: got '1', expected a number, not a string",)),
    Bad("max-concurrent-bool", _set("max_concurrent", True),
        ("max_concurrent: got True, expected an integer, not true/false",)),
    Bad("d-model-absurd", _set("model.d_model", 2**40),
        ("model.d_model: got 1099511627776, expected at most 65,536 (a sanity bound: one "
         "sublayer of this width alone needs",)),
    Bad("context-absurd", _set("model.context", 2**30), ("model.context: got 1073741824",)),
    Bad("seeds-repeated", _set("seeds", [0, 0]),
        ("seeds: got [0, 0], expected a list of distinct seeds (repeated: 0)",)),
    Bad("baseline-seeds-repeated", _set("baseline", {"seeds": [1, 2, 1]}),
        ("baseline.seeds: got [1, 2, 1], expected a list of distinct seeds (repeated: 1)",)),
    Bad("duplicate-yaml-key", _bytes(b"name: a\nname: b\nspace: {type: sandwich, n: 4}\n"),
        ("duplicate key 'name' (first at line 1)", "expected well-formed YAML")),
    Bad("duplicate-nested-key", _bytes(b"name: a\ntrain: {lr: 0.1, lr: 0.2}\n"),
        ("duplicate key 'lr'",)),
    Bad("permutations-count-too-large", _set("space", {"type": "permutations", "n_s": 2,
                                                       "n_f": 2, "count": 7}),
        ("space.count: got 7, expected at most 6 (the number of distinct orders of 2 s and 2 f)",)),
    # files that used to end in a traceback
    Bad("utf16-file", _bytes("name: x\n".encode("utf-16")),
        ("that is not UTF-8 (it looks like UTF-16)', expected a UTF-8 text file",)),
    Bad("latin1-file", _bytes("name: café\n".encode("latin-1")),
        ("a byte 0xe9 at offset 9 that is not UTF-8", "expected a UTF-8 text file")),
    Bad("nul-byte", _bytes(b"name: x\x00\n"), ("got 'a NUL byte', expected a UTF-8 text file",)),
    Bad("deeply-nested", _bytes(("a: " + "[" * 5000 + "]" * 5000 + "\n").encode()),
        ("a document nested more than 32 levels deep", "expected a flatter YAML document")),
    # every problem, once
    Bad("train-several-at-once", _do(_set("train.steps", -1), _set("train.lr", -1),
                                     _set("train.batch_size", 0)),
        ("3 problem(s)", "train.steps: got -1", "train.lr: got -1", "train.batch_size: got 0")),
    Bad("unknown-key-does-not-hide-the-space", _do(_set("colour", "blue"), _set("space.k", [9])),
        ("2 problem(s)", "colour: unknown key", "space.k[0]: got 9")),
]


def _write(tmp_path: Path, spoil: Spoil) -> Path:
    cfg = _base(tmp_path)
    got = spoil(cfg, tmp_path)
    path = tmp_path / "experiment.yaml"
    if isinstance(got, bytes):
        path.write_bytes(got)
    else:
        path.write_text(got if isinstance(got, str) else yaml.safe_dump(cfg, sort_keys=False))
    return path


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_experiment_class_exits_2(case: Bad, tmp_path: Path, untouched,  # noqa: F811
                                      capsys: pytest.CaptureFixture[str]) -> None:
    check_bad_sweep(_write(tmp_path, case.spoil), tmp_path, case.expect, capsys, untouched)


def test_anchor_bomb_message_is_bounded(tmp_path: Path, untouched,  # noqa: F811
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A 1 KB file whose anchors expand to millions of items: a short message."""
    path = _write(tmp_path, lambda cfg, tmp: ANCHORS)
    assert len(ANCHORS) < 1024
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert "space[0]: got [[[[...]" in err and "expected a mapping" in err
    assert len(err) < 20_000, len(err)
    untouched({"experiment.yaml"})


def test_a_huge_plan_needs_yes(tmp_path: Path, untouched,  # noqa: F811
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _do(_set("space", {"type": "sandwich", "n": 4, "k": [1]}),
                                _set("seeds", MAX_TRIALS + 1)))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    total = MAX_TRIALS + 1 + 3  # and three baseline seeds
    assert f"the plan has {total:,} trials (more than {MAX_TRIALS:,})" in err
    assert "--yes" in err
    assert main(["sweep", str(path), "--dry-run"]) == 0  # looking at it is fine
    assert f"{total} trial(s)" in capsys.readouterr().out
    untouched({"experiment.yaml"})


def test_relative_data_paths_are_relative_to_the_experiment_file(
        tmp_path: Path, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``data: {path: input.txt}`` beside the YAML works from any working directory."""
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "input.txt").write_bytes((shared_data / "tinyshakespeare" / "input.txt").read_bytes())
    cfg = _base(tmp_path)
    cfg["data"] = {"name": "tinyshakespeare", "path": "input.txt"}
    (folder / "exp.yaml").write_text(yaml.safe_dump(cfg))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    exp = load_experiment(folder / "exp.yaml")
    assert exp.data.path == str(folder / "input.txt")
    plan = plan_sweep(exp, check_resources=False)
    spec = plan.trials[0].planned_spec()
    assert spec.data.path == str(folder / "input.txt")


# -- a server on the tracking URI that is not MLflow's REST API ---------------------------
SITES = {  # status, content type, body of every reply
    "not-mlflow": (404, "text/html", b"<!DOCTYPE html><html><body>Not Found</body></html>"),
    "needs-login": (401, "text/plain", b"You are not authenticated."),
}


@pytest.fixture
def site(request: pytest.FixtureRequest) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 answering every request as ``SITES[param]``."""
    status, kind, body = SITES[request.param]

    class Reply(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Reply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize(("site", "expect"), [
    ("not-mlflow", "expected an MLflow tracking server (it answered HTTP 404 to MLflow's REST "
                   "API: API request to endpoint /api/2.0/mlflow/experiments/search failed with "
                   "error code 404 != 200. (a web page: not MLflow's API at this URI))"),
    ("needs-login", "expected an MLflow server that accepts this client (it answered HTTP 401: "
                    "set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or "
                    "MLFLOW_TRACKING_TOKEN)"),
], indirect=["site"])
def test_a_tracking_uri_that_answers_but_not_as_mlflow_exits_2(
        site: str, expect: str, tmp_path: Path, untouched,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    """The port accepts connections, so only asking MLflow's API finds out (this used to
    start Ray and end in an internal error, exit 1)."""
    path = _write(tmp_path, _set("tracking.uri", site))
    check_bad_sweep(path, tmp_path, (f"tracking.uri: got '{site}', {expect}",), capsys, untouched)
