"""Load a corpus as memory-mapped token-id arrays (tokenised once, then cached)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from sublayer_search.models.data.cache import content_key, load_tokens, save_tokens
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.data.download import cache_root, resolve_files
from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.registry import ALL, CorpusSpec, get_spec, metric_for_level
from sublayer_search.models.data.tokenize import (
    TOKENIZER_VERSION,
    build_word_vocab,
    count_words,
    encode_units,
    encode_words,
    read_units,
)

__all__ = ["Corpus", "check_text_files", "load_corpus", "split_sizes", "vocab_size_on_disk"]

TEXT_CHECK_BYTES = 64 * 2**20
"""How much of each file :func:`check_text_files` reads (the start of a huge corpus)."""


@dataclass(frozen=True, kw_only=True, eq=False)
class Corpus:
    """Token ids of the three splits (read-only memmaps) and the vocabulary."""

    name: str
    level: str  # "char" | "word" | "byte"
    train: np.ndarray
    valid: np.ndarray
    test: np.ndarray  # empty for text-files without a test file
    itos: tuple[str, ...]
    files: dict[str, Path] = field(default_factory=dict)  # split (or "all") -> source file
    cache_path: Path | None = None  # folder of the cached .npy files

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    @property
    def metric(self) -> str:
        """Main validation metric name: "val_ppl" (word) or "val_bpc" (char/byte)."""
        return metric_for_level(self.level)

    def decode(self, ids) -> str:
        """Text of a sequence of ids (words joined by spaces)."""
        sep = " " if self.level == "word" else ""
        return sep.join(self.itos[int(i)] for i in ids)


def split_sizes(n: int, spec: CorpusSpec) -> tuple[int, int, int]:
    """(train, valid, test) sizes of a single-file corpus of ``n`` units."""
    if spec.fixed_split is not None:
        n_train, n_valid = spec.fixed_split
        if n <= n_train + n_valid:
            raise DataError(
                f"{spec.name}: the file has {n} units, expected more than {n_train + n_valid} "
                f"for the {n_train}/{n_valid}/rest split"
            )
    else:
        n_train, n_valid = n * 90 // 100, n * 5 // 100
    return n_train, n_valid, n - n_train - n_valid


def _build(spec: CorpusSpec, level: str, files: dict[str, Path]) -> tuple[dict, list[str]]:
    if spec.single_file:
        (units,), itos = encode_units([read_units(files[ALL], level)], level)
        n_train, n_valid, _ = split_sizes(len(units), spec)
        arrays = {
            "train": units[:n_train],
            "valid": units[n_train : n_train + n_valid],
            "test": units[n_train + n_valid :],
        }
        return arrays, itos
    splits = [s for s in ("train", "valid", "test") if s in files]
    if level == "word":
        itos = build_word_vocab(count_words(files["train"]))
        stoi = {w: i for i, w in enumerate(itos)}
        arrays = {s: encode_words(files[s], stoi) for s in splits}
    else:
        ids, itos = encode_units([read_units(files[s], level) for s in splits], level)
        arrays = dict(zip(splits, ids, strict=True))
    for s in ("valid", "test"):
        arrays.setdefault(s, np.zeros(0, dtype=np.int64))
    return arrays, itos


def load_corpus(cfg: DataConfig) -> Corpus:
    """Find, tokenise (once; cached by content hash) and memory-map a corpus.

    Raises DataError when files are missing (naming the file and where to put it),
    unreadable, or fail their checksum on download.
    """
    spec = get_spec(cfg.name)
    level = cfg.resolved_level
    files = resolve_files(cfg, spec)
    key = content_key(name=spec.name, level=level, files=files)
    folder = _cache_folder(cfg, spec, key)
    cached = load_tokens(folder)
    if cached is None:
        arrays, itos = _build(spec, level, files)
        meta = {"name": spec.name, "level": level, "key": key, "tokenizer": TOKENIZER_VERSION}
        save_tokens(folder, arrays, itos, meta)
        cached = load_tokens(folder)
        if cached is None:  # pragma: no cover - only if the folder vanished meanwhile
            raise DataError(f"{spec.name}: token cache {folder} could not be read back")
    arrays, itos, _ = cached
    return Corpus(
        name=spec.name,
        level=level,
        train=arrays["train"],
        valid=arrays["valid"],
        test=arrays["test"],
        itos=tuple(itos),
        files=files,
        cache_path=folder,
    )


def _cache_folder(cfg: DataConfig, spec: CorpusSpec, key: str) -> Path:
    return cache_root(cfg) / "tokens" / f"{spec.name}-{cfg.resolved_level}-{key[:16]}"


def vocab_size_on_disk(cfg: DataConfig) -> int:
    """The vocabulary size of a corpus on disk, without downloading or writing anything
    (``sublayer sweep --dry-run``): the token cache's when it is built, else counted from
    the files. DataError when the files are not on disk."""
    spec = get_spec(cfg.name)
    files = resolve_files(replace(cfg, download=False), spec)
    key = content_key(name=spec.name, level=cfg.resolved_level, files=files)
    cached = load_tokens(_cache_folder(cfg, spec, key))
    return len(cached[1] if cached is not None else _build(spec, cfg.resolved_level, files)[1])


def check_text_files(data: DataConfig) -> None:
    """DataError unless the corpus files of a character or word level corpus are UTF-8
    text: caught by the driver before any trial starts (byte-level corpora take anything)."""
    import codecs

    spec = get_spec(data.name)
    if data.resolved_level == "byte":
        return
    try:
        files = resolve_files(replace(data, download=False), spec)
    except DataError:
        return  # not on disk (yet): finding or fetching it is another check's business
    for path in files.values():
        decoder = codecs.getincrementaldecoder("utf-8")()
        with open(path, "rb") as handle:
            chunk = handle.read(TEXT_CHECK_BYTES)
        if b"\x00" in chunk:
            raise DataError(f"{path}: a binary file (NUL bytes), expected UTF-8 text")
        try:
            decoder.decode(chunk, final=len(chunk) < TEXT_CHECK_BYTES)
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 text (byte 0x{chunk[exc.start]:02x} at offset "
                            f"{exc.start}: {exc.reason})") from None
