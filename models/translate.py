"""Train one translation model: ``fit_translation(spec, report) -> FitResult``.

The same contract as :func:`models.train.fit`: a plain ``report(metrics, checkpoint=None)``
after every evaluation, a checkpoint folder per evaluation when ``checkpoint_dir`` is
given, ``resume_from`` to continue, status ``diverged`` on a NaN/inf loss. Optimizer,
schedule, seeding, devices and checkpoint files come from :mod:`models.train`.

Reported metrics: ``step``, ``train_loss`` (label-smoothed training objective; for IOT
the full IOT loss), ``val_loss`` (plain NLL per target token, nats, argmax routing for
IOT), ``val_bleu`` (sacrebleu corpus BLEU of detokenised hypotheses against the
whitespace-normalised references; only at evaluations where BLEU is due, see
``bleu_every``), ``best_val_bleu``, ``lr``, ``tokens_per_s`` (target tokens, padding
excluded), ``status``. IOT adds ``tau`` and ``route_share_<code>`` (share of evaluated
sentences whose argmax decoder order is ``<code>``), and at the last evaluation
``routing_bleu``: a JSON string ``{"<routed code>": {"<decoding code>": BLEU, …}, …}``
— the sentences routed to each order, decoded with every order (the paper's Fig. 2).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from sublayer_search.models.data.parallel import (
    ParallelCorpus,
    ParallelDataConfig,
    ParallelSplit,
    eval_pair_batches,
    load_parallel,
    random_pairs,
)
from sublayer_search.models.decoding import translate_batch
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.iot import IOTConfig, IOTSeq2Seq, iot_param_count, temperature
from sublayer_search.models.seq2seq import OrderedSeq2Seq, Seq2SeqConfig, seq2seq_param_count
from sublayer_search.models.train import (
    FitResult,
    Report,
    TrainConfig,
    autocast_for,
    build_optimizer,
    device_for,
    lr_factor,
    optimizer_step,
    report_evaluation,
    report_resumed_end,
    restore_training,
    seed_everything,
)

__all__ = [
    "TRANSLATION_METRIC",
    "TranslationConfig",
    "TranslationSpec",
    "bleu",
    "build_translation_model",
    "evaluate_translation",
    "fit_translation",
    "translation_param_count",
]

TRANSLATION_METRIC = "val_bleu"
"""The main validation metric of translation trials (higher is better)."""


def _check(cond: bool, field_: str, value: object, expected: str) -> None:
    if not cond:
        raise ConfigError(f"translation.{field_}", value, expected)


def _pos_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


@dataclass(frozen=True, kw_only=True)
class TranslationConfig:
    """Decoding and evaluation settings of a translation trial."""

    __pydantic_config__ = {"extra": "forbid"}

    beam: int = 5
    """Beam size for BLEU (1 = greedy)."""
    length_penalty: float = 1.0
    """Finished beam scores are divided by ``len^length_penalty``."""
    max_len: int = 200
    """Most generated target tokens, ``</s>`` included (also capped by the context)."""
    label_smoothing: float = 0.1
    """Label smoothing of the training loss (the validation loss is plain NLL)."""
    bleu_every: int | None = None
    """Compute BLEU at evaluations whose step is a multiple of this (and at the end);
    ``None`` = at every evaluation."""
    eval_sentences: int | None = None
    """Evaluate on the first this many validation pairs; ``None`` = ``train.eval_batches``
    batches, or the whole split."""
    eval_at_start: bool = False
    """Also evaluate (and report) the untrained model at step 0."""
    routing_bleu: bool = True
    """IOT: compute the routed-split × order BLEU matrix at the last evaluation."""

    def __post_init__(self) -> None:
        _check(_pos_int(self.beam), "beam", self.beam, "a positive integer")
        _check(_pos_int(self.max_len), "max_len", self.max_len, "a positive integer")
        _check(isinstance(self.length_penalty, int | float) and math.isfinite(self.length_penalty),
               "length_penalty", self.length_penalty, "a finite number")
        _check(isinstance(self.label_smoothing, int | float) and 0 <= self.label_smoothing < 1,
               "label_smoothing", self.label_smoothing, "a number in [0, 1)")
        for name in ("bleu_every", "eval_sentences"):
            value = getattr(self, name)
            _check(value is None or _pos_int(value), name, value, "a positive integer or null")
        for name in ("eval_at_start", "routing_bleu"):
            _check(isinstance(getattr(self, name), bool), name, getattr(self, name),
                   "true or false")


@dataclass(frozen=True, kw_only=True)
class TranslationSpec:
    """Everything that defines one trained translation model."""

    __pydantic_config__ = {"extra": "forbid"}

    model: Seq2SeqConfig | IOTConfig
    data: ParallelDataConfig
    train: TrainConfig = field(default_factory=TrainConfig)
    translation: TranslationConfig = field(default_factory=TranslationConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.model, Seq2SeqConfig | IOTConfig):
            raise ConfigError("model", type(self.model).__name__, "a Seq2SeqConfig or IOTConfig")

    def flat(self) -> dict[str, Any]:
        """``{"model.d_model": 64, "translation.beam": 5, …}``: every setting, for tracking."""
        out: dict[str, Any] = {}
        for section in ("model", "data", "train", "translation"):
            for key, value in asdict(getattr(self, section)).items():
                out[f"{section}.{key}"] = value
        return out


def build_translation_model(cfg: Seq2SeqConfig | IOTConfig) -> OrderedSeq2Seq | IOTSeq2Seq:
    return IOTSeq2Seq(cfg) if isinstance(cfg, IOTConfig) else OrderedSeq2Seq(cfg)


def translation_param_count(cfg: Seq2SeqConfig | IOTConfig) -> int:
    return iot_param_count(cfg) if isinstance(cfg, IOTConfig) else seq2seq_param_count(cfg)


def bleu(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Corpus BLEU (sacrebleu defaults: 13a tokenisation, one reference per sentence)."""
    import sacrebleu

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)]).score)


@torch.no_grad()
def evaluate_translation(
    model: OrderedSeq2Seq | IOTSeq2Seq,
    corpus: ParallelCorpus,
    *,
    split: str = "valid",
    batch_size: int = 32,
    limit: int | None = None,
    with_bleu: bool = True,
    beam: int = 1,
    max_len: int = 200,
    length_penalty: float = 1.0,
    routing_matrix: bool = False,
    device: torch.device | None = None,
    autocast: Any = None,
) -> dict[str, Any]:
    """Validation loss (plain NLL), BLEU and, for IOT, routing shares (and matrix).

    Returns ``{"loss", "bleu"?, "hypotheses"?, "routes"?, "routing_bleu"?}``.
    """
    from contextlib import nullcontext

    data: ParallelSplit = corpus.split(split)
    device = device or next(model.parameters()).device
    autocast = autocast or nullcontext()
    was_training = model.training
    model.eval()
    ctx = model.cfg.context
    iot = isinstance(model, IOTSeq2Seq)
    total, count = 0.0, 0
    hyps: list[list[int]] = []
    routes: list[int] = []
    forced: dict[int, list[list[int]]] = {}
    decode = dict(beam=beam, max_len=max_len, length_penalty=length_penalty)
    for batch in eval_pair_batches(data, batch_size=batch_size, limit=limit, max_src=ctx,
                                   max_tgt=ctx):
        src, tgt_in, tgt_out = (t.to(device) for t in batch[:3])
        with autocast:
            enc = model.encode(src)
            logits = model.decode(tgt_in, enc)
        loss = model.loss(logits, tgt_out)
        total += float(loss) * batch.n_tokens
        count += batch.n_tokens
        if with_bleu:
            with autocast:
                hyps += translate_batch(model, src, enc=enc, **decode)
        if iot:
            assert enc.route is not None
            routes += enc.route.tolist()
            if routing_matrix and with_bleu:
                for j in range(model.cfg.decoder_size):
                    with autocast:
                        enc_j = model.encode(src, decoder_route=j)
                        forced.setdefault(j, []).extend(translate_batch(model, src, enc=enc_j,
                                                                        **decode))
    if was_training:
        model.train()
    if count == 0:
        raise ConfigError("translation.eval_sentences", limit, f"at least one {split} pair")
    out: dict[str, Any] = {"loss": total / count}
    if with_bleu:
        refs = list(data.tgt_text[: len(hyps)])
        texts = [corpus.decode(h) for h in hyps]
        out["bleu"] = bleu(texts, refs)
        out["hypotheses"] = texts
    if iot:
        out["routes"] = routes
        if forced:
            out["routing_bleu"] = _routing_matrix(model.cfg, corpus, routes, forced,
                                                  list(data.tgt_text))
    return out


def _routing_matrix(cfg: IOTConfig, corpus: ParallelCorpus, routes: list[int],
                    forced: dict[int, list[list[int]]], refs: list[str]) -> dict[str, dict]:
    assert cfg.decoder_codes is not None
    codes = cfg.decoder_codes
    matrix: dict[str, dict[str, float]] = {}
    for k, code_k in enumerate(codes):
        rows = [i for i, r in enumerate(routes) if r == k]
        if not rows:
            continue
        matrix[str(code_k)] = {
            str(code_j): bleu([corpus.decode(forced[j][i]) for i in rows], [refs[i] for i in rows])
            for j, code_j in enumerate(codes)
        }
    return matrix


def _model_config(spec: TranslationSpec, corpus: ParallelCorpus) -> Seq2SeqConfig | IOTConfig:
    mcfg = spec.model
    if mcfg.shared_embeddings and not corpus.shared:
        raise ConfigError("model.shared_embeddings", True,
                          "false, or data.shared_vocab true (a joint vocabulary)")
    if mcfg.src_vocab_size is None or mcfg.tgt_vocab_size is None:
        mcfg = mcfg.with_vocab(corpus.src_vocab_size, corpus.tgt_vocab_size)
    for side in ("src", "tgt"):
        have, need = getattr(mcfg, f"{side}_vocab_size"), getattr(corpus, f"{side}_vocab_size")
        if have < need:
            raise ConfigError(f"model.{side}_vocab_size", have, f">= the corpus vocabulary ({need})")
    return mcfg


def fit_translation(
    spec: TranslationSpec,
    report: Report | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    corpus: ParallelCorpus | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> FitResult:
    """Train ``spec.model`` on ``spec.data``; call ``report`` after every evaluation."""
    cfg, tcfg = spec.train, spec.translation
    corpus = corpus if corpus is not None else load_parallel(spec.data)
    mcfg = _model_config(spec, corpus)
    report = report or (lambda metrics, checkpoint=None: None)
    generator = seed_everything(cfg.seed)
    device = device_for(cfg)
    model = build_translation_model(mcfg).to(device)
    iot = isinstance(model, IOTSeq2Seq)
    optimizer = build_optimizer(cfg, model)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(cfg, s))
    step, best = 0, -math.inf
    metrics: dict[str, Any] = {}
    if resume_from is not None:
        step, best, metrics = restore_training(resume_from, model, optimizer, scheduler,
                                               generator)
    run_model: Any = model
    if cfg.compile and device.type == "cuda":
        run_model = torch.compile(model)
    autocast = autocast_for(cfg, device)
    eval_bs = cfg.eval_batch_size or cfg.batch_size
    limit = tcfg.eval_sentences or (cfg.eval_batches * eval_bs if cfg.eval_batches else None)
    ctx = mcfg.context

    def evaluate(at: int, final: bool) -> dict[str, Any]:
        due = tcfg.bleu_every is None or at % tcfg.bleu_every == 0 or final
        res = evaluate_translation(
            model, corpus, batch_size=eval_bs, limit=limit, with_bleu=due, beam=tcfg.beam,
            max_len=tcfg.max_len, length_penalty=tcfg.length_penalty,
            routing_matrix=iot and final and tcfg.routing_bleu, device=device, autocast=autocast,
        )
        out: dict[str, Any] = {"val_loss": res["loss"]}
        if "bleu" in res:
            out["val_bleu"] = res["bleu"]
        if iot:
            assert isinstance(mcfg, IOTConfig) and mcfg.decoder_codes is not None
            routes = np.bincount(res["routes"], minlength=mcfg.decoder_size) / len(res["routes"])
            out["tau"] = model.tau
            for k, code in enumerate(mcfg.decoder_codes):
                out[f"route_share_{code}"] = float(routes[k])
            if "routing_bleu" in res:
                out["routing_bleu"] = json.dumps(res["routing_bleu"], sort_keys=True)
        return out

    last_ckpt: str | None = resume_from
    ckpt_root = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if tcfg.eval_at_start and step == 0:
        if iot:
            model.set_temperature(temperature(mcfg, 0, cfg.steps))
        first = evaluate(0, final=False)
        if "val_bleu" in first:
            best = max(best, first["val_bleu"])
        report({"step": 0, **first, "lr": scheduler.get_last_lr()[0], "status": "running"}, None)
    tokens, clock = 0, time.perf_counter()
    train_losses: list[float] = []
    status: Literal["finished", "diverged"] = "finished"
    reported = False
    model.train()
    while step < cfg.steps:
        if iot:
            model.set_temperature(temperature(mcfg, step, cfg.steps))
        step_loss = 0.0
        for _ in range(cfg.grad_accum):
            batch = random_pairs(corpus.train, batch_size=cfg.batch_size, generator=generator,
                                 max_src=ctx, max_tgt=ctx)
            src, tgt_in, tgt_out = (t.to(device) for t in batch[:3])
            with autocast:
                loss = run_model(src, tgt_in, tgt_out,
                                 label_smoothing=tcfg.label_smoothing).loss / cfg.grad_accum
            loss.backward()
            step_loss += float(loss.detach())
            tokens += batch.n_tokens
        if not math.isfinite(step_loss):
            status = "diverged"
            step += 1
            metrics = {"step": step, "train_loss": step_loss, "val_loss": math.nan,
                       "val_bleu": math.nan, "lr": scheduler.get_last_lr()[0]}
            report({**metrics, "status": "diverged"}, None)
            break
        lr = optimizer_step(model, optimizer, scheduler, cfg.clip_norm)
        step += 1
        train_losses.append(step_loss)
        if on_step is not None and (step % cfg.log_every == 0 or step == cfg.steps):
            on_step({"step": step, "train_loss": step_loss, "lr": lr})
        if step % cfg.eval_every == 0 or step == cfg.steps:
            elapsed = time.perf_counter() - clock
            scores = evaluate(step, final=step == cfg.steps)
            if "val_bleu" in scores:
                best = max(best, scores["val_bleu"])
            metrics, last_ckpt = report_evaluation(
                report, step=step, total=cfg.steps, train_losses=train_losses,
                scores={**scores, "best_val_bleu": best}, lr=lr,
                tokens_per_s=tokens / max(elapsed, 1e-9), ckpt_root=ckpt_root,
                parts=(model, optimizer, scheduler, generator), best=best, last_ckpt=last_ckpt)
            reported = True
            tokens, clock = 0, time.perf_counter()
    report_resumed_end(report, resumed=resume_from is not None, reported=reported,
                       metrics=metrics, status=status)
    return FitResult(status=status, steps=step, metrics=metrics, checkpoint=last_ckpt)
