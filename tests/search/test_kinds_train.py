"""docs/kinds.md's tiny runs, one per hybrid kind, run as written (the config path made
absolute: a test runs in its own folder)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sublayer_search.search.cli.main import main

REPO = Path(__file__).resolve().parents[2]


def commands() -> list[str]:
    text = (REPO / "docs" / "kinds.md").read_text()
    block = re.search(r"## A tiny run of each\n\n```bash\n(.*?)```", text, flags=re.S)
    assert block, "docs/kinds.md has no tiny runs"
    return [line for line in block.group(1).splitlines() if line.startswith("sublayer ")]


def test_the_docs_name_a_tiny_run_of_each_hybrid_kind() -> None:
    orders = [shlex.split(c)[shlex.split(c).index("--order") + 1] for c in commands()]
    assert {k for order in orders for k in order if k in "wre"} == set("wre"), orders


@pytest.mark.slow
@pytest.mark.parametrize("command", commands())
def test_each_tiny_run_trains(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [str(REPO / a) if a.startswith("configs/") else a for a in shlex.split(command)[1:]]
    assert main(argv) == 0
    out = capsys.readouterr().out
    bpc = [float(m) for m in re.findall(r"^eval step \d+ .*val_bpc (\d+\.?\d*)", out,
                                        flags=re.M)]
    assert len(bpc) == 2, out  # evaluations at steps 30 and 60
    assert bpc[-1] < 5.0, out  # below uniform over Tiny Shakespeare's 65 characters (6.02)
