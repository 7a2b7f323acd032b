"""Tokenisers: word level (WikiText / fairseq rule), characters and bytes.

Word level follows fairseq's ``tokenize_line`` + ``append_eos``: every line of the file,
blank ones included, is split on whitespace and followed by the end-of-line token
``</s>``; a blank line therefore yields just ``</s>`` (this is how fairseq's
``preprocess.py`` binarises WikiText-103: valid = 213,886 words + 3,760 lines = 217,646
tokens). The vocabulary comes from the train split only, ordered by frequency
(descending, ties by the token's text) so that adaptive softmax cutoffs apply; ``<unk>``
is kept as an ordinary token (and added if absent); tokens of valid/test missing from
the vocabulary map to ``<unk>``.

Characters: the vocabulary is the sorted set of code points of the whole text (all
splits), as in nanoGPT's char preparation; bytes: the sorted set of byte values present,
each shown in ``itos`` as its latin-1 character.
"""

from __future__ import annotations

import array
import os
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from sublayer_search.models.data.errors import DataError

__all__ = [
    "EOS",
    "TOKENIZER_VERSION",
    "UNK",
    "build_word_vocab",
    "count_words",
    "encode_units",
    "encode_words",
    "read_units",
    "read_wikitext_tokens",
    "tokenize_wikitext_lines",
]

TOKENIZER_VERSION = "1"  # bump when any rule here changes: invalidates the token caches
EOS = "</s>"
UNK = "<unk>"
_PROGRESS_BYTES = 20_000_000  # show a progress bar for files at least this big (on a TTY)


def tokenize_wikitext_lines(lines: Iterable[str]) -> list[str]:
    """Whitespace-split each line and append ``</s>`` (blank lines give ``["</s>"]``)."""
    out: list[str] = []
    for line in lines:
        out.extend(line.split())
        out.append(EOS)
    return out


def read_wikitext_tokens(path: str | os.PathLike[str]) -> list[str]:
    """Tokens of one WikiText split file (no vocabulary needed): a split-only parse."""
    with _open_text(path) as f:
        return tokenize_wikitext_lines(f)


def _open_text(path: str | os.PathLike[str]):
    try:
        return open(path, encoding="utf-8", newline=None)
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from exc


def _lines(path: Path, desc: str) -> Iterable[str]:
    size = path.stat().st_size
    show = size >= _PROGRESS_BYTES and sys.stderr.isatty()
    with _open_text(path) as f:
        if not show:
            yield from f
            return
        from tqdm import tqdm

        with tqdm(total=size, unit="B", unit_scale=True, desc=desc, leave=False) as bar:
            for line in f:
                bar.update(len(line))
                yield line


def count_words(path: Path) -> Counter[str]:
    """Token frequencies of a word-level file (``</s>`` counted once per line)."""
    counts: Counter[str] = Counter()
    n_lines = 0
    try:
        for line in _lines(path, f"counting {path.name}"):
            counts.update(line.split())
            n_lines += 1
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 text ({exc.reason})") from exc
    counts[EOS] += n_lines
    return counts


def build_word_vocab(counts: Counter[str]) -> list[str]:
    """Vocabulary by descending frequency (ties by text), with ``<unk>`` and ``</s>``."""
    counts = Counter(counts)
    for special in (EOS, UNK):
        counts.setdefault(special, 0)
    return sorted(counts, key=lambda w: (-counts[w], w))


def encode_words(path: Path, stoi: dict[str, int]) -> np.ndarray:
    """Ids of a word-level file under ``stoi`` (unknown words -> ``<unk>``), as int64."""
    unk, eos = stoi[UNK], stoi[EOS]
    ids = array.array("q")
    get = stoi.get
    try:
        for line in _lines(path, f"encoding {path.name}"):
            ids.extend([get(w, unk) for w in line.split()])
            ids.append(eos)
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 text ({exc.reason})") from exc
    return np.frombuffer(ids, dtype=np.int64) if len(ids) else np.zeros(0, np.int64)


def read_units(path: Path, level: str) -> np.ndarray:
    """The file as code points (``char``, uint32 or uint8 for ASCII) or bytes (uint8)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from exc
    raw = np.frombuffer(data, dtype=np.uint8)
    if level == "byte" or not (raw >= 128).any():
        return raw
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 text ({exc.reason})") from exc
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def encode_units(parts: Sequence[np.ndarray], level: str) -> tuple[list[np.ndarray], list[str]]:
    """Map code points/bytes to dense ids over the union of ``parts``; returns ids, itos."""
    if all(p.dtype == np.uint8 for p in parts):
        present = np.flatnonzero(sum(np.bincount(p, minlength=256) for p in parts))
        lut = np.zeros(256, dtype=np.int64)
        lut[present] = np.arange(len(present))
        ids = [lut[p] for p in parts]
        values = present
    else:
        joined = np.concatenate([p.astype(np.uint32) for p in parts])
        values, inverse = np.unique(joined, return_inverse=True)
        bounds = np.cumsum([0] + [len(p) for p in parts])
        ids = [inverse[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    itos = [chr(int(v)) for v in values]  # bytes: the latin-1 character of each value
    return ids, itos
