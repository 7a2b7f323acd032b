"""One-shot order ranking: train one weight-sharing supernet, rank every order with it.

    net = train_supernet(spec, orders, SupernetConfig(steps=2000, sharing="ordinal"))
    scores = rank_orders(net.model, orders, corpus, metric="val_bpc", eval_batches=20,
                         batch_size=16, context=128)

Training goes through THE trainer (:func:`models.training_loop.train`) with a
:class:`SupernetWorkload`: each optimizer step trains the shared weights along one order
drawn uniformly from the orders (single-path one-shot). The draws are a fixed sequence
from the supernet's own ``torch.Generator`` (seeded from ``cfg.seed``), indexed by the
step, so a resumed run draws exactly what the uninterrupted one would. ``spec.model``
gives the sizes (its ``order`` is ignored), ``spec.data`` the corpus and ``spec.train``
the optimizer, schedule, batch size and evaluation cadence; ``cfg.steps`` and
``cfg.seed`` replace ``spec.train.steps`` and ``spec.train.seed``. Each evaluation
reports ``val_loss`` and the main metric averaged over a fixed sample of at most
:data:`MONITOR_ORDERS` orders. The model is :mod:`models.supernet.model`, the ranking
:mod:`models.supernet.rank`. Torch only: no Ray, no MLflow.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from sublayer_search.models.data import Corpus, load_corpus, metrics_from_loss
from sublayer_search.models.lm import LMOutput
from sublayer_search.models.lm_workload import model_for_corpus, train_batch
from sublayer_search.models.specs import TrialSpec, main_metric
from sublayer_search.models.supernet.config import SHARING, SupernetConfig
from sublayer_search.models.supernet.model import (
    PoolKey,
    Supernet,
    canonical_orders,
    path_keys,
    pool_keys,
)
from sublayer_search.models.supernet.rank import (
    RANK_METRICS,
    Batches,
    OrderScore,
    held_out,
    order_losses,
    rank_orders,
    ranking_table,
)
from sublayer_search.models.training_loop import Reporter, Scores, StepContext, Workload, train

__all__ = [
    "MONITOR_ORDERS",
    "RANK_METRICS",
    "SHARING",
    "LMOutput",
    "OrderScore",
    "PoolKey",
    "Supernet",
    "SupernetConfig",
    "SupernetWorkload",
    "SupernetResult",
    "canonical_orders",
    "monitor_orders",
    "order_schedule",
    "path_keys",
    "pool_keys",
    "rank_orders",
    "ranking_table",
    "train_supernet",
]

MONITOR_ORDERS = 8
"""Orders whose mean validation loss the training curve reports."""
_SCHEDULE_STREAM = 0x5EED
_MONITOR_STREAM = 0x0B5E


def _generator(seed: int, stream: int) -> torch.Generator:
    """A generator of its own for ``seed`` (apart from the batch sampler's)."""
    return torch.Generator().manual_seed(
        int(np.random.SeedSequence([seed, stream]).generate_state(1, np.uint64)[0])
    )


def order_schedule(n_orders: int, steps: int, seed: int) -> list[int]:
    """The order index trained at each step 0..steps-1: uniform i.i.d. draws."""
    draws = torch.randint(0, n_orders, (steps,), generator=_generator(seed, _SCHEDULE_STREAM))
    return [int(i) for i in draws]


def monitor_orders(orders: Sequence[str], seed: int, k: int = MONITOR_ORDERS) -> tuple[str, ...]:
    """A fixed sample of at most ``k`` orders (in their given order) for the curve."""
    if len(orders) <= k:
        return tuple(orders)
    pick = torch.randperm(len(orders), generator=_generator(seed, _MONITOR_STREAM))[:k]
    return tuple(orders[i] for i in sorted(int(i) for i in pick))


class SupernetWorkload(Workload):
    """The supernet as a workload of :func:`models.training_loop.train`."""

    def __init__(
        self,
        spec: TrialSpec,
        orders: Sequence[str],
        cfg: SupernetConfig,
        corpus: Corpus | None = None,
    ) -> None:
        self.corpus = corpus if corpus is not None else load_corpus(spec.data)
        self.model_config = model_for_corpus(spec.model, self.corpus)
        self.cfg = cfg
        self.metric = main_metric(self.corpus.level)
        self.orders = canonical_orders(orders)
        for order in self.orders:  # unknown kinds fail here, before training starts
            path_keys(order, cfg.sharing)
        self.model: Supernet | None = None
        """The last model :meth:`build` built (the one the trainer trains)."""
        self.schedule = order_schedule(len(self.orders), cfg.steps, cfg.seed)
        self.monitored = monitor_orders(self.orders, cfg.seed)
        self.eval_limit = spec.train.eval_batches
        self.current = self.orders[self.schedule[0]]
        self._batches: Batches | None = None

    def build(self) -> Supernet:
        self.model = Supernet(self.model_config, self.orders, sharing=self.cfg.sharing)
        return self.model

    def order_at(self, step: int) -> str:
        """The order trained at optimizer step ``step`` (0-based)."""
        return self.orders[self.schedule[step]]

    def before_step(self, model: torch.nn.Module, step: int, total: int) -> None:
        self.current = self.order_at(min(step, len(self.schedule) - 1))

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        x, y = train_batch(self.corpus, self.model_config.context, ctx)
        out = model(x, y, order=self.current).loss
        return out, y.numel()

    def evaluate(
        self, model: torch.nn.Module, ctx: StepContext, *, step: int, final: bool
    ) -> Scores:
        assert isinstance(model, Supernet)
        if self._batches is None:
            self._batches = held_out(
                self.corpus,
                limit=self.eval_limit,
                batch_size=ctx.eval_batch_size,
                context=self.model_config.context,
            )
        means = []
        for order in self.monitored:
            losses, sizes = order_losses(
                model, order, self._batches, device=ctx.device, autocast=ctx.autocast
            )
            means.append(float(np.average(losses, weights=sizes)))
        val_loss = float(np.mean(means))
        scores = metrics_from_loss(val_loss, self.corpus.level)
        main = scores["ppl"] if self.corpus.level == "word" else scores["bpc"]
        return {
            "val_loss": val_loss,
            self.metric: main,
            "val_loss_spread": float(np.max(means) - np.min(means)),
        }


@dataclass(frozen=True)
class SupernetResult:
    """A trained supernet."""

    model: Supernet
    steps: int
    metrics: dict[str, Any]
    """The last reported metrics (``val_loss``, the main metric, ``best_*``, …)."""
    checkpoint: str | None
    status: str = "finished"
    """``finished`` or ``diverged`` (the trainer's status)."""


def train_supernet(
    spec: TrialSpec,
    orders: Sequence[str],
    cfg: SupernetConfig,
    report: Reporter | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    corpus: Corpus | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> SupernetResult:
    """Train a supernet over ``orders`` through :func:`models.training_loop.train`."""
    workload = SupernetWorkload(spec, orders, cfg, corpus)
    train_cfg = dataclasses.replace(spec.train, steps=cfg.steps, seed=cfg.seed,
                                    eval_every=cfg.eval_every or spec.train.eval_every)
    fit = train(
        train_cfg,
        workload,
        report,
        checkpoint_dir=checkpoint_dir,
        resume_from=resume_from,
        on_step=on_step,
    )
    assert workload.model is not None
    return SupernetResult(
        model=workload.model,
        steps=fit.steps,
        metrics=fit.metrics,
        checkpoint=fit.checkpoint,
        status=fit.status,
    )
