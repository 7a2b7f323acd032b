"""The trainer's AdamW runs torch's fused kernel, and steps as the plain one does."""

from __future__ import annotations

import torch

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.optim import build_optimizer, fused_adamw_applies
from sublayer_search.models.train_config import TrainConfig


def _model() -> OrderedLM:
    torch.manual_seed(0)
    return OrderedLM(ModelConfig(order="sfsf", vocab_size=30, d_model=16, n_heads=2,
                                 d_ff=32, context=8, dropout=0.0))


def test_adamw_is_fused_for_float_parameters_on_the_cpu():
    model = _model()
    assert fused_adamw_applies(model)
    opt = build_optimizer(TrainConfig(optimizer="adamw"), model)
    assert all(group["fused"] for group in opt.param_groups)


def test_fused_adamw_steps_as_plain_adamw():
    cfg = TrainConfig(optimizer="adamw", lr=1e-2, weight_decay=0.1)
    fused_model, plain_model = _model(), _model()
    fused = build_optimizer(cfg, fused_model)
    groups = [{"params": [p for p in plain_model.parameters() if p.dim() >= 2],
               "weight_decay": cfg.weight_decay},
              {"params": [p for p in plain_model.parameters() if p.dim() < 2],
               "weight_decay": 0.0}]
    plain = torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)
    idx = torch.randint(0, 30, (2, 8), generator=torch.Generator().manual_seed(1))
    for _ in range(3):
        for model, opt in ((fused_model, fused), (plain_model, plain)):
            model(idx, idx.roll(-1, 1)).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    for a, b in zip(fused_model.parameters(), plain_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=5e-5)  # updates are ~1e-2
    changed = any(not torch.equal(a, b) for a, b in
                  zip(fused_model.parameters(), _model().parameters(), strict=True))
    assert changed  # the steps moved the weights
