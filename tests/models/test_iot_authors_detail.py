"""``routing: authors``, third pass (issue 39): each remaining detail of the authors' IOT
run where it acts, on a tiny model against a hand computation — the site of predictor
dropout (the N-way logits), label smoothing summed over the paths, the Gumbel weights
averaged over one forward pass per path, the predictor's init std d^-0.5 — plus post-LN
and the shipped ``configs/iot_iwslt14_authors.yaml``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, cast

import pytest
import torch
import torch.nn.functional as F
import yaml

from sublayer_search.models.blocks import Residual
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.iot_config import AUTHORS_ROUTING
from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq, clamp_probs

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def icfg(**kw: Any) -> IOTConfig:
    base = dict(d_model=32, n_heads=2, d_ff=64, context=32, dropout=0.0, encoder_layers=1,
                decoder_layers=1, decoder_size=3)
    return IOTConfig(**{**base, **kw}).with_vocab(40)


def _batch(b: int = 4, s: int = 6, t: int = 7) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    src = torch.randint(3, 40, (b, s), generator=g)
    tgt = torch.randint(3, 40, (b, t), generator=g)
    src[0, -2:] = 0  # some padding on both sides
    tgt[1, -3:] = 0
    return src, tgt[:, :-1], tgt[:, 1:]


def test_the_preset_sets_the_new_details_and_ours_stay_the_defaults() -> None:
    ours = icfg()
    assert (ours.predictor_dropout_at, ours.path_smoothing, ours.path_passes) == (
        "input", "weighted", "shared")
    assert ours.predictor_init_std == 0.02
    c = icfg(routing="authors")
    assert (c.predictor_dropout_at, c.path_smoothing, c.path_passes) == (
        "logits", "summed", "per_path")
    assert c.predictor_init_std == pytest.approx(32 ** -0.5)
    assert icfg(predictor_init_std=None).predictor_init_std == pytest.approx(32 ** -0.5)
    # an explicit non-default value overrides the preset
    assert icfg(routing="authors", predictor_init_std=0.1).predictor_init_std == 0.1
    for field, bad in (("predictor_dropout_at", "output"), ("path_smoothing", "mean"),
                       ("path_passes", "all"), ("predictor_init_std", 0)):
        with pytest.raises(ConfigError, match=f"model.{field}"):
            icfg(**{field: bad})
    # one pass per path pairs with one encoder order only
    with pytest.raises(ConfigError, match="model.encoder_size"):
        icfg(routing="authors", encoder_size=2)
    theirs_but_shared = {k: v for k, v in AUTHORS_ROUTING.items() if k != "path_passes"}
    assert icfg(encoder_size=2, **theirs_but_shared).encoder_size == 2


def _hooked(model: IOTSeq2Seq) -> dict[str, torch.Tensor]:
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str):
        def hook(_m: torch.nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor) -> None:
            seen[f"{name}_in"], seen[f"{name}_out"] = args[0].detach(), out.detach()
        return hook

    model.predictor_dropout.register_forward_hook(keep("drop"))
    assert model.decoder_predictor is not None
    model.decoder_predictor.register_forward_hook(keep("pred"))
    return seen


@pytest.mark.parametrize("site", ["logits", "input"])
def test_predictor_dropout_acts_where_the_setting_says(site: str) -> None:
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg(predictor_dropout=0.5, predictor_dropout_at=site)).train()
    seen = _hooked(model)
    memory = torch.randn(4, 6, 32)
    pad = torch.zeros(4, 6, dtype=torch.bool)
    pad[0, -2:] = True
    out = model.decoder_logits(memory, pad)
    assert out is not None
    keep = (~pad).unsqueeze(-1).float()
    mean = (memory * keep).sum(1) / keep.sum(1)
    dropped = seen["drop_out"]
    assert ((dropped == 0) | torch.isclose(dropped, 2 * seen["drop_in"])).all()
    assert (dropped == 0).any()  # p = 0.5 drops some units
    if site == "logits":  # the authors': the N-way logits, the predictor sees the mean
        assert seen["drop_in"].shape == (4, 3)
        assert torch.equal(seen["drop_in"], seen["pred_out"])
        assert torch.allclose(seen["pred_in"], mean)
        assert torch.allclose(out, F.log_softmax(dropped, dim=-1))
    else:  # ours: the d-dim mean representation, before the predictor
        assert seen["drop_in"].shape == (4, 32)
        assert torch.allclose(seen["drop_in"], mean)
        assert torch.equal(seen["pred_in"], dropped)
        assert torch.allclose(out, F.log_softmax(seen["pred_out"], dim=-1))


def _hand_path_loss(model: IOTSeq2Seq, src: torch.Tensor, tgt_in: torch.Tensor,
                    tgt_out: torch.Tensor, weights: torch.Tensor, eps: float,
                    summed: bool) -> torch.Tensor:
    """Σ_n over paths of the token losses by hand, from plain logits (no fused head)."""
    pad = src.eq(0)
    memory = model._encode_path(model.src_embed(src), pad, 0)
    mask = tgt_out.ne(0).float()
    total = torch.zeros(())
    vocab = 40
    for n in range(weights.shape[1]):
        lp = F.log_softmax(model.head(model._decode_path(tgt_in, memory, pad, n)), dim=-1)
        nll = -lp.gather(-1, tgt_out.unsqueeze(-1)).squeeze(-1) * mask  # (B, T)
        smooth = -lp.sum(-1) * mask  # Σ_v −log p_v
        w = weights[:, n, None]
        if summed:  # the authors' criterion: (1−ε) Σ λ nll + ε/V Σ_paths smooth
            total = total + ((1 - eps) * w * nll).sum() + (eps / vocab * smooth).sum()
        else:
            total = total + (w * ((1 - eps) * nll + eps / vocab * smooth)).sum()
    return total / mask.sum()


@pytest.mark.parametrize("fused", [True, False])
def test_label_smoothing_is_summed_over_the_paths_by_hand(fused: bool) -> None:
    """N = 2 paths: only the NLL is weighted by λ, every path's smoothing term counts once."""
    torch.manual_seed(1)
    model = IOTSeq2Seq(icfg(routing="authors", decoder_codes=(4, 6))).train()
    model.fused_loss = fused
    src, tgt_in, tgt_out = _batch()
    out = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    assert out.weights is not None and out.path_loss is not None
    lam = out.weights[:, 0, :].detach()  # (B, 2): the weights the loss used
    with torch.no_grad():
        summed = _hand_path_loss(model, src, tgt_in, tgt_out, lam, 0.1, summed=True)
        weighted = _hand_path_loss(model, src, tgt_in, tgt_out, lam, 0.1, summed=False)
    assert out.path_loss.item() == pytest.approx(summed.item(), rel=1e-5)
    # the two readings differ by (1 − λ_n)·ε·ū summed over paths: not a rounding error
    assert summed.item() - weighted.item() > 1e-3
    # ours weights each path's smoothed loss: the same hand computation, the other branch
    # (a preset value given explicitly is its default: the authors' details one by one)
    torch.manual_seed(1)
    theirs_but_weighted = {k: v for k, v in AUTHORS_ROUTING.items() if k != "path_smoothing"}
    ours = IOTSeq2Seq(icfg(decoder_codes=(4, 6), **theirs_but_weighted)).train()
    assert ours.cfg.path_smoothing == "weighted" and ours.cfg.path_passes == "per_path"
    ours.fused_loss = fused
    out2 = ours(src, tgt_in, tgt_out, label_smoothing=0.1)
    assert out2.weights is not None and out2.path_loss is not None
    with torch.no_grad():
        hand = _hand_path_loss(ours, src, tgt_in, tgt_out, out2.weights[:, 0, :], 0.1,
                               summed=False)
    assert out2.path_loss.item() == pytest.approx(hand.item(), rel=1e-5)


def test_gumbel_weights_are_the_mean_over_the_passes_samples() -> None:
    """Seeded: the weights used equal the mean of N Gumbel samples (one per pass), drawn
    in pass order; no dropout here, so the passes' π are equal and only the draws differ."""
    model = IOTSeq2Seq(icfg(routing="authors")).train()
    src, tgt_in, tgt_out = _batch()
    torch.manual_seed(7)
    out = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    assert out.weights is not None and out.weights.shape == (4, 1, 3)
    with torch.no_grad():
        enc = model.encode(src)
        log_pi = model.decoder_logits(enc.memory, enc.padding_mask)
        assert log_pi is not None
        logits = clamp_probs(log_pi.exp(), 0.05, "both").log()  # --gs-clamp
    torch.manual_seed(7)
    samples = []
    for _ in range(3):
        u = torch.rand(4, 3)
        g = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
        samples.append(torch.softmax((logits + g) / 20.0, dim=-1))
    mean = torch.stack(samples).mean(0)
    assert torch.allclose(out.weights[:, 0, :], mean, atol=1e-6)
    assert not torch.allclose(out.weights[:, 0, :], samples[0], atol=1e-4)  # not one sample


def test_every_decoder_path_is_a_whole_forward_pass_of_its_own() -> None:
    """per_path runs the encoder (and its dropout) once per decoder path; shared once."""
    calls = {}
    for passes in ("per_path", "shared"):
        theirs = {**AUTHORS_ROUTING, "path_passes": passes}
        model = IOTSeq2Seq(icfg(dropout=0.3, **theirs)).train()
        seen: list[torch.Tensor] = []
        cast(torch.nn.ModuleDict, model.encoder[0])["s"].register_forward_hook(
            lambda _m, _a, o, seen=seen: seen.append(o.detach()))
        src, tgt_in, tgt_out = _batch()
        model(src, tgt_in, tgt_out, label_smoothing=0.1)
        calls[passes] = seen
    assert len(calls["per_path"]) == 3 and len(calls["shared"]) == 1
    # each pass draws its own dropout masks: the encoder states differ between passes
    assert not torch.allclose(calls["per_path"][0], calls["per_path"][1])


def test_per_path_losses_match_the_authors_criterion_with_dropout_off() -> None:
    """L_D on the mean π over the passes (unclamped), L_S on the mean clamped π."""
    model = IOTSeq2Seq(icfg(routing="authors")).train()
    src, tgt_in, tgt_out = _batch()
    out = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    with torch.no_grad():
        enc = model.encode(src)
        log_pi = model.decoder_logits(enc.memory, enc.padding_mask)
        assert log_pi is not None
        pi = log_pi.exp()
    n = 3
    hand_d = -(pi.mean(0).log().mean() + math.log(n))  # KL(u ‖ E_x π)
    hand_s = (pi.clamp(0.05, 0.9).log().mean(-1) + math.log(n)).mean()  # −E_x KL(u ‖ clamp π)
    assert out.explore is not None and out.exploit is not None and out.loss is not None
    assert out.explore.item() == pytest.approx(hand_d.item(), rel=1e-5)
    assert out.exploit.item() == pytest.approx(hand_s.item(), rel=1e-5)
    assert out.path_loss is not None
    assert out.loss.item() == pytest.approx(
        out.path_loss.item() + 0.1 * hand_d.item() + 0.01 * hand_s.item(), rel=1e-5)
    out.loss.backward()
    assert model.decoder_predictor is not None and model.decoder_predictor.weight.grad is not None
    assert model.decoder_predictor.weight.grad.abs().sum() > 0


def test_predictor_init_std_is_d_to_the_minus_half() -> None:
    torch.manual_seed(0)
    d = 256
    theirs = IOTSeq2Seq(icfg(routing="authors", d_model=d, n_heads=4, d_ff=512, decoder_size=6))
    ours = IOTSeq2Seq(icfg(d_model=d, n_heads=4, d_ff=512, decoder_size=6))
    assert theirs.decoder_predictor is not None and ours.decoder_predictor is not None
    # 1536 weights: the sample std is within ~2% of the true one
    assert theirs.decoder_predictor.weight.std().item() == pytest.approx(d ** -0.5, rel=0.08)
    assert ours.decoder_predictor.weight.std().item() == pytest.approx(0.02, rel=0.08)


def test_post_ln_normalises_after_the_residual() -> None:
    torch.manual_seed(0)
    post = IOTSeq2Seq(icfg(norm="post")).eval()
    pre = IOTSeq2Seq(icfg()).eval()
    x = torch.randn(2, 5, 32)
    pad = torch.zeros(2, 5, dtype=torch.bool)
    for model, is_post in ((post, True), (pre, False)):
        for kind in "sf":
            layer = cast(Residual, cast(torch.nn.ModuleDict, model.encoder[0])[kind])
            args = (pad,) if kind == "s" else ()
            with torch.no_grad():
                hand = (layer.norm(x + layer.sublayer(x, *args)) if is_post
                        else x + layer.sublayer(layer.norm(x), *args))
                assert torch.allclose(layer(x, *args), hand, atol=1e-6)
    assert isinstance(post.encoder_norm, torch.nn.Identity)  # fairseq post-LN: no final norm
    assert isinstance(post.decoder_norm, torch.nn.Identity)
    assert isinstance(pre.encoder_norm, torch.nn.LayerNorm)


def test_the_shipped_authors_config_runs_their_settings() -> None:
    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep

    raw = yaml.safe_load((CONFIGS / "iot_iwslt14_authors.yaml").read_text())
    plan = plan_sweep(parse_experiment(raw), check_resources=False, notes=[])
    specs = list(plan.specs.values())  # one per candidate: 5 subsets + the baseline
    iot = [s.model for s in specs if isinstance(s.model, IOTConfig)]
    assert sorted(m.decoder_size for m in iot) == [2, 3, 4, 5, 6] and len(specs) == 6
    for spec in specs:
        m, t = spec.model, spec.train
        assert (m.norm, m.d_model, m.d_ff, m.n_heads, m.dropout) == ("post", 512, 1024, 4, 0.3)
        assert spec.translation.max_tokens == 4000 and spec.translation.label_smoothing == 0.1
        # BLEU as the paper scored it (issue 46); fairseq's batch multiple of 8
        assert (spec.translation.bleu_tokenize, spec.translation.test_bleu) == ("none", True)
        assert spec.translation.batch_multiple == 8
        assert (t.steps, t.lr, t.schedule, t.warmup_steps, t.betas) == (
            100000, 0.0005, "inverse_sqrt", 4000, (0.9, 0.98))
        assert (t.weight_decay, t.clip_norm, t.precision) == (0.0001, 25.0, "fp32")
    for m in iot:
        assert (m.tau_schedule, m.tau_start, m.tau_end, m.clamp, m.gumbel_from) == (
            "step", 20.0, 2.0, "both", "clamped")
        assert (m.explore_clamp, m.predictor_dropout, m.predictor_dropout_at) == (
            False, 0.3, "logits")
        assert (m.path_smoothing, m.path_passes) == ("summed", "per_path")
        assert m.predictor_init_std == pytest.approx(512 ** -0.5)
        assert (m.c1, m.c2, m.floor) == (0.1, 0.01, 0.05)
    ours = yaml.safe_load((CONFIGS / "iot_iwslt14.yaml").read_text())
    assert "routing" not in ours["model"] and "not the authors' run" in (
        CONFIGS / "iot_iwslt14.yaml").read_text()


def test_the_experiment_file_takes_each_setting_and_names_a_bad_one(
        capsys: pytest.CaptureFixture[str]) -> None:
    from sublayer_search.search.cli.main import main

    doc: dict[str, Any] = {
        "name": "x", "task": "translation", "seeds": [0], "baseline": {"seeds": 1},
        "space": {"type": "iot_subsets", "codes": [4, 6], "layers": 1},
        "model": {"preset": "debug", "path_smoothing": "summed", "path_passes": "per_path",
                  "predictor_dropout_at": "logits", "predictor_init_std": None},
        "data": {"name": "multi30k", "vocab_size": 400},
        "train": {"steps": 2, "batch_size": 2}, "translation": {"max_tokens": 500}}
    path = Path("experiment.yaml")  # the test's own fresh working directory
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    capsys.readouterr()
    doc["model"]["path_passes"] = "every"
    path.write_text(yaml.safe_dump(doc))
    code = main(["sweep", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 2 and "model.path_passes" in err and "Traceback" not in err
    doc["model"]["path_passes"] = "per_path"
    doc["translation"]["max_tokens"] = 0
    path.write_text(yaml.safe_dump(doc))
    code = main(["sweep", str(path), "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 2 and "translation.max_tokens" in err and "Traceback" not in err
