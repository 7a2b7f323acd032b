"""benchmarks/kinds_throughput.py runs and reports every kind against ``s``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "kinds_throughput.py"


def _bench():
    spec = importlib.util.spec_from_file_location("kinds_throughput", PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_kind_is_timed_at_about_the_weights_of_an_s(capsys) -> None:
    bench = _bench()
    args = ["--d-model", "32", "--heads", "2", "--batch", "2", "--contexts", "16,40",
            "--window", "8", "--chunk", "8", "--rounds", "1", "--steps", "1", "--json"]
    assert bench.main(args) == 0
    import json
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["context"]) for r in rows] == [
        (k, t) for t in (16, 40) for k in ("s", "w", "r", "f", "e")]
    for r in rows:
        assert r["tokens_per_s"] > 0 and r["train_memory_mb"] > 0
        assert r["params"] == pytest.approx(4 * 32 * 32, rel=0.15), r  # about an s's 4d²
    state = {(r["kind"], r["context"]): r["state_bytes_per_seq"] for r in rows}
    assert state[("s", 40)] == 4 * 2 * 40 * 32 and state[("w", 40)] == 4 * 2 * 8 * 32
    assert state[("r", 16)] == state[("r", 40)] == 4 * 32 * 16 and state[("f", 40)] == 0
