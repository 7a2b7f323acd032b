"""Models with half-width feedforwards (Macaron blocks) and PAR orders: built layers and
exact parameter / FLOP counts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.blocks import FeedForward, build_sublayer
from sublayer_search.models.config import model_preset
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.seq2seq.model import (
    OrderedSeq2Seq,
    seq2seq_flops_per_token,
    seq2seq_param_count,
    seq2seq_preset,
)
from sublayer_search.spaces import expand, interleaved, order_params

V = 50


def numel(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_h_builds_a_feedforward_of_half_width() -> None:
    layer = build_sublayer("h", d_model=16, n_heads=2, d_ff=64)
    assert isinstance(layer.sublayer, FeedForward)
    assert layer.sublayer.fc1.out_features == 32 and layer.sublayer.fc2.in_features == 32
    full = build_sublayer("f", d_model=16, n_heads=2, d_ff=64)
    assert 2 * layer.sublayer.fc1.weight.numel() == full.sublayer.fc1.weight.numel()


@pytest.mark.parametrize("order", ["(hsh)^2", "hshf", "hhss", "sfhsh"])
@pytest.mark.parametrize("overrides", [{}, {"norm": "post", "tie_embeddings": False}])
def test_lm_param_count_equals_the_built_model(order: str, overrides: dict) -> None:
    cfg = model_preset("debug", order=order, vocab_size=V, **overrides)
    model = OrderedLM(cfg)
    assert param_count(cfg) == numel(model)
    idx = torch.randint(0, V, (2, 8))
    out = model(idx, idx)
    assert out.loss is not None and torch.isfinite(out.loss)
    kinds = ["h" if isinstance(layer.sublayer, FeedForward)
             and layer.sublayer.fc1.out_features == cfg.d_ff // 2 else "-" for layer in model.layers]
    assert kinds == ["h" if ch == "h" else "-" for ch in cfg.order]


@pytest.mark.parametrize("n", [1, 2, 4])
def test_macaron_and_par_members_cost_what_the_baseline_costs(n: int) -> None:
    base = model_preset("debug", order=interleaved(n), vocab_size=V)  # d_ff = 4d
    for cand in expand("macaron", {"n": n}) + (expand("par", {"n": n}) if n > 1 else []):
        cfg = model_preset("debug", order=cand.order, vocab_size=V)
        assert param_count(cfg) == numel(OrderedLM(cfg)), cand.name
        weights = order_params(cand.order, d_model=cfg.d_model, d_ff=cfg.d_ff)
        assert weights == order_params(base.order, d_model=cfg.d_model, d_ff=cfg.d_ff)
        if cand.space == "macaron":  # same weights and the same number of s: same compute
            # an h pair adds one LayerNorm (2d) and one output bias (d) per block
            assert param_count(cfg) - param_count(base) == 3 * n * cfg.d_model
            assert flops_per_token(cfg) == flops_per_token(base)


def test_h_needs_an_even_d_ff() -> None:
    with pytest.raises(ConfigError, match="model.d_ff: got 127, expected an even number"):
        model_preset("debug", order="hsh", d_ff=127, vocab_size=V)
    assert model_preset("debug", order="sf", d_ff=127, vocab_size=V).d_ff == 127
    with pytest.raises(ConfigError, match="model.d_ff"):
        seq2seq_preset("debug", encoder_order="hsh", d_ff=63)


@pytest.mark.parametrize(("encoder", "decoder"), [("(hsh)^2", "(hsch)^2"), ("sfsf", "hsch"),
                                                  ("hsh", "scf")])
def test_seq2seq_macaron_counts_exactly(encoder: str, decoder: str) -> None:
    cfg = seq2seq_preset("debug", encoder_order=encoder, decoder_order=decoder,
                         dropout=0.0).with_vocab(40)
    model = OrderedSeq2Seq(cfg)
    assert seq2seq_param_count(cfg) == numel(model)
    src = torch.randint(3, 40, (2, 5))
    tgt = torch.randint(3, 40, (2, 6))
    out = model(src, tgt[:, :-1], tgt[:, 1:])
    assert torch.isfinite(out.loss)
    plain = seq2seq_preset("debug", encoder_order="sfsf", decoder_order="scfscf").with_vocab(40)
    if (encoder, decoder) == ("(hsh)^2", "(hsch)^2"):  # the debug preset, as macaron
        assert seq2seq_flops_per_token(cfg) == seq2seq_flops_per_token(plain)
