"""The dry run of every shipped experiment file, and of the adaptive setups a user writes
by hand, prints exactly its golden text (``golden.py``): refactors of planning must not
change a table, a footer or a scheduler line a user reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import golden
import pytest
import yaml

from sublayer_search.search.cli.main import main

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "configs").glob("*.yaml"))
QUICKSTART = REPO / "configs" / "quickstart.yaml"

VARIANTS: dict[str, dict[str, Any]] = {
    "grid-prior-curve": {"search": {"prior": "press2020"}, "scheduler": {"type": "curve"}},
    "evolution-asha": {"search": {"algorithm": "evolution", "num_samples": 6, "population": 4,
                                  "sample_size": 2},
                       "scheduler": {"type": "asha", "grace_period": 2}},
    "optuna-two-objectives": {"search": {"algorithm": "optuna", "num_samples": 6,
                                         "objectives": ["val_bpc", "params"],
                                         "sampler": "nsga2"}},
    "surrogate-prior": {"search": {"algorithm": "surrogate", "num_samples": 5,
                                   "prior": ["press2020", "mini_press2020"]},
                        "scheduler": {"type": "curve", "top_k": 2}},
    "oneshot": {"search": {"algorithm": "oneshot", "top_k": 2,
                           "supernet": {"steps": 50, "eval_batches": 2}}},
}


@pytest.fixture(autouse=True)
def _bare_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A home of its own: no corpus, vocabulary or prior cached by an earlier test (a
    cached BPE vocabulary turns a translation table's ``~`` estimates into counts)."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def _dry_run(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = main(["sweep", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("config", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_dry_run_is_unchanged(config: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    out = _dry_run(config, capsys)
    golden.check("dry_run", golden.normalise(out, tmp=tmp_path, repo=REPO), key=config.stem)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_adaptive_dry_run_is_unchanged(variant: str, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw.update(VARIANTS[variant])
    path = tmp_path / f"{variant}.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = _dry_run(path, capsys)
    golden.check("dry_run", golden.normalise(out, tmp=tmp_path, repo=REPO),
                 key=f"quickstart+{variant}")
