"""Batched greedy decoding and beam search for the seq2seq models.

Both work with any model that has ``encode(src) -> EncoderOut`` and
``log_probs_last(tgt_in, enc) -> (B, V)`` (``OrderedSeq2Seq``, ``IOTSeq2Seq``); pass a
precomputed ``enc`` to decode with, e.g., a forced IOT order. The decoder is re-run over
the whole prefix at every step (no cache).

Conventions (as in fairseq's ``SequenceGenerator``):

* ``max_len`` counts generated tokens *including* ``</s>``; at the last step ``</s>`` is
  forced, so at most ``max_len - 1`` real tokens come out (also capped by the model's
  context). ``<pad>`` and ``<s>`` are never generated.
* Beam search keeps ``beam`` live hypotheses per sentence, looks at the best ``2·beam``
  extensions, finalises those ending in ``</s>`` among the best ``beam``, and stops a
  sentence once it has ``beam`` finished hypotheses. Finished scores are normalised as
  ``score / len^length_penalty`` (``len`` counts ``</s>``); the best normalised one wins.
  With ``beam = 1`` this is exactly greedy decoding.

Outputs are lists of token ids without ``<s>``/``</s>``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from sublayer_search.models.seq2seq.model import EncoderOut

__all__ = ["beam_search", "greedy_decode", "translate_batch"]


def _limit(model: Any, max_len: int) -> int:
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    return min(max_len, model.cfg.context - 1)


def _next_log_probs(model: Any, tokens: Tensor, enc: EncoderOut, *, last: bool,
                    eos: int, banned: tuple[int, ...]) -> Tensor:
    lp = model.log_probs_last(tokens, enc)  # (N, V) float
    if last:
        forced = torch.full_like(lp, -math.inf)
        forced[:, eos] = lp[:, eos]
        return forced
    lp[:, list(banned)] = -math.inf
    return lp


@torch.no_grad()
def greedy_decode(model: Any, src: Tensor, *, max_len: int, enc: EncoderOut | None = None,
                  bos: int = 1, eos: int = 2, pad: int = 0) -> list[list[int]]:
    """Argmax decoding of every sentence of ``src`` (B, S) at once."""
    limit = _limit(model, max_len)
    enc = model.encode(src) if enc is None else enc
    b = src.shape[0]
    tokens = torch.full((b, 1), bos, dtype=torch.long, device=src.device)
    done = torch.zeros(b, dtype=torch.bool, device=src.device)
    for step in range(limit):
        lp = _next_log_probs(model, tokens, enc, last=step == limit - 1, eos=eos,
                             banned=(pad, bos))
        nxt = lp.argmax(-1).masked_fill(done, eos)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        done |= nxt.eq(eos)
        if bool(done.all()):
            break
    out = []
    for row in tokens[:, 1:].tolist():
        out.append(row[: row.index(eos)] if eos in row else row)
    return out


@torch.no_grad()
def beam_search(model: Any, src: Tensor, *, beam: int, max_len: int,
                length_penalty: float = 1.0, enc: EncoderOut | None = None,
                bos: int = 1, eos: int = 2, pad: int = 0) -> list[list[int]]:
    """Batched beam search (see the module docstring for the exact rules)."""
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    limit = _limit(model, max_len)
    enc = model.encode(src) if enc is None else enc
    b, k = src.shape[0], beam
    device = src.device
    enc = enc.select(torch.arange(b, device=device).repeat_interleave(k))
    tokens = torch.full((b * k, 1), bos, dtype=torch.long, device=device)
    scores = torch.full((b, k), -math.inf, device=device)
    scores[:, 0] = 0.0
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(b)]
    done = [False] * b
    for step in range(limit):
        lp = _next_log_probs(model, tokens, enc, last=step == limit - 1, eos=eos,
                             banned=(pad, bos))
        v = lp.shape[-1]
        cand = (scores[:, :, None] + lp.view(b, k, v)).view(b, k * v)
        top_s, top_i = cand.topk(min(2 * k, k * v), dim=1)
        top_s_l, top_i_l = top_s.tolist(), top_i.tolist()
        new_scores = [[-math.inf] * k for _ in range(b)]
        new_beam = [[0] * k for _ in range(b)]
        new_tok = [[eos] * k for _ in range(b)]
        prefix = tokens[:, 1:].tolist()
        norm = (step + 1) ** length_penalty
        for i in range(b):
            if done[i]:
                continue
            active = 0
            for rank, (s, flat) in enumerate(zip(top_s_l[i], top_i_l[i], strict=True)):
                if s == -math.inf:
                    break
                src_beam, tok = divmod(flat, v)
                if tok == eos:
                    if rank < k:
                        finished[i].append((s / norm, prefix[i * k + src_beam]))
                elif active < k:
                    new_scores[i][active] = s
                    new_beam[i][active] = src_beam
                    new_tok[i][active] = tok
                    active += 1
            if len(finished[i]) >= k or active == 0:
                done[i] = True
        if all(done):
            break
        rows = (torch.arange(b, device=device)[:, None] * k
                + torch.tensor(new_beam, device=device)).view(-1)
        tokens = torch.cat([tokens[rows], torch.tensor(new_tok, device=device).view(-1, 1)], 1)
        scores = torch.tensor(new_scores, device=device)
    out = []
    for hyps in finished:
        out.append(max(hyps, key=lambda h: h[0])[1] if hyps else [])
    return out


def translate_batch(model: Any, src: Tensor, *, beam: int = 1, max_len: int,
                    length_penalty: float = 1.0, enc: EncoderOut | None = None,
                    **ids: int) -> list[list[int]]:
    """Greedy decoding when ``beam == 1``, else beam search."""
    if beam == 1:
        return greedy_decode(model, src, max_len=max_len, enc=enc, **ids)
    return beam_search(model, src, beam=beam, max_len=max_len, length_penalty=length_penalty,
                       enc=enc, **ids)
