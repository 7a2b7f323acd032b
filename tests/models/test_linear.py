"""The oneDNN float32 linear equals ``F.linear`` in value and gradients, and is taken
exactly where it should be."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.kernels import linear as lin
from sublayer_search.models.kernels.fused_loss import linear_cross_entropy
from sublayer_search.models.lm import OrderedLM

TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture
def blas():
    """Every product on BLAS for the duration of a test."""
    lin.set_cpu_gemm("blas")
    yield
    lin.set_cpu_gemm("onednn")


def _ran_onednn(y: torch.Tensor) -> bool:
    """Whether the autograd graph of ``y`` holds the oneDNN linear."""
    seen, todo = set(), [y.grad_fn]
    while todo:
        fn = todo.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        if type(fn).__name__ == "_LinearBackward":
            return True
        todo.extend(f for f, _ in fn.next_functions)
    return False


def test_onednn_is_the_cpu_float32_path_of_this_build():
    # the x86 wheels carry oneDNN; where a build has none, cpu_gemm() says blas
    assert torch.backends.mkldnn.is_available()
    assert lin.cpu_gemm() == "onednn"


@pytest.mark.parametrize("shape", [(7, 12), (3, 5, 12), (2, 3, 4, 12)])
@pytest.mark.parametrize("bias", [True, False])
def test_value_and_gradients_match_f_linear(shape, bias):
    g = torch.Generator().manual_seed(len(shape) + bias)
    x = torch.randn(*shape, generator=g, requires_grad=True)
    w = torch.randn(9, 12, generator=g, requires_grad=True)
    b = torch.randn(9, generator=g, requires_grad=True) if bias else None
    upstream = torch.randn(*shape[:-1], 9, generator=g)
    y = lin.linear(x, w, b)
    assert _ran_onednn(y)
    ref = F.linear(x, w, b)
    torch.testing.assert_close(y, ref, **TOL)
    params = [x, w] + ([b] if b is not None else [])
    got = torch.autograd.grad(y, params, upstream)
    want = torch.autograd.grad(ref, params, upstream)
    for a, e in zip(got, want, strict=True):
        torch.testing.assert_close(a, e, **TOL)


def test_only_the_gradients_asked_for_are_computed():
    x = torch.randn(6, 4)  # no grad: a frozen input
    w = torch.randn(3, 4, requires_grad=True)
    (gw,) = torch.autograd.grad(lin.linear(x, w).sum(), [w])
    torch.testing.assert_close(gw, torch.ones(6, 3).t() @ x, **TOL)


def test_a_weight_changed_in_place_is_read_again():
    # an optimizer updates weights in place: nothing may be cached by address
    x, w = torch.randn(5, 8), torch.randn(4, 8)
    before = lin.linear(x, w)
    w.mul_(-2.0)
    torch.testing.assert_close(lin.linear(x, w), -2.0 * before, **TOL)


def test_blas_takes_f_linear(blas):
    x = torch.randn(5, 8, requires_grad=True)
    w = torch.randn(4, 8, requires_grad=True)
    assert lin.cpu_gemm() == "blas"
    assert not _ran_onednn(lin.linear(x, w))


def test_float64_and_bf16_autocast_take_f_linear():
    x64 = torch.randn(5, 8, dtype=torch.float64, requires_grad=True)
    y = lin.linear(x64, torch.randn(4, 8, dtype=torch.float64))
    assert y.dtype == torch.float64 and not _ran_onednn(y)
    x = torch.randn(5, 8, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = lin.linear(x, torch.randn(4, 8))
    assert y.dtype == torch.bfloat16 and not _ran_onednn(y)


def test_unknown_gemm_is_refused_with_the_choices():
    with pytest.raises(ValueError, match=r"'mkl'.*onednn, blas"):
        lin.set_cpu_gemm("mkl")


@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_fused_loss_in_float32_matches_cross_entropy(smoothing):
    g = torch.Generator().manual_seed(3)
    h = torch.randn(70, 16, generator=g, requires_grad=True)
    w = (0.3 * torch.randn(50, 16, generator=g)).requires_grad_()
    t = torch.randint(0, 50, (70,), generator=g)
    loss = linear_cross_entropy(h, w, t, rows=16, label_smoothing=smoothing)
    ref = F.cross_entropy(h @ w.t(), t, label_smoothing=smoothing)
    torch.testing.assert_close(loss, ref, **TOL)
    for a, e in zip(torch.autograd.grad(loss, [h, w]), torch.autograd.grad(ref, [h, w]),
                    strict=True):
        torch.testing.assert_close(a, e, **TOL)


def _lm_step(model, idx):
    out = model(idx, idx.roll(-1, 1))
    grads = torch.autograd.grad(out.loss, list(model.parameters()))
    return out.loss.detach(), grads


def test_the_lm_trains_alike_on_onednn_and_blas():
    cfg = ModelConfig(order="sfsffs", vocab_size=40, d_model=32, n_heads=4, d_ff=64,
                      context=16, dropout=0.0)
    torch.manual_seed(0)
    model = OrderedLM(cfg)
    idx = torch.randint(0, 40, (3, 16))
    loss_dnn, grads_dnn = _lm_step(model, idx)
    lin.set_cpu_gemm("blas")
    try:
        loss_blas, grads_blas = _lm_step(model, idx)
    finally:
        lin.set_cpu_gemm("onednn")
    torch.testing.assert_close(loss_dnn, loss_blas, **TOL)
    for a, e in zip(grads_dnn, grads_blas, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)


def test_the_gemm_benchmark_times_every_product_both_ways():
    spec = importlib.util.spec_from_file_location(
        "cpu_gemm", Path(__file__).resolve().parents[2] / "benchmarks" / "cpu_gemm.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--rows", "64", "--d-model", "16", "--d-ff", "32", "--vocab", "64",
                      "--chunk", "16", "--repeat", "1", "--json"])
    rows = out["products"]
    # four linears (forward, input and weight gradient) and the head's two chunk products
    assert len(rows) == 4 * 3 + 2
    assert {r["product"] for r in rows} >= {"qkv", "ffn out", "head logits (chunk)"}
    assert all(r["blas_ms"] > 0 and r["onednn_ms"] > 0 and r["speedup"] > 0 for r in rows)


def test_the_op_is_probed_before_it_is_trusted(monkeypatch):
    assert lin._onednn_op() is not None  # this build's op answers as F.linear does
    wrong = SimpleNamespace(default=lambda x, w, b, *rest: torch.zeros(x.shape[0], w.shape[0]))
    monkeypatch.setattr(torch.ops.mkldnn, "_linear_pointwise", wrong)
    assert lin._onednn_op() is None  # a product that disagrees: BLAS everywhere
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert lin._onednn_op() is None


def test_an_unknown_gemm_in_the_environment_is_named_and_ignored(monkeypatch):
    monkeypatch.setenv("SUBLAYER_CPU_GEMM", "MKL")
    with pytest.warns(UserWarning, match=r"SUBLAYER_CPU_GEMM='mkl'.*onednn, blas"):
        assert lin._env_choice() == "onednn"
    monkeypatch.setenv("SUBLAYER_CPU_GEMM", " BLAS ")
    assert lin._env_choice() == "blas"
