"""Parallel corpora for translation: registry, file lookup, BPE vocabulary, batching.

Registered corpora (``PARALLEL_CORPORA``)::

    multi30k        German–English raw text: train / val / test2016 .{de,en}
                    (downloadable: the multi30k/dataset repository's data/task1/raw *.gz)
    iwslt14-de-en   fairseq's prepare-iwslt14.sh output: {train,valid,test}.{de,en}
    wmt14-en-de     fairseq's prepare-wmt14en2de.sh output: {train,valid,test}.{en,de}
    parallel-files  your own files: train_src/train_tgt/valid_src/valid_tgt(/test_*)

Lookup per split mirrors :mod:`models.data.download`: explicit ``*_src``/``*_tgt``
paths -> ``path`` (a folder; exclusive when set) -> ``data_dir`` (else
``$SUBLAYER_DATA_DIR``) ``/<name>/`` -> the cache ``/<name>/`` -> download (multi30k only).
No published checksums are known for the multi30k ``.gz`` files: downloads are
unverified (like enwik8/text8).

Text handling:

* Lines are split on ``\\n`` only (``\\r`` stripped), so both sides of a pair stay
  aligned even when a line holds exotic Unicode separators. Files of one split with
  different line counts raise :class:`DataError` naming both files and counts.
* Pairs whose two sides are both blank are dropped (Multi30k's files end in a blank
  line); training pairs with one blank side are dropped too; validation/test pairs are
  kept as they are.
* fairseq-prepared corpora (iwslt14-de-en, wmt14-en-de) are already Moses-tokenised and
  BPE-split with ``@@`` continuation markers. We *undo* that BPE (``"@@ "`` removed,
  ``strip_bpe``), which gives fairseq's tokenised text, and learn our own BPE on it. The
  BLEU references are then that Moses-tokenised text, so BLEU on these corpora is
  "tokenised BLEU" (sacrebleu's 13a tokenisation on top), not comparable to
  detokenised sacreBLEU of raw text.

Vocabulary: byte-pair encoding learned with HF ``tokenizers`` on the training split
(joint over both languages when ``shared_vocab``, else one per language), pre-tokenised
with Metaspace (``▁`` marks a preceding space) + punctuation splitting, so
:meth:`ParallelCorpus.decode` returns detokenised text (whitespace normalised to single
spaces). Special ids: ``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3. The trainer is
deterministic for a given input and vocabulary size.

Caching: ``<cache>/bpe/<name>-<key16>/{joint|src|tgt}.json`` keyed by the sha256 of the
training files, languages, vocabulary settings and ``PARALLEL_VERSION``; beside it
``<cache>/tokens/<name>-<src>-<tgt>-<key16>/`` with the id arrays of every split
(``<split>.<side>.npy`` flat ids + ``<split>.<side>.off.npy`` offsets) and ``meta.json``
(written last, atomically).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from sublayer_search.models.data.cache import atomic_write, file_sha256
from sublayer_search.models.data.download import ENV_DATA_DIR, ENV_DOWNLOAD_BASE, default_cache_dir
from sublayer_search.models.data.errors import DataError

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "PARALLEL_CORPORA",
    "PARALLEL_VERSION",
    "SPECIALS",
    "UNK",
    "PairBatch",
    "ParallelCorpus",
    "ParallelDataConfig",
    "ParallelSpec",
    "ParallelSplit",
    "collate_pairs",
    "eval_pair_batches",
    "fetch_parallel",
    "load_parallel",
    "parallel_info",
    "random_pairs",
    "read_lines",
    "read_pairs",
    "resolve_parallel_files",
    "train_bpe",
]

PARALLEL_VERSION = "1"  # bump when a text or BPE rule changes: invalidates the caches
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
SPLITS = ("train", "valid", "test")
_M30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"


@dataclass(frozen=True, kw_only=True)
class ParallelSpec:
    """A registered parallel corpus: split -> accepted file stems, languages, source."""

    name: str
    src_lang: str
    tgt_lang: str
    stems: Mapping[str, tuple[str, ...]]  # split -> file stems, canonical first
    urls: Mapping[str, str] = field(default_factory=dict)  # "<stem>.<lang>" -> .gz URL
    fairseq_bpe: bool = False  # files carry fairseq's "@@ " BPE markers
    note: str = ""


PARALLEL_CORPORA: dict[str, ParallelSpec] = {
    s.name: s
    for s in (
        ParallelSpec(
            name="multi30k",
            src_lang="de",
            tgt_lang="en",
            stems={"train": ("train",), "valid": ("val", "valid"),
                   "test": ("test2016", "test_2016_flickr", "test")},
            urls={f"{stem}.{lang}": f"{_M30K}/{remote}.{lang}.gz"
                  for stem, remote in (("train", "train"), ("val", "val"),
                                       ("test2016", "test_2016_flickr"))
                  for lang in ("de", "en")},
            note="Multi30k task 1 (Elliott et al. 2016), raw text; unverified download",
        ),
        ParallelSpec(
            name="iwslt14-de-en",
            src_lang="de",
            tgt_lang="en",
            stems={"train": ("train",), "valid": ("valid",), "test": ("test",)},
            fairseq_bpe=True,
            note="run fairseq's examples/translation/prepare-iwslt14.sh and place its "
                 "iwslt14.tokenized.de-en/{train,valid,test}.{de,en}",
        ),
        ParallelSpec(
            name="wmt14-en-de",
            src_lang="en",
            tgt_lang="de",
            stems={"train": ("train",), "valid": ("valid",), "test": ("test",)},
            fairseq_bpe=True,
            note="run fairseq's examples/translation/prepare-wmt14en2de.sh and place its "
                 "wmt14_en_de/{train,valid,test}.{en,de}",
        ),
        ParallelSpec(
            name="parallel-files",
            src_lang="src",
            tgt_lang="tgt",
            stems={"train": ("train",), "valid": ("valid",), "test": ("test",)},
            note="give data.train_src/train_tgt/valid_src/valid_tgt (and test_*), or a "
                 "folder in data.path with {train,valid,test}.{src_lang,tgt_lang}",
        ),
    )
}


def _spec(name: str) -> ParallelSpec:
    try:
        return PARALLEL_CORPORA[name]
    except (KeyError, TypeError):
        raise DataError(
            f"data.name: got {name!r}, expected one of {', '.join(PARALLEL_CORPORA)}"
        ) from None


def parallel_info(name: str) -> ParallelSpec:
    """The registry entry of a parallel corpus (DataError for unknown names)."""
    return _spec(name)


def _bad(field_: str, value: Any, expected: str) -> DataError:
    return DataError(f"data.{field_}: got {value!r}, expected {expected}")


@dataclass(frozen=True, kw_only=True)
class ParallelDataConfig:
    """Which parallel corpus to load, where from, and how to build its vocabulary.

    ``src_lang``/``tgt_lang`` default to the corpus's direction (multi30k de→en);
    ``vocab_size`` is the BPE size (per language when ``shared_vocab`` is false);
    ``max_train_tokens`` drops training pairs with more BPE tokens on either side;
    ``max_train_pairs`` keeps only the first pairs of the training split (after
    filtering); ``strip_bpe=None`` undoes fairseq's ``@@`` markers exactly for the
    fairseq-prepared corpora.
    """

    name: str
    src_lang: str | None = None
    tgt_lang: str | None = None
    path: str | None = None
    train_src: str | None = None
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    test_src: str | None = None
    test_tgt: str | None = None
    data_dir: str | None = None
    cache_dir: str | None = None
    download: bool = True
    vocab_size: int = 8000
    shared_vocab: bool = True
    max_train_tokens: int | None = None
    max_train_pairs: int | None = None
    strip_bpe: bool | None = None

    def __post_init__(self) -> None:
        spec = _spec(self.name)
        paths = ("path", "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src",
                 "test_tgt", "data_dir", "cache_dir")
        for name in paths:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise _bad(name, value, "a non-empty path or null")
        for name, default in (("src_lang", spec.src_lang), ("tgt_lang", spec.tgt_lang)):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, default)
            elif not isinstance(value, str) or not value.isidentifier():
                raise _bad(name, value, "a language code such as 'de' or null")
        if self.src_lang == self.tgt_lang:
            raise _bad("tgt_lang", self.tgt_lang, f"a language other than src_lang ({self.src_lang})")
        for name in ("download", "shared_vocab"):
            if not isinstance(getattr(self, name), bool):
                raise _bad(name, getattr(self, name), "true or false")
        if self.strip_bpe is not None and not isinstance(self.strip_bpe, bool):
            raise _bad("strip_bpe", self.strip_bpe, "true, false or null (automatic)")
        if not (_int(self.vocab_size) and self.vocab_size >= len(SPECIALS) + 1):
            raise _bad("vocab_size", self.vocab_size, f"an integer >= {len(SPECIALS) + 1}")
        for name in ("max_train_tokens", "max_train_pairs"):
            value = getattr(self, name)
            if value is not None and not (_int(value) and value > 0):
                raise _bad(name, value, "a positive integer or null")
        for split in SPLITS:
            src, tgt = getattr(self, f"{split}_src"), getattr(self, f"{split}_tgt")
            if (src is None) != (tgt is None):
                missing = f"{split}_tgt" if tgt is None else f"{split}_src"
                raise _bad(missing, None, f"a file path (given together with {split}_"
                                          f"{'src' if tgt is None else 'tgt'})")
        if self.name == "parallel-files" and self.path is None and not (
            self.train_src and self.valid_src
        ):
            raise _bad("train_src", self.train_src, "file paths: parallel-files needs "
                       "train_src/train_tgt and valid_src/valid_tgt, or a folder in data.path")

    @property
    def strips_bpe(self) -> bool:
        return _spec(self.name).fairseq_bpe if self.strip_bpe is None else self.strip_bpe


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- reading ---------------------------------------------------------------------------


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 file, split on ``\\n`` only (a final newline ends the last line)."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 text ({exc.reason})") from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r") for line in lines]


def _unbpe(line: str) -> str:
    line = (line + " ").replace("@@ ", "")
    return line.rstrip()


def read_pairs(src: Path, tgt: Path, *, strip_bpe: bool = False) -> tuple[list[str], list[str]]:
    """Aligned lines of two files (both-blank pairs dropped, whitespace normalised).

    Raises DataError naming both files and their line counts when they differ.
    """
    a, b = read_lines(src), read_lines(tgt)
    if len(a) != len(b):
        raise DataError(
            f"parallel files differ in length: {src} has {len(a)} lines but {tgt} has "
            f"{len(b)} lines (expected one line per sentence on both sides)"
        )
    out_a, out_b = [], []
    for x, y in zip(a, b, strict=True):
        if strip_bpe:
            x, y = _unbpe(x), _unbpe(y)
        x, y = " ".join(x.split()), " ".join(y.split())
        if x or y:
            out_a.append(x)
            out_b.append(y)
    return out_a, out_b


# -- finding files ---------------------------------------------------------------------


def _roots(cfg: ParallelDataConfig) -> tuple[Path | None, Path]:
    data = cfg.data_dir or os.environ.get(ENV_DATA_DIR)
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else default_cache_dir()
    return (Path(data).expanduser() if data else None), cache


def _folders(cfg: ParallelDataConfig) -> list[Path]:
    if cfg.path is not None:
        return [Path(cfg.path).expanduser()]
    if cfg.name == "parallel-files":
        return []
    data, cache = _roots(cfg)
    return ([data / cfg.name] if data else []) + [cache / cfg.name]


def _find_pair(folders: list[Path], stems: tuple[str, ...], src: str, tgt: str):
    for folder in folders:
        for stem in stems:
            a, b = folder / f"{stem}.{src}", folder / f"{stem}.{tgt}"
            if a.is_file() and b.is_file():
                return a, b
    return None


def fetch_parallel(spec: ParallelSpec, dest: Path, *, base: str | None = None) -> list[Path]:
    """Download and gunzip ``spec``'s files into ``dest`` (no known checksums: unverified).

    ``base`` (else ``$SUBLAYER_DOWNLOAD_BASE``) replaces everything before the file name.
    """
    import gzip

    import pooch
    import requests

    if not spec.urls:
        raise DataError(f"{spec.name}: this corpus cannot be downloaded; {spec.note}")
    base = base if base is not None else os.environ.get(ENV_DOWNLOAD_BASE)
    downloads = dest.parent / "downloads"
    placed = []
    for target, url in spec.urls.items():
        if (dest / target).is_file():
            continue
        fname = url.rsplit("/", 1)[-1]
        if base:
            url = f"{base.rstrip('/')}/{fname}"
        try:
            archive = pooch.retrieve(url, None, fname=f"{spec.name}.{fname}", path=downloads,
                                     progressbar=False)
        except requests.exceptions.RequestException as exc:
            raise DataError(f"{spec.name}: download of {url} failed: {exc}") from exc
        try:
            with gzip.open(archive, "rb") as f:
                data = f.read()
        except (OSError, EOFError) as exc:
            raise DataError(f"{spec.name}: {url} is not a readable gzip file ({exc})") from exc
        atomic_write(dest / target, lambda f, data=data: f.write(data))
        os.remove(archive)
        placed.append(dest / target)
    return placed


def resolve_parallel_files(cfg: ParallelDataConfig) -> dict[str, tuple[Path, Path]]:
    """Split -> (source file, target file); train and valid are required, test optional."""
    spec = _spec(cfg.name)
    src, tgt = cfg.src_lang, cfg.tgt_lang
    assert src is not None and tgt is not None
    found: dict[str, tuple[Path, Path]] = {}
    for split in SPLITS:
        a, b = getattr(cfg, f"{split}_src"), getattr(cfg, f"{split}_tgt")
        if a is not None:
            for name, value in ((f"{split}_src", a), (f"{split}_tgt", b)):
                if not Path(value).expanduser().is_file():
                    raise _bad(name, value, "an existing file")
            found[split] = (Path(a).expanduser(), Path(b).expanduser())
    folders = _folders(cfg)

    def search() -> None:
        for split in SPLITS:
            if split not in found and (hit := _find_pair(folders, spec.stems[split], src, tgt)):
                found[split] = hit

    search()
    failure = None
    if ("train" not in found or "valid" not in found) and spec.urls and cfg.download \
            and cfg.path is None:
        try:
            fetch_parallel(spec, _roots(cfg)[1] / cfg.name)
        except DataError as exc:
            failure = str(exc)
        search()
    missing = [s for s in ("train", "valid") if s not in found]
    if missing:
        wanted = "; ".join(f"{spec.stems[s][0]}.{src} and {spec.stems[s][0]}.{tgt} ({s} split)"
                           for s in missing)
        looked = ", ".join(str(f) for f in folders) or "(no folder: give the file paths)"
        data, cache = _roots(cfg)
        target = data / cfg.name if data else f"<data dir>/{cfg.name} (${ENV_DATA_DIR} is unset)"
        msg = (f"{cfg.name}: cannot find {wanted}. Looked in: {looked}. Place the files in "
               f"{target} or {cache / cfg.name}" + (f" ({spec.note})." if spec.note else "."))
        if failure:
            msg += f" Download failed: {failure}"
        raise DataError(msg)
    return found


# -- vocabulary --------------------------------------------------------------------------


def train_bpe(lines: Sequence[str], vocab_size: int):
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


def _load_tokenizer(path: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


def _encode(tok, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    encoded = tok.encode_batch(list(lines), add_special_tokens=False) if lines else []
    lengths = np.fromiter((len(e.ids) for e in encoded), dtype=np.int64, count=len(encoded))
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    ids = np.fromiter((i for e in encoded for i in e.ids), dtype=np.int32, count=int(offsets[-1]))
    return ids, offsets


# -- the corpus ----------------------------------------------------------------------------


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


def load_parallel(cfg: ParallelDataConfig) -> ParallelCorpus:
    """Find the files, learn (or reuse) the BPE vocabulary and encode every split (cached).

    The training text is read only when the BPE or the token cache must be built.
    """
    files = resolve_parallel_files(cfg)
    _, cache = _roots(cfg)
    strip = cfg.strips_bpe
    text = {s: read_pairs(a, b, strip_bpe=strip) for s, (a, b) in files.items() if s != "train"}
    text.setdefault("test", ([], []))
    hashes = {s: (file_sha256(a), file_sha256(b)) for s, (a, b) in files.items()}
    common = (f"v{PARALLEL_VERSION}", cfg.name, f"{cfg.src_lang}-{cfg.tgt_lang}",
              f"strip={strip}", f"max_tokens={cfg.max_train_tokens}",
              f"max_pairs={cfg.max_train_pairs}")
    bpe_key = _key(*common[:4], f"vocab={cfg.vocab_size}", f"shared={cfg.shared_vocab}",
                   *hashes["train"])
    bpe_dir = cache / "bpe" / f"{cfg.name}-{bpe_key[:16]}"
    train_text: list[tuple[list[str], list[str]]] = []  # read at most once, when needed

    def train_pairs() -> tuple[list[str], list[str]]:
        if not train_text:
            train_text.append(read_pairs(*files["train"], strip_bpe=strip))
        return train_text[0]

    src_tok, tgt_tok = _tokenizers(cfg, bpe_dir, train_pairs)
    tok_key = _key(bpe_key, *common, *(h for s in sorted(hashes) for h in hashes[s]))
    folder = cache / "tokens" / f"{cfg.name}-{cfg.src_lang}-{cfg.tgt_lang}-{tok_key[:16]}"
    arrays = _load_arrays(folder)
    if arrays is None:
        arrays = {}
        for split, (a, b) in {"train": train_pairs(), **text}.items():
            arrays[f"{split}.src"] = _encode(src_tok, a)
            arrays[f"{split}.tgt"] = _encode(tgt_tok, b)
        arrays = _filter_train(arrays, cfg)
        _save_arrays(folder, arrays)
    splits = {}
    for split in SPLITS:
        a, b = text.get(split, ((), ()))
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


def _tokenizers(cfg: ParallelDataConfig, folder: Path, train: Callable[[], tuple[list, list]]):
    names = ("joint",) if cfg.shared_vocab else ("src", "tgt")
    paths = [folder / f"{n}.json" for n in names]
    if not all(p.is_file() for p in paths):
        src, tgt = train()
        corpora = [src + tgt] if cfg.shared_vocab else [src, tgt]
        for path, lines in zip(paths, corpora, strict=True):
            tok = train_bpe(lines, cfg.vocab_size)
            data = tok.to_str().encode("utf-8")
            atomic_write(path, lambda f, data=data: f.write(data))
    toks = [_load_tokenizer(p) for p in paths]
    return (toks[0], toks[0]) if cfg.shared_vocab else (toks[0], toks[1])


def _filter_train(arrays: dict[str, tuple[np.ndarray, np.ndarray]], cfg: ParallelDataConfig):
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
        atomic_write(folder / f"{name}.npy", lambda f, ids=ids: np.save(f, ids))
        atomic_write(folder / f"{name}.off.npy", lambda f, off=off: np.save(f, off))
    meta = {"version": PARALLEL_VERSION, "sizes": {k: len(v[1]) - 1 for k, v in arrays.items()}}
    text = json.dumps(meta).encode()
    atomic_write(folder / "meta.json", lambda f: f.write(text))


def _load_arrays(folder: Path) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
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


# -- batching ------------------------------------------------------------------------------


class PairBatch(NamedTuple):
    """Padded sentence pairs (pad id 0, right padding).

    ``src`` (B, S): source ids + ``</s>``; ``tgt_in`` (B, T): ``<s>`` + target ids;
    ``tgt_out`` (B, T): target ids + ``</s>``; ``index`` (B,): sentence numbers in the
    split; ``n_tokens``: non-pad entries of ``tgt_out``.
    """

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    index: torch.Tensor
    n_tokens: int


def collate_pairs(
    split: ParallelSplit,
    index: Sequence[int] | np.ndarray,
    *,
    max_src: int | None = None,
    max_tgt: int | None = None,
    pad_id: int = 0,
    bos_id: int = 1,
    eos_id: int = 2,
) -> PairBatch:
    """Pad the pairs ``index`` of ``split``; sentences longer than ``max_src - 1`` /
    ``max_tgt - 1`` tokens are truncated (the ``</s>``/``<s>`` still fit)."""
    index = np.asarray(index, dtype=np.int64)
    srcs = [split.src(int(i)) for i in index]
    tgts = [split.tgt(int(i)) for i in index]
    if max_src is not None:
        srcs = [s[: max_src - 1] for s in srcs]
    if max_tgt is not None:
        tgts = [t[: max_tgt - 1] for t in tgts]
    b = len(index)
    s_len = max(len(s) for s in srcs) + 1
    t_len = max(len(t) for t in tgts) + 1
    src = np.full((b, s_len), pad_id, dtype=np.int64)
    tgt_in = np.full((b, t_len), pad_id, dtype=np.int64)
    tgt_out = np.full((b, t_len), pad_id, dtype=np.int64)
    for row, (s, t) in enumerate(zip(srcs, tgts, strict=True)):
        src[row, : len(s)] = s
        src[row, len(s)] = eos_id
        tgt_in[row, 0] = bos_id
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
        tgt_out[row, len(t)] = eos_id
    n_tokens = int(sum(len(t) + 1 for t in tgts))
    return PairBatch(torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out),
                     torch.from_numpy(index), n_tokens)


def random_pairs(
    split: ParallelSplit,
    *,
    batch_size: int,
    generator: torch.Generator,
    max_src: int | None = None,
    max_tgt: int | None = None,
) -> PairBatch:
    """``batch_size`` pairs drawn uniformly (with replacement) with ``generator``."""
    index = torch.randint(len(split), (batch_size,), generator=generator).numpy()
    return collate_pairs(split, index, max_src=max_src, max_tgt=max_tgt)


def eval_pair_batches(
    split: ParallelSplit,
    *,
    batch_size: int,
    limit: int | None = None,
    max_src: int | None = None,
    max_tgt: int | None = None,
) -> Iterator[PairBatch]:
    """The first ``limit`` (default all) pairs of ``split`` in order, ``batch_size`` at a time."""
    n = len(split) if limit is None else min(limit, len(split))
    for start in range(0, n, batch_size):
        yield collate_pairs(split, range(start, min(start + batch_size, n)),
                            max_src=max_src, max_tgt=max_tgt)
