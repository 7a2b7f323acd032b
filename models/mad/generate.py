"""The six MAD tasks' samples, generated on the fly from a seed (numpy only).

A sample is ``(inputs, targets)``, two int64 arrays of one length: a model reads
``inputs`` causally and is scored where ``targets`` is not :data:`IGNORE` (next-token
framing: ``targets[t]`` is what should follow ``inputs[:t + 1]``). Compression is the
exception: its targets are the sequence itself, decoded from the last position alone.

* ``in_context_recall``: key-value pairs of a mapping drawn per sequence (keys: the first
  half of the vocabulary, values: the second); every value whose key came earlier in the
  sequence is a target (MAD's multi-query form: many targets per sample, so that a short
  training budget sees a useful signal).
* ``fuzzy_recall``: the same with keys and values of 1 to ``motif`` tokens each; every
  token of a value whose key came before is a target; the sequence ends mid-pair.
* ``noisy_recall``: in-context recall with ``noise_frac`` of the sequence replaced by noise
  tokens (their own vocabulary) placed between pairs; noise is never a target.
* ``selective_copying``: ``copy_tokens`` tokens scattered among blanks, a separator, then the
  tokens again in order: the copy is the target.
* ``compression``: random tokens then a compression token; the model's state at that
  token alone must give back every token (a decoder reads it with each position).
* ``memorization``: key-value pairs of one mapping fixed by the data seed for every sample,
  train and test: the facts must be stored in the weights; every value is a target.
"""

from __future__ import annotations

import numpy as np

from sublayer_search.models.mad.settings import Setting

__all__ = ["IGNORE", "sample", "split"]

IGNORE = -100
"""A position that is not scored (``torch.nn.functional.cross_entropy``'s ignore index)."""

Sample = tuple[np.ndarray, np.ndarray]


def _next_token(seq: np.ndarray, scored: np.ndarray) -> Sample:
    """Inputs ``seq[:-1]``; targets ``seq[1:]`` where ``scored[1:]``, else IGNORE."""
    targets = np.where(scored[1:], seq[1:], IGNORE)
    return seq[:-1].copy(), targets.astype(np.int64)


def _seen_before(keys: np.ndarray) -> np.ndarray:
    """Whether each key occurred earlier in the sequence."""
    _, first = np.unique(keys, return_index=True)
    seen = np.ones(len(keys), dtype=bool)
    seen[first] = False
    return seen


def _recall(s: Setting, rng: np.random.Generator, pairs: int) -> tuple[np.ndarray, np.ndarray]:
    half = s.vocab // 2
    mapping = rng.integers(half, s.vocab, size=half)  # key -> value, for this sequence
    keys = rng.integers(0, half, size=pairs)
    return keys, mapping[keys]


def in_context_recall(s: Setting, rng: np.random.Generator) -> Sample:
    pairs = s.seq_len // 2 + 1  # seq_len + 1 tokens or one more
    keys, values = _recall(s, rng, pairs)
    seq = np.stack([keys, values], axis=1).reshape(-1)[: s.seq_len + 1]
    scored = np.stack([np.zeros(pairs, bool), _seen_before(keys)], axis=1).reshape(-1)
    return _next_token(seq, scored[: s.seq_len + 1])


def noisy_recall(s: Setting, rng: np.random.Generator) -> Sample:
    length = s.seq_len + 1
    noise = int(round(s.noise_frac * length))
    pairs = (length - noise) // 2
    noise = length - 2 * pairs
    keys, values = _recall(s, rng, pairs)
    units = np.array([True] * pairs + [False] * noise)  # True: a pair, False: a noise token
    rng.shuffle(units)
    seq, scored, seen, p = [], [], _seen_before(keys), 0
    for is_pair in units:
        if is_pair:
            seq += [keys[p], values[p]]
            scored += [False, bool(seen[p])]
            p += 1
        else:
            seq.append(s.vocab + int(rng.integers(0, s.noise_vocab)))
            scored.append(False)
    return _next_token(np.array(seq, np.int64), np.array(scored))


def fuzzy_recall(s: Setting, rng: np.random.Generator) -> Sample:
    half, length = s.vocab // 2, s.seq_len + 1
    n_keys = max(2, length // (2 * s.motif))  # distinct keys of this sequence
    motifs: dict[tuple[int, ...], tuple[int, ...]] = {}
    while len(motifs) < n_keys:
        key = tuple(rng.integers(0, half, size=int(rng.integers(1, s.motif + 1))).tolist())
        if key not in motifs:
            motifs[key] = tuple(rng.integers(half, s.vocab,
                                             size=int(rng.integers(1, s.motif + 1))).tolist())
    keys = list(motifs)
    seq: list[int] = []
    scored: list[bool] = []
    met: set[tuple[int, ...]] = set()
    while len(seq) < length:
        key = keys[int(rng.integers(0, len(keys)))]
        seq += key
        scored += [False] * len(key)
        seq += motifs[key]
        scored += [key in met] * len(motifs[key])
        met.add(key)
    seq, scored = seq[:length], scored[:length]
    return _next_token(np.array(seq, np.int64), np.array(scored))


def selective_copying(s: Setting, rng: np.random.Generator) -> Sample:
    blank, sep = s.vocab, s.vocab + 1
    region = s.seq_len + 1 - s.copy_tokens - 1
    tokens = rng.integers(0, s.vocab, size=s.copy_tokens)
    where = np.sort(rng.choice(region, size=s.copy_tokens, replace=False))
    head = np.full(region, blank, np.int64)
    head[where] = tokens
    seq = np.concatenate([head, [sep], tokens])
    scored = np.zeros(len(seq), bool)
    scored[region + 1:] = True
    return _next_token(seq, scored)


def compression(s: Setting, rng: np.random.Generator) -> Sample:
    tokens = rng.integers(0, s.vocab, size=s.seq_len - 1)
    return np.concatenate([tokens, [s.vocab]]).astype(np.int64), tokens.astype(np.int64)


def memorization(s: Setting, rng: np.random.Generator, mapping: np.ndarray) -> Sample:
    half = s.vocab // 2
    pairs = s.seq_len // 2 + 1
    keys = rng.integers(0, half, size=pairs)
    seq = np.stack([keys, mapping[keys]], axis=1).reshape(-1)[: s.seq_len + 1]
    scored = np.tile([False, True], pairs)[: s.seq_len + 1].astype(bool)
    return _next_token(seq, scored)


def sample(s: Setting, rng: np.random.Generator, mapping: np.ndarray | None = None) -> Sample:
    """One sample of ``s``'s task (``mapping``: memorization's facts)."""
    if s.task == "memorization":
        assert mapping is not None
        return memorization(s, rng, mapping)
    make = {"in_context_recall": in_context_recall, "fuzzy_recall": fuzzy_recall,
            "noisy_recall": noisy_recall, "selective_copying": selective_copying,
            "compression": compression}[s.task]
    return make(s, rng)


def split(s: Setting, n: int, seed: int, part: str) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of ``s`` as (inputs, targets), each (n, length): deterministic for
    (``seed``, ``part``); ``train`` and ``test`` draw apart, memorization's facts alike."""
    facts = np.random.default_rng([seed, 0]).integers(s.vocab // 2, s.vocab, size=s.vocab // 2)
    rng = np.random.default_rng([seed, 1 if part == "train" else 2])
    drawn = [sample(s, rng, facts) for _ in range(n)]
    return np.stack([x for x, _ in drawn]), np.stack([y for _, y in drawn])
