"""What a researcher reads first: help texts, error words, the sweep's closing lines."""

from __future__ import annotations

import inspect
import json
import os
import shlex
import sys
from types import SimpleNamespace

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.search.tracking import links
from sublayer_search.spaces.registry import SPACES


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--help"]) == 0
    return capsys.readouterr().out


def test_top_level_help_has_no_raw_rst(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys)
    assert "``" not in text and "`" not in text
    for command in ("train", "spaces", "sweep", "ui", "analyze"):
        assert command in text


def test_spaces_sample_help_lists_every_space_and_its_arguments(
        capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "spaces", "sample")
    for name, info in SPACES.items():
        line = next((ln for ln in text.splitlines() if ln.strip().startswith(name + " ")), "")
        assert line, f"{name} missing from:\n{text}"
        for arg, default in info.arguments.items():
            shown = "k" if arg == "ks" else arg
            assert (shown if default is inspect.Parameter.empty else f"{shown}=") in line
    assert " ks" not in text


@pytest.mark.parametrize(("flag", "default"), [("--steps", "200"), ("--lr", "0.003"),
                                               ("--batch-size", "16")])
def test_train_flags_have_help_and_defaults(capsys: pytest.CaptureFixture[str], flag: str,
                                            default: str) -> None:
    text = " ".join(_help(capsys, "train").split())
    after = text.split(f"{flag} {flag.lstrip('-').upper().replace('-', '_')} ", 1)[1]
    assert after.split(")", 1)[0].endswith(f"else {default}"), after[:200]


@pytest.mark.parametrize("value", ["20", "x", "[0,20]"])
def test_sandwich_errors_name_k_as_typed(capsys: pytest.CaptureFixture[str], value: str) -> None:
    assert main(["spaces", "sample", "sandwich", "n=16", f"k={value}"]) == 2
    err = capsys.readouterr().err.splitlines()[0]
    assert "ks" not in err and err.startswith("sublayer: error: k"), err
    if value == "20":
        assert err == "sublayer: error: k: got 20, expected an integer in 0..15"


def test_closing_lines_are_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(links, "program", lambda: "sublayer")
    lines = links.closing_lines(uri="sqlite:///mlflow.db", experiment="my sweep",
                                experiment_id="3", metric="val_bpc", mode="min")
    ui = shlex.split(lines[0].split(": ", 1)[1])
    assert ui == ["sublayer", "ui", "--tracking-uri", "sqlite:///mlflow.db"]
    assert lines[1].endswith("http://127.0.0.1:5000/#/experiments/3/runs?viewStateShareKey="
                             "sublayer")
    analyze = shlex.split(lines[2].split(": ", 1)[1])
    assert analyze == ["sublayer", "analyze", "--experiment", "my sweep", "--tracking-uri",
                       "sqlite:///mlflow.db", "--out", "reports/my sweep"]
    http = links.closing_lines(uri="http://h:5000/", experiment="q", experiment_id="1",
                               metric="bleu", mode="max")
    assert http[0].endswith("http://h:5000/#/experiments/1/runs?viewStateShareKey=sublayer")


def test_program_is_bare_only_when_path_finds_this_sublayer(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path) -> None:
    exe = tmp_path / "bin" / "sublayer"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(sys, "argv", [str(exe), "sweep"])
    monkeypatch.setenv("PATH", str(exe.parent))
    assert links.program() == "sublayer"
    monkeypatch.setenv("PATH", os.defpath)
    assert links.program() in (str(exe), os.path.relpath(exe))


def test_label_experiment_sets_note_kind_and_view(monkeypatch: pytest.MonkeyPatch) -> None:
    tags: dict[str, str] = {}
    client = SimpleNamespace(set_experiment_tag=lambda _id, k, v: tags.__setitem__(k, v))
    plan = SimpleNamespace(experiment=SimpleNamespace(description="orders of a tiny LM"),
                           metric="val_bpc", mode="min")
    links.label_experiment(client, "1", plan)
    assert tags["mlflow.experimentKind"] == "custom_model_development"
    assert tags["mlflow.note.content"].startswith("orders of a tiny LM")
    view = json.loads(tags["mlflow.sharedViewState.sublayer"])
    assert view["orderByKey"] == "metrics.`final_val_bpc`" and view["orderByAsc"] is True
    assert {"params.`order`", "metrics.`final_val_bpc`"} <= set(view["selectedColumns"])
