"""Train one language model: ``fit(spec, report) -> FitResult``.

The language-model workload of :mod:`sublayer_search.models.training_loop`: an
:class:`OrderedLM` on a corpus, next-token loss on random blocks, validation NLL with
the corpus's main metric (``val_bpc`` for characters and bytes, ``val_ppl`` for words).
With soft cross-layer guidance the training loss gains ``alpha ·`` the model's
:meth:`~models.lm.OrderedLM.guidance_penalty` and every evaluation reports that term as
``guidance_loss`` (see :func:`guidance_term`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from sublayer_search.models.checkpoint import load_checkpoint
from sublayer_search.models.config import ModelConfig
from sublayer_search.models.data import (
    Corpus,
    eval_batches,
    load_corpus,
    metrics_from_loss,
    random_batch,
)
from sublayer_search.models.distributed import SINGLE, Workers, unwrap
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.optim import lr_factor
from sublayer_search.models.specs import TrialSpec, main_metric
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.models.training_loop import (
    FitResult,
    Reporter,
    Scores,
    StepContext,
    Workload,
    train,
)

__all__ = [
    "FitResult",
    "LMWorkload",
    "Reporter",
    "TrainConfig",
    "TrialSpec",
    "evaluate",
    "fit",
    "guidance_term",
    "load_checkpoint",
    "lr_factor",
    "main_metric",
    "model_for_corpus",
    "train_batch",
]


def guidance_term(model: Any, guidance: GuidanceConfig) -> torch.Tensor | None:
    """``alpha · model.guidance_penalty()`` under soft guidance, else None."""
    if guidance.mode != "soft":
        return None
    penalty = model.guidance_penalty()
    return None if penalty is None else guidance.alpha * penalty


@torch.no_grad()
def evaluate(
    model: OrderedLM,
    ids: np.ndarray,
    *,
    context: int,
    batch_size: int,
    limit: int | None,
    device: torch.device,
    autocast: Any,
    workers: Workers = SINGLE,
) -> float:
    """Mean token NLL (nats) over contiguous blocks of the split. Several ``workers``
    each evaluate their share of the batches and add up (loss × tokens, tokens): every
    worker gets the one-worker value (to float rounding)."""
    model.eval()
    total, count = 0.0, 0
    batches = eval_batches(ids, context=context, batch_size=batch_size, limit=limit)
    for _, (x, y), counted in workers.share(batches):
        x, y = x.to(device), y.to(device)
        with autocast:
            loss = model(x, y).loss
        if counted:
            n = y.numel()
            total += float(loss) * n
            count += n
    model.train()
    total, summed = workers.sums([total, count], device)
    count = round(summed)
    if count == 0:
        raise ConfigError(
            "model.context", context, f"a context shorter than the split ({len(ids)} tokens)"
        )
    return total / count


def model_for_corpus(model: ModelConfig, corpus: Corpus) -> ModelConfig:
    """``model`` with the corpus's vocabulary when it has none; a ConfigError when its
    vocabulary is smaller than the corpus's."""
    if model.vocab_size is None:
        model = model.with_vocab(corpus.vocab_size)
    if model.vocab_size is not None and model.vocab_size < corpus.vocab_size:
        raise ConfigError("model.vocab_size", model.vocab_size,
                          f">= the corpus vocabulary ({corpus.vocab_size})")
    return model


def train_batch(corpus: Corpus, context: int, ctx: StepContext) -> tuple[torch.Tensor, torch.Tensor]:
    """This worker's share of a random training batch (inputs, targets) on ``ctx``'s device."""
    x, y = random_batch(corpus.train, context=context, batch_size=ctx.batch_size,
                        generator=ctx.generator)  # the global batch: this worker keeps its share
    return ctx.workers.local(x).to(ctx.device), ctx.workers.local(y).to(ctx.device)


class LMWorkload(Workload):
    """Decoder-only language models on a corpus of the registry."""

    def __init__(self, spec: TrialSpec, corpus: Corpus | None = None) -> None:
        self.corpus = corpus if corpus is not None else load_corpus(spec.data)
        self.model_config = model_for_corpus(spec.model, self.corpus)
        self.eval_limit = spec.train.eval_batches
        self.metric = main_metric(self.corpus.level)

    def build(self) -> OrderedLM:
        return OrderedLM(self.model_config)

    def shard_blocks(self, model: torch.nn.Module) -> list[torch.nn.Module] | None:
        """One FSDP unit per sublayer; none with guidance (its pairs read, or share, the
        weights of two sublayers at once, outside their forward)."""
        if self.model_config.guidance.mode != "none":
            return None
        assert isinstance(model, OrderedLM)
        return list(model.layers)

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        x, y = train_batch(self.corpus, self.model_config.context, ctx)
        loss = model(x, y).loss
        term = guidance_term(unwrap(model), self.model_config.guidance)
        balance = unwrap(model).balance_loss()  # mixture-of-experts sublayers only
        for extra in (term, balance):
            if extra is not None:
                loss = loss + extra
        return loss, y.numel()

    def evaluate(
        self, model: torch.nn.Module, ctx: StepContext, *, step: int, final: bool
    ) -> Scores:
        assert isinstance(model, OrderedLM)
        val_loss = evaluate(
            model,
            self.corpus.valid,
            context=self.model_config.context,
            batch_size=ctx.eval_batch_size,
            limit=self.eval_limit,
            device=ctx.device,
            autocast=ctx.autocast,
            workers=ctx.workers,
        )
        scores = metrics_from_loss(val_loss, self.corpus.level)
        main = scores["ppl"] if self.corpus.level == "word" else scores["bpc"]
        out: Scores = {"val_loss": val_loss, self.metric: main}
        with torch.no_grad():
            term = guidance_term(model, self.model_config.guidance)
        if term is not None:
            out["guidance_loss"] = float(term)
        return out


def fit(
    spec: TrialSpec,
    report: Reporter | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    corpus: Corpus | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> FitResult:
    """Train ``spec.model`` on ``spec.data`` through :func:`~sublayer_search.models.training_loop.train`."""
    return train(
        spec.train,
        LMWorkload(spec, corpus),
        report,
        checkpoint_dir=checkpoint_dir,
        resume_from=resume_from,
        on_step=on_step,
    )
