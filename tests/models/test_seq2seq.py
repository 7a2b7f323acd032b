"""OrderedSeq2Seq: any order, masking, the source only through ``c``, exact parameters."""

from __future__ import annotations

import pytest
import torch

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.model import (
    OrderedSeq2Seq,
    Seq2SeqConfig,
    sandwich_orders,
    seq2seq_param_count,
    seq2seq_preset,
    with_sandwich,
)
from sublayer_search.spaces.errors import OrderError

V = 40


def cfg(**kw) -> Seq2SeqConfig:
    base = dict(dropout=0.0)
    return seq2seq_preset("debug", **{**base, **kw}).with_vocab(V)


def batch(seed: int = 0, b: int = 3, s: int = 7, t: int = 6):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (b, s), generator=g)
    src[0, s - 2 :] = 0  # padding
    tgt = torch.randint(3, V, (b, t + 1), generator=g)
    return src, tgt[:, :-1], tgt[:, 1:]


@pytest.mark.parametrize("decoder", ["scf", "cfs", "ffsscc", "fcs", "scscfscff", "c", "sf"])
@pytest.mark.parametrize("encoder", ["sfsf", "ssff", "f"])
def test_any_order_builds_runs_and_counts_exactly(encoder, decoder):
    c = cfg(encoder_order=encoder, decoder_order=decoder)
    torch.manual_seed(0)
    model = OrderedSeq2Seq(c)
    src, tgt_in, tgt_out = batch()
    out = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    assert out.logits is None  # training: the fused head builds no (B, T, V) logits
    assert model(src, tgt_in).logits.shape == (3, 6, V)
    assert torch.isfinite(out.loss)
    out.loss.backward()
    assert seq2seq_param_count(c) == sum(p.numel() for p in model.parameters())
    assert [type(layer.sublayer).__name__[0] for layer in model.decoder] == [
        {"s": "S", "c": "C", "f": "F"}[k] for k in decoder
    ]


@pytest.mark.parametrize("overrides", [
    dict(shared_embeddings=False), dict(tie_output=False), dict(positions="learned"),
    dict(norm="post"), dict(shared_embeddings=False, tie_output=False, positions="learned"),
])
def test_param_count_matches_numel_for_every_option(overrides):
    c = seq2seq_preset("debug", **overrides).with_vocab(V, V + 7 if not overrides.get(
        "shared_embeddings", True) else V)
    model = OrderedSeq2Seq(c)
    assert seq2seq_param_count(c) == sum(p.numel() for p in model.parameters())


def test_tied_head_is_the_target_embedding_and_shared_embeddings_are_one_table():
    model = OrderedSeq2Seq(cfg())
    assert model.head.weight is model.tgt_embed.embed.weight is model.src_embed.embed.weight
    split = OrderedSeq2Seq(cfg(shared_embeddings=False, tie_output=False))
    assert split.src_embed.embed.weight is not split.tgt_embed.embed.weight
    assert split.head.weight is not split.tgt_embed.embed.weight


def test_source_reaches_the_decoder_only_through_cross_attention():
    src_a, tgt_in, _ = batch(0)
    src_b, _, _ = batch(1)
    torch.manual_seed(0)
    no_c = OrderedSeq2Seq(cfg(decoder_order="sfsf")).eval()
    assert torch.equal(no_c(src_a, tgt_in).logits, no_c(src_b, tgt_in).logits)
    torch.manual_seed(0)
    with_c = OrderedSeq2Seq(cfg(decoder_order="sfcsf")).eval()
    assert not torch.allclose(with_c(src_a, tgt_in).logits, with_c(src_b, tgt_in).logits)


@pytest.mark.parametrize("decoder", ["scfscf", "cfs", "ffsscc"])
def test_decoder_is_causal(decoder):
    torch.manual_seed(0)
    model = OrderedSeq2Seq(cfg(decoder_order=decoder)).eval()
    src, tgt_in, _ = batch()
    changed = tgt_in.clone()
    changed[:, 4] = (changed[:, 4] + 1 - 3) % (V - 3) + 3
    a, b = model(src, tgt_in).logits, model(src, changed).logits
    assert torch.allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not torch.allclose(a[:, 4:], b[:, 4:])


def test_encoder_is_bidirectional_and_ignores_source_padding():
    torch.manual_seed(0)
    model = OrderedSeq2Seq(cfg()).eval()
    src, tgt_in, _ = batch()
    padded = torch.cat([src, torch.zeros(3, 4, dtype=torch.long)], dim=1)
    assert torch.allclose(model(src, tgt_in).logits, model(padded, tgt_in).logits, atol=1e-5)
    enc = model.encode(src)
    changed = src.clone()
    changed[1, -1] = (changed[1, -1] - 3 + 1) % (V - 3) + 3  # last source token
    assert not torch.allclose(enc.memory[1, 0], model.encode(changed).memory[1, 0])


@torch.no_grad()
def test_loss_ignores_padding_and_label_smoothing_raises_it():
    torch.manual_seed(0)
    model = OrderedSeq2Seq(cfg()).eval()
    src, tgt_in, tgt_out = batch()
    tgt_out = tgt_out.clone()
    tgt_out[0, 3:] = 0
    logits = model(src, tgt_in).logits
    keep = tgt_out != 0
    manual = torch.nn.functional.cross_entropy(logits[keep], tgt_out[keep])
    assert float(model(src, tgt_in, tgt_out).loss) == pytest.approx(float(manual), rel=1e-5)
    assert model(src, tgt_in, tgt_out, label_smoothing=0.1).loss > manual


def test_orders_are_canonicalised_and_sandwich_groups_s_and_c():
    c = cfg(encoder_order="(sf)^2", decoder_order="interleaved(2)")
    assert (c.encoder_order, c.decoder_order) == ("sfsf", "scfscf")
    # Press et al.: a 3-layer decoder with k = 1 is (sc)(sc)f(sc)ff
    assert with_sandwich(c, n=3, k=1).decoder_order == "scscfscff"
    assert with_sandwich(c, n=3, k=1).encoder_order == "sfsf"
    assert with_sandwich(c, n=3, k=2, side="encoder").encoder_order == "sssfff"
    assert sandwich_orders(2) == ["scfscf", "scscff"]
    assert sandwich_orders(2, side="encoder") == ["sfsf", "ssff"]


def test_bad_configs_raise_value_errors_naming_the_field():
    with pytest.raises(OrderError, match="'c' is not allowed in an order for kind 'encoder'"):
        cfg(encoder_order="scf")
    with pytest.raises(OrderError, match="unknown symbol 'x'"):
        cfg(decoder_order="scx")
    with pytest.raises(ConfigError, match=r"model\.tgt_vocab_size: got 50, expected the source"):
        Seq2SeqConfig(encoder_order="sf", decoder_order="scf", d_model=32, n_heads=2, d_ff=64,
                      src_vocab_size=40, tgt_vocab_size=50)
    with pytest.raises(ConfigError, match=r"model\.d_model: got 30, expected a multiple"):
        cfg(d_model=30, n_heads=4)
    with pytest.raises(ConfigError, match=r"model\.bogus"):
        Seq2SeqConfig.from_dict({**seq2seq_preset("debug").to_dict(), "bogus": 1})
    with pytest.raises(ConfigError, match=r"model\.src_vocab_size"):
        OrderedSeq2Seq(seq2seq_preset("debug"))
    with pytest.raises(ConfigError, match=r"side: got 'middle'"):
        with_sandwich(cfg(), n=2, k=1, side="middle")
    for err in (OrderError, ConfigError):
        assert issubclass(err, ValueError)


def test_config_round_trips_through_a_dict():
    c = cfg(decoder_order="cfs")
    assert Seq2SeqConfig.from_dict(c.to_dict()) == c


def test_flops_per_token_counts_matmuls_and_attention():
    from sublayer_search.models.seq2seq.model import seq2seq_flops_per_token, seq2seq_preset

    cfg = seq2seq_preset("debug", src_vocab_size=100, tgt_vocab_size=100)
    d, ff, ctx = cfg.d_model, cfg.d_ff, cfg.context
    # encoder sfsf (2 s, 2 f) and decoder scfscf (2 s, 2 c, 2 f): 6 attention sublayers
    expected = 2 * (6 * 4 * d * d + 4 * 2 * d * ff + 100 * d) + 6 * 4 * ctx * d
    assert seq2seq_flops_per_token(cfg) == expected
    reordered = seq2seq_preset("debug", src_vocab_size=100, tgt_vocab_size=100,
                               decoder_order="ccssff")
    assert seq2seq_flops_per_token(reordered) == expected  # order does not change compute
    longer = seq2seq_preset("debug", src_vocab_size=100, tgt_vocab_size=100, context=2 * ctx)
    assert seq2seq_flops_per_token(longer) - expected == 6 * 4 * ctx * d
