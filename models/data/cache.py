"""Token-id cache: one folder per (corpus, level, source content, tokenizer version).

Layout: ``<cache>/tokens/<name>-<key16>/{train,valid,test}.npy`` plus ``meta.json``
(vocabulary and sizes), where ``key`` is the sha256 of the name, level, tokenizer
version and the sha256 of every source file. Each file is written to a temporary name
in the same folder and moved into place with ``os.replace`` (atomic), ``meta.json``
last, so concurrent trials on one node either see a complete entry or build their own
identical copy. Arrays are uint16 when the vocabulary has fewer than 65,536 entries,
else int32, and are opened with ``np.load(mmap_mode="r")``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from sublayer_search.models.data.tokenize import TOKENIZER_VERSION

__all__ = [
    "atomic_save_npy",
    "atomic_write",
    "atomic_write_bytes",
    "content_key",
    "file_sha256",
    "id_dtype",
    "load_tokens",
    "save_tokens",
]

META = "meta.json"


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def content_key(*, name: str, level: str, files: Mapping[str, Path]) -> str:
    """sha256 over the corpus name, level, tokenizer version and the source files."""
    h = hashlib.sha256(f"{name}|{level}|tokenizer={TOKENIZER_VERSION}".encode())
    for split in sorted(files):
        h.update(f"|{split}={file_sha256(files[split])}".encode())
    return h.hexdigest()


def id_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size < 65536 else np.dtype(np.int32)


def atomic_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write ``path`` through a temporary file in its folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda f: f.write(data))


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    """:func:`atomic_write` of ``np.save(array)``."""
    atomic_write(path, lambda f: np.save(f, array))


def save_tokens(
    folder: Path, arrays: Mapping[str, np.ndarray], itos: Sequence[str], meta: Mapping[str, Any]
) -> None:
    """Store the id arrays (converted to the id dtype) and then ``meta.json``."""
    dtype = id_dtype(len(itos))
    for split, ids in arrays.items():
        atomic_save_npy(folder / f"{split}.npy", np.ascontiguousarray(ids, dtype=dtype))
    full = dict(meta, itos=list(itos), sizes={k: int(len(v)) for k, v in arrays.items()})
    atomic_write_bytes(folder / META, json.dumps(full, ensure_ascii=False).encode("utf-8"))


def load_tokens(folder: Path) -> tuple[dict[str, np.ndarray], list[str], dict[str, Any]] | None:
    """Memory-mapped arrays, itos and meta of a complete entry; None if absent/incomplete."""
    try:
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        arrays = {s: np.load(folder / f"{s}.npy", mmap_mode="r") for s in meta["sizes"]}
    except (OSError, ValueError, KeyError):
        return None
    if any(len(arrays[s]) != n for s, n in meta["sizes"].items()):
        return None
    return arrays, list(meta["itos"]), meta
