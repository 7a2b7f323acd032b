"""``routing: authors``: the IOT authors' run detail by detail (issue 26), each detail
against a hand computation: Gumbel logits from log clamp(π), L_D on the unclamped π, L_S
on the clamped π, temperature from 20 with a minimum of 2, dropout on the predictors."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.iot_config import AUTHORS_ROUTING, temperature
from sublayer_search.models.seq2seq.iot_model import (
    IOTConfig,
    IOTSeq2Seq,
    exploration_loss,
    gumbel_weights,
)


def icfg(**kw: Any) -> IOTConfig:
    base = dict(d_model=32, n_heads=2, d_ff=64, context=32, dropout=0.25, encoder_layers=1,
                decoder_layers=1, decoder_size=3)
    return IOTConfig(**{**base, **kw}).with_vocab(40)


def test_the_preset_sets_every_detail_and_ours_stays_the_default() -> None:
    ours = icfg()
    assert (ours.gumbel_from, ours.explore_clamp, ours.predictor_dropout) == ("pi", True, 0.0)
    c = icfg(routing="authors")
    assert (c.tau_schedule, c.tau_start, c.tau_end, c.clamp) == ("step", 20.0, 2.0, "both")
    assert (c.gumbel_from, c.explore_clamp) == ("clamped", False)
    assert c.predictor_dropout == 0.25  # None in the preset: the model's dropout
    assert set(AUTHORS_ROUTING) <= set(c.to_dict())
    # an explicit non-default value overrides the preset
    assert icfg(routing="authors", tau_end=3.0).tau_end == 3.0
    with pytest.raises(ConfigError, match="model.routing"):
        icfg(routing="theirs")
    with pytest.raises(ConfigError, match="model.gumbel_from"):
        icfg(gumbel_from="logits")


def test_minimum_temperature_is_two() -> None:
    c = icfg(routing="authors", tau_decay=0.5, tau_interval=10)
    taus = [temperature(c, s, 1000) for s in (0, 10, 20, 30, 40, 1000)]
    assert taus == [20.0, 10.0, 5.0, 2.5, 2.0, 2.0]  # max(2, 20 * 0.5^(step // 10))


def _probs() -> torch.Tensor:
    return torch.tensor([[0.97, 0.02, 0.01], [0.2, 0.5, 0.3]])


def test_gumbel_logits_are_the_log_of_the_clamped_pi() -> None:
    model = IOTSeq2Seq(icfg(routing="authors"))
    log_pi = _probs().log()
    # clamp both at floor 0.05, N = 3: pi in [0.05, 0.9]
    hand = torch.tensor([[0.9, 0.05, 0.05], [0.2, 0.5, 0.3]]).log()
    assert torch.allclose(model.gumbel_logits(log_pi), hand)
    ours = IOTSeq2Seq(icfg())
    assert torch.equal(ours.gumbel_logits(log_pi), log_pi)
    # the weights: softmax((log clamp(pi) + g) / tau), same Gumbel noise
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    u = torch.rand(hand.shape, generator=g1)
    noise = -torch.log(-torch.log(u.clamp(1e-10, 1.0 - 1e-7)))
    expected = torch.softmax((hand + noise) / 20.0, dim=-1)
    got = gumbel_weights(model.gumbel_logits(log_pi), 20.0, generator=g2)
    assert torch.allclose(got, expected)


def test_exploration_uses_the_unclamped_pi_and_exploitation_the_clamped() -> None:
    p = _probs()
    mean = p.mean(0)  # [0.585, 0.26, 0.155], inside the clamp: use a sharper batch too
    hand_d = sum(math.log(1 / 3) - math.log(float(m)) for m in mean) / 3
    assert exploration_loss(p, 0.05, "both", clamped=False).item() == pytest.approx(hand_d)
    sharp = torch.tensor([[0.99, 0.005, 0.005], [0.98, 0.01, 0.01]])
    m = sharp.mean(0)
    unclamped = sum(math.log(1 / 3) - math.log(float(v)) for v in m) / 3
    clamped = sum(math.log(1 / 3) - math.log(v) for v in (0.9, 0.05, 0.05)) / 3
    assert exploration_loss(sharp, 0.05, "both", clamped=False).item() == pytest.approx(unclamped)
    assert exploration_loss(sharp, 0.05, "both").item() == pytest.approx(clamped)
    assert unclamped > clamped


def test_the_model_combines_the_details_as_the_authors_criterion_does() -> None:
    torch.manual_seed(0)
    cfg = icfg(routing="authors", dropout=0.0)  # no dropout: encode() repeats the memory
    model = IOTSeq2Seq(cfg).train()
    src = torch.randint(3, 40, (4, 6))
    tgt = torch.randint(3, 40, (4, 7))
    out = model(src, tgt[:, :-1], tgt[:, 1:])
    enc = model.encode(src)
    probs = model.decoder_logits(enc.memory, enc.padding_mask).exp()
    n = 3
    hand_d = (math.log(1 / n) - probs.mean(0).log()).sum() / n  # unclamped
    clamped = probs.clamp(0.05, 0.9)
    hand_s = -((math.log(1 / n) - clamped.log()).sum(-1) / n).mean()
    assert out.explore is not None and out.exploit is not None
    assert out.explore.item() == pytest.approx(hand_d.item(), rel=1e-5)
    assert out.exploit.item() == pytest.approx(hand_s.item(), rel=1e-5)
    assert out.loss is not None
    assert out.loss.item() == pytest.approx(
        out.path_loss.item() + 0.1 * hand_d.item() + 0.01 * hand_s.item(), rel=1e-5)


def test_predictor_dropout_acts_in_training_only() -> None:
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg(routing="authors", predictor_dropout=0.5))
    assert model.predictor_dropout.p == 0.5
    src = torch.randint(3, 40, (4, 6))
    model.eval()
    enc = model.encode(src)
    a = model.decoder_logits(enc.memory, enc.padding_mask)
    b = model.decoder_logits(enc.memory, enc.padding_mask)
    assert a is not None and b is not None and torch.equal(a, b)
    model.train()
    torch.manual_seed(1)
    c = model.decoder_logits(enc.memory, enc.padding_mask)
    assert c is not None and not torch.allclose(a, c)


def test_a_translation_sweep_passes_the_preset_to_the_model() -> None:
    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.tasks.translation import TranslationTask

    exp = parse_experiment({"name": "x", "task": "translation",
                            "space": {"type": "iot_subsets", "codes": [1, 2]},
                            "model": {"preset": "debug", "routing": "authors",
                                      "predictor_dropout": 0.1},
                            "data": {"name": "multi30k"}})
    task = exp.new_task()  # the task that read the model section
    assert isinstance(task, TranslationTask) and exp.model.template is not None
    assert task.iot_settings == {"routing": "authors", "predictor_dropout": 0.1}
