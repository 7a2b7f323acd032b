"""``y = x Wᵀ + b`` on the faster of the CPU's two float32 GEMM libraries.

PyTorch's CPU ``F.linear`` runs float32 matrix products through BLAS (MKL in the
x86 wheels). oneDNN, which the same wheels carry for bf16 and for ``torch.compile``,
has float32 kernels of its own; on the AMD EPYC (Zen 4) CPU of earlier CI machines they
are 10-20 % faster for the model's shapes (``benchmarks/cpu_gemm.py``):
x (2048, 256) times W (1024, 256) takes 12.1 ms through MKL and 10.2 ms through
oneDNN on one thread. On an Intel Xeon (family 6, model 207) the two are within a few
per cent (MKL ahead on most forwards, oneDNN on some input gradients; README, Speed). Same float32 arithmetic (no reduced precision), another order
of summation: results agree to rounding.

:func:`linear` sends a training or evaluation product through oneDNN when every
operand is a float32 CPU tensor outside autocast and outside a ``torch.compile``
trace; everything else (CUDA, bf16 autocast, float64, compiled graphs, a build
without oneDNN) takes ``F.linear`` unchanged. The backward computes the input
gradient through oneDNN as well (``g W`` is ``linear(g, Wᵀ)``) and the weight
gradient ``gᵀ x`` through BLAS, which is the faster of the two for that product.

``SUBLAYER_CPU_GEMM=blas`` (or :func:`set_cpu_gemm`) keeps every product on BLAS.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Linear", "cpu_gemm", "linear", "set_cpu_gemm"]

_GEMMS = ("onednn", "blas")


def _onednn_op() -> Any:
    """oneDNN's dense float32 linear, or None where this build has none or where it does
    not answer a small product as ``F.linear`` does (the op is the one ``torch.compile``'s
    CPU backend calls, not a public API: it is probed, never trusted)."""
    if not torch.backends.mkldnn.is_available():
        return None
    try:
        op = torch.ops.mkldnn._linear_pointwise.default
        x = torch.linspace(-1.0, 1.0, 15).view(3, 5)
        w = torch.linspace(0.5, -0.5, 20).view(4, 5)
        b = torch.linspace(0.0, 1.0, 4)
        g = torch.linspace(-2.0, 2.0, 12).view(3, 4)  # and a transposed weight view
        for got, want in ((op(x, w, b, "none", [], ""), F.linear(x, w, b)),
                          (op(g, w.t(), None, "none", [], ""), F.linear(g, w.t()))):
            if got.shape != want.shape or not torch.allclose(got, want, atol=1e-5):
                return None
        return op
    except (AttributeError, RuntimeError, TypeError):
        return None


def _env_choice() -> str:
    """``$SUBLAYER_CPU_GEMM``; an unknown value is named in a warning and ignored."""
    value = os.environ.get("SUBLAYER_CPU_GEMM", "").strip().lower()
    if value and value not in _GEMMS:
        warnings.warn(f"SUBLAYER_CPU_GEMM={value!r} is not one of {', '.join(_GEMMS)}: "
                      "using onednn", stacklevel=2)
    return value if value in _GEMMS else "onednn"


_OP = _onednn_op()
_choice = _env_choice()


def set_cpu_gemm(name: str) -> None:
    """Choose the float32 CPU GEMM: ``"onednn"`` (the default) or ``"blas"``."""
    global _choice
    if name not in _GEMMS:
        raise ValueError(f"cpu gemm {name!r}: expected one of {', '.join(_GEMMS)}")
    _choice = name


def cpu_gemm() -> str:
    """The float32 CPU GEMM in use: ``"onednn"`` where chosen and available, else ``"blas"``."""
    return "onednn" if _choice == "onednn" and _OP is not None else "blas"


def _onednn(*tensors: Tensor | None) -> bool:
    """Whether these operands take oneDNN (see the module docstring)."""
    if _OP is None or _choice != "onednn" or torch.compiler.is_compiling():
        return False
    if torch.is_autocast_enabled("cpu"):
        return False
    return all(
        t is None or (t.device.type == "cpu" and t.dtype == torch.float32) for t in tensors
    )


def _dnn(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    assert _OP is not None
    out: Tensor = _OP(x, weight, bias, "none", [], "")
    return out


class _Linear(torch.autograd.Function):
    """oneDNN forward and input gradient, BLAS weight gradient, 2-D ``x``."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        return _dnn(x, weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_x = _dnn(grad, weight.t(), None)  # (N, out) · (out, in)
        if ctx.needs_input_grad[1]:
            grad_w = grad.t().mm(x)  # (out, N) · (N, in)
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = grad.sum(0)
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``F.linear(x, weight, bias)`` for ``x`` (…, in), ``weight`` (out, in): oneDNN on
    float32 CPU tensors (forward and backward), ``F.linear`` otherwise."""
    if x.dim() < 2 or not _onednn(x, weight, bias):
        return F.linear(x, weight, bias)
    lead = x.shape[:-1]
    x2 = x.reshape(-1, x.shape[-1])
    wants_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, weight, bias))
    y: Tensor = _Linear.apply(x2, weight, bias) if wants_grad else _dnn(x2, weight, bias)
    return y if x.dim() == 2 else y.view(*lead, weight.shape[0])


class Linear(nn.Linear):
    """``nn.Linear`` (same parameters, initialisation and state dict) computed by
    :func:`linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
