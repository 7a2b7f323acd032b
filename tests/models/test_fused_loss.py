"""The chunked linear + cross-entropy equals the plain head in value and gradients."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.kernels.fused_loss import chunk_rows, linear_cross_entropy
from sublayer_search.models.lm import OrderedLM


def _reference(h, w, t):
    h = h.detach().clone().requires_grad_(h.requires_grad)
    w = w.detach().clone().requires_grad_(w.requires_grad)
    loss = F.cross_entropy(h @ w.t(), t)
    loss.backward()
    return loss, h.grad, w.grad


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 70), d=st.integers(1, 12), v=st.integers(2, 40), rows=st.integers(1, 80),
       seed=st.integers(0, 2**16))
def test_value_and_gradients_match_cross_entropy(n, d, v, rows, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, d, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(v, d, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, v, (n,), generator=g)
    ref_loss, ref_gh, ref_gw = _reference(h, w, t)
    loss = linear_cross_entropy(h, w, t, rows=rows)
    (loss * 3.0).backward()  # the incoming gradient scales both results
    torch.testing.assert_close(loss, ref_loss)
    torch.testing.assert_close(h.grad, 3.0 * ref_gh)
    torch.testing.assert_close(w.grad, 3.0 * ref_gw)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 40), v=st.integers(2, 30), rows=st.integers(1, 50),
       smoothing=st.sampled_from([0.0, 0.1, 0.37]), ignore=st.sampled_from([None, -100, 0]),
       weighted=st.booleans(), seed=st.integers(0, 2**16))
def test_smoothing_padding_and_row_weights_match_cross_entropy(n, v, rows, smoothing, ignore,
                                                              weighted, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, 5, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(v, 5, generator=g, dtype=torch.float64, requires_grad=True)
    t = torch.randint(0, v, (n,), generator=g)
    if ignore is not None:
        t[torch.rand(n, generator=g) < 0.3] = ignore
        t[0] = 1  # at least one row counts
    r = torch.rand(n, generator=g, dtype=torch.float64).requires_grad_() if weighted else None
    kw = dict(label_smoothing=smoothing, ignore_index=-100 if ignore is None else ignore)
    if r is None:
        ref = F.cross_entropy(h @ w.t(), t, **kw)
    else:
        ref = (r * F.cross_entropy(h @ w.t(), t, reduction="none", **kw)).sum()
    ref_grads = torch.autograd.grad(ref, [h, w] + ([r] if weighted else []))
    loss = linear_cross_entropy(h, w, t, rows=rows, label_smoothing=smoothing,
                                ignore_index=ignore, row_weights=r)
    grads = torch.autograd.grad(2.0 * loss, [h, w] + ([r] if weighted else []))
    torch.testing.assert_close(loss, ref)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, 2.0 * want)


def test_float32_loss_is_exact_for_confident_rows():
    """The loss stays exact when the target's probability underflows (most probable class)."""
    h = torch.tensor([[30.0, 0.0], [0.0, 1.0]], requires_grad=True)
    w = torch.tensor([[4.0, 0.0], [-4.0, 0.0], [0.0, 1.0]], requires_grad=True)
    t = torch.tensor([1, 2])  # row 0: target logit −120 against 120, p ≈ e^−240
    loss = linear_cross_entropy(h, w, t)
    torch.testing.assert_close(loss, F.cross_entropy(h @ w.t(), t))
    assert torch.isfinite(torch.autograd.grad(loss, h)[0]).all()


def test_only_the_gradients_asked_for_are_computed():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(9, 4, generator=g, requires_grad=True)
    w = torch.randn(7, 4, generator=g)  # frozen head
    t = torch.randint(0, 7, (9,), generator=g)
    linear_cross_entropy(h, w, t, rows=4).backward()
    assert h.grad is not None and w.grad is None
    with torch.no_grad():
        torch.testing.assert_close(linear_cross_entropy(h, w, t), F.cross_entropy(h @ w.t(), t))


def test_bad_shapes_are_named():
    with pytest.raises(ValueError, match="expected"):
        linear_cross_entropy(torch.zeros(3, 4), torch.zeros(5, 3), torch.zeros(3, dtype=torch.long))
    with pytest.raises(ValueError, match="targets"):
        linear_cross_entropy(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="row_weights"):
        linear_cross_entropy(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(3, dtype=torch.long),
                             row_weights=torch.ones(2))
    with pytest.raises(ValueError, match="label_smoothing"):
        linear_cross_entropy(torch.zeros(3, 4), torch.zeros(5, 4), torch.zeros(3, dtype=torch.long),
                             label_smoothing=1.5)


def test_chunks_stay_small_for_any_vocabulary():
    assert chunk_rows(8192) * 8192 * 4 <= 8 << 20
    assert chunk_rows(10**7) == 16


def test_a_training_step_of_the_lm_equals_the_plain_head():
    """Tied embeddings: the head's gradient and the embedding's add up on one weight."""
    cfg = ModelConfig(order="sfsf", vocab_size=50, d_model=16, n_heads=2, d_ff=32, context=12,
                      dropout=0.0)
    x = torch.randint(0, 50, (3, 12), generator=torch.Generator().manual_seed(1))
    y = x.roll(-1, 1)
    grads = []
    for fused in (True, False):
        torch.manual_seed(0)
        model = OrderedLM(cfg)
        model.fused_loss = fused
        out = model(x, y)
        assert (out.logits is None) == fused
        out.loss.backward()
        grads.append((out.loss.detach(), {k: p.grad.clone() for k, p in model.named_parameters()}))
    (fused_loss, fused_grads), (plain_loss, plain_grads) = grads
    torch.testing.assert_close(fused_loss, plain_loss)
    assert fused_grads.keys() == plain_grads.keys()
    for key in plain_grads:
        torch.testing.assert_close(fused_grads[key], plain_grads[key], rtol=1e-4, atol=1e-6)


def test_rows_whose_target_probability_underflows_mix_with_ordinary_rows():
    """float32: the loss comes from the target's probability; rows where it underflows (a
    target 100+ nats below the top) take the most probable class instead, in any chunk,
    with label smoothing and row weights too."""
    g = torch.Generator().manual_seed(3)
    h = torch.randn(11, 6, generator=g)
    h[[2, 7, 8]] *= 60.0  # confident rows: some targets fall far below the top
    w = torch.randn(9, 6, generator=g)
    t = torch.randint(0, 9, (11,), generator=g)
    logits = (h @ w.t()).double()
    gap = logits.max(1).values - logits.gather(1, t[:, None]).squeeze(1)
    assert (gap > 104).any() and (gap < 5).any()  # both kinds of row are there
    r = torch.rand(11, generator=g)
    for smoothing in (0.0, 0.2):
        want = (r.double() * F.cross_entropy(logits, t, reduction="none",
                                             label_smoothing=smoothing)).sum()
        for rows in (1, 3, 11):
            got = linear_cross_entropy(h, w, t, rows=rows, label_smoothing=smoothing,
                                       row_weights=r)
            assert torch.isfinite(got)
            torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-3)
