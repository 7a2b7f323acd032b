"""models.attention_capture: attention probabilities of tiny real models."""

from __future__ import annotations

import numpy as np
import pytest

from sublayer_search.analysis import attention_distance


def test_tiny_models_attention_arrays_and_distance():
    from sublayer_search.models.attention_capture import tiny_model_attention

    a = tiny_model_attention("sfsf", seed=0, context=8)
    again = tiny_model_attention("sfsf", seed=0, context=8)
    b = tiny_model_attention("ssff", seed=1, context=8)
    assert len(a) == 2  # one array per s sublayer
    assert a[0].shape == (1, 2, 8, 8)  # (B, H, T, T) of the debug preset (2 heads)
    assert np.allclose(a[0].sum(axis=-1), 1.0, atol=1e-5)
    assert np.allclose(np.triu(a[0][0, 0], k=1), 0.0)  # causal
    assert attention_distance(a, again) == 0.0
    assert attention_distance(a, b) > 0.0
    assert attention_distance(a, b) == pytest.approx(attention_distance(b, a))


def test_capture_restores_training_mode():
    import torch

    from sublayer_search.models.attention_capture import capture
    from sublayer_search.models.config import model_preset
    from sublayer_search.models.lm import OrderedLM

    model = OrderedLM(model_preset("debug", order="sfs", vocab_size=16, context=4))
    model.train()
    probs = capture(model, torch.zeros((2, 4), dtype=torch.long))
    assert model.training
    assert len(probs) == 2 and probs[0].shape == (2, 2, 4, 4)
