"""Train an order on the MAD tasks: ``fit(spec, report) -> FitResult``.

Each run trains an :class:`~models.lm.OrderedLM` of the trial's order on one setting
through the one training loop (:func:`~models.training_loop.train`) and scores it by the
accuracy of its argmax on the test samples' targets. The trial reports after each
setting: the accuracy of each task met so far and ``mad_acc``, their mean, at a ``step``
that moves from 0 to ``train.steps`` as settings finish (every trial runs the settings in
the same order, so a stopping rule compares orders on the same tasks). A proxy run takes
seconds to minutes: a trial neither writes nor resumes checkpoints, it starts again.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from sublayer_search.models.distributed import unwrap
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.mad.generate import IGNORE, split
from sublayer_search.models.mad.settings import MadSpec, Run, Setting, runs, score
from sublayer_search.models.training_loop import (
    FitResult,
    Reporter,
    Scores,
    StepContext,
    Workload,
    train,
)
from sublayer_search.spaces.records import STATUS_KEY, TrialStatus, best

__all__ = ["MadModel", "MadWorkload", "fit", "METRIC"]

METRIC = "mad_acc"
"""The main metric of a proxy trial: mean accuracy over its tasks (higher is better)."""


class MadModel(nn.Module):
    """An ordered LM; for compression, a decoder that reads the state at the last position
    with a learned embedding of each position to give back the sequence (MAD's design)."""

    def __init__(self, lm: OrderedLM, setting: Setting) -> None:
        super().__init__()
        self.lm = lm
        self.compress = setting.task == "compression"
        d = lm.cfg.d_model
        if self.compress:
            self.positions = nn.Parameter(torch.randn(setting.seq_len - 1, d) * 0.02)
            self.decoder = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, lm.cfg.vocab_size or 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) of the targets of ``x`` (B, T)."""
        h = self.lm.hidden(x)
        if self.compress:
            return self.decoder(h[:, -1:, :] + self.positions)
        return self.lm._logits(h)

    def balance_loss(self) -> torch.Tensor | None:
        return self.lm.balance_loss()


@functools.lru_cache(maxsize=8)
def _data(setting: Setting, n: int, seed: int, part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """One split as tensors (cached: a process that scores several orders draws it once)."""
    x, y = split(setting, n, seed, part)
    return torch.from_numpy(x), torch.from_numpy(y)


class MadWorkload(Workload):
    """One setting: batches drawn from its fixed training samples, scored on its test ones."""

    metric = "val_acc"

    def __init__(self, spec: MadSpec, setting: Setting) -> None:
        self.spec, self.setting = spec, setting
        self.train_x, self.train_y = _data(setting, setting.train_samples, spec.data.seed, "train")
        self.test_x, self.test_y = _data(setting, spec.data.test_samples, spec.data.seed, "test")

    def build(self) -> MadModel:
        return MadModel(OrderedLM(self.spec.model_for(self.setting)), self.setting)

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        pick = torch.randint(0, len(self.train_x), (ctx.batch_size,), generator=ctx.generator)
        # the global batch: every worker draws all of it, then keeps its share
        x = ctx.workers.local(self.train_x[pick]).to(ctx.device)
        y = ctx.workers.local(self.train_y[pick]).to(ctx.device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1),
                               ignore_index=IGNORE)
        balance = unwrap(model).balance_loss()  # experts only
        return (loss if balance is None else loss + balance), int((y != IGNORE).sum())

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, ctx: StepContext, *, step: int,
                 final: bool) -> Scores:
        model.eval()
        right = scored = 0
        total_loss = 0.0
        for start in range(0, len(self.test_x), ctx.eval_batch_size):
            x = self.test_x[start:start + ctx.eval_batch_size].to(ctx.device)
            y = self.test_y[start:start + ctx.eval_batch_size].to(ctx.device)
            with ctx.autocast:
                logits = model(x).float()
            mask = y != IGNORE
            total_loss += float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                y.reshape(-1), ignore_index=IGNORE,
                                                reduction="sum"))
            right += int(((logits.argmax(-1) == y) & mask).sum())
            scored += int(mask.sum())
        model.train()
        return {"val_loss": total_loss / max(scored, 1), "val_acc": right / max(scored, 1)}


def _one(spec: MadSpec, run: Run) -> tuple[float, float, FitResult]:
    """(test accuracy, seconds, result) of one run; a diverged run scores 0."""
    clock = time.perf_counter()
    result = train(run.train, MadWorkload(spec, run.setting))
    acc = float(result.metrics.get("val_acc", math.nan))
    return (0.0 if result.status == "diverged" or not math.isfinite(acc) else acc,
            time.perf_counter() - clock, result)


def fit(spec: MadSpec, report: Reporter | None = None, *, checkpoint_dir: str | None = None,
        resume_from: str | None = None) -> FitResult:
    """Score ``spec.model``'s order on ``spec.data``'s protocol, reporting per setting."""
    groups = list(runs(spec.data, spec.train))
    by_setting: dict[Setting, float] = {}
    metrics: dict[str, Any] = {}
    seconds, runs_done = 0.0, 0
    for i, group in enumerate(groups):
        outcomes = [_one(spec, run) for run in group]
        by_setting[group[0].setting] = max(acc for acc, _, _ in outcomes)
        seconds += sum(s for _, s, _ in outcomes)
        runs_done += len(group)
        scores = score(by_setting)  # over the tasks met so far: its best is its last
        last = outcomes[-1][2].metrics
        done = i == len(groups) - 1
        metrics = {"step": round(spec.train.steps * (i + 1) / len(groups)), **scores,
                   best(METRIC): scores[METRIC], "train_loss": float(last.get("train_loss", math.nan)),
                   "lr": float(last.get("lr", 0.0)), "runs": runs_done,
                   "proxy_seconds": seconds,
                   STATUS_KEY: (TrialStatus.FINISHED if done else TrialStatus.RUNNING).value}
        if report is not None:
            report(metrics, None)
    return FitResult(status="finished", steps=spec.train.steps, metrics=metrics)
