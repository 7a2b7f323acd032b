"""A parallel corpus as token-id arrays: splits, the corpus, loading and its token cache
(see :mod:`.parallel`)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from sublayer_search.models.data.cache import atomic_save_npy, atomic_write_bytes, file_sha256
from sublayer_search.models.data.download import cache_root
from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.parallel.bpe import (
    encode_lines,
    load_tokenizers,
    stored_vocab_sizes,
)
from sublayer_search.models.data.parallel.config import (
    PARALLEL_VERSION,
    SPLITS,
    ParallelDataConfig,
)
from sublayer_search.models.data.parallel.files import read_pairs, resolve_parallel_files

__all__ = ["ParallelCorpus", "ParallelSplit", "built_vocab_sizes", "load_parallel"]

_notes = logging.getLogger("sublayer_search.notes")
"""Notes before a slow step; the CLI shows them on a terminal (search.cli.main)."""

Arrays = dict[str, tuple[np.ndarray, np.ndarray]]  # "<split>.<side>" -> (ids, offsets)


@dataclass(frozen=True, kw_only=True, eq=False)
class ParallelSplit:
    """Token ids of one split (flat arrays + offsets) and, for valid/test, the raw text."""

    src_ids: np.ndarray
    src_offsets: np.ndarray
    tgt_ids: np.ndarray
    tgt_offsets: np.ndarray
    src_text: tuple[str, ...] = ()
    tgt_text: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.src_offsets) - 1

    def src(self, i: int) -> np.ndarray:
        return self.src_ids[self.src_offsets[i] : self.src_offsets[i + 1]]

    def tgt(self, i: int) -> np.ndarray:
        return self.tgt_ids[self.tgt_offsets[i] : self.tgt_offsets[i + 1]]

    @property
    def src_lengths(self) -> np.ndarray:
        return np.diff(self.src_offsets)

    @property
    def tgt_lengths(self) -> np.ndarray:
        return np.diff(self.tgt_offsets)


@dataclass(frozen=True, kw_only=True, eq=False)
class ParallelCorpus:
    """Three splits of sentence pairs and their BPE tokenizer(s)."""

    name: str
    src_lang: str
    tgt_lang: str
    train: ParallelSplit
    valid: ParallelSplit
    test: ParallelSplit
    src_tokenizer: Any
    tgt_tokenizer: Any  # the same object as src_tokenizer when shared
    shared: bool
    files: dict[str, tuple[Path, Path]] = field(default_factory=dict)
    cache_path: Path | None = None

    pad_id = 0
    bos_id = 1
    eos_id = 2
    unk_id = 3

    @property
    def src_vocab_size(self) -> int:
        return int(self.src_tokenizer.get_vocab_size())

    @property
    def tgt_vocab_size(self) -> int:
        return int(self.tgt_tokenizer.get_vocab_size())

    def split(self, name: str) -> ParallelSplit:
        if name not in SPLITS:
            raise DataError(f"split: got {name!r}, expected one of {', '.join(SPLITS)}")
        return getattr(self, name)

    def decode(self, ids: Sequence[int]) -> str:
        """Detokenised target text of ids (specials, e.g. ``</s>``, are dropped)."""
        return self.tgt_tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def decode_src(self, ids: Sequence[int]) -> str:
        return self.src_tokenizer.decode([int(i) for i in ids], skip_special_tokens=True)

    def encode_src(self, lines: Sequence[str]) -> list[list[int]]:
        """BPE ids of source sentences (no specials)."""
        return [e.ids for e in self.src_tokenizer.encode_batch(list(lines),
                                                                add_special_tokens=False)]


def _key(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _common(cfg: ParallelDataConfig) -> tuple[str, ...]:
    return (f"v{PARALLEL_VERSION}", cfg.name, f"{cfg.src_lang}-{cfg.tgt_lang}",
            f"strip={cfg.strips_bpe}", f"max_tokens={cfg.max_train_tokens}",
            f"max_pairs={cfg.max_train_pairs}")


def _bpe_key(cfg: ParallelDataConfig, train_hashes: tuple[str, str]) -> str:
    return _key(*_common(cfg)[:4], f"vocab={cfg.vocab_size}", f"shared={cfg.shared_vocab}",
                *train_hashes)


def built_vocab_sizes(cfg: ParallelDataConfig) -> tuple[int, int] | None:
    """(source, target) vocabulary sizes when the corpus is on disk and its BPE vocabulary
    is in the cache already; None otherwise. Never downloads, learns or writes anything
    (what ``sublayer sweep --dry-run`` may do)."""
    try:
        files = resolve_parallel_files(replace(cfg, download=False))
        train = files["train"]
        key = _bpe_key(cfg, (file_sha256(train[0]), file_sha256(train[1])))
    except (DataError, OSError):
        return None
    return stored_vocab_sizes(cfg, cache_root(cfg) / "bpe" / f"{cfg.name}-{key[:16]}")


def load_parallel(cfg: ParallelDataConfig) -> ParallelCorpus:
    """Find the files, learn (or reuse) the BPE vocabulary and encode every split (cached).

    The training text is read only when the BPE or the token cache must be built.
    """
    files = resolve_parallel_files(cfg)
    cache = cache_root(cfg)
    strip = cfg.strips_bpe
    text = {s: read_pairs(a, b, strip_bpe=strip) for s, (a, b) in files.items() if s != "train"}
    text.setdefault("test", ([], []))
    hashes = {s: (file_sha256(a), file_sha256(b)) for s, (a, b) in files.items()}
    common = _common(cfg)
    bpe_key = _bpe_key(cfg, hashes["train"])
    bpe_dir = cache / "bpe" / f"{cfg.name}-{bpe_key[:16]}"
    train_text: list[tuple[list[str], list[str]]] = []  # read at most once, when needed

    def train_pairs() -> tuple[list[str], list[str]]:
        if not train_text:
            train_text.append(read_pairs(*files["train"], strip_bpe=strip))
        return train_text[0]

    if not bpe_dir.is_dir():
        _notes.info("building the %s BPE vocabulary and token cache in %s (first use only; "
                    "seconds to a minute) ...", cfg.name, cache)
    src_tok, tgt_tok = load_tokenizers(cfg, bpe_dir, train_pairs)
    tok_key = _key(bpe_key, *common, *(h for s in sorted(hashes) for h in hashes[s]))
    folder = cache / "tokens" / f"{cfg.name}-{cfg.src_lang}-{cfg.tgt_lang}-{tok_key[:16]}"
    arrays = _load_arrays(folder)
    if arrays is None:
        arrays = {}
        for split, (a, b) in {"train": train_pairs(), **text}.items():
            arrays[f"{split}.src"] = encode_lines(src_tok, a)
            arrays[f"{split}.tgt"] = encode_lines(tgt_tok, b)
        arrays = _filter_train(arrays, cfg)
        _save_arrays(folder, arrays)
    splits = {}
    for split in SPLITS:
        a, b = text.get(split, ([], []))
        splits[split] = ParallelSplit(
            src_ids=arrays[f"{split}.src"][0], src_offsets=arrays[f"{split}.src"][1],
            tgt_ids=arrays[f"{split}.tgt"][0], tgt_offsets=arrays[f"{split}.tgt"][1],
            src_text=tuple(a), tgt_text=tuple(b),
        )
    return ParallelCorpus(
        name=cfg.name, src_lang=str(cfg.src_lang), tgt_lang=str(cfg.tgt_lang),
        train=splits["train"], valid=splits["valid"], test=splits["test"],
        src_tokenizer=src_tok, tgt_tokenizer=tgt_tok, shared=cfg.shared_vocab,
        files=files, cache_path=folder,
    )


def _filter_train(arrays: Arrays, cfg: ParallelDataConfig) -> Arrays:
    (sids, soff), (tids, toff) = arrays["train.src"], arrays["train.tgt"]
    slen, tlen = np.diff(soff), np.diff(toff)
    keep = (slen > 0) & (tlen > 0)
    if cfg.max_train_tokens is not None:
        keep &= (slen <= cfg.max_train_tokens) & (tlen <= cfg.max_train_tokens)
    index = np.flatnonzero(keep)
    if cfg.max_train_pairs is not None:
        index = index[: cfg.max_train_pairs]
    if len(index) == 0:
        raise DataError(f"{cfg.name}: no training pairs left after filtering "
                        f"(max_train_tokens={cfg.max_train_tokens})")
    out = dict(arrays)
    out["train.src"] = _take(sids, soff, index)
    out["train.tgt"] = _take(tids, toff, index)
    return out


def _take(ids: np.ndarray, off: np.ndarray, index: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lengths = off[index + 1] - off[index]
    new_off = np.zeros(len(index) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_off[1:])
    parts = [ids[off[i] : off[i + 1]] for i in index]
    flat = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    return flat, new_off


def _save_arrays(folder: Path, arrays: Mapping[str, tuple[np.ndarray, np.ndarray]]) -> None:
    for name, (ids, off) in arrays.items():
        atomic_save_npy(folder / f"{name}.npy", ids)
        atomic_save_npy(folder / f"{name}.off.npy", off)
    meta = {"version": PARALLEL_VERSION, "sizes": {k: len(v[1]) - 1 for k, v in arrays.items()}}
    atomic_write_bytes(folder / "meta.json", json.dumps(meta).encode())


def _load_arrays(folder: Path) -> Arrays | None:
    try:
        meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        out = {k: (np.load(folder / f"{k}.npy", mmap_mode="r"),
                   np.load(folder / f"{k}.off.npy"))
               for k in meta["sizes"]}
    except (OSError, ValueError, KeyError):
        return None
    if any(len(out[k][1]) - 1 != n for k, n in meta["sizes"].items()):
        return None
    return out
