"""Train one translation model: ``fit_translation(spec, report) -> FitResult``.

The same contract as :func:`models.lm_workload.fit`: a plain ``report(metrics, checkpoint=None)``
after every evaluation, a checkpoint folder per evaluation when ``checkpoint_dir`` is
given, ``resume_from`` to continue, status ``diverged`` on a NaN/inf loss. Optimizer,
schedule, seeding, devices and checkpoint files come from :mod:`models.lm_workload`.

Reported metrics: ``step``, ``train_loss`` (label-smoothed training objective; for IOT
the full IOT loss), ``val_loss`` (plain NLL per target token, nats, argmax routing for
IOT), ``val_bleu`` (sacrebleu corpus BLEU of the decoded hypotheses against the
whitespace-normalised references, tokenised as ``translation.bleu_tokenize`` says: 13a,
or none for multi-bleu.perl's BLEU of tokenised text; only at evaluations where BLEU is
due, see ``bleu_every``), with ``translation.test_bleu`` ``test_bleu`` and ``test_loss``
on the test split at the final evaluation, ``best_val_bleu``, ``lr``, ``tokens_per_s`` (target tokens, padding
excluded), ``status``. IOT adds ``tau`` and ``route_share_<code>`` (share of evaluated
sentences whose argmax decoder order is ``<code>``), and at the last evaluation
``routing_bleu``: a JSON string ``{"<routed code>": {"<decoding code>": BLEU, …}, …}``
— the sentences routed to each order, decoded with every order (the paper's Fig. 2).
Soft cross-layer guidance adds its term to the training loss and reports it as
``guidance_loss`` (as :mod:`models.lm_workload`). Training batches are ``train.batch_size``
random pairs, or with ``translation.max_tokens`` one of fairseq's length-sorted batches of
at most that many tokens per worker (:func:`models.data.parallel.token_batches`, built once
from ``train.seed``), drawn at random per micro-batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from sublayer_search.models.data.parallel import (
    ParallelCorpus,
    ParallelSplit,
    collate_pairs,
    eval_pair_batches,
    load_parallel,
    random_pairs,
    token_batches,
)
from sublayer_search.models.distributed import SINGLE, Workers, unwrap
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import guidance_term
from sublayer_search.models.seq2seq.decoding import translate_batch
from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq, temperature
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, Seq2SeqConfig
from sublayer_search.models.specs import (
    TranslationConfig,
    TranslationSpec,
    translation_param_count,
)
from sublayer_search.models.training_loop import (
    FitResult,
    Reporter,
    Scores,
    StepContext,
    Workload,
    train,
)
from sublayer_search.spaces.records import route_share

__all__ = [
    "TranslationWorkload",
    "TranslationConfig",
    "TranslationSpec",
    "bleu",
    "build_translation_model",
    "evaluate_translation",
    "fit_translation",
    "translation_param_count",
]


def build_translation_model(cfg: Seq2SeqConfig | IOTConfig) -> OrderedSeq2Seq | IOTSeq2Seq:
    return IOTSeq2Seq(cfg) if isinstance(cfg, IOTConfig) else OrderedSeq2Seq(cfg)


def bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str = "13a") -> float:
    """Corpus BLEU with sacrebleu, one reference per sentence; ``tokenize``: ``13a``
    (sacrebleu's default) or ``none`` (the text as it is: multi-bleu.perl on tokenised
    text, as fairseq's IWSLT14 numbers are scored)."""
    import sacrebleu

    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references")
    return float(sacrebleu.corpus_bleu(list(hyps), [list(refs)], tokenize=tokenize).score)


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
    workers: Workers = SINGLE,
    tokenize: str = "13a",
) -> dict[str, Any]:
    """Validation loss (plain NLL), BLEU and, for IOT, routing shares (and matrix).

    Returns ``{"loss", "bleu"?, "hypotheses"?, "routes"?, "routing_bleu"?}``. Several
    ``workers`` each score and decode their share of the batches; the loss sums are added
    and the hypotheses and routes gathered in corpus order, so every worker returns the
    one-worker result.
    """
    from contextlib import nullcontext

    data: ParallelSplit = corpus.split(split)
    device = device or next(model.parameters()).device
    autocast = autocast or nullcontext()
    was_training = model.training
    model.eval()
    ctx = model.cfg.context
    total, count = 0.0, 0
    mine: list[_Decoded] = []
    decode: dict[str, Any] = dict(beam=beam, max_len=max_len, length_penalty=length_penalty)
    batches = eval_pair_batches(data, batch_size=batch_size, limit=limit, max_src=ctx,
                                max_tgt=ctx)
    for index, batch, counted in workers.share(batches):
        if not counted:  # a repeat only sharded models run; translation models are not
            continue
        src, tgt_in, tgt_out = (t.to(device) for t in batch[:3])
        with autocast:
            enc = model.encode(src)
            logits = model.decode(tgt_in, enc)
        loss = model.loss(logits, tgt_out)
        total += float(loss) * batch.n_tokens
        count += batch.n_tokens
        with autocast:
            mine.append(_decoded(model, index, src, enc, decode, with_bleu=with_bleu,
                                 routing_matrix=routing_matrix))
    if was_training:
        model.train()
    total, summed = workers.sums([total, count], device)
    count = round(summed)
    if count == 0:
        raise ConfigError("translation.eval_sentences", limit, f"at least one {split} pair")
    parts = sorted(workers.gather(mine), key=lambda part: part.index)  # corpus order
    return {"loss": total / count,
            **_decoded_scores(model, corpus, data, parts, with_bleu, tokenize)}


def _decoded(model: OrderedSeq2Seq | IOTSeq2Seq, index: int, src: torch.Tensor, enc: Any,
             decode: dict[str, Any], *, with_bleu: bool, routing_matrix: bool) -> _Decoded:
    """What batch ``index`` decodes: its hypotheses (for BLEU), an IOT model's routes and,
    for the routing matrix, its decodings forced through each decoder order."""
    part = _Decoded(index)
    if with_bleu:
        part.hyps = translate_batch(model, src, enc=enc, **decode)
    if isinstance(model, IOTSeq2Seq):
        assert enc.route is not None
        part.routes = enc.route.tolist()
        if routing_matrix and with_bleu:
            for j in range(model.cfg.decoder_size):
                enc_j = model.encode(src, decoder_route=j)
                part.forced[j] = translate_batch(model, src, enc=enc_j, **decode)
    return part


def _decoded_scores(model: OrderedSeq2Seq | IOTSeq2Seq, corpus: ParallelCorpus,
                    data: ParallelSplit, parts: list[_Decoded],
                    with_bleu: bool, tokenize: str = "13a") -> dict[str, Any]:
    """BLEU and hypotheses; an IOT model's routes and routing BLEU matrix (all batches'
    parts, in corpus order)."""
    hyps = [h for part in parts for h in part.hyps]
    routes = [r for part in parts for r in part.routes]
    forced = {j: [h for part in parts for h in part.forced[j]]
              for j in (parts[0].forced if parts else {})}
    out: dict[str, Any] = {}
    if with_bleu:
        refs = list(data.tgt_text[: len(hyps)])
        texts = [corpus.decode(h) for h in hyps]
        out["bleu"] = bleu(texts, refs, tokenize)
        out["hypotheses"] = texts
    if isinstance(model, IOTSeq2Seq):
        out["routes"] = routes
        if forced:
            out["routing_bleu"] = _routing_matrix(
                model.cfg, corpus, routes, forced, list(data.tgt_text)
            )
    return out


@dataclass
class _Decoded:
    """What one evaluation batch decoded: hypotheses, IOT routes, forced decodings."""

    index: int
    hyps: list[list[int]] = field(default_factory=list)
    routes: list[int] = field(default_factory=list)
    forced: dict[int, list[list[int]]] = field(default_factory=dict)


def _routing_matrix(
    cfg: IOTConfig,
    corpus: ParallelCorpus,
    routes: list[int],
    forced: dict[int, list[list[int]]],
    refs: list[str],
) -> dict[str, dict]:
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
        raise ConfigError(
            "model.shared_embeddings", True, "false, or data.shared_vocab true (a joint vocabulary)"
        )
    if mcfg.src_vocab_size is None or mcfg.tgt_vocab_size is None:
        mcfg = mcfg.with_vocab(corpus.src_vocab_size, corpus.tgt_vocab_size)
    for side in ("src", "tgt"):
        have, need = getattr(mcfg, f"{side}_vocab_size"), getattr(corpus, f"{side}_vocab_size")
        if have < need:
            raise ConfigError(
                f"model.{side}_vocab_size", have, f">= the corpus vocabulary ({need})"
            )
    return mcfg


class TranslationWorkload(Workload):
    """Encoder–decoder models (plain or IOT) on a parallel corpus; main metric ``val_bleu``."""

    metric = "val_bleu"

    def __init__(self, spec: TranslationSpec, corpus: ParallelCorpus | None = None) -> None:
        self.corpus = corpus if corpus is not None else load_parallel(spec.data)
        self.model_config = _model_config(spec, self.corpus)
        self.settings = spec.translation
        self.eval_at_start = spec.translation.eval_at_start
        train = spec.train
        eval_bs = train.eval_batch_size or train.batch_size
        self.eval_limit = self.settings.eval_sentences or (
            train.eval_batches * eval_bs if train.eval_batches else None
        )
        max_tokens = spec.translation.max_tokens
        ctx_len = self.model_config.context
        self.token_batches = None if max_tokens is None else token_batches(
            self.corpus.train, max_tokens=max_tokens, seed=train.seed, max_src=ctx_len,
            max_tgt=ctx_len, multiple=spec.translation.batch_multiple)
        """``translation.max_tokens``: the fixed length-sorted batches (fairseq's)."""

    def build(self) -> OrderedSeq2Seq | IOTSeq2Seq:
        return build_translation_model(self.model_config)

    def before_step(self, model: torch.nn.Module, step: int, total: int) -> None:
        if isinstance(model, IOTSeq2Seq) and isinstance(self.model_config, IOTConfig):
            model.set_temperature(temperature(self.model_config, step, total))

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        ctx_len = self.model_config.context
        workers = ctx.workers
        if self.token_batches is not None:
            # one batch index per worker, drawn by every worker (the generators stay in
            # step); each trains on its own batch: max_tokens per worker, as fairseq's
            pick = torch.randint(len(self.token_batches), (workers.world,),
                                 generator=ctx.generator)
            batch = collate_pairs(self.corpus.train, self.token_batches[int(pick[workers.rank])],
                                  max_src=ctx_len, max_tgt=ctx_len)
            rows: tuple[torch.Tensor, ...] = batch[:3]
        else:
            batch = random_pairs(self.corpus.train, batch_size=ctx.batch_size,
                                 generator=ctx.generator, max_src=ctx_len, max_tgt=ctx_len)
            # the global batch: this worker keeps its share of the pairs
            rows = tuple(workers.local(t) for t in batch[:3])
        # (DDP weights the workers' mean losses equally, so shares of unequal token counts
        # are weighted per worker, not per token)
        src, tgt_in, tgt_out = (t.to(ctx.device) for t in rows)
        out = model(src, tgt_in, tgt_out, label_smoothing=self.settings.label_smoothing)
        term = guidance_term(unwrap(model), self.model_config.guidance)
        local = workers.parallel and self.token_batches is None
        n_tokens = int((tgt_out != 0).sum()) if local else batch.n_tokens
        return (out.loss if term is None else out.loss + term), n_tokens

    def evaluate(
        self, model: torch.nn.Module, ctx: StepContext, *, step: int, final: bool
    ) -> Scores:
        assert isinstance(model, OrderedSeq2Seq | IOTSeq2Seq)
        tcfg = self.settings
        iot = isinstance(model, IOTSeq2Seq)
        due = tcfg.bleu_every is None or step % tcfg.bleu_every == 0 or final
        res = evaluate_translation(
            model,
            self.corpus,
            batch_size=ctx.eval_batch_size,
            limit=self.eval_limit,
            with_bleu=due,
            beam=tcfg.beam,
            max_len=tcfg.max_len,
            length_penalty=tcfg.length_penalty,
            routing_matrix=iot and final and tcfg.routing_bleu,
            device=ctx.device,
            autocast=ctx.autocast,
            workers=ctx.workers,
            tokenize=tcfg.bleu_tokenize,
        )
        out: Scores = {"val_loss": res["loss"]}
        if final and tcfg.test_bleu and len(self.corpus.test):
            test = evaluate_translation(
                model, self.corpus, split="test", batch_size=ctx.eval_batch_size, beam=tcfg.beam,
                max_len=tcfg.max_len, length_penalty=tcfg.length_penalty, device=ctx.device,
                autocast=ctx.autocast, workers=ctx.workers, tokenize=tcfg.bleu_tokenize)
            out.update(test_loss=test["loss"], test_bleu=test["bleu"])
        with torch.no_grad():
            term = guidance_term(model, self.model_config.guidance)
        if term is not None:
            out["guidance_loss"] = float(term)
        if "bleu" in res:
            out[self.metric] = res["bleu"]
        if isinstance(model, IOTSeq2Seq):
            mcfg = self.model_config
            assert isinstance(mcfg, IOTConfig) and mcfg.decoder_codes is not None
            routes = np.bincount(res["routes"], minlength=mcfg.decoder_size) / len(res["routes"])
            out["tau"] = model.tau
            for k, code in enumerate(mcfg.decoder_codes):
                out[route_share(code)] = float(routes[k])
            if "routing_bleu" in res:
                out["routing_bleu"] = json.dumps(res["routing_bleu"], sort_keys=True)
        return out


def fit_translation(
    spec: TranslationSpec,
    report: Reporter | None = None,
    *,
    checkpoint_dir: str | None = None,
    resume_from: str | None = None,
    corpus: ParallelCorpus | None = None,
    on_step: Callable[[dict[str, float]], None] | None = None,
) -> FitResult:
    """Train ``spec.model`` on ``spec.data`` through :func:`~sublayer_search.models.training_loop.train`."""
    return train(
        spec.train,
        TranslationWorkload(spec, corpus),
        report,
        checkpoint_dir=checkpoint_dir,
        resume_from=resume_from,
        on_step=on_step,
    )
