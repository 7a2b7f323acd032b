"""Crossformer guidance options beyond Eq. 5's defaults: the decoder's cross-attention as a
chain of its own (``cross_attention``) and the soft regulariser's norm (``norm``: the
default squared Frobenius or the paper's L2). Counts against the built models, each norm
against a hand computation, labels and params stable for the settings of runs before."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from sublayer_search.models.blocks import projection
from sublayer_search.models.config import ModelConfig
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq, iot_param_count
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, Seq2SeqConfig, seq2seq_param_count
from sublayer_search.search.core.variant import run_variant

D, FF = 16, 32
DIMS: dict[str, Any] = dict(src_vocab_size=40, tgt_vocab_size=40, d_model=D, n_heads=2, d_ff=FF,
                            context=16, dropout=0.0)


def _numel(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def _seq2seq(decoder: str = "scfscfscf", **guidance: Any) -> OrderedSeq2Seq:
    torch.manual_seed(0)
    return OrderedSeq2Seq(Seq2SeqConfig(encoder_order="sfsfsf", decoder_order=decoder,
                                        guidance=guidance, **DIMS))


@pytest.mark.parametrize("blocks", [["key_query"], ["value"], ["key_query", "value", "ffn"]])
def test_guided_cross_attention_counts_match_the_built_model(blocks: list[str]) -> None:
    plain = _seq2seq(mode="hard", blocks=blocks)
    cross = _seq2seq(mode="hard", blocks=blocks, cross_attention=True)
    for model in (plain, cross):
        assert _numel(model) == seq2seq_param_count(model.cfg)
    # 3 c sublayers: 2 more pairs of d^2 per attention block
    attention = len([b for b in blocks if b != "ffn"])
    assert _numel(plain) - _numel(cross) == attention * 2 * D * D
    c1, c4, c7 = (plain.decoder[i] for i in (1, 4, 7))
    assert projection(c4, "q").weight is not projection(c1, "q").weight
    c1, c4, c7 = (cross.decoder[i] for i in (1, 4, 7))
    if "key_query" in blocks:  # K(t) = Q(t+1) along the c chain
        assert projection(c4, "q").weight is projection(c1, "k").weight
        assert projection(c7, "q").weight is projection(c4, "k").weight
    if blocks == ["value"]:  # out between the 1st and 2nd, v between the 2nd and 3rd
        assert projection(c4, "out").weight is projection(c1, "out").weight
        assert projection(c7, "v").weight is projection(c4, "v").weight


def test_guided_cross_attention_runs_and_keeps_the_fused_result() -> None:
    """Splitting a cross-attention's k,v keeps its function: same output as fused."""
    torch.manual_seed(0)
    model = _seq2seq(mode="soft", blocks=["key_query"], cross_attention=True)
    src, tgt = torch.randint(1, 40, (2, 5)), torch.randint(1, 40, (2, 4))
    out = model(src, tgt, tgt)
    assert out.loss is not None and torch.isfinite(out.loss)
    from sublayer_search.models.blocks import CrossAttention

    torch.manual_seed(1)
    fused = CrossAttention(D, 2)
    x, memory = torch.randn(2, 3, D), torch.randn(2, 5, D)
    before = fused(x, memory)
    fused.split_kv()
    assert fused.kv is None and fused.k is not None
    torch.testing.assert_close(fused(x, memory), before)


def test_iot_guided_cross_attention_counts_match_the_built_model() -> None:
    cfg = IOTConfig(encoder_layers=2, decoder_layers=3, decoder_codes=[1, 4],
                    guidance={"mode": "hard", "blocks": ["key_query"], "cross_attention": True},
                    **DIMS)
    plain = IOTConfig(encoder_layers=2, decoder_layers=3, decoder_codes=[1, 4],
                      guidance={"mode": "hard", "blocks": ["key_query"]}, **DIMS)
    model = IOTSeq2Seq(cfg)
    assert _numel(model) == iot_param_count(cfg) == iot_param_count(plain) - 2 * D * D
    layers = [model.decoder[i]["c"] for i in range(3)]
    assert projection(layers[1], "q").weight is projection(layers[0], "k").weight


def _hand_penalty(model: OrderedSeq2Seq, pairs: list[tuple[Any, str, Any, str]],
                  norm: str) -> float:
    total = 0.0
    for lower, lrole, upper, urole in pairs:
        diff = projection(lower, lrole).weight.detach() - projection(upper, urole).weight.detach()
        squared = float((diff.double() ** 2).sum())
        total += squared if norm == "squared_frobenius" else squared ** 0.5
    return total


@pytest.mark.parametrize("norm", ["squared_frobenius", "l2"])
def test_each_norm_against_a_hand_computation(norm: str) -> None:
    model = _seq2seq(mode="soft", blocks=["key_query"], cross_attention=True, norm=norm)
    enc, dec = model.encoder, model.decoder
    # encoder s at 0, 2, 4; decoder s at 0, 3, 6 and c at 1, 4, 7: K(t) <-> Q(t+1)
    pairs = [(enc[0], "k", enc[2], "q"), (enc[2], "k", enc[4], "q"),
             (dec[0], "k", dec[3], "q"), (dec[3], "k", dec[6], "q"),
             (dec[1], "k", dec[4], "q"), (dec[4], "k", dec[7], "q")]
    penalty = model.guidance_penalty()
    assert penalty is not None
    assert float(penalty.detach()) == pytest.approx(_hand_penalty(model, pairs, norm), rel=1e-5)
    penalty.backward()  # only the lower matrix is pulled
    assert projection(enc[0], "k").weight.grad is not None
    assert projection(enc[4], "q").weight.grad is None
    if norm == "l2":  # gradient (A - B) / ||A - B||: norm 1 per pair, for the one lower side
        grad = projection(enc[4], "k").weight.grad
        assert grad is None
        g = projection(enc[0], "k").weight.grad
        assert float(g.norm()) == pytest.approx(1.0, rel=1e-5)


def test_l2_of_an_equal_pair_has_no_nan_gradient() -> None:
    model = _seq2seq(mode="soft", blocks=["key_query"], norm="l2")
    with torch.no_grad():
        projection(model.encoder[0], "k").weight.copy_(projection(model.encoder[2], "q").weight)
    penalty = model.guidance_penalty()
    assert penalty is not None
    penalty.backward()
    assert torch.isfinite(projection(model.encoder[0], "k").weight.grad).all()


def test_defaults_keep_labels_params_and_dicts() -> None:
    old = GuidanceConfig.from_dict({"mode": "soft", "blocks": ["key_query"]})
    assert old.label == "sg-kq" and set(old.flat()) == {
        "model.guidance.mode", "model.guidance.blocks", "model.guidance.alpha",
        "model.guidance.pairing"}
    assert set(old.to_dict()) == {"mode", "blocks", "alpha", "pairing"}
    cases = {"hg-kq.cross": {"mode": "hard", "blocks": ["key_query"], "cross_attention": True},
             "sg-v.l2": {"mode": "soft", "blocks": ["value"], "norm": "l2"},
             "sg-kq+v.qk.cross.l2.alpha0.1": {"mode": "soft", "blocks": ["value", "key_query"],
                                              "pairing": "query_key", "cross_attention": True,
                                              "norm": "l2", "alpha": 0.1}}
    for label, setting in cases.items():
        cfg = GuidanceConfig.from_dict(setting)
        assert cfg.label == label and GuidanceConfig.from_label(label) == cfg
        assert GuidanceConfig.from_dict(cfg.to_dict()) == cfg
        params = {k: str(v) for k, v in cfg.flat().items()} | {"order": "sfsf"}
        variant = run_variant(params)
        assert variant is not None and variant.guidance == cfg, label
    flat = GuidanceConfig.from_dict(cases["hg-kq.cross"]).flat()
    assert flat["model.guidance.cross_attention"] is True and "model.guidance.norm" not in flat
    # hard guidance has no norm in its label; mode none drops both options
    assert GuidanceConfig(mode="hard", blocks=("ffn",), norm="l2").label == "hg-ffn"
    assert GuidanceConfig(mode="none", cross_attention=True, norm="l2") == GuidanceConfig()


@pytest.mark.parametrize("setting,field,words", [
    ({"mode": "hard", "blocks": ["ffn"], "cross_attention": True},
     "model.guidance.cross_attention", "key_query or value"),
    ({"mode": "soft", "blocks": ["ffn"], "norm": "l1"}, "model.guidance.norm", "l2"),
    ({"mode": "soft", "blocks": ["value"], "cross_attention": "yes"},
     "model.guidance.cross_attention", "true or false"),
])
def test_bad_options_name_the_field(setting: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        GuidanceConfig.from_dict(setting)
    assert err.value.field == field and words in err.value.expected


def test_where_cross_attention_cannot_be_guided() -> None:
    with pytest.raises(ConfigError) as err:  # a language model has no c
        ModelConfig(order="sfsf", d_model=16, n_heads=2, d_ff=32, context=8,
                    guidance={"mode": "soft", "blocks": ["key_query"], "cross_attention": True})
    assert err.value.field == "model.guidance.cross_attention"
    with pytest.raises(ConfigError, match="one c sublayer"):  # hard needs a pair of c
        Seq2SeqConfig(encoder_order="sfsf", decoder_order="sscff", **DIMS,
                      guidance={"mode": "hard", "blocks": ["value"], "cross_attention": True})
