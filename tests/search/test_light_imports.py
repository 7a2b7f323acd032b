"""Planning a sweep imports no heavy library: ``sublayer sweep FILE --dry-run`` and
``sublayer --help`` must stay instant (issue 16; ``benchmarks/plan_time.py`` times them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "ray", "mlflow", "matplotlib", "scipy", "pandas", "optuna")
PROBE = """
import sys
from sublayer_search.search.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print("EXIT", code)
print("HEAVY", " ".join(m for m in {heavy!r} if m in sys.modules))
"""


def _probe(args: list[str], tmp_path: Path) -> tuple[int, list[str]]:
    env = {**os.environ, "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=120)
    lines = dict(line.split(" ", 1) if " " in line else (line, "")
                 for line in proc.stdout.splitlines() if line.startswith(("EXIT", "HEAVY")))
    assert "EXIT" in lines, proc.stdout + proc.stderr
    return int(lines["EXIT"]), lines["HEAVY"].split()


@pytest.mark.parametrize("config", ["press2020_sandwich.yaml", "press2020_translation.yaml",
                                    "iot_iwslt14.yaml", "crossformer_multi30k.yaml"])
def test_dry_run_imports_no_heavy_library(config: str, tmp_path: Path) -> None:
    code, heavy = _probe(["sweep", str(ROOT / "configs" / config), "--dry-run"], tmp_path)
    assert code == 0
    assert heavy == [], f"--dry-run of {config} imported {heavy}"


def test_help_imports_no_heavy_library(tmp_path: Path) -> None:
    code, heavy = _probe(["--help"], tmp_path)
    assert code == 0
    assert heavy == []


def test_training_still_finds_torch_lazily() -> None:
    """The lazy package exports resolve to the real objects on first use."""
    from sublayer_search import models
    from sublayer_search.models.lm import OrderedLM
    from sublayer_search.models.lm_workload import TrialSpec as Reexported
    from sublayer_search.models.specs import TrialSpec

    assert models.OrderedLM is OrderedLM
    assert Reexported is TrialSpec
    assert "OrderedLM" in dir(models)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = models.nothing  # type: ignore[attr-defined]
