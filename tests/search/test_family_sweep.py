"""PAR and Macaron spaces through the CLI: ``spaces sample``, exact dry-run parameters
(LM; Macaron in encoders and decoders) and one tiny real sweep over both families."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.models.accounting import param_count
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import trial_table

FAMILIES = [{"type": "par", "n": 3}, {"type": "macaron", "n": 3}]
# par at 9 units: s f f f f (n_s 1) and s s s f f f (n_s 3); macaron3 = (hsh)^3
EXPECTED = {"interleaved3": "sfsfsf", "par9_s1": "sffff", "par9_s3": "sssfff",
            "macaron3": "hshhshhsh"}


def _experiment(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "families", "space": FAMILIES, "seeds": [0], "baseline": {"seeds": 1},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 2},
        "resources": {"cpu": 1}, "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2},
    }
    doc.update(overrides)
    return doc


def _numel(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def test_spaces_sample_prints_both_families(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spaces", "sample", "par", "n=6"]) == 0
    out = capsys.readouterr().out
    assert "par18_s2" in out and "sfffsfffff" in out and "3 order(s)" in out
    assert main(["spaces", "sample", "macaron", "n=[2,3]", "--kind", "decoder"]) == 0
    out = capsys.readouterr().out
    assert "n_h" in out.splitlines()[0] and "hschhsch" in out and "2 order(s)" in out
    assert main(["spaces", "sample", "par", "n=6", "n_s=3"]) == 2
    assert "n_s: got 3" in capsys.readouterr().err


def test_lm_dry_run_has_exact_parameters(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_sweep(parse_experiment(_experiment(tmp_path)))
    rows = {r["name"].split("@")[0]: r for r in trial_table(plan)}
    assert {k: r["order"] for k, r in rows.items()} == EXPECTED
    for trial, row in zip(plan.trials, trial_table(plan), strict=True):
        model = plan.model_for(trial)
        assert row["params"] == param_count(model) == _numel(OrderedLM(model)), trial.name
        assert row["units"] == 9
    assert rows["macaron3"]["n_h"] == 6 and "n_h" not in rows["par9_s1"]
    assert rows["par9_s1"]["family"] == "par" and rows["macaron3"]["family"] == "macaron"
    path = tmp_path / "families.yaml"
    path.write_text(yaml.safe_dump(_experiment(tmp_path)))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "n_h" in out.splitlines()[0] and "hshhshhsh" in out and "4 trial(s)" in out


def test_translation_dry_run_macaron_on_both_sides(tmp_path: Path) -> None:
    doc = _experiment(tmp_path, task="translation", space=[
        {"type": "macaron", "n": 2, "side": "decoder"},
        {"type": "macaron", "n": 2, "side": "encoder"}],
        data={"name": "multi30k", "vocab_size": 300, "max_train_pairs": 500})
    plan = plan_sweep(parse_experiment(doc))
    names = [t.name for t in plan.trials]
    assert names == ["transformer2@seed0", "macaron2@seed0", "macaron2_enc@seed0"]
    for trial, row in zip(plan.trials, trial_table(plan), strict=True):
        model = plan.model_for(trial)
        assert row["params"] == _numel(OrderedSeq2Seq(model)), trial.name
    dec, enc = plan.model_for(plan.trials[1]), plan.model_for(plan.trials[2])
    assert (dec.encoder_order, dec.decoder_order) == ("sfsf", "hschhsch")
    assert (enc.encoder_order, enc.decoder_order) == ("hshhsh", "scfscf")


@pytest.mark.slow
def test_tiny_real_sweep_over_par_and_macaron(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "families.yaml"
    path.write_text(yaml.safe_dump(_experiment(tmp_path)))
    assert main(["sweep", str(path)]) == 0, capsys.readouterr().err
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.get_experiment_by_name("families")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])
            if r.data.tags.get("sublayer.role") == "trial"}
    assert set(runs) == {f"{name}@seed0" for name in EXPECTED}
    plan = plan_sweep(parse_experiment(_experiment(tmp_path)))
    for trial in plan.trials:
        run = runs[trial.name]
        params = run.data.params
        assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
        assert params["order"] == EXPECTED[trial.candidate] and params["units"] == "9.0"
        assert int(params["params"]) == _numel(OrderedLM(plan.model_for(trial)))
        assert "val_bpc" in run.data.metrics and "final_val_bpc" in run.data.metrics
    assert runs["macaron3@seed0"].data.tags["sublayer.family"] == "macaron"
    assert runs["macaron3@seed0"].data.params["n_h"] == "6"
    assert runs["par9_s1@seed0"].data.tags["sublayer.family"] == "par"
    assert runs["par9_s1@seed0"].data.params["par_ratio"] == "5.0"
    # the analysis reads the new kind: the halves study counts h per half
    out = tmp_path / "report"
    assert main(["analyze", "--experiment", "families", "--tracking-uri",
                 f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    models = next(out.glob("tables/*halves_models.csv")).read_text()
    assert "bottom_h" in models.splitlines()[0]


def test_spaces_sample_weighs_hybrid_kinds_at_a_presets_dims(capsys) -> None:
    assert main(["spaces", "sample", "budgeted_kinds", "symbols=srf", "budget_units=8",
                 "count=3", "--preset", "tiny"]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()
            if line.startswith("draw")]
    assert len(rows) == 3 and all(abs(float(r[4]) - 8) <= 0.4 for r in rows), rows
    assert main(["spaces", "sample", "budgeted_kinds", "symbols=srf", "budget_units=8",
                 "count=3"]) == 2
    assert "takes --preset" in capsys.readouterr().err
    assert main(["spaces", "sample", "multiset", "counts={s: 1, r: 2}", "count=2",
                 "--preset", "nope"]) == 2
    assert "--preset: got 'nope', expected one of debug, tiny" in capsys.readouterr().err
