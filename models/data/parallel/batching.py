"""Padded batches of sentence pairs (see :mod:`.parallel`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
import torch

from sublayer_search.models.data.parallel.corpus import ParallelSplit

__all__ = ["PairBatch", "collate_pairs", "eval_pair_batches", "random_pairs", "token_batches"]


class PairBatch(NamedTuple):
    """Padded sentence pairs (pad id 0, right padding).

    ``src`` (B, S): source ids + ``</s>``; ``tgt_in`` (B, T): ``<s>`` + target ids;
    ``tgt_out`` (B, T): target ids + ``</s>``; ``index`` (B,): sentence numbers in the
    split; ``n_tokens``: non-pad entries of ``tgt_out``.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: torch.Tensor  # type: ignore[assignment]  # the field shadows tuple.index (public name)
    n_tokens: int


def collate_pairs(
    split: ParallelSplit,
    index: Sequence[int] | np.ndarray,
    *,
    max_src: int | None = None,
    max_tgt: int | None = None,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
) -> PairBatch:
    """Pad the pairs ``index`` of ``split``; sentences longer than ``max_src - 1`` /
    ``max_tgt - 1`` tokens are truncated (the ``</s>``/``<s>`` still fit)."""
    index = np.asarray(index, dtype=np.int64)
    srcs = [split.src(int(i)) for i in index]
    tgts = [split.tgt(int(i)) for i in index]
    if max_src is not None:
        srcs = [s[: max_src - 1] for s in srcs]
    if max_tgt is not None:
        tgts = [t[: max_tgt - 1] for t in tgts]
    b = len(index)
    s_len = max(len(s) for s in srcs) + 1
    t_len = max(len(t) for t in tgts) + 1
    src = np.full((b, s_len), pad_id, dtype=np.int64)
    tgt_in = np.full((b, t_len), pad_id, dtype=np.int64)
    tgt_out = np.full((b, t_len), pad_id, dtype=np.int64)
    for row, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
        src[row, : len(s)] = s
        src[row, len(s)] = eos_id
        tgt_in[row, 0] = bos_id
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = eos_id
    n_tokens = int(sum(len(t) + 1 for t in tgts))
    return PairBatch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out),
                     torch.from_numpy(index), n_tokens)


def random_pairs(
    split: ParallelSplit,
    *,
    batch_size: int,
    generator: torch.Generator,
    max_src: int | None = None,
    max_tgt: int | None = None,
) -> PairBatch:
    """``batch_size`` pairs drawn uniformly (with replacement) with ``generator``."""
    index = torch.randint(len(split), (batch_size,), generator=generator).numpy()
    return collate_pairs(split, index, max_src=max_src, max_tgt=max_tgt)


def eval_pair_batches(
    split: ParallelSplit,
    *,
    batch_size: int,
    limit: int | None = None,
    max_src: int | None = None,
    max_tgt: int | None = None,
) -> Iterator[PairBatch]:
    """The first ``limit`` (default all) pairs of ``split`` in order, ``batch_size`` at a time."""
    n = len(split) if limit is None else min(limit, len(split))
    for start in range(0, n, batch_size):
        yield collate_pairs(split, range(start, min(start + batch_size, n)),
                            max_src=max_src, max_tgt=max_tgt)


def token_batches(
    split: ParallelSplit,
    *,
    max_tokens: int,
    seed: int,
    max_src: int | None = None,
    max_tgt: int | None = None,
    multiple: int = 1,
) -> list[np.ndarray]:
    """Sentence numbers of ``split`` cut into batches of at most ``max_tokens`` tokens, as
    fairseq's ``--max-tokens`` does (``ordered_indices`` + ``batch_by_size``).

    A pair counts ``max(source + </s>, target + </s>)`` tokens (after truncation to
    ``max_src`` / ``max_tgt``); pairs are shuffled with ``seed`` (ties), stably sorted by
    target then by source length, and taken in that order into a batch while ``rows ×
    longest pair`` (the padded size) stays within ``max_tokens``. A full batch is cut to
    a multiple of ``multiple`` pairs (fairseq's ``--required-batch-size-multiple``; a
    batch of fewer pairs stays whole) and the rest carried into the next. A pair longer
    than ``max_tokens`` alone is a batch of its own. Every pair is in exactly one batch.
    """
    for name, value in (("max_tokens", max_tokens), ("multiple", multiple)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    src = split.src_lengths + 1
    tgt = split.tgt_lengths + 1
    if max_src is not None:
        src = np.minimum(src, max_src)
    if max_tgt is not None:
        tgt = np.minimum(tgt, max_tgt)
    order = np.random.RandomState(seed).permutation(len(split))
    order = order[np.argsort(tgt[order], kind="mergesort")]
    order = order[np.argsort(src[order], kind="mergesort")]
    sizes = np.maximum(src, tgt)[order].tolist()
    batches: list[np.ndarray] = []
    batch: list[int] = []  # positions in ``order`` (fairseq's batch_by_size_fn)
    longest = 0
    for i, size in enumerate(sizes):
        if batch and (len(batch) + 1) * max(longest, size) > max_tokens:
            cut = max(multiple * (len(batch) // multiple), len(batch) % multiple)
            batches.append(order[batch[:cut]])
            batch = batch[cut:]
            longest = max((sizes[j] for j in batch), default=0)
        batch.append(i)
        longest = max(longest, size)
    if batch:
        batches.append(order[batch])
    return batches
