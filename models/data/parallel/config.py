"""The parallel-corpus registry and :class:`ParallelDataConfig` (see :mod:`.parallel`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sublayer_search.models.data.config import check_paths
from sublayer_search.models.data.errors import DataError, setting_error
from sublayer_search.models.data.verified import check_hash_form
from sublayer_search.models.errors import is_int, is_positive_int

__all__ = [
    "BOS",
    "EOS",
    "PAD",
    "PARALLEL_CORPORA",
    "PARALLEL_VERSION",
    "SPECIALS",
    "SPLITS",
    "UNK",
    "ParallelDataConfig",
    "ParallelSpec",
    "parallel_info",
]

PARALLEL_VERSION = "1"  # bump when a text or BPE rule changes: invalidates the caches
PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)  # ids 0, 1, 2, 3
SPLITS = ("train", "valid", "test")
_M30K = "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw"
# MD5s of the .gz files, from torchtext's Multi30k loader (pytorch/text,
# torchtext/datasets/multi30k.py, commit 6595925a; the same URLs)
_M30K_MD5 = {
    "train.de": "81ff90b99829c0cd4b1b587d394afd39",
    "train.en": "0065d13af80720a55ca8153d126e6627",
    "val.de": "6e0e229eb049e3fc99a1ef02fb2d5f91",
    "val.en": "2b69aa9253948ac9f67e94917272dd40",
    "test2016.de": "efd67d314d98489b716b145475101932",
    "test2016.en": "ff2c0fcb4893a13bd73414306bc250ae",
}


@dataclass(frozen=True, kw_only=True)
class ParallelSpec:
    """A registered parallel corpus: split -> accepted file stems, languages, source."""

    name: str
    src_lang: str
    tgt_lang: str
    stems: Mapping[str, tuple[str, ...]]  # split -> file stems, canonical first
    urls: Mapping[str, str] = field(default_factory=dict)  # "<stem>.<lang>" -> .gz URL
    hashes: Mapping[str, str] = field(default_factory=dict)  # "<stem>.<lang>" -> "alg:hex" of .gz
    fairseq_bpe: bool = False  # files carry fairseq's "@@ " BPE markers
    note: str = ""

    def __post_init__(self) -> None:
        if set(self.hashes) != set(self.urls):
            raise DataError(f"{self.name}.hashes: got {sorted(self.hashes)}, expected one "
                            f"known hash per download: {sorted(self.urls)}")
        for target, value in self.hashes.items():
            check_hash_form(value, f"{self.name}.hashes[{target!r}]")


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
            hashes={target: f"md5:{digest}" for target, digest in _M30K_MD5.items()},
            note="Multi30k task 1 (Elliott et al. 2016), raw text",
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


def parallel_info(name: str) -> ParallelSpec:
    """The registry entry of a parallel corpus (DataError for unknown names)."""
    try:
        return PARALLEL_CORPORA[name]
    except (KeyError, TypeError):
        raise DataError(
            f"data.name: got {name!r}, expected one of {', '.join(PARALLEL_CORPORA)}"
        ) from None


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
        spec = parallel_info(self.name)
        check_paths(self, ("path", "train_src", "train_tgt", "valid_src", "valid_tgt",
                           "test_src", "test_tgt", "data_dir", "cache_dir"))
        for name, default in (("src_lang", spec.src_lang), ("tgt_lang", spec.tgt_lang)):
            value = getattr(self, name)
            if value is None:
                object.__setattr__(self, name, default)
            elif not isinstance(value, str) or not value.isidentifier():
                raise setting_error(name, value, "a language code such as 'de' or null")
        if self.src_lang == self.tgt_lang:
            raise setting_error("tgt_lang", self.tgt_lang,
                                f"a language other than src_lang ({self.src_lang})")
        for name in ("download", "shared_vocab"):
            if not isinstance(getattr(self, name), bool):
                raise setting_error(name, getattr(self, name), "true or false")
        if self.strip_bpe is not None and not isinstance(self.strip_bpe, bool):
            raise setting_error("strip_bpe", self.strip_bpe, "true, false or null (automatic)")
        if not (is_int(self.vocab_size) and self.vocab_size >= len(SPECIALS) + 1):
            raise setting_error("vocab_size", self.vocab_size,
                                f"an integer >= {len(SPECIALS) + 1}")
        for name in ("max_train_tokens", "max_train_pairs"):
            value = getattr(self, name)
            if value is not None and not is_positive_int(value):
                raise setting_error(name, value, "a positive integer or null")
        for split in SPLITS:
            src, tgt = getattr(self, f"{split}_src"), getattr(self, f"{split}_tgt")
            if (src is None) != (tgt is None):
                missing = f"{split}_tgt" if tgt is None else f"{split}_src"
                raise setting_error(missing, None, f"a file path (given together with {split}_"
                                                   f"{'src' if tgt is None else 'tgt'})")
        if self.name == "parallel-files" and self.path is None and not (
            self.train_src and self.valid_src
        ):
            raise setting_error("train_src", self.train_src, "file paths: parallel-files "
                                "needs train_src/train_tgt and valid_src/valid_tgt, or a "
                                "folder in data.path")

    @property
    def strips_bpe(self) -> bool:
        return parallel_info(self.name).fairseq_bpe if self.strip_bpe is None else self.strip_bpe
