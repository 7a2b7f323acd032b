"""The fused head of the seq2seq and IOT models trains exactly as the plain (B, T, V) head:
same loss and same gradient on every parameter, with and without label smoothing, with
padded targets, tied and untied output."""

from __future__ import annotations

import pytest
import torch

from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, seq2seq_preset

V = 40


def padded_batch(seed: int = 0, b: int = 4, s: int = 7, t: int = 6):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, V, (b, s), generator=g)
    src[0, s - 2 :] = 0
    tgt = torch.randint(3, V, (b, t + 1), generator=g)
    tgt[1, t - 2 :] = 0  # a shorter target: padding in tgt_in and tgt_out
    tgt[2, t:] = 0
    return src, tgt[:, :-1], tgt[:, 1:]


def train_step(model: torch.nn.Module, fused: bool, smoothing: float, seed: int = 5):
    """Loss, gradients by parameter name, and how often the head module ran (the fused
    loss reads its weight and never calls it) in one training step."""
    model.zero_grad(set_to_none=True)
    model.fused_loss = fused
    calls: list[int] = []
    hook = model.head.register_forward_hook(lambda *_: calls.append(1))
    torch.manual_seed(seed)  # the same Gumbel noise for both heads (IOT)
    out = model(*padded_batch(), label_smoothing=smoothing)
    hook.remove()
    out.loss.backward()
    grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), grads, len(calls)


def assert_same_step(model: torch.nn.Module, smoothing: float) -> None:
    fused_loss, fused_grads, fused_calls = train_step(model, True, smoothing)
    plain_loss, plain_grads, plain_calls = train_step(model, False, smoothing)
    assert fused_calls == 0 and plain_calls > 0  # fused: no (B, T, V) logits
    torch.testing.assert_close(fused_loss, plain_loss)
    assert fused_grads.keys() == plain_grads.keys()
    for key, grad in plain_grads.items():
        torch.testing.assert_close(fused_grads[key], grad, rtol=1e-4, atol=1e-6, msg=key)


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_seq2seq_fused_head_equals_plain_head(smoothing, tie):
    torch.manual_seed(0)
    cfg = seq2seq_preset("debug", dropout=0.0, tie_output=tie).with_vocab(V)
    assert_same_step(OrderedSeq2Seq(cfg).train(), smoothing)


@pytest.mark.parametrize(("m", "n"), [(1, 3), (2, 2)])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_iot_per_path_fused_losses_equal_plain_path_losses(m, n, smoothing):
    torch.manual_seed(0)
    cfg = IOTConfig(
        d_model=32,
        n_heads=2,
        d_ff=64,
        context=32,
        dropout=0.0,
        encoder_layers=2,
        decoder_layers=2,
        encoder_size=m,
        decoder_size=n,
    ).with_vocab(V)
    model = IOTSeq2Seq(cfg).train()
    assert_same_step(model, smoothing)
    assert model.decoder_predictor is not None and model.decoder_predictor.weight.grad is not None
    assert model.decoder_predictor.weight.grad.abs().sum() > 0  # routing learns through L_C


def test_eval_and_no_grad_keep_the_plain_head():
    torch.manual_seed(0)
    model = OrderedSeq2Seq(seq2seq_preset("debug", dropout=0.0).with_vocab(V))
    src, tgt_in, tgt_out = padded_batch()
    with torch.no_grad():
        out = model(src, tgt_in, tgt_out)
    assert out.logits is not None and out.logits.shape == (4, 6, V)
    torch.testing.assert_close(out.loss, model.loss(out.logits, tgt_out))
