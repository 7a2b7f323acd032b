"""``translation.max_tokens`` (issue 39): fairseq's ``--max-tokens`` batches — pairs sorted
by length and cut where ``rows × longest pair`` would pass the budget — and training that
draws one of them per micro-batch (the IOT authors' 4,000-token batches)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import pytest
import torch

from sublayer_search.models.data.parallel import (
    ParallelDataConfig,
    ParallelSplit,
    collate_pairs,
    load_parallel,
    token_batches,
)
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig
from sublayer_search.models.seq2seq.model import seq2seq_preset
from sublayer_search.models.seq2seq.translation_workload import (
    TranslationConfig,
    TranslationSpec,
    TranslationWorkload,
    fit_translation,
)
from sublayer_search.models.training_loop import StepContext


def _split(src_lens: Sequence[int], tgt_lens: Sequence[int]) -> ParallelSplit:
    def flat(lens: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        ids = np.concatenate([np.full(n, 5 + i % 7, dtype=np.int32) for i, n in enumerate(lens)])
        return ids, np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)

    (s, so), (t, to) = flat(src_lens), flat(tgt_lens)
    return ParallelSplit(src_ids=s, src_offsets=so, tgt_ids=t, tgt_offsets=to)


def test_batches_keep_the_budget_cover_every_pair_once_and_sort_by_length() -> None:
    rng = np.random.default_rng(0)
    src = rng.integers(1, 40, 500).tolist()
    tgt = rng.integers(1, 40, 500).tolist()
    src[7] = 120  # longer than the budget allows with a second pair: a batch of its own
    split = _split(src, tgt)
    batches = token_batches(split, max_tokens=200, seed=1)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(500))  # every pair exactly once
    size = np.maximum(np.asarray(src) + 1, np.asarray(tgt) + 1)  # + </s>
    for b in batches:
        padded = len(b) * int(size[b].max())
        assert padded <= 200 or len(b) == 1
    assert [7] in [b.tolist() for b in batches]
    # greedy: adding the next pair of the order would have passed the budget
    for b, nxt in zip(batches, batches[1:], strict=False):
        assert (len(b) + 1) * int(max(size[b].max(), size[nxt[0]])) > 200
    # sorted by source length, then target length (ties shuffled by the seed)
    keys = list(zip((np.asarray(src) + 1)[flat], (np.asarray(tgt) + 1)[flat], strict=True))
    assert keys == sorted(keys)
    again = token_batches(split, max_tokens=200, seed=1)
    assert all(np.array_equal(a, b) for a, b in zip(batches, again, strict=True))
    other = token_batches(split, max_tokens=200, seed=2)
    assert any(not np.array_equal(a, b) for a, b in zip(batches, other, strict=False))
    # truncation to the context counts in the sizes
    short = token_batches(split, max_tokens=200, seed=1, max_src=50, max_tgt=50)
    assert [7] not in [b.tolist() for b in short]
    with pytest.raises(ValueError, match="max_tokens"):
        token_batches(split, max_tokens=0, seed=1)


def _fairseq_batch_by_size(indices: list[int], num_tokens: list[int], max_tokens: int,
                           bsz_mult: int) -> list[list[int]]:
    """fairseq's ``data_utils_fast.batch_by_size_fn``, line by line (no max_sentences)."""
    batches: list[list[int]] = []
    batch: list[int] = []
    sample_lens: list[int] = []
    sample_len = 0
    for idx in indices:
        sample_lens.append(num_tokens[idx])
        sample_len = max(sample_len, num_tokens[idx])
        n = (len(batch) + 1) * sample_len
        if len(batch) > 0 and n > max_tokens:  # _is_batch_full
            mod_len = max(bsz_mult * (len(batch) // bsz_mult), len(batch) % bsz_mult)
            batches.append(batch[:mod_len])
            batch = batch[mod_len:]
            sample_lens = sample_lens[mod_len:]
            sample_len = max(sample_lens) if len(sample_lens) > 0 else 0
        batch.append(idx)
    if len(batch) > 0:
        batches.append(batch)
    return batches


@pytest.mark.parametrize("multiple", [1, 8])
def test_batches_are_cut_to_a_multiple_of_8_as_fairseq_cuts_them(multiple: int) -> None:
    rng = np.random.default_rng(4)
    src = rng.integers(3, 60, 3000).tolist()
    tgt = rng.integers(3, 60, 3000).tolist()
    split = _split(src, tgt)
    ours = token_batches(split, max_tokens=1000, seed=5, multiple=multiple)
    flat = np.concatenate(ours)
    size = np.maximum(np.asarray(src) + 1, np.asarray(tgt) + 1).tolist()
    reference = _fairseq_batch_by_size(flat.tolist(), size, 1000, multiple)
    assert [b.tolist() for b in ours] == reference
    assert sorted(flat.tolist()) == list(range(3000))
    if multiple == 8:  # every full batch a multiple of 8 pairs, within the budget
        assert all(len(b) % 8 == 0 for b in ours[:-1])
        assert all(len(b) * max(size[i] for i in b) <= 1000 for b in ours)
    with pytest.raises(ValueError, match="multiple"):
        token_batches(split, max_tokens=1000, seed=5, multiple=0)


def test_batch_multiple_is_8_by_default_and_validated() -> None:
    assert TranslationConfig().batch_multiple == 8
    assert TranslationConfig(batch_multiple=1).batch_multiple == 1
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="translation.batch_multiple"):
            TranslationConfig(batch_multiple=bad)


def test_max_tokens_is_validated_naming_the_field() -> None:
    assert TranslationConfig().max_tokens is None
    bad: Any
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ConfigError, match="translation.max_tokens"):
            TranslationConfig(max_tokens=bad)


@pytest.fixture(scope="module")
def data(shared_data, tmp_path_factory) -> ParallelDataConfig:
    return ParallelDataConfig(name="multi30k", vocab_size=2000, max_train_tokens=20,
                              download=False, cache_dir=str(tmp_path_factory.mktemp("m30k")))


def test_training_draws_one_token_batch_per_micro_batch(data) -> None:
    corpus = load_parallel(data)
    model_cfg = seq2seq_preset("debug", dropout=0.0)
    spec = TranslationSpec(model=model_cfg, data=data,
                           train=TrainConfig(steps=2, batch_size=4, lr=1e-3, eval_every=2, seed=3),
                           translation=TranslationConfig(beam=1, max_len=8, eval_sentences=8,
                                                         max_tokens=300))
    family = TranslationWorkload(spec, corpus)
    assert family.token_batches is not None
    expected = token_batches(corpus.train, max_tokens=300, seed=3, max_src=64, max_tgt=64,
                             multiple=8)  # fairseq's --required-batch-size-multiple default
    assert all(np.array_equal(a, b) for a, b in zip(family.token_batches, expected, strict=True))
    model = family.build().train()
    gen = torch.Generator().manual_seed(11)
    ctx = StepContext(device=torch.device("cpu"), autocast=nullcontext(), generator=gen,
                      batch_size=4, eval_batch_size=4)
    twin = torch.Generator().manual_seed(11)
    pick = int(torch.randint(len(family.token_batches), (1,), generator=twin)[0])
    batch = collate_pairs(corpus.train, family.token_batches[pick], max_src=64, max_tgt=64)
    loss, n_tokens = family.loss(model, ctx)
    assert n_tokens == batch.n_tokens and n_tokens > 4 * 10  # far more than 4 pairs' worth
    assert batch.src.numel() <= 300 and batch.tgt_out.numel() <= 300  # padded, per side
    with torch.no_grad():
        hand = model(batch.src, batch.tgt_in, batch.tgt_out, label_smoothing=0.1).loss
    assert hand is not None and loss.item() == pytest.approx(hand.item(), rel=1e-5)
    # two training steps with token batches run end to end
    result = fit_translation(spec, corpus=corpus)
    assert result.status == "finished" and result.steps == 2
    assert result.metrics["tokens_per_s"] > 0
