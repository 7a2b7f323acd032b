"""The guidance study on the runs of a real guidance sweep: `sublayer sweep` (real Ray
Tune and MLflow) over none / soft / hard, then the study and `sublayer analyze`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from sublayer_search.analysis.studies.guidance import study_experiment

D_MODEL, D_FF = 32, 128  # the debug preset


@pytest.mark.slow
def test_guidance_study_of_a_real_sweep(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from sublayer_search.search.cli.main import main

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    doc = {
        "name": "guided-lm",
        "space": {"type": "explicit", "orders": ["sfsf"]},
        "seeds": [0, 1],
        "baseline": {"seeds": 2},
        "model": {
            "preset": "debug",
            "guidance": [
                {"mode": "soft", "blocks": ["key_query"]},
                {"mode": "hard", "blocks": ["ffn"]},
            ],
        },
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": 4, "eval_every": 2},
        "max_concurrent": 2,
        "tracking": {"uri": uri},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2},
    }
    path = tmp_path / "guided.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path)]) == 0, capsys.readouterr().err

    info = study_experiment("guided-lm", uri)
    assert info.metric == "val_bpc" and info.lower_is_better
    assert info.baseline.n == 2  # the unguided baseline seeds
    t = info.table.set_index("name")
    assert set(t.index) == {"sfsf+sg-kq", "sfsf+hg-ffn"}
    assert list(t["n"]) == [2, 2] and (t["comparisons"] == 2).all()
    assert t.loc["sfsf+sg-kq", "guidance_mode"] == "soft"
    assert t.loc["sfsf+sg-kq", "guidance_loss"] > 0  # the regulariser, logged by soft trials
    assert t.loc["sfsf+sg-kq", "params_change"] == 0
    # hard FFN guidance in sfsf: the two feedforwards share one W2 (d x d_ff)
    assert t.loc["sfsf+hg-ffn", "params_change"] == -D_MODEL * D_FF
    assert len(info.trials) == 4 and info.trials["run_id"].is_unique  # one row per guided run

    out = tmp_path / "report"
    code = main(
        [
            "analyze",
            "--experiment",
            "guided-lm",
            "--tracking-uri",
            uri,
            "--out",
            str(out),
            "--no-attach",
        ]
    )
    assert code == 0, capsys.readouterr().err
    written = pd.read_csv(out / "tables" / "guidance_study.csv")
    assert set(written["name"]) == {"sfsf+sg-kq", "sfsf+hg-ffn"}
    assert "Guidance: metric by mode and blocks" in (out / "report.html").read_text()
