"""Batches of token ids for training (random blocks) and evaluation (contiguous blocks)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from sublayer_search.models.data.errors import DataError

__all__ = ["eval_batches", "random_batch"]


def _check(ids: np.ndarray, context: int, batch_size: int) -> None:
    if context < 1 or batch_size < 1:
        raise DataError(f"context and batch_size must be >= 1, got {context} and {batch_size}")
    if len(ids) < 2:
        raise DataError(f"a split of {len(ids)} tokens is too short to predict anything")


def _to_long(block: np.ndarray, device: torch.device | str | None) -> torch.Tensor:
    out = torch.from_numpy(np.array(block, dtype=np.int64))  # a writable copy
    return out if device is None else out.to(device, non_blocking=True)


def random_batch(
    ids: np.ndarray,
    *,
    context: int,
    batch_size: int,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` contiguous blocks of ``context + 1`` ids at random offsets.

    Returns ``(x, y)``, both (B, T) long, with ``y[:, t] == x[:, t + 1]`` inside a block
    (``y`` is ``x`` shifted by one). Offsets come from ``generator`` (deterministic).
    """
    _check(ids, context, batch_size)
    if len(ids) < context + 1:
        raise DataError(f"a split of {len(ids)} tokens is shorter than context + 1 = {context + 1}")
    starts = torch.randint(0, len(ids) - context, (batch_size,), generator=generator).numpy()
    block = ids[starts[:, None] + np.arange(context + 1)]  # (B, T + 1)
    return _to_long(block[:, :-1], device), _to_long(block[:, 1:], device)


def eval_batches(
    ids: np.ndarray,
    *,
    context: int,
    batch_size: int,
    limit: int | None = None,
    device: torch.device | str | None = None,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Contiguous, non-overlapping blocks that together predict every id after the first.

    Block ``i`` is ``x = ids[i*T : i*T + T]``, ``y = ids[i*T + 1 : i*T + T + 1]``. Full
    blocks come ``batch_size`` at a time (the last batch may have fewer rows); a final
    shorter block (``(len(ids) - 1) % T`` targets) follows as a batch of one row, so
    the caller should weight each batch's mean loss by ``y.numel()``. ``limit`` caps
    the number of batches yielded.
    """
    _check(ids, context, batch_size)
    if limit is not None and limit < 1:
        raise DataError(f"limit must be >= 1 or None, got {limit}")
    n_targets = len(ids) - 1
    n_full = n_targets // context
    yielded = 0
    for first in range(0, n_full, batch_size):
        if limit is not None and yielded >= limit:
            return
        rows = min(batch_size, n_full - first)
        start = first * context
        block = np.asarray(ids[start : start + rows * context + 1])
        x = np.lib.stride_tricks.sliding_window_view(block[:-1], context)[::context]
        y = np.lib.stride_tricks.sliding_window_view(block[1:], context)[::context]
        yield _to_long(x, device), _to_long(y, device)
        yielded += 1
    rest = n_targets - n_full * context
    if rest and (limit is None or yielded < limit):
        start = n_full * context
        block = np.asarray(ids[start : start + rest + 1])
        yield _to_long(block[None, :-1], device), _to_long(block[None, 1:], device)
