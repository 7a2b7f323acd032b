"""Greedy and beam search: beam 1 = greedy, exhaustive optimum, batching, limits."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from sublayer_search.models.seq2seq.decoding import beam_search, greedy_decode, translate_batch
from sublayer_search.models.seq2seq.iot_model import IOTConfig, IOTSeq2Seq
from sublayer_search.models.seq2seq.model import OrderedSeq2Seq, seq2seq_preset

PAD, BOS, EOS = 0, 1, 2


def model(decoder: str = "scfscf", vocab: int = 30, seed: int = 0) -> OrderedSeq2Seq:
    torch.manual_seed(seed)
    m = OrderedSeq2Seq(seq2seq_preset("debug", decoder_order=decoder, dropout=0.0).with_vocab(vocab))
    with torch.no_grad():  # livelier than the 0.02-std init: varied, confident predictions
        for p in m.parameters():
            if p.dim() >= 2:
                p.normal_(std=0.3)
    return m.eval()


def sources(vocab: int = 30, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(3, vocab, (5, 8), generator=g)
    src[1, 5:] = PAD
    src[3, 3:] = PAD
    return src


@pytest.mark.parametrize("decoder", ["scfscf", "cfs", "ffsscc"])
def test_beam_one_equals_greedy(decoder):
    m = model(decoder)
    src = sources()
    greedy = greedy_decode(m, src, max_len=12)
    assert beam_search(m, src, beam=1, max_len=12) == greedy
    assert beam_search(m, src, beam=1, max_len=12, length_penalty=0.0) == greedy
    assert translate_batch(m, src, beam=1, max_len=12) == greedy
    assert len({tuple(h) for h in greedy}) > 1  # not a degenerate model


def test_beam_one_equals_greedy_for_iot_with_per_sentence_orders():
    torch.manual_seed(0)
    cfg = IOTConfig(d_model=32, n_heads=2, d_ff=64, context=32, dropout=0.0, encoder_layers=1,
                    decoder_layers=2, decoder_size=6).with_vocab(30)
    m = IOTSeq2Seq(cfg).eval()
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() >= 2:
                p.normal_(std=0.3)
    src = sources()
    assert len(set(m.encode(src).route.tolist())) > 1  # several orders in one batch
    assert beam_search(m, src, beam=1, max_len=10) == greedy_decode(m, src, max_len=10)


@torch.no_grad()
def _score(m, src_row: torch.Tensor, hyp: list[int]) -> float:
    tokens = torch.tensor([[BOS, *hyp]])
    logp = torch.log_softmax(m(src_row[None], tokens).logits.float(), -1)[0]
    target = [*hyp, EOS]
    return float(sum(logp[i, t] for i, t in enumerate(target)))


@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.0])
def test_wide_beam_finds_the_exhaustive_optimum(alpha):
    vocab = 6  # pad, bos, eos, unk and two words: three generable tokens besides eos
    m = model(vocab=vocab, seed=2)
    src = sources(vocab=vocab)[:2]
    max_len = 3  # up to two tokens, then </s>
    words = [3, 4, 5]
    for row in range(2):
        best, best_score = None, -math.inf
        for n in range(max_len):
            for hyp in itertools.product(words, repeat=n):
                s = _score(m, src[row], list(hyp)) / (n + 1) ** alpha
                if s > best_score:
                    best, best_score = list(hyp), s
        found = beam_search(m, src[row : row + 1], beam=16, max_len=max_len,
                            length_penalty=alpha)[0]
        assert found == best


def test_batched_search_equals_one_sentence_at_a_time():
    m = model("cfs")
    src = sources()
    batched = beam_search(m, src, beam=3, max_len=10, length_penalty=1.0)
    single = []
    for row in src:
        keep = int(row.ne(PAD).sum())
        single += beam_search(m, row[None, :keep], beam=3, max_len=10, length_penalty=1.0)
    assert batched == single
    assert greedy_decode(m, src, max_len=10) == [
        greedy_decode(m, row[None, : int(row.ne(PAD).sum())], max_len=10)[0] for row in src
    ]


def test_outputs_respect_max_len_and_never_hold_specials():
    m = model()
    src = sources()
    for hyps in (greedy_decode(m, src, max_len=4), beam_search(m, src, beam=4, max_len=4)):
        assert all(len(h) <= 3 for h in hyps)
        assert all(t not in (PAD, BOS, EOS) for h in hyps for t in h)
    # the context caps the length too (context 64 in the debug preset)
    assert all(len(h) <= 63 for h in greedy_decode(m, src, max_len=500))


def test_length_penalty_changes_the_preference_for_length():
    m = model(seed=3)
    src = sources()
    short = beam_search(m, src, beam=5, max_len=12, length_penalty=0.0)
    long = beam_search(m, src, beam=5, max_len=12, length_penalty=3.0)
    assert sum(map(len, long)) > sum(map(len, short))


def test_bad_arguments():
    m = model()
    with pytest.raises(ValueError, match="beam must be >= 1"):
        beam_search(m, sources(), beam=0, max_len=5)
    with pytest.raises(ValueError, match="max_len must be >= 1"):
        greedy_decode(m, sources(), max_len=0)
