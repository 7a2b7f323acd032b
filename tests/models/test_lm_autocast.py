"""The LM trains under CPU bf16 autocast (the GPU benchmark's path), adaptive softmax too."""

from __future__ import annotations

import pytest
import torch

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.lm import OrderedLM


@pytest.mark.parametrize("adaptive", [True, False])
def test_a_bf16_autocast_step_matches_float32(adaptive):
    cfg = ModelConfig(order="sfsf", vocab_size=64, d_model=16, n_heads=2, d_ff=32, context=8,
                      dropout=0.0, adaptive_softmax=adaptive, cutoffs=(16, 40) if adaptive else ())
    torch.manual_seed(0)
    model = OrderedLM(cfg)
    x = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))
    y = x.roll(-1, 1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(x, y).loss
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all()
               for p in model.parameters() if p.requires_grad)
    with torch.no_grad():
        reference = model(x, y).loss
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, reference, rtol=0.02, atol=0.02)
