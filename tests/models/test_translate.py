"""fit_translation: learning on Multi30k, BLEU, the report contract, resume, IOT routing."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import sacrebleu

from sublayer_search.models.data.parallel import ParallelDataConfig, load_parallel
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig
from sublayer_search.models.seq2seq.iot_model import IOTConfig
from sublayer_search.models.seq2seq.model import seq2seq_preset
from sublayer_search.models.seq2seq.translation_workload import (
    TranslationConfig,
    TranslationSpec,
    bleu,
    build_translation_model,
    evaluate_translation,
    fit_translation,
    translation_param_count,
)


@pytest.fixture(scope="module")
def data(shared_data, tmp_path_factory) -> ParallelDataConfig:
    return ParallelDataConfig(name="multi30k", vocab_size=2000, max_train_tokens=20,
                              download=False, cache_dir=str(tmp_path_factory.mktemp("m30k")))


@pytest.fixture(scope="module")
def corpus(data):
    return load_parallel(data)


def small_spec(data, model=None, **train) -> TranslationSpec:
    base = dict(steps=6, batch_size=16, lr=3e-3, eval_every=3, seed=0)
    return TranslationSpec(
        model=model or seq2seq_preset("debug", dropout=0.0),
        data=data,
        train=TrainConfig(**{**base, **train}),
        translation=TranslationConfig(beam=2, max_len=8, eval_sentences=12),
    )


def test_project_bleu_equals_sacrebleu(corpus):
    refs = list(corpus.valid.tgt_text[:50])
    hyps = [" ".join(r.split()[: max(1, len(r.split()) - i % 4)]) for i, r in enumerate(refs)]
    hyps[3] = "completely unrelated words"
    assert bleu(hyps, refs) == sacrebleu.corpus_bleu(hyps, [refs]).score
    assert 0 < bleu(hyps, refs) < 100 and bleu(refs, refs) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        bleu(["a", "b"], ["a"])


def test_small_model_learns_to_translate_multi30k(data, corpus):
    """A d=64 two-layer model, 300 steps, greedy BLEU on 100 validation sentences."""
    spec = TranslationSpec(
        model=seq2seq_preset("debug", d_model=64, n_heads=4, d_ff=256, dropout=0.0),
        data=data,
        train=TrainConfig(steps=300, batch_size=64, lr=6e-3, warmup_steps=30, eval_every=300,
                          seed=0),
        translation=TranslationConfig(beam=1, max_len=40, eval_sentences=100, eval_at_start=True),
    )
    reports = []
    result = fit_translation(spec, lambda m, checkpoint=None: reports.append(m), corpus=corpus)
    first, last = reports[0], reports[-1]
    print(f"\nMulti30k de-en BLEU: step 0 {first['val_bleu']:.2f} -> step 300 "
          f"{last['val_bleu']:.2f}; val loss {first['val_loss']:.2f} -> {last['val_loss']:.2f}")
    assert [r["step"] for r in reports] == [0, 300]
    assert result.status == "finished" and last["status"] == "finished"
    assert last["val_bleu"] >= first["val_bleu"] + 2.0
    assert last["val_loss"] < first["val_loss"] - 3.0
    assert result.metrics["best_val_bleu"] == max(first["val_bleu"], last["val_bleu"])


def test_reports_follow_the_fit_contract(data, corpus, tmp_path):
    reports = []
    result = fit_translation(small_spec(data), lambda m, checkpoint=None: reports.append(
        (m, checkpoint)), corpus=corpus, checkpoint_dir=str(tmp_path))
    assert [m["step"] for m, _ in reports] == [3, 6]
    assert [m["status"] for m, _ in reports] == ["running", "finished"]
    keys = {"step", "train_loss", "val_loss", "val_bleu", "best_val_bleu", "lr", "tokens_per_s"}
    assert all(keys <= set(m) for m, _ in reports)
    assert all(ckpt == str(tmp_path) for _, ckpt in reports)
    assert result.checkpoint == str(tmp_path) and (tmp_path / "state.pt").is_file()
    assert 0 <= result.metrics["val_bleu"] <= 100 and math.isfinite(result.metrics["val_loss"])


class _Stop(Exception):
    pass


def test_resume_from_checkpoint_matches_uninterrupted_run(data, corpus, tmp_path):
    straight = fit_translation(small_spec(data), corpus=corpus)

    def stop(metrics, checkpoint=None):
        if metrics["step"] >= 3:
            raise _Stop

    with pytest.raises(_Stop):
        fit_translation(small_spec(data), stop, corpus=corpus, checkpoint_dir=str(tmp_path))
    steps = []
    resumed = fit_translation(small_spec(data), lambda m, checkpoint=None: steps.append(m["step"]),
                              corpus=corpus, resume_from=str(tmp_path))
    assert steps == [6]
    assert resumed.metrics["val_loss"] == pytest.approx(straight.metrics["val_loss"], rel=1e-6)
    assert resumed.metrics["val_bleu"] == pytest.approx(straight.metrics["val_bleu"])


def test_iot_reports_route_shares_temperature_and_the_routing_bleu_matrix(data, corpus):
    model = IOTConfig(d_model=32, n_heads=2, d_ff=64, context=64, dropout=0.0, encoder_layers=1,
                      decoder_layers=1, decoder_size=3, tau_start=2.0, tau_end=0.5)
    reports = []
    result = fit_translation(small_spec(data, model), lambda m, checkpoint=None: reports.append(m),
                             corpus=corpus)
    assert result.status == "finished"
    for m in reports:
        shares = [m[f"route_share_{c}"] for c in (1, 4, 6)]
        assert sum(shares) == pytest.approx(1.0) and all(0 <= s <= 1 for s in shares)
    assert 0.5 < reports[1]["tau"] < reports[0]["tau"] < 2.0
    assert "routing_bleu" not in reports[0]
    matrix = json.loads(reports[-1]["routing_bleu"])
    routed = [c for c in ("1", "4", "6") if reports[-1][f"route_share_{c}"] > 0]
    assert sorted(matrix) == routed
    assert all(sorted(row) == ["1", "4", "6"] for row in matrix.values())
    assert all(0 <= v <= 100 for row in matrix.values() for v in row.values())
    assert result.metrics["routing_bleu"] == reports[-1]["routing_bleu"]


def test_routing_matrix_diagonal_matches_the_routed_decoding(data, corpus):
    cfg = IOTConfig(d_model=32, n_heads=2, d_ff=64, context=64, dropout=0.0, encoder_layers=1,
                    decoder_layers=1, decoder_size=2).with_vocab(corpus.src_vocab_size)
    import torch

    torch.manual_seed(0)
    model = build_translation_model(cfg)
    assert translation_param_count(cfg) == sum(p.numel() for p in model.parameters())
    res = evaluate_translation(model, corpus, limit=10, beam=1, max_len=6, routing_matrix=True)
    refs = list(corpus.valid.tgt_text[:10])
    for code, row in res["routing_bleu"].items():
        k = cfg.decoder_codes.index(int(code))
        rows = [i for i, r in enumerate(res["routes"]) if r == k]
        assert row[code] == pytest.approx(bleu([res["hypotheses"][i] for i in rows],
                                               [refs[i] for i in rows]))


def test_bleu_every_skips_bleu_between_its_multiples(data, corpus):
    spec = small_spec(data, steps=6, eval_every=2)
    spec = replace(spec, translation=replace(spec.translation, bleu_every=4))
    reports = []
    fit_translation(spec, lambda m, checkpoint=None: reports.append(m), corpus=corpus)
    assert [("val_bleu" in m) for m in reports] == [False, True, True]


def test_nan_loss_ends_with_diverged_status(data, corpus):
    reports = []
    result = fit_translation(small_spec(data, optimizer="sgd", lr=1e6, clip_norm=None, steps=30,
                                        eval_every=30),
                             lambda m, checkpoint=None: reports.append(m), corpus=corpus)
    assert result.status == "diverged" and result.steps < 30
    assert reports[-1]["status"] == "diverged" and math.isnan(reports[-1]["val_bleu"])


def test_settings_are_checked(data, corpus):
    for kw, field in ((dict(beam=0), "beam"), (dict(label_smoothing=1.0), "label_smoothing"),
                      (dict(bleu_every=0), "bleu_every"), (dict(max_len=0), "max_len")):
        with pytest.raises(ConfigError, match=rf"translation\.{field}: got"):
            TranslationConfig(**kw)
    separate = load_parallel(replace(data, shared_vocab=False, max_train_pairs=200,
                                     vocab_size=300))
    with pytest.raises(ConfigError, match=r"model\.shared_embeddings"):
        fit_translation(small_spec(data), corpus=separate)
    ok = small_spec(data, seq2seq_preset("debug", shared_embeddings=False, dropout=0.0), steps=1,
                    eval_every=1)
    assert fit_translation(ok, corpus=separate).status == "finished"
    flat = small_spec(data).flat()
    assert flat["translation.beam"] == 2 and flat["model.decoder_order"] == "scfscf"
    assert flat["data.name"] == "multi30k"
