"""An experiment file sets the guidance options beyond Eq. 5 (``cross_attention``, ``norm``)
in ``model.guidance``: the plan names them, counts the built models, refuses bad ones at
their YAML path, and the settings without them keep their names and params."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.models.seq2seq.model import OrderedSeq2Seq
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import trial_table

GUIDANCE = [{"mode": "hard", "blocks": ["key_query"]},
            {"mode": "hard", "blocks": ["key_query"], "cross_attention": True},
            {"mode": "soft", "blocks": ["value"], "norm": "l2"},
            {"mode": "soft", "blocks": ["value"]}]


def _doc(tmp_path: Path, guidance: Any = GUIDANCE) -> dict[str, Any]:
    return {
        "name": "options", "task": "translation", "seeds": [0], "baseline": {"seeds": 1},
        "space": {"type": "explicit", "orders": ["(scf)^2"]},
        "model": {"preset": "debug", "guidance": guidance},
        "data": {"name": "multi30k", "vocab_size": 300}, "train": {"steps": 4, "eval_every": 2},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2},
    }


def test_experiment_sets_cross_attention_and_norm(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_sweep(parse_experiment(_doc(tmp_path)), check_resources=False, notes=[])
    rows = {r["name"]: r for r in trial_table(plan)}
    assert {"scfscf+hg-kq@seed0", "scfscf+hg-kq.cross@seed0", "scfscf+sg-v.l2@seed0",
            "scfscf+sg-v@seed0"} <= set(rows)
    for trial in plan.trials:
        model = plan.model_for(trial)
        built = sum(p.numel() for p in OrderedSeq2Seq(model).parameters())
        assert rows[trial.name]["params"] == built, trial.name
    d = 32  # debug preset; 2 c sublayers: one more shared d^2 with cross_attention
    assert rows["scfscf+hg-kq@seed0"]["params"] - rows["scfscf+hg-kq.cross@seed0"]["params"] \
        == d * d
    l2 = next(t for t in plan.trials if t.name == "scfscf+sg-v.l2@seed0")
    assert plan.model_for(l2).guidance.norm == "l2"
    assert plan.task.identity(l2.variant) != plan.task.identity(
        next(t for t in plan.trials if t.name == "scfscf+sg-v@seed0").variant)
    path = tmp_path / "options.yaml"
    path.write_text(yaml.safe_dump(_doc(tmp_path)))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    assert "hg-kq.cross" in capsys.readouterr().out


def test_bad_options_are_refused_at_their_path(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    bad = [{"mode": "soft", "blocks": ["ffn"]},
           {"mode": "soft", "blocks": ["value"], "norm": "l1"}]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(_doc(tmp_path, bad)))
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert "model.guidance[1].norm: got 'l1'" in capsys.readouterr().err
