"""A translation sweep's baseline keeps the stack the sweep does not search (issue 26):
a 36+6 model and its baseline plan in one sweep with the right counts in the dry run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.models.seq2seq.config import Seq2SeqConfig, seq2seq_param_count
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.spaces.order import interleaved, sandwich_order

DIMS = {"d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.0}


def _doc(space: dict[str, Any], model: dict[str, Any]) -> dict[str, Any]:
    return {"name": "deep_enc", "task": "translation", "space": space, "seeds": [0],
            "baseline": {"seeds": 1}, "model": {"preset": "debug", **DIMS, **model},
            "data": {"name": "multi30k", "vocab_size": 400},
            "train": {"steps": 2, "batch_size": 2}}


def _plan(doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch, shared: Path):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(shared))
    return plan_sweep(parse_experiment(doc), check_resources=False, notes=[])


def _count(plan, trial) -> tuple[int, Seq2SeqConfig]:  # type: ignore[no-untyped-def]
    model = plan.model_for(trial)
    return seq2seq_param_count(model), model


def test_36_plus_6_decoder_search_keeps_the_36_layer_encoder(
        shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(_doc({"type": "sandwich", "n": 6, "k": [2], "side": "decoder"},
                      {"encoder_order": "(sf)^36"}), monkeypatch, shared_data)
    base = [t for t in plan.trials if t.baseline]
    cand = [t for t in plan.trials if not t.baseline]
    assert len(base) == 1 and len(cand) == 1
    _, bmodel = _count(plan, base[0])
    _, cmodel = _count(plan, cand[0])
    assert bmodel.encoder_order == cmodel.encoder_order == interleaved(36)
    assert bmodel.decoder_order == interleaved(6, kind="decoder")
    assert cmodel.decoder_order == sandwich_order(6, 2, kind="decoder")
    rows = {r["name"]: r for r in (plan.row(t) for t in plan.trials)}
    brow = rows[base[0].name]
    assert brow["stacks"] == "enc 36 s 36 f | dec 6 s 6 c 6 f"
    # the dry run's count is the count of the model the config builds
    ref = Seq2SeqConfig(**{**{k: getattr(bmodel, k) for k in ("d_model", "n_heads", "d_ff",
                                                              "context", "dropout")},
                           "encoder_order": interleaved(36),
                           "decoder_order": interleaved(6, kind="decoder")})
    ref = ref.with_vocab(bmodel.src_vocab_size, bmodel.tgt_vocab_size)
    assert brow["params"] == seq2seq_param_count(ref) == seq2seq_param_count(bmodel)
    assert rows[cand[0].name]["params"] == brow["params"]  # a sandwich moves, adds nothing


def test_encoder_search_keeps_the_6_layer_decoder(
        shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(_doc({"type": "sandwich", "n": 36, "k": [3], "side": "encoder"},
                      {"decoder_order": "(scf)^6"}), monkeypatch, shared_data)
    (base,) = [t for t in plan.trials if t.baseline]
    model = plan.model_for(base)
    assert model.encoder_order == interleaved(36)  # the baseline is on the searched stack
    assert model.decoder_order == interleaved(6, kind="decoder")  # not 36 layers deep
    assert plan.row(base)["stacks"] == "enc 36 s 36 f | dec 6 s 6 c 6 f"


def test_without_the_other_stack_the_baseline_interleaves_it_as_before(
        shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = _plan(_doc({"type": "sandwich", "n": 3, "k": [1], "side": "decoder"}, {}),
                 monkeypatch, shared_data)
    (base,) = [t for t in plan.trials if t.baseline]
    model = plan.model_for(base)
    assert (model.encoder_order, model.decoder_order) == (interleaved(3),
                                                          interleaved(3, kind="decoder"))


def test_the_dry_run_table_shows_both_stacks(shared_data: Path, tmp_path: Path) -> None:
    doc = _doc({"type": "sandwich", "n": 6, "k": [2], "side": "decoder"},
               {"encoder_order": "(sf)^36"})
    path = tmp_path / "deep.yaml"
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run([sys.executable, "-m", "sublayer_search.search.cli.main", "sweep",
                          str(path), "--dry-run"], capture_output=True, text=True,
                         env={"SUBLAYER_DATA_DIR": str(shared_data), "PATH": "/usr/bin:/bin",
                              "HOME": str(tmp_path)}, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if "transformer6" in ln or "sandwich" in ln]
    assert len(lines) == 2
    assert all("enc 36 s 36 f | dec 6 s 6 c 6 f" in ln for ln in lines)
