"""A sweep whose trials failed never exits 0 (unless the experiment says failures are
expected); the summary says how many failed."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sublayer_search.search.cli.main import main
from sublayer_search.search.core.injected_failure import FAIL_ENV

pytestmark = pytest.mark.slow


def _experiment(tmp_path: Path, **extra: object) -> Path:
    doc = {
        "name": "exits", "space": {"type": "explicit", "orders": ["sfsf", "ssff"]},
        "seeds": [0], "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": {"steps": 10, "batch_size": 8, "eval_every": 10, "eval_batches": 2},
        "resources": {"cpu": 1}, "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2}, **extra,
    }
    path = tmp_path / "exits.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize(("tolerate", "code"), [(False, 1), (True, 0)])
def test_failed_trials_make_the_sweep_fail(tmp_path, monkeypatch, capsys, tolerate, code):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(FAIL_ENV, "ssff@seed0")
    monkeypatch.chdir(tmp_path)
    path = _experiment(tmp_path, failure={"retries": 0, "tolerate": tolerate})
    assert main(["sweep", str(path)]) == code
    out, err = capsys.readouterr()
    assert "ssff@seed0" in out and "failed" in out
    assert "1 failed of 2 trial(s)" in err if not tolerate else "failure.tolerate: true" in err
