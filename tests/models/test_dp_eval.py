"""Validation split across the workers and reduced (models/distributed.py,
``Workers.share`` / ``sums`` / ``gather``; models/lm_workload.py and
models/seq2seq/translation_workload.py).

Two gloo workers evaluate the same model: each runs the forward on its share of the
batches only (counted), and both report the one-process value: the LM's token-weighted
validation loss over 5 batches of unequal sizes (replicated as under DDP, and sharded by
FSDP, where the worker with fewer batches runs one more uncounted forward), and a
translation model's loss, hypotheses, BLEU, IOT routes and routing matrix.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
import torch
from dp_helpers import on_workers

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig, eval_batches, load_corpus
from sublayer_search.models.data.parallel import ParallelDataConfig, load_parallel
from sublayer_search.models.distributed import SINGLE, Workers
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.lm_workload import evaluate, model_for_corpus
from sublayer_search.models.seq2seq.iot_model import IOTConfig
from sublayer_search.models.seq2seq.translation_workload import (
    build_translation_model,
    evaluate_translation,
)

REL_TOL = 1e-5
"""Split against one worker: the same forwards, their sums added in another order."""
BATCH = 2


def _lm() -> tuple[OrderedLM, Any]:
    """The debug LM (seeded) and a validation slice of 7 full blocks and one of 10 ids:
    batches of 2, 2, 2, 1 and 1 rows (the last one shorter), 5 in all."""
    corpus = load_corpus(DataConfig(name="tinyshakespeare"))
    cfg = model_for_corpus(model_preset("debug", order="sfsf", dropout=0.0), corpus)
    torch.manual_seed(0)
    model = OrderedLM(cfg)
    return model, corpus.valid[: 7 * cfg.context + 11]


def _lm_loss(model: OrderedLM, ids: Any, workers: Workers) -> tuple[float, int]:
    """The validation loss and how many forwards this worker ran."""
    calls: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, args: calls.append(1))
    loss = evaluate(model, ids, context=model.cfg.context, batch_size=BATCH, limit=None,
                    device=torch.device("cpu"), autocast=nullcontext(), workers=workers)
    hook.remove()
    return loss, len(calls)


def _iot(data: ParallelDataConfig) -> tuple[Any, Any]:
    corpus = load_parallel(data)
    cfg = IOTConfig(d_model=32, n_heads=2, d_ff=64, context=64, dropout=0.0, encoder_layers=1,
                    decoder_layers=1, decoder_size=2).with_vocab(corpus.src_vocab_size)
    torch.manual_seed(0)
    return build_translation_model(cfg), corpus


def _translate(model: Any, corpus: Any, workers: Workers) -> dict[str, Any]:
    # 10 sentences in batches of 4, 4 and 2: 3 batches for 2 workers
    return evaluate_translation(model, corpus, limit=10, batch_size=4, beam=1, max_len=6,
                                routing_matrix=True, workers=workers)


def _split(rank: int, data: ParallelDataConfig) -> dict[str, Any]:
    model, ids = _lm()
    replicated = _lm_loss(model, ids, Workers(rank=rank, world=2))
    model, _ = _lm()
    sharded_workers = Workers(rank=rank, world=2, strategy="fsdp")
    sharded_workers.shard(model, list(model.layers))
    sharded = _lm_loss(model, ids, sharded_workers)
    iot, corpus = _iot(data)
    return {"replicated": replicated, "sharded": sharded,
            "translation": _translate(iot, corpus, Workers(rank=rank, world=2))}


@pytest.mark.slow
def test_two_workers_evaluate_their_shares_and_report_one_workers_value(
        tmp_path: Path, shared_data: Path) -> None:
    torch.set_num_threads(1)
    model, ids = _lm()
    n_batches = len(list(eval_batches(ids, context=model.cfg.context, batch_size=BATCH)))
    assert n_batches == 5
    one_loss, one_calls = _lm_loss(model, ids, SINGLE)
    assert one_calls == n_batches
    data = ParallelDataConfig(name="multi30k", vocab_size=2000, max_train_tokens=20,
                              download=False, cache_dir=str(tmp_path / "m30k"))
    one = _translate(*_iot(data), SINGLE)
    ranks = on_workers(_split, tmp_path, data)
    # replicated (DDP): batches 0, 2, 4 on rank 0, batches 1, 3 on rank 1
    assert [r["replicated"][1] for r in ranks] == [3, 2]
    # sharded (FSDP): every forward gathers from both, so rank 1 runs one uncounted more
    assert [r["sharded"][1] for r in ranks] == [3, 3]
    for got in ranks:
        for loss, _ in (got["replicated"], got["sharded"]):
            assert math.isclose(loss, one_loss, rel_tol=REL_TOL), (loss, one_loss)
        split = got["translation"]
        assert math.isclose(split.pop("loss"), one["loss"], rel_tol=REL_TOL)
        assert split == {k: v for k, v in one.items() if k != "loss"}
        assert len(split["hypotheses"]) == len(split["routes"]) == 10


def test_shares_tile_the_batches() -> None:
    batches = list(range(7))
    for world in (1, 2, 3):
        shares = [list(Workers(rank=r, world=world).share(batches)) for r in range(world)]
        assert sorted(i for share in shares for i, _, _ in share) == batches
        assert all(counted and b == i for share in shares for i, b, counted in share)
        sharded = [list(Workers(rank=r, world=world, strategy="fsdp").share(batches))
                   for r in range(world)]
        assert {len(s) for s in sharded} == {math.ceil(7 / world)}  # as many forwards each
        counted = sorted(i for s in sharded for i, _, c in s if c)
        assert counted == batches  # every batch counted once, the repeats not at all
    assert list(Workers(rank=1, world=2, strategy="fsdp").share([])) == []
