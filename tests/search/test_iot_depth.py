"""An IOT sweep keeps the depth the model section gives the stack it does not reorder
(issue 39): a 36+6 experiment with ``iot_subsets`` on the decoder trained 6+6 IOT models
against 36+6 baselines, exit 0, silently. Real translation plans and dry runs; no training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.models.seq2seq.config import Seq2SeqConfig, seq2seq_param_count
from sublayer_search.models.seq2seq.iot_config import IOTConfig, iot_param_count
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.spaces.order import interleaved

DIMS = {"d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.0}
DECODER_IOT = {"type": "iot_subsets", "stack": "decoder", "size": 4, "mode": "paper",
               "layers": 6}


def _doc(space: dict[str, Any], model: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "deep_iot", "task": "translation", "space": space, "seeds": [0],
            "baseline": {"seeds": 1}, "model": {"preset": "debug", **DIMS, **model},
            "data": {"name": "multi30k", "vocab_size": 400},
            "train": {"steps": 2, "batch_size": 2}, **more}


def _plan(doc: dict[str, Any]) -> SweepPlan:
    return plan_sweep(parse_experiment(doc), check_resources=False, notes=[])


def _dry_run(doc: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    path = Path("experiment.yaml")  # the test's own fresh working directory
    path.write_text(yaml.safe_dump(doc))
    code = main(["sweep", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    return code, out, err


def test_36_plus_6_iot_keeps_the_36_layer_encoder(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(DECODER_IOT, {"encoder_order": "(sf)^36"})
    plan = _plan(doc)
    (base,) = [t for t in plan.trials if t.baseline]
    (iot,) = [t for t in plan.trials if t.variant.subset is not None]
    model, bmodel = plan.model_for(iot), plan.model_for(base)
    assert isinstance(model, IOTConfig) and isinstance(bmodel, Seq2SeqConfig)
    assert (model.encoder_layers, model.decoder_layers) == (36, 6)
    assert model.encoder_codes == (1,) and model.decoder_codes == (1, 2, 4, 6)
    assert model.base_config().encoder_order == bmodel.encoder_order == interleaved(36)
    rows = {t.name: plan.row(t) for t in plan.trials}
    assert rows[iot.name]["stacks"] == rows[base.name]["stacks"] == \
        "enc 36 s 36 f | dec 6 s 6 c 6 f"
    # the params shown are the models' own: the IOT model is the baseline's 36+6 network
    # plus its predictor (N·d, N = 4 decoder orders)
    assert rows[base.name]["params"] == seq2seq_param_count(bmodel)
    assert rows[iot.name]["params"] == iot_param_count(model) \
        == seq2seq_param_count(bmodel) + 4 * DIMS["d_model"]
    from sublayer_search.models.seq2seq.iot_model import IOTSeq2Seq  # torch: the real model

    built = IOTSeq2Seq(model)
    assert len(built.encoder) == 36 and len(built.decoder) == 6
    assert sum(p.numel() for p in built.parameters()) == rows[iot.name]["params"]
    code, out, _ = _dry_run(doc, capsys)
    bp, ip = rows[base.name]["params"], rows[iot.name]["params"]
    mark = "~" if plan.task.estimate else ""  # until a sweep has learned the vocabulary
    assert code == 0
    assert (f"models: 1 baseline trial(s), 36+6 layers, {mark}{bp:,} params; "
            f"1 IOT trial(s), 36+6 layers, {mark}{ip:,} params") in out.splitlines()


def test_an_encoder_block_given_is_the_encoders_one_order() -> None:
    plan = _plan(_doc(DECODER_IOT, {"encoder_order": "(fs)^8"}))
    (iot,) = [t for t in plan.trials if t.variant.subset is not None]
    model = plan.model_for(iot)
    assert isinstance(model, IOTConfig)
    assert (model.encoder_layers, model.encoder_codes, model.decoder_layers) == (8, (2,), 6)
    assert model.encoder_orders == ("fs" * 8,)


def test_an_encoder_subset_keeps_the_6_layer_decoder() -> None:
    space = {"type": "iot_subsets", "stack": "encoder", "size": 2, "mode": "paper", "layers": 12}
    plan = _plan(_doc(space, {"decoder_order": "(csf)^6"}))
    (base,) = [t for t in plan.trials if t.baseline]
    (iot,) = [t for t in plan.trials if t.variant.subset is not None]
    model = plan.model_for(iot)
    assert isinstance(model, IOTConfig)
    assert (model.encoder_layers, model.decoder_layers) == (12, 6)
    assert model.encoder_codes == (1, 2) and model.decoder_codes == (4,)
    assert plan.row(base)["stacks"] == plan.row(iot)["stacks"] == \
        "enc 12 s 12 f | dec 6 s 6 c 6 f"


def test_without_the_other_stack_iot_is_as_deep_on_both_sides(
        capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc({**DECODER_IOT, "layers": 3}, {}, search={"algorithm": "optuna",
                                                        "num_samples": 2})
    plan = _plan(doc)
    (cand,) = plan.candidates
    model = plan.spec_of(cand.variant).model
    assert isinstance(model, IOTConfig)
    assert (model.encoder_layers, model.decoder_layers) == (3, 3)
    code, out, _ = _dry_run(doc, capsys)
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("models: "))
    assert "1 baseline trial(s), 3+3 layers" in line and "1 IOT candidate(s), 3+3 layers" in line


def test_an_encoder_not_one_block_stacked_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _dry_run(_doc(DECODER_IOT, {"encoder_order": "ss(sf)^4ff"}), capsys)
    assert code == 2 and "Traceback" not in err and out == ""
    assert "model.encoder_order: got 'sssfsfsfsfff', expected one encoder block stacked n " \
        "times ((sf)^n, (fs)^n) when iot_subsets reorders the decoder" in err


def test_reuse_never_takes_an_iot_run_planned_before_the_encoder_was_kept() -> None:
    deep = _plan(_doc(DECODER_IOT, {"encoder_order": "(sf)^36"}))
    assert deep.settings()["model.iot_keeps"] == "encoder_order"
    plain = _plan(_doc(DECODER_IOT, {}))
    assert "model.iot_keeps" not in plain.settings()  # the hash of other sweeps is unchanged
