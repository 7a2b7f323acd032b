"""IOT Gumbel temperature schedules (ours: anneal; the authors': step) and π clamps."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.iot_model import (
    IOTConfig,
    IOTSeq2Seq,
    clamp_probs,
    exploitation_loss,
    exploration_loss,
    temperature,
)
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.tasks.translation import TranslationTask


def icfg(**kw: Any) -> IOTConfig:
    base = dict(d_model=32, n_heads=2, d_ff=64, context=32, dropout=0.0, encoder_layers=1,
                decoder_layers=1)
    return IOTConfig(**{**base, **kw}).with_vocab(40)


def test_defaults_are_ours_anneal_and_clamp_below() -> None:
    c = icfg()
    assert (c.tau_schedule, c.tau_start, c.tau_end, c.clamp) == ("anneal", 1.0, 0.1, "below")
    assert temperature(c, 0, 100) == 1.0
    assert temperature(c, 50, 100) == pytest.approx(math.sqrt(0.1))
    assert temperature(c, 100, 100) == pytest.approx(0.1)
    assert IOTSeq2Seq(c).tau == 1.0


def test_authors_step_schedule_keeps_20_throughout_by_default() -> None:
    c = icfg(tau_schedule="step")
    assert c.tau_start == 20.0 and c.tau_decay == 1.0
    assert {temperature(c, s, 10_000) for s in (0, 1, 999, 5000, 10_000)} == {20.0}
    assert IOTSeq2Seq(c).tau == 20.0


def test_step_schedule_steps_down_at_fixed_intervals_to_tau_end() -> None:
    c = icfg(tau_schedule="step", tau_start=8.0, tau_decay=0.5, tau_interval=100, tau_end=1.5)
    taus = [temperature(c, s, 1000) for s in (0, 99, 100, 199, 200, 300, 10_000)]
    assert taus == [8.0, 8.0, 4.0, 4.0, 2.0, 1.5, 1.5]


@pytest.mark.parametrize(("kw", "field"), [
    ({"tau_schedule": "cosine"}, "model.tau_schedule"),
    ({"tau_schedule": "step", "tau_decay": 0.5}, "model.tau_interval"),
    ({"tau_schedule": "step", "tau_decay": 1.5}, "model.tau_decay"),
    ({"tau_schedule": "step", "tau_decay": 0.0}, "model.tau_decay"),
    ({"tau_schedule": "step", "tau_interval": 0, "tau_decay": 0.9}, "model.tau_interval"),
    ({"tau_schedule": "step", "anneal_steps": 10}, "model.anneal_steps"),
    ({"tau_schedule": "step", "tau_start": 1.0, "tau_end": 2.0}, "model.tau_end"),
    ({"tau_decay": 0.5}, "model.tau_decay"),
    ({"tau_interval": 10}, "model.tau_interval"),
    ({"clamp": "above"}, "model.clamp"),
    ({"clamp": "both", "decoder_size": 6, "floor": 0.2}, "model.floor"),
])
def test_bad_schedule_or_clamp_names_the_field(kw: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        icfg(**kw)
    assert info.value.field == field


def test_clamp_below_and_both() -> None:
    p = torch.tensor([[0.9, 0.08, 0.02], [0.01, 0.01, 0.98]])
    below = clamp_probs(p, 0.05, "below")
    assert torch.allclose(below, torch.tensor([[0.9, 0.08, 0.05], [0.05, 0.05, 0.98]]))
    both = clamp_probs(p, 0.05, "both")  # upper bound 1 - 2·0.05 = 0.9
    assert torch.allclose(both, torch.tensor([[0.9, 0.08, 0.05], [0.05, 0.05, 0.9]]))
    with pytest.raises(ValueError, match="clamp"):
        clamp_probs(p, 0.05, "above")


def test_losses_follow_the_clamp() -> None:
    confident = torch.tensor([[0.99, 0.005, 0.005]] * 4)
    n = 3
    kl_both = sum(math.log(1 / n) - math.log(v) for v in (0.9, 0.05, 0.05)) / n
    kl_below = sum(math.log(1 / n) - math.log(v) for v in (0.99, 0.05, 0.05)) / n
    assert exploitation_loss(confident, 0.05, "both").item() == pytest.approx(-kl_both, rel=1e-5)
    assert exploitation_loss(confident, 0.05).item() == pytest.approx(-kl_below, rel=1e-5)
    assert exploration_loss(confident, 0.05, "both").item() == pytest.approx(kl_both, rel=1e-5)
    uniform = torch.full((4, 3), 1 / 3)  # inside both bounds: the clamps agree
    assert exploration_loss(uniform, 0.05, "both").item() == pytest.approx(0.0, abs=1e-6)
    assert exploitation_loss(uniform, 0.05, "both") == exploitation_loss(uniform, 0.05)


def test_model_trains_with_the_authors_settings() -> None:
    torch.manual_seed(0)
    c = icfg(decoder_size=3, tau_schedule="step", clamp="both")
    model = IOTSeq2Seq(c).train()
    src = torch.randint(3, 40, (4, 6))
    tgt = torch.randint(3, 40, (4, 7))
    out = model(src, tgt[:, :-1], tgt[:, 1:])
    assert out.loss is not None and torch.isfinite(out.loss)
    out.loss.backward()
    assert model.tau == 20.0


def _template_settings(model: dict[str, Any]) -> dict[str, Any]:
    exp = parse_experiment({"name": "x", "task": "translation",
                            "space": {"type": "iot_subsets", "codes": [1, 2]},
                            "model": {"preset": "debug", **model},
                            "data": {"name": "multi30k"}})
    task = exp.new_task()  # the task that read the model section
    assert isinstance(task, TranslationTask) and exp.model.template is not None
    return task.iot_settings


def test_translation_model_section_passes_the_new_keys() -> None:
    settings = _template_settings({"tau_schedule": "step", "tau_decay": 0.5,
                                   "tau_interval": 100, "clamp": "both"})
    assert settings == {"tau_schedule": "step", "tau_decay": 0.5, "tau_interval": 100,
                        "clamp": "both"}


def test_schedule_and_clamp_change_the_config_hash(shared_data: Any,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Reuse matches finished runs by config hash: other routing settings, other runs."""
    from sublayer_search.search.plan.steps import plan_sweep

    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(shared_data))

    def hash_of(model: dict[str, Any]) -> str:
        raw = {"name": "h", "task": "translation",
               "space": {"type": "iot_subsets", "codes": [1, 2], "layers": 1},
               "model": {"preset": "debug", "d_model": 32, "n_heads": 2, "d_ff": 64, **model},
               "data": {"name": "multi30k", "vocab_size": 500}}
        return plan_sweep(parse_experiment(raw), check_resources=False, notes=[]).config_hash

    hashes = {hash_of({}), hash_of({"tau_schedule": "step"}), hash_of({"clamp": "both"})}
    assert len(hashes) == 3
