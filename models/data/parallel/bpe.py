"""BPE vocabularies of a parallel corpus: learn, store, load, encode (see :mod:`.parallel`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sublayer_search.models.data.cache import atomic_write_bytes
from sublayer_search.models.data.parallel.config import SPECIALS, UNK, ParallelDataConfig

__all__ = ["encode_lines", "load_tokenizers", "stored_vocab_sizes", "train_bpe"]


def train_bpe(lines: Sequence[str], vocab_size: int) -> Any:
    """A HF ``tokenizers`` BPE tokenizer learned on ``lines`` (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()]
    )
    tok.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False
    )
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return tok


def _load_tokenizer(path: Path) -> Any:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def encode_lines(tok: Any, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """BPE ids of ``lines`` (no specials) as flat int32 ids + int64 offsets (len + 1)."""
    encoded = tok.encode_batch(list(lines), add_special_tokens=False) if lines else []
    lengths = np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter((i for e in encoded for i in e.ids), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


def _names(cfg: ParallelDataConfig) -> tuple[str, ...]:
    return ("joint",) if cfg.shared_vocab else ("src", "tgt")


def stored_vocab_sizes(cfg: ParallelDataConfig, folder: Path) -> tuple[int, int] | None:
    """(source, target) vocabulary sizes of the tokenizers stored in ``folder``; None when
    they have not been learned yet (nothing is learned or written here)."""
    paths = [folder / f"{n}.json" for n in _names(cfg)]
    if not all(p.is_file() for p in paths):
        return None
    try:
        sizes = [int(_load_tokenizer(p).get_vocab_size()) for p in paths]
    except Exception:  # noqa: BLE001  # a damaged file: load_tokenizers decides, later
        return None
    return (sizes[0], sizes[0]) if cfg.shared_vocab else (sizes[0], sizes[1])


def load_tokenizers(cfg: ParallelDataConfig, folder: Path,
                    train: Callable[[], tuple[list[str], list[str]]]) -> tuple[Any, Any]:
    """(source, target) tokenizers from ``folder``, learned on ``train()`` and stored there
    first when missing (one joint tokenizer, returned twice, when ``cfg.shared_vocab``)."""
    paths = [folder / f"{n}.json" for n in _names(cfg)]
    if not all(p.is_file() for p in paths):
        src, tgt = train()
        corpora = [src + tgt] if cfg.shared_vocab else [src, tgt]
        for path, lines in zip(paths, corpora, strict=True):
            atomic_write_bytes(path, train_bpe(lines, cfg.vocab_size).to_str().encode("utf-8"))
    toks = [_load_tokenizer(p) for p in paths]
    return (toks[0], toks[0]) if cfg.shared_vocab else (toks[0], toks[1])
