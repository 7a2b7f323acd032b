"""The hybrid kinds' torch modules: they hold what :mod:`spaces.kinds` counts, see only the
past, and compute what their definitions say (the recurrence one token at a time, the
window as masked attention, the experts token by token)."""

from __future__ import annotations

import contextlib
import math

import pytest
import torch
import torch.nn.functional as F

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.blocks import SelfAttention, build_sublayer
from sublayer_search.models.config import ModelConfig, model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.lm_workload import LMWorkload, train_batch
from sublayer_search.models.mixers.experts import MixtureOfExperts
from sublayer_search.models.mixers.recurrent import (
    DECAY_INIT,
    GatedLinearRecurrence,
    recurrence_reference,
)
from sublayer_search.models.mixers.window import SlidingWindowAttention, band_mask
from sublayer_search.models.specs import TrialSpec
from sublayer_search.models.training_loop import StepContext
from sublayer_search.spaces.kinds import Dims, KindSettings, kind_of

SETTINGS = KindSettings(window=5, experts=4, top_k=2, chunk=4)


def _layer(kind: str, d: int = 32, heads: int = 4, ff: int = 64,
           settings: KindSettings = SETTINGS) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_sublayer(kind, d_model=d, n_heads=heads, d_ff=ff, settings=settings)


@pytest.mark.parametrize("kind", ["w", "r", "e"])
@pytest.mark.parametrize(("d", "heads", "ff"), [(32, 4, 64), (48, 3, 40), (16, 1, 16)])
def test_each_kind_holds_the_parameters_its_registration_counts(kind, d, heads, ff) -> None:
    layer = _layer(kind, d, heads, ff)
    dims = Dims(d_model=d, d_ff=ff, n_heads=heads, settings=SETTINGS)
    assert sum(p.numel() for p in layer.parameters()) == kind_of(kind).params(dims, exact=True)


@pytest.mark.parametrize("kind", ["w", "r", "e"])
def test_each_kind_sees_only_the_past(kind: str) -> None:
    layer = _layer(kind).eval()
    x = torch.randn(2, 19, 32)
    later = x.clone()
    later[:, 11:] = torch.randn(2, 8, 32)  # the future of position 10 changed
    with torch.no_grad():
        a, b = layer(x), layer(later)
    assert torch.allclose(a[:, :11], b[:, :11], atol=1e-6)
    assert not torch.allclose(a[:, 11:], b[:, 11:], atol=1e-3)


def test_the_window_reaches_exactly_window_tokens_back() -> None:
    layer = _layer("w").eval()  # window 5: position 12 sees 8..12
    x = torch.randn(1, 16, 32)
    for moved, seen in ((7, False), (8, True)):
        other = x.clone()
        other[:, moved] = torch.randn(32)
        with torch.no_grad():
            changed = not torch.allclose(layer(x)[:, 12], layer(other)[:, 12], atol=1e-6)
        assert changed == seen, moved
    assert band_mask(4, 2).int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 1, 1, 0],
                                             [0, 0, 1, 1]]


def test_sliding_window_is_masked_attention_and_plain_attention_within_its_window() -> None:
    layer = _layer("w").sublayer.eval()
    assert isinstance(layer, SlidingWindowAttention)
    x = torch.randn(2, 12, 32)
    b, t, d = x.shape
    q, k, v = layer.qkv(x).view(b, t, 3, 4, 8).unbind(2)
    q, k, v = (z.transpose(1, 2) for z in (q, k, v))
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(8)
    probs = scores.masked_fill(~band_mask(t, 5), float("-inf")).softmax(-1)
    expected = layer.out((probs @ v).transpose(1, 2).reshape(b, t, d))
    with torch.no_grad():
        assert torch.allclose(layer(x), expected, atol=1e-5)
        plain = SelfAttention(32, 4)
        plain.load_state_dict(layer.state_dict())
        short = x[:, :5]  # no longer than the window: every earlier token is in it
        assert torch.allclose(layer(short), plain(short), atol=1e-6)


@pytest.mark.parametrize("chunk", [1, 3, 4, 32])
def test_the_chunked_recurrence_is_the_recurrence(chunk: int) -> None:
    layer = _layer("r", settings=KindSettings(chunk=chunk)).sublayer
    assert isinstance(layer, GatedLinearRecurrence)
    with torch.no_grad():
        layer.decay.weight.normal_(std=0.5)  # decays that differ token to token
    x = torch.randn(2, 13, 32)  # 13: a last chunk shorter than the others
    assert torch.allclose(layer(x), recurrence_reference(layer, x), atol=1e-5)


def test_the_recurrence_starts_with_short_and_long_memory_and_trains() -> None:
    layer = _layer("r").sublayer
    decays = torch.sigmoid(layer.decay.bias)
    assert decays.min().item() == pytest.approx(DECAY_INIT[0], abs=1e-5)
    assert decays.max().item() == pytest.approx(DECAY_INIT[1], abs=1e-5)
    x = torch.randn(2, 9, 32, requires_grad=True)
    layer(x).pow(2).mean().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in layer.parameters())


def test_experts_route_each_token_to_its_top_k_and_weigh_them() -> None:
    moe = _layer("e").sublayer.eval()
    assert isinstance(moe, MixtureOfExperts)
    x = torch.randn(3, 7, 32)
    with torch.no_grad():
        out = moe(x)
        tokens = x.reshape(-1, 32)
        probs = F.softmax(moe.router(tokens), dim=-1)
        expected = torch.zeros_like(tokens)
        for i, token in enumerate(tokens):  # one token at a time, as the definition says
            top = probs[i].topk(2)
            for w, e in zip(top.values / top.values.sum(), top.indices, strict=True):
                expected[i] += w * moe.experts[int(e)](token)
    assert torch.allclose(out.reshape(-1, 32), expected, atol=1e-5)


def test_the_balance_loss_is_one_when_balanced_and_grows_with_imbalance() -> None:
    moe = _layer("e").sublayer
    x = torch.randn(4, 8, 32)
    with torch.no_grad():
        moe.router.weight.zero_()  # every expert equally likely: f picks the first two
    moe(x)
    assert moe.balance_loss is not None
    assert float(moe.balance_loss.detach()) == pytest.approx(1.0)
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] = 5 * x.reshape(-1, 32).mean(0)  # expert 0 favoured
    moe(x)
    with torch.no_grad():
        probs = F.softmax(moe.router(x.reshape(-1, 32)), -1)
    chosen = probs.topk(2).indices
    share = torch.stack([(chosen == e).float().sum() for e in range(4)]) / chosen.numel()
    expected = float(4 * (share * probs.mean(0)).sum())
    assert float(moe.balance_loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert float(moe.balance_loss.detach()) > 1.0


@pytest.mark.parametrize("order", ["(wf)^2", "(rf)^2", "(se)^2", "swrfhe"])
def test_a_hybrid_language_model_counts_its_parameters_and_flops(order: str) -> None:
    cfg = model_preset("debug", order=order, vocab_size=40, sublayers={"window": 8})
    model = OrderedLM(cfg)
    assert param_count(cfg) == sum(p.numel() for p in model.parameters())
    classic = model_preset("debug", order="sfsf", vocab_size=40)
    extra = sum(kind_of(k).flops(cfg.dims) - (kind_of("s").flops(cfg.dims) if k in "wr"
                                              else kind_of("f").flops(cfg.dims))
                for k in cfg.order if k in "wre")
    if len(cfg.order) == 4:  # a hybrid kind in place of an s or an f of sfsf
        assert flops_per_token(cfg) == flops_per_token(classic) + extra


def _context(seed: int = 0) -> StepContext:
    return StepContext(device=torch.device("cpu"), autocast=contextlib.nullcontext(),
                       generator=torch.Generator().manual_seed(seed), batch_size=4,
                       eval_batch_size=4)


def test_a_mixture_of_experts_lm_adds_its_balance_loss_to_training() -> None:
    cfg = model_preset("debug", order="sese", dropout=0.0, sublayers={"balance": 0.5})
    work = LMWorkload(TrialSpec(model=cfg, data=DataConfig(name="tinyshakespeare")))
    model = work.build()
    loss, _ = work.loss(model, _context())
    balance = model.balance_loss()
    assert balance is not None and float(balance.detach()) > 0
    x, y = train_batch(work.corpus, cfg.context, _context())  # the same batch again
    with torch.no_grad():
        again = model(x, y).loss + model.balance_loss()
    assert float(loss.detach()) == pytest.approx(float(again), rel=1e-6)


def test_hybrid_kinds_are_for_language_models_and_their_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"model.sublayers.top_k: got 9, expected an "
                                          r"integer in 1\.\.4"):
        model_preset("debug", sublayers={"top_k": 9})
    with pytest.raises(ConfigError, match="model.sublayers.chunks: got 2, expected one of"):
        ModelConfig.from_dict({**model_preset("debug").to_dict(), "sublayers": {"chunks": 2}})
    assert "sublayers" not in model_preset("debug").to_dict()  # as before the hybrid kinds
    assert model_preset("debug", sublayers={"window": 4}).to_dict()["sublayers"] == {"window": 4}


def test_captured_window_attention_is_the_band_and_gives_the_same_outputs() -> None:
    from sublayer_search.models.lm import capture_attention

    model = OrderedLM(model_preset("debug", order="wfsf", vocab_size=40, dropout=0.0,
                                   sublayers={"window": 3})).eval()
    idx = torch.randint(0, 40, (2, 11))
    with torch.no_grad():
        plain = model(idx).logits
        with capture_attention(model) as probs:
            captured = model(idx).logits
    assert torch.allclose(plain, captured, atol=1e-5)
    window, full = probs  # the w, then the s
    assert window.shape == full.shape == (2, 2, 11, 11)
    assert torch.all(window[..., ~band_mask(11, 3)] == 0)
    assert torch.allclose(window.sum(-1), torch.ones(2, 2, 11))


@pytest.mark.parametrize("sharing", ["ordinal", "slot"])
def test_a_supernet_shares_hybrid_kinds_like_the_classic_ones(sharing: str) -> None:
    from sublayer_search.models.supernet.model import Supernet

    cfg = model_preset("debug", vocab_size=40, sublayers={"window": 4, "experts": 2,
                                                           "top_k": 1})
    net = Supernet(cfg, ["swrf", "rfsw", "sesf"], sharing=sharing)
    x = torch.randint(0, 40, (2, 9))
    for order in net.orders:
        loss = net(x, x, order=order).loss
        assert loss is not None and math.isfinite(float(loss.detach()))
        kinds = [type(m.sublayer).__name__ for m in net.sublayers(order)]
        expected = {"s": "SelfAttention", "w": "SlidingWindowAttention", "f": "FeedForward",
                    "r": "GatedLinearRecurrence", "e": "MixtureOfExperts"}
        assert kinds == [expected[k] for k in order]
    experts = [m.sublayer for m in net.lm.layers if isinstance(m.sublayer, MixtureOfExperts)]
    assert experts and all(len(e.experts) == 2 and e.top_k == 1 for e in experts)


def test_active_parameters_leave_out_the_experts_a_token_skips() -> None:
    from sublayer_search.models.accounting import active_param_count

    cfg = model_preset("debug", order="sese", vocab_size=40)  # d 32, d_ff 128: experts 4 x 64
    idle = 2 * (4 - 2) * (2 * 32 * 64 + 64 + 32)  # two e, two experts of four idle per token
    assert active_param_count(cfg) == param_count(cfg) - idle
    classic = model_preset("debug", order="sfsf", vocab_size=40)
    assert active_param_count(classic) == param_count(classic)
