"""Help texts say what the commands do (issue 30, friction 8)."""

from __future__ import annotations

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.spaces.exit_codes import ExitCode
from sublayer_search.spaces.registry import ALL_SPACES


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main([*argv, "--help"]) == ExitCode.OK
    return " ".join(capsys.readouterr().out.split())


def test_spaces_sample_lists_every_space(capsys):
    text = _help(capsys, "spaces", "sample")
    positional = text.split("positional arguments:")[1].split("options:")[0]
    for name in ALL_SPACES:
        assert name in positional, (name, positional)
    assert {"par", "macaron"} <= set(ALL_SPACES)


def test_top_level_help_gives_every_exit_status(capsys):
    text = _help(capsys)
    for code in ExitCode:
        assert f" {int(code)} " in text.split("Exit status:")[1] + " ", code


@pytest.mark.parametrize("command", ["analyze", "replay", "export"])
def test_tracking_uri_default_is_worded_alike(command, capsys):
    text = _help(capsys, command)
    assert "(default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)" in text, text


@pytest.mark.parametrize(("args", "kind"), [
    (["iot_subsets", "stack=decoder", "size=2"], "decoder"),
    (["explicit", "orders=[scf]"], "decoder"),
])
def test_a_space_refused_for_lm_points_to_the_kind_that_takes_it(args, kind, capsys):
    assert main(["spaces", "sample", *args]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert f"give --kind {kind} for {kind} orders" in err, err
    assert main(["spaces", "sample", *args, "--kind", kind]) == ExitCode.OK
