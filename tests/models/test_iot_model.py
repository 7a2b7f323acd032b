"""IOTSeq2Seq: shared weights, exact extra parameters, routing, losses and bad input."""

from __future__ import annotations

import math

import pytest
import torch

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.seq2seq.iot_model import (
    IOTConfig,
    IOTSeq2Seq,
    exploitation_loss,
    exploration_loss,
    gumbel_weights,
    iot_param_count,
    temperature,
)
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, seq2seq_param_count

V, D = 40, 32


def icfg(**kw) -> IOTConfig:
    base = dict(d_model=D, n_heads=2, d_ff=64, context=32, dropout=0.0, encoder_layers=2,
                decoder_layers=2)
    return IOTConfig(**{**base, **kw}).with_vocab(V)


def batch(seed: int = 0, b: int = 4, s: int = 7, t: int = 6):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (b, s), generator=g)
    src[0, s - 2 :] = 0
    tgt = torch.randint(3, V, (b, t + 1), generator=g)
    return src, tgt[:, :-1], tgt[:, 1:]


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("m", [1, 2])
def test_extra_parameters_are_exactly_the_predictors(n, m):
    c = icfg(decoder_size=n, encoder_size=m)
    model = IOTSeq2Seq(c)
    numel = sum(p.numel() for p in model.parameters())
    base = seq2seq_param_count(c.base_config())
    assert numel == iot_param_count(c) == base + (n * D if n > 1 else 0) + (m * D if m > 1 else 0)
    assert base == sum(p.numel() for p in OrderedSeq2Seq(c.base_config()).parameters())


def test_paper_subsets_and_orders():
    c = icfg()
    assert c.decoder_codes == (1, 2, 4, 6) and c.decoder_size == 4
    assert c.decoder_blocks == ("scf", "fsc", "csf", "fcs")
    assert c.decoder_orders[2] == "csfcsf"
    assert icfg(decoder_size=2).decoder_codes == (4, 6)
    assert icfg(decoder_codes=(6, 3)).decoder_codes == (3, 6)
    assert icfg(encoder_size=2).encoder_blocks == ("sf", "fs")
    assert icfg(decoder_size=3, decoder_mode="diverse").decoder_codes[0] == 1


def _ordered_copy(model: IOTSeq2Seq, enc_block: str, dec_block: str) -> OrderedSeq2Seq:
    """A plain model whose sublayers are the IOT model's, laid out in the given block orders."""
    c = model.cfg
    plain = OrderedSeq2Seq(c.base_config().__class__(
        **{**c.base_config().__dict__, "encoder_order": enc_block * c.encoder_layers,
           "decoder_order": dec_block * c.decoder_layers}))
    state = {k: v for k, v in model.state_dict().items()
             if not k.startswith(("encoder.", "decoder.", "encoder_predictor", "decoder_predictor"))}
    for side, block in (("encoder", enc_block), ("decoder", dec_block)):
        for i in range(getattr(c, f"{side}_layers")):
            for pos, kind in enumerate(block):
                prefix = f"{side}.{i}.{kind}."
                for k, v in model.state_dict().items():
                    if k.startswith(prefix):
                        state[f"{side}.{i * len(block) + pos}.{k[len(prefix):]}"] = v
    plain.load_state_dict(state)
    return plain.eval()


@pytest.mark.parametrize("j", [0, 1, 2, 3])
def test_each_forced_order_is_the_plain_model_with_the_shared_weights(j):
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg(encoder_size=2)).eval()
    src, tgt_in, _ = batch()
    for m, enc_block in enumerate(model.cfg.encoder_blocks):
        enc = model.encode(src, encoder_route=m, decoder_route=j)
        plain = _ordered_copy(model, enc_block, model.cfg.decoder_blocks[j])
        assert torch.allclose(model.decode(tgt_in, enc), plain(src, tgt_in).logits, atol=1e-5)


def test_orders_differ_but_share_every_module():
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg()).eval()
    src, tgt_in, _ = batch()
    logits = [model.decode(tgt_in, model.encode(src, decoder_route=j)) for j in range(4)]
    assert not torch.allclose(logits[0], logits[1])
    six = IOTSeq2Seq(icfg(decoder_size=6))
    names = {k for k in model.state_dict() if "predictor" not in k}
    assert names == {k for k in six.state_dict() if "predictor" not in k}


def test_routing_weights_sum_to_one_and_sharpen_as_temperature_falls():
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg(decoder_size=6))
    src, _, _ = batch(b=8)
    previous = None
    for tau in (4.0, 1.0, 0.3, 0.05):
        w = model.routing_weights(src, tau=tau, generator=torch.Generator().manual_seed(3))
        assert w.shape == (8, 6)
        assert torch.allclose(w.sum(-1), torch.ones(8), atol=1e-6)
        entropy = -(w * w.clamp_min(1e-12).log()).sum(-1)
        if previous is not None:
            assert (entropy < previous).all()
        previous = entropy
    assert previous.median() < 0.01  # nearly one-hot at tau = 0.05


def test_gumbel_weights_follow_the_predictor_on_average():
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1]])).expand(4000, 3)
    w = gumbel_weights(logits, 0.01, generator=torch.Generator().manual_seed(0))
    picked = torch.bincount(w.argmax(-1), minlength=3).float() / 4000
    assert torch.allclose(picked, torch.tensor([0.7, 0.2, 0.1]), atol=0.03)


def test_temperature_anneals_exponentially():
    c = icfg(tau_start=2.0, tau_end=0.5)
    assert temperature(c, 0, 100) == 2.0
    assert temperature(c, 50, 100) == pytest.approx(1.0)
    assert temperature(c, 100, 100) == pytest.approx(0.5)
    assert temperature(c, 500, 100) == pytest.approx(0.5)
    assert temperature(icfg(tau_start=2.0, tau_end=0.5, anneal_steps=10), 5, 100) == \
        pytest.approx(1.0)


def test_auxiliary_losses_match_hand_computed_values():
    probs = torch.tensor([[0.9, 0.1], [0.5, 0.5]])
    # exploration: KL(u || mean) with mean = (0.7, 0.3)
    expected_d = 0.5 * math.log(0.5 / 0.7) + 0.5 * math.log(0.5 / 0.3)
    assert float(exploration_loss(probs)) == pytest.approx(expected_d, rel=1e-6)
    # exploitation: -mean_x KL(u || pi_x); the second row is uniform (KL 0)
    kl_first = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert float(exploitation_loss(probs)) == pytest.approx(-kl_first / 2, rel=1e-6)
    # the clamp at 0.05 bounds both
    peaked = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    clamped = 0.5 * math.log(0.5 / 1.0) + 0.5 * math.log(0.5 / 0.05)
    assert float(exploration_loss(peaked)) == pytest.approx(clamped, rel=1e-6)
    assert float(exploitation_loss(peaked)) == pytest.approx(-clamped, rel=1e-6)
    assert float(exploitation_loss(peaked, floor=0.2)) == pytest.approx(
        -(0.5 * math.log(0.5) + 0.5 * math.log(0.5 / 0.2)), rel=1e-6)


def test_training_loss_is_the_weighted_sum_of_path_losses_plus_aux():
    torch.manual_seed(0)
    c = icfg(decoder_size=3, c1=0.3, c2=0.07, tau_start=0.7)
    model = IOTSeq2Seq(c).train()
    src, tgt_in, tgt_out = batch()
    torch.manual_seed(11)
    out = model(src, tgt_in, tgt_out, label_smoothing=0.1)
    out_loss = out.loss
    out = out._replace(**{k: getattr(out, k).detach() for k in ('loss', 'path_loss', 'explore', 'exploit')})
    torch.manual_seed(11)  # the same Gumbel noise: one draw for the decoder predictor
    with torch.no_grad():
        pad = src.eq(0)
        memory = model._encode_path(model.src_embed(src), pad, 0)
        log_pi = model.decoder_logits(memory, pad)
        lam = gumbel_weights(log_pi, 0.7)
        n_tokens = tgt_out.ne(0).sum()
        path = sum(
            (lam[:, n] * model.token_nll(model.head(model._decode_path(tgt_in, memory, pad, n)),
                                         tgt_out, 0.1).sum(1)).sum() / n_tokens
            for n in range(3)
        )
        explore = exploration_loss(log_pi.exp())
        exploit = exploitation_loss(log_pi.exp())
    assert float(out.path_loss) == pytest.approx(float(path), rel=1e-5)
    assert float(out.explore) == pytest.approx(float(explore), rel=1e-5)
    assert float(out.exploit) == pytest.approx(float(exploit), rel=1e-5)
    assert float(out.loss) == pytest.approx(float(path + 0.3 * explore + 0.07 * exploit), rel=1e-5)
    out_loss.backward()
    assert model.decoder_predictor.weight.grad.abs().sum() > 0


def test_encoder_and_decoder_predictors_both_learn():
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg(encoder_size=2, decoder_size=2)).train()
    out = model(*batch())
    out.loss.backward()
    for pred in (model.encoder_predictor, model.decoder_predictor):
        assert pred.weight.grad is not None and pred.weight.grad.abs().sum() > 0


def test_inference_picks_the_argmax_order_deterministically():
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg()).eval()
    src, tgt_in, tgt_out = batch(b=6)
    with torch.no_grad():
        first = model.encode(src)
        keep = (~first.padding_mask)[..., None].float()
        means = (first.memory * keep).sum(1) / keep.sum(1)  # (B, d): the predictor's input
        feature = int(torch.minimum((means > 0).sum(0), (means < 0).sum(0)).argmax())
        model.decoder_predictor.weight.zero_()
        model.decoder_predictor.weight[2, feature] = 5.0  # code 4 when the feature is > 0
        model.decoder_predictor.weight[3, feature] = -5.0  # code 6 when it is < 0
        enc = model.encode(src)
    expected = torch.where(means[:, feature] > 0, 2, 3)
    assert len(set(expected.tolist())) == 2  # both orders occur in this batch
    assert torch.equal(enc.route, expected)
    assert torch.equal(model.encode(src).route, enc.route)
    logits = model(src, tgt_in).logits
    assert torch.equal(logits, model(src, tgt_in).logits)
    for j in (2, 3):
        rows = enc.route == j
        if rows.any():
            forced = model.decode(tgt_in, model.encode(src, decoder_route=j))
            assert torch.allclose(logits[rows], forced[rows], atol=1e-6)


def test_eval_loss_is_plain_nll_of_the_routed_path():
    torch.manual_seed(0)
    model = IOTSeq2Seq(icfg()).eval()
    src, tgt_in, tgt_out = batch()
    with torch.no_grad():
        out = model(src, tgt_in, tgt_out)
        manual = torch.nn.functional.cross_entropy(out.logits.reshape(-1, V), tgt_out.reshape(-1))
    assert float(out.loss) == pytest.approx(float(manual), rel=1e-5)
    assert out.path_loss is None


@pytest.mark.parametrize("kw,field,expected", [
    (dict(decoder_size=7), "model.decoder_size", "an integer in 1..6"),
    (dict(encoder_size=3), "model.encoder_size", "an integer in 1..2"),
    (dict(decoder_size=0), "model.decoder_size", "an integer in 1..6"),
    (dict(decoder_mode="bogus"), "model.decoder_mode", "one of paper, diverse"),
    (dict(decoder_mode="random"), "model.decoder_mode", "one of paper, diverse"),
    (dict(decoder_codes=(1, 7)), r"model.decoder_codes\[1\]", "a code in 1..6"),
    (dict(decoder_codes=(1, 1)), "model.decoder_codes", "distinct codes"),
    (dict(encoder_codes=(3,)), r"model.encoder_codes\[0\]", "a code in 1..2"),
    (dict(tau_end=0.0), "model.tau_end", "a positive number"),
    (dict(c1=-1.0), "model.c1", "a number >= 0"),
    (dict(encoder_layers=0), "model.encoder_layers", "a positive integer"),
])
def test_bad_iot_settings_name_the_field(kw, field, expected):
    with pytest.raises(ConfigError, match=rf"{field}: got .*, expected {expected}"):
        icfg(**kw)
    assert issubclass(ConfigError, ValueError)
