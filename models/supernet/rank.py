"""Rank orders by their held-out metric under a supernet's shared weights.

Every order is evaluated on the SAME validation batches (the first ``eval_batches``
contiguous blocks of the split), so differences between orders are paired: the batch
difficulty that ``sem`` reflects is common to all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch

from sublayer_search.models.data import Corpus, eval_batches
from sublayer_search.models.errors import ConfigError, is_positive_int
from sublayer_search.models.supernet.model import Supernet
from sublayer_search.spaces.order import Order

__all__ = ["RANK_METRICS", "OrderScore", "held_out", "order_losses", "rank_orders", "ranking_table"]

RANK_METRICS = ("val_bpc", "val_loss", "val_ppl")
"""``val_bpc``: per-batch bits per character; ``val_loss`` and ``val_ppl``: per-batch mean
NLL in nats (it ranks as perplexity does, and averages sensibly)."""


@dataclass(frozen=True, kw_only=True)
class OrderScore:
    """One order's estimate under the shared weights."""

    order: str
    mean: float
    """Token-weighted mean of the per-batch metric."""
    sem: float
    """Standard error of the mean over batches (0 with one batch)."""
    n_batches: int
    rank: int
    """1 = best (lowest mean); ties broken by the order string."""


Batches = list[tuple[torch.Tensor, torch.Tensor]]


def held_out(corpus: Corpus, *, limit: int | None, batch_size: int, context: int) -> Batches:
    """The first ``limit`` contiguous validation batches (None: the whole split)."""
    return list(eval_batches(corpus.valid, context=context, batch_size=batch_size, limit=limit))


@torch.no_grad()
def order_losses(
    model: Supernet,
    order: str,
    batches: Batches,
    *,
    device: torch.device,
    autocast: AbstractContextManager[Any] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-batch mean NLL (nats) of ``order`` and each batch's token count."""
    was_training = model.training
    model.eval()
    losses, sizes = [], []
    try:
        for x, y in batches:
            with autocast if autocast is not None else nullcontext():
                loss = model(x.to(device), y.to(device), order=order).loss
            assert loss is not None
            losses.append(float(loss))
            sizes.append(y.numel())
    finally:
        model.train(was_training)
    return np.asarray(losses, dtype=np.float64), np.asarray(sizes, dtype=np.float64)


def _score(losses: np.ndarray, sizes: np.ndarray, metric: str) -> tuple[float, float]:
    values = losses / math.log(2) if metric == "val_bpc" else losses
    mean = float(np.average(values, weights=sizes))
    sem = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else 0.0
    return mean, sem


def rank_orders(
    model: Supernet,
    orders: Sequence[str],
    corpus: Corpus,
    *,
    metric: str,
    eval_batches: int,
    batch_size: int,
    context: int,
    device: str = "cpu",
) -> list[OrderScore]:
    """Every order's estimate on the same held-out batches, sorted best first (rank 1)."""
    if metric not in RANK_METRICS:
        raise ConfigError("metric", metric, "one of " + ", ".join(RANK_METRICS))
    for name, value in (
        ("eval_batches", eval_batches),
        ("batch_size", batch_size),
        ("context", context),
    ):
        if not is_positive_int(value):
            raise ConfigError(name, value, "a positive integer")
    if isinstance(orders, str) or not orders:
        raise ConfigError("orders", orders, "a non-empty list of order strings")
    batches = held_out(corpus, limit=eval_batches, batch_size=batch_size, context=context)
    dev = torch.device(device)
    model.to(dev)
    rows = []
    for order in dict.fromkeys(Order.of(o, kind="lm") for o in orders):  # distinct
        losses, sizes = order_losses(model, order, batches, device=dev)
        mean, sem = _score(losses, sizes, metric)
        rows.append((mean, order, sem, len(losses)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return [
        OrderScore(order=order, mean=mean, sem=sem, n_batches=n, rank=i + 1)
        for i, (mean, order, sem, n) in enumerate(rows)
    ]


def ranking_table(scores: Sequence[OrderScore]) -> list[dict[str, Any]]:
    """Rows ``order, mean, sem, n_batches, rank`` (for CSV and MLflow tables)."""
    return [asdict(score) for score in sorted(scores, key=lambda s: s.rank)]
