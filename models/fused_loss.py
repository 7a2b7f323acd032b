"""Output projection + cross-entropy in row chunks, gradients computed in the forward.

A full-softmax LM head materialises (N, V) logits, their log-softmax, the gradient of
the log-softmax and the gradient of the logits: four N·V float buffers per step
(4 × 64 MB at N = 2048, V = 8192). On CPU each fresh buffer of that size is mapped
anew and page-faulted in, which costs about a sixth of a small model's step.

:func:`linear_cross_entropy` instead walks the rows in chunks of a few MB. For each
chunk it computes the logits, the loss, and — since the loss is the end of the graph —
the gradient of the mean loss with respect to the chunk's hidden states and to the
projection at once (softmax − one-hot). ``backward`` only scales those by the
incoming gradient. Same FLOPs as the plain head (one forward and two backward
matmuls), no N·V buffer. Targets must lie in ``[0, V)`` (no ``ignore_index``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = ["linear_cross_entropy", "chunk_rows", "CHUNK_BYTES"]

CHUNK_BYTES = 8 << 20
"""Size of one chunk's float32 logits: small enough for the allocator to reuse."""


def chunk_rows(vocab: int, chunk_bytes: int = CHUNK_BYTES) -> int:
    """Rows per chunk so that a chunk's float32 logits take about ``chunk_bytes``."""
    return max(16, chunk_bytes // (4 * vocab))


class _LinearCrossEntropy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, h: Tensor, weight: Tensor, targets: Tensor, rows: int) -> Tensor:
        n = h.shape[0]
        acc = torch.promote_types(h.dtype, torch.float32)  # softmax in at least float32
        want_h, want_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(h) if want_h else None
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if want_w else None
        total = torch.zeros((), dtype=acc, device=h.device)
        for start in range(0, n, rows):
            hc, tc = h[start:start + rows], targets[start:start + rows]
            logits = (hc @ weight.t()).to(acc)
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, tc[:, None]).squeeze(1)).sum()
            if want_h or want_w:
                probs = logits.sub_(lse[:, None]).exp_()  # softmax, in place
                probs[torch.arange(len(tc), device=tc.device), tc] -= 1.0
                probs.div_(n)  # gradient of the mean loss with respect to the logits
                if grad_h is not None:
                    grad_h[start:start + rows] = (probs @ weight.to(acc)).to(h.dtype)
                if grad_w is not None:
                    grad_w.addmm_(probs.t(), hc.to(acc))
        # the gradients are results of this forward, not inputs: kept on ctx as they are
        ctx.grads = (grad_h, None if grad_w is None else grad_w.to(weight.dtype))
        return total / n

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, ...]:
        grad_h, grad_w = ctx.grads
        ctx.grads = None
        return (None if grad_h is None else grad_h * grad_out.to(grad_h.dtype),
                None if grad_w is None else grad_w * grad_out.to(grad_w.dtype), None, None)


def linear_cross_entropy(h: Tensor, weight: Tensor, targets: Tensor,
                         *, rows: int | None = None) -> Tensor:
    """Mean cross-entropy of ``h @ weight.T`` against ``targets``, without the N·V logits.

    ``h`` (N, d), ``weight`` (V, d), ``targets`` (N,) long. Equal to
    ``F.cross_entropy(h @ weight.T, targets)`` in value and gradients.
    """
    if h.dim() != 2 or weight.dim() != 2 or h.shape[1] != weight.shape[1]:
        raise ValueError(f"h {tuple(h.shape)} and weight {tuple(weight.shape)}: expected (N, d), (V, d)")
    if targets.shape != (h.shape[0],):
        raise ValueError(f"targets {tuple(targets.shape)}: expected ({h.shape[0]},)")
    out: Tensor = _LinearCrossEntropy.apply(h, weight, targets, rows or chunk_rows(weight.shape[0]))
    return out
