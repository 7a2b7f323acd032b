"""Output projection + cross-entropy in row chunks, gradients computed in the forward.

A full-softmax head materialises (N, V) logits, their log-softmax, the gradient of the
log-softmax and the gradient of the logits: four N·V float buffers per step
(4 × 64 MB at N = 2048, V = 8192). On CPU each fresh buffer of that size is mapped
anew and page-faulted in, which costs about a sixth of a small model's step.

:func:`linear_cross_entropy` instead walks the rows in chunks of a few MB. For each
chunk it computes the logits, the loss, and — since the loss is the end of the graph —
the gradient of the loss with respect to the chunk's hidden states and to the
projection at once (softmax − smoothed one-hot). ``backward`` only scales those by the
incoming gradient. Same FLOPs as the plain head (one forward and two backward
matmuls), no N·V buffer, and on the CPU one pass over the logits besides the matmuls:
the softmax, in place. The log-sum-exp comes from the target's own probability
(``lse = x_t − log p_t``, two gathers); a row whose ``p_t`` underflows takes it at its
most probable class instead (exact, since that probability is at least 1/V). Other
devices keep two reductions (``lse = max − log max softmax``) and no host sync. Row
weights (the mean's 1/N, zero at ignored targets, IOT's per-sentence path weights) scale
the (rows, d) matmul operands and results, never the logits; label smoothing's uniform
part is a rank-one term, and its mean logit of a row is ``h·Σw / V``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["CHUNK_BYTES", "chunk_rows", "fusable", "linear_cross_entropy"]

CHUNK_BYTES = 8 << 20
"""Size of one chunk's float32 logits: small enough for the allocator to reuse."""


def chunk_rows(vocab: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Rows per chunk so that a chunk's float32 logits take about ``chunk_bytes``."""
    return max(16, chunk_bytes // (4 * vocab))


def fusable(h: Tensor, weight: Tensor) -> bool:
    """Whether a training loss of ``h @ weight.T`` should take the fused path: gradients
    wanted, no autocast and no ``torch.compile`` trace (those keep the standard path,
    which the compiler fuses itself)."""
    return (
        torch.is_grad_enabled()
        and (h.requires_grad or weight.requires_grad)
        and not torch.is_autocast_enabled(h.device.type)
        and not torch.compiler.is_compiling()
    )


def _product(hc: Tensor, weight: Tensor, *, out: Tensor) -> None:
    """``out[:] = hc @ weight.T`` (``out`` in the accumulation dtype). BLAS writes into
    ``out`` directly; oneDNN's op has no ``out`` and its product plus the copy was the
    slower of the two on the CPU (``benchmarks/cpu_gemm.py``, head rows)."""
    if hc.dtype == out.dtype and weight.dtype == out.dtype:
        torch.mm(hc, weight.t(), out=out)
    else:
        out.copy_(hc @ weight.t())


def _grad_rows(probs: Tensor, w_acc: Tensor, cc: Tensor, *, out: Tensor) -> None:
    """``out[:] = (probs @ w) · c`` per row: the chunk's gradient of the hidden states."""
    if out.dtype == probs.dtype:
        torch.mm(probs, w_acc, out=out)
        out.mul_(cc[:, None])
    else:
        out.copy_((probs @ w_acc) * cc[:, None])  # copy_ converts to out's dtype


def _lse_from_target(probs: Tensor, target: Tensor, tc: Tensor, hc: Tensor,
                     w_acc: Tensor) -> Tensor:
    """``log Σ exp(logits)`` per row from the softmax: ``x_t − log p_t`` with the target's
    logit and probability (no pass over the row). A row whose ``p_t`` is too small to
    trust (below ``2²⁴ ×`` the smallest normal float: the target some 69 nats below the
    top in float32) takes ``x_m − log p_m`` at its most probable class m instead, whose
    probability is at least 1/V and whose logit is recomputed as one dot product."""
    p_t = probs.gather(1, tc[:, None]).squeeze(1)
    lse = target - p_t.log()
    low = p_t < torch.finfo(probs.dtype).tiny * 2.0**24
    if bool(low.any()):  # rare: one host-side check per chunk (CPU only, see the caller)
        rows = low.nonzero().squeeze(1)
        p_m, m = probs[rows].max(1)
        x_m = (hc[rows].to(w_acc.dtype) * w_acc[m]).sum(1)
        lse[rows] = x_m - p_m.log()
    return lse


class _LinearCrossEntropy(torch.autograd.Function):
    """``Σᵢ cᵢ ℓᵢ`` with ℓᵢ the (smoothed) cross-entropy of row i; inputs h, weight,
    targets (all in range), coefficients c (N,), rows, smoothing, grad wanted."""

    @staticmethod
    def forward(
        ctx: Any,
        h: Tensor,
        weight: Tensor,
        targets: Tensor,
        coef: Tensor,
        rows: int,
        smoothing: float,
        grad: bool,
    ) -> Tensor:
        n, vocab = h.shape[0], weight.shape[0]
        acc = torch.promote_types(h.dtype, torch.float32)  # softmax in at least float32
        want_h = grad and ctx.needs_input_grad[0]
        want_w = grad and ctx.needs_input_grad[1]
        want_c = grad and ctx.needs_input_grad[3]
        coef = coef.to(acc)
        w_acc = weight.to(acc)
        grad_h = torch.empty_like(h) if want_h else None
        grad_w = None
        if want_w:  # the first chunk writes it (below): zeros only without rows
            make = torch.empty if n else torch.zeros
            grad_w = make(weight.shape, dtype=acc, device=weight.device)
        losses = torch.empty(n, dtype=acc, device=h.device) if want_c else None
        row_sum = torch.zeros(h.shape[1], dtype=acc, device=h.device)  # Σ cᵢ hᵢ
        # smoothing's mean logit of a row is h·w̄: a matrix-vector product, no logits pass
        w_sum = w_acc.sum(0) if smoothing else None
        total = torch.zeros((), dtype=acc, device=h.device)
        # one logits buffer for every chunk, overwritten by its softmax in place: no
        # fresh (rows, V) allocation per chunk (on CPU each would be page-faulted in)
        buf = torch.empty(min(rows, n), vocab, dtype=acc, device=h.device)
        for start in range(0, n, rows):
            hc, tc, cc = (
                h[start : start + rows],
                targets[start : start + rows],
                coef[start : start + rows],
            )
            logits = buf[: len(tc)]
            _product(hc, weight, out=logits)  # (rows, V)
            target = logits.gather(1, tc[:, None]).squeeze(1)  # x_t
            picked = target
            if w_sum is not None:  # ℓ = lse − (1 − ε)·x_t − ε·mean(x), mean(x) = h·Σw / V
                picked = (1.0 - smoothing) * target + (smoothing / vocab) * (hc.to(acc) @ w_sum)
            if logits.device.type == "cpu":  # softmax in place: no second buffer
                probs = torch.softmax(logits, 1, out=logits)
                lse = _lse_from_target(probs, target, tc, hc, w_acc)
            else:  # as before (untested there): no host sync per chunk
                top = logits.amax(1)
                probs = torch.softmax(logits, 1)
                lse = top - probs.amax(1).log()
            loss = lse - picked
            total += (cc * loss).sum()
            if losses is not None:
                losses[start : start + rows] = loss
            if grad_h is None and grad_w is None:
                continue
            # ∂ℓ/∂logits = softmax − (1 − ε)·one-hot − ε/V; the −ε/V part is rank one
            probs[torch.arange(len(tc), device=tc.device), tc] -= 1.0 - smoothing
            if grad_h is not None:
                _grad_rows(probs, w_acc, cc, out=grad_h[start : start + rows])
            if grad_w is not None:
                scaled = hc.to(acc) * cc[:, None]
                if start == 0:  # the first chunk writes, the others add: no zero fill
                    torch.mm(probs.t(), scaled, out=grad_w)
                else:
                    grad_w.addmm_(probs.t(), scaled)
                if smoothing:
                    row_sum += scaled.sum(0)
        if w_sum is not None:
            if grad_h is not None:
                grad_h -= (smoothing / vocab * coef[:, None] * w_sum).to(h.dtype)
            if grad_w is not None:
                grad_w -= smoothing / vocab * row_sum
        # the gradients are results of this forward, not inputs: kept on ctx as they are
        ctx.grads = (grad_h, None if grad_w is None else grad_w.to(weight.dtype), losses)
        return total

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        grad_h, grad_w, losses = ctx.grads
        ctx.grads = None
        if grad_out.device.type == "cpu" and bool(grad_out == 1):
            return grad_h, grad_w, None, losses, None, None, None  # the plain mean: as is
        # the buffers are this function's own and used once: scaled in place, no copies
        return (
            None if grad_h is None else grad_h.mul_(grad_out.to(grad_h.dtype)),
            None if grad_w is None else grad_w.mul_(grad_out.to(grad_w.dtype)),
            None,
            None if losses is None else losses.mul_(grad_out.to(losses.dtype)),
            None,
            None,
            None,
        )


def linear_cross_entropy(
    h: Tensor,
    weight: Tensor,
    targets: Tensor,
    *,
    rows: int | None = None,
    label_smoothing: float = 0.0,
    ignore_index: int | None = None,
    row_weights: Tensor | None = None,
) -> Tensor:
    """Cross-entropy of ``h @ weight.T`` against ``targets``, without the N·V logits.

    ``h`` (N, d), ``weight`` (V, d), ``targets`` (N,) long in ``[0, V)`` except at
    ``ignore_index``. Without ``row_weights``: the mean over the rows not ignored, equal
    to ``F.cross_entropy(h @ weight.T, targets, ignore_index=…, label_smoothing=…)`` in
    value and gradients. With ``row_weights`` (N,): ``Σᵢ wᵢ ℓᵢ`` over rows not ignored,
    ℓᵢ the per-row loss (``reduction="none"``); gradients reach ``row_weights`` too.
    """
    if h.dim() != 2 or weight.dim() != 2 or h.shape[1] != weight.shape[1]:
        raise ValueError(
            f"h {tuple(h.shape)} and weight {tuple(weight.shape)}: expected (N, d), (V, d)"
        )
    if targets.shape != (h.shape[0],):
        raise ValueError(f"targets {tuple(targets.shape)}: expected ({h.shape[0]},)")
    if row_weights is not None and row_weights.shape != (h.shape[0],):
        raise ValueError(f"row_weights {tuple(row_weights.shape)}: expected ({h.shape[0]},)")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing {label_smoothing}: expected a number in [0, 1]")
    acc = torch.promote_types(h.dtype, torch.float32)
    coef: Tensor
    if ignore_index is None:
        coef = (
            row_weights
            if row_weights is not None
            else torch.full((h.shape[0],), 1.0 / max(h.shape[0], 1), dtype=acc, device=h.device)
        )
    else:
        keep = targets.ne(ignore_index)
        targets = targets.masked_fill(~keep, 0)
        coef = (
            row_weights * keep if row_weights is not None else keep.to(acc) / keep.sum()
        )  # no rows kept: nan, as F.cross_entropy
    out: Tensor = _LinearCrossEntropy.apply(
        h,
        weight,
        targets,
        coef,
        rows or chunk_rows(weight.shape[0]),
        float(label_smoothing),
        torch.is_grad_enabled(),
    )
    return out
