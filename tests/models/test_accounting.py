"""Analytic parameter / FLOP counts against the built models."""

from __future__ import annotations

from itertools import permutations

import pytest
import torch
from torch import nn

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.config import model_preset
from sublayer_search.models.lm import OrderedLM


def numel(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # shared parameters once


def test_all_permutations_of_a_multiset_have_equal_counts() -> None:
    orders = sorted({"".join(p) for p in permutations("ssff")})
    assert len(orders) == 6
    counts = {o: numel(OrderedLM(model_preset("debug", order=o, vocab_size=50))) for o in orders}
    assert len(set(counts.values())) == 1, counts
    assert numel(OrderedLM(model_preset("debug", order="sssf", vocab_size=50))) != counts["ssff"]


CONFIGS = {
    "tied": {},
    "untied": {"tie_embeddings": False},
    "sinusoidal": {"positions": "sinusoidal", "scale_embedding": True},
    "post-norm": {"norm": "post", "activation": "gelu"},
    "adaptive-input-tied": {"adaptive_input": True, "cutoffs": (10, 30)},
    "adaptive-input-untied": {"adaptive_input": True, "cutoffs": (10, 30), "tie_embeddings": False},
    "adaptive-softmax-tied": {"adaptive_softmax": True, "cutoffs": (10, 30)},
    "adaptive-softmax-untied": {
        "adaptive_softmax": True,
        "cutoffs": (20,),
        "tie_embeddings": False,
    },
    "adaptive-both-tied": {"adaptive_input": True, "adaptive_softmax": True, "cutoffs": (10, 30)},
    "adaptive-both-untied": {
        "adaptive_input": True,
        "adaptive_softmax": True,
        "cutoffs": (10, 30, 40),
        "adaptive_factor": 2,
        "tie_embeddings": False,
        "positions": "sinusoidal",
    },
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_param_count_matches_the_model(name: str) -> None:
    cfg = model_preset("debug", order="ssffsf", vocab_size=50, **CONFIGS[name])
    assert param_count(cfg) == numel(OrderedLM(cfg))


def test_tying_saves_exactly_the_shared_matrices() -> None:
    tied = model_preset("debug", vocab_size=50)
    untied = model_preset("debug", vocab_size=50, tie_embeddings=False)
    assert param_count(untied) - param_count(tied) == 50 * 32
    both = {"adaptive_input": True, "adaptive_softmax": True, "cutoffs": (10, 30)}
    a_tied = model_preset("debug", vocab_size=50, **both)
    a_untied = model_preset("debug", vocab_size=50, tie_embeddings=False, **both)
    # shortlist rows 10·32, tail 1: 32·8 + 8·20, tail 2: 32·2 + 2·20
    assert (
        param_count(a_untied) - param_count(a_tied) == 10 * 32 + 32 * 8 + 8 * 20 + 32 * 2 + 2 * 20
    )


def test_press2020_parameter_count() -> None:
    cfg = model_preset("press2020")
    d, d_ff, vocab, (c0, c1) = cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.cutoffs
    # adaptive input: bands of width d, d/4, d/16, each with a projection to d
    embeddings = c0 * d + (c1 - c0) * (d // 4) + (vocab - c1) * (d // 16)
    projections = d * d + (d // 4) * d + (d // 16) * d
    s_exact = 4 * d * d + 4 * d + 2 * d  # q,k,v,out + biases + LayerNorm
    f_exact = 2 * d * d_ff + d_ff + d + 2 * d
    final_norm = 2 * d
    cluster_rows = 2 * d  # the only untied part of the adaptive softmax
    expected = embeddings + projections + 16 * (s_exact + f_exact) + final_norm + cluster_rows
    with torch.device("meta"):
        model = OrderedLM(cfg)
    built = numel(model)
    print(f"\npress2020 parameters: {built:,} (analytic {param_count(cfg):,})")
    assert built == param_count(cfg) == expected
    assert 246_000_000 < built < 248_000_000  # Baevski & Auli: 247M


def test_flops_per_token_counts_every_matmul_weight() -> None:
    cfg = model_preset("debug", order="ssffs", vocab_size=50, tie_embeddings=False)
    model = OrderedLM(cfg)
    matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))
    attention = 3 * 2 * 2 * cfg.context * cfg.d_model
    assert flops_per_token(cfg) == 2 * matmul + attention
    tied = model_preset("debug", order="ssffs", vocab_size=50)
    assert flops_per_token(tied) == flops_per_token(cfg)  # a tied head still multiplies


def test_flops_per_token_adaptive_and_order_invariance() -> None:
    d, ctx = 32, 32
    cfg = model_preset("debug", vocab_size=50, adaptive_softmax=True, cutoffs=(10, 30))
    layers = 2 * 4 * d * d + 2 * 2 * d * 128
    head = (10 + 2) * d + (d * 8 + 8 * 20) + (d * 2 + 2 * 20)
    assert flops_per_token(cfg) == 2 * (layers + head) + 2 * 4 * ctx * d
    swapped = model_preset(
        "debug", order="ffss", vocab_size=50, adaptive_softmax=True, cutoffs=(10, 30)
    )
    assert flops_per_token(swapped) == flops_per_token(cfg)
