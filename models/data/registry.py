"""Known corpora: where their files come from, their level and split rule.

Split rules (single-file corpora split by position, no shuffling):

- ``tinyshakespeare``: first 90% of the characters train, next 5% valid, the rest test,
  with ``n_train = n * 90 // 100`` and ``n_valid = n * 5 // 100`` (1,115,394 characters ->
  1,003,854 / 55,769 / 55,771).
- ``enwik8`` (bytes) and ``text8`` (characters): the standard first 90M train, next 5M
  valid, last 5M test.
- ``wikitext-2`` / ``wikitext-103`` and ``text-files``: separate files per split.

Checksums: every download is verified (a spec with a URL must carry ``known_hash``).
Tiny Shakespeare: its sha256. The WikiText archives: the sha1 recorded by GluonNLP
(``gluonnlp/data/language_model.py``; its member-file sha1s match the ``wikitext-2-eval``
files shipped with this project). ``enwik8.zip``: the sha256 in Hugging Face datasets'
``datasets/enwik8/dataset_infos.json`` (huggingface/datasets, commit 040102f1), and the
extracted ``enwik8`` against the sha1 Matt Mahoney publishes on
http://mattmahoney.net/dc/textdata.html (quoted in dmlc/gluon-nlp
``src/gluonnlp/data/corpora/large_text_compression_benchmark.py``, commit 0b3ed83e).
``text8.zip`` and the extracted ``text8``: the sha1s of dmlc/gluon-nlp
``gluonnlp/data/corpora/text8.py`` (commit a947d66d), which downloads the same URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.verified import check_hash_form
from sublayer_search.spaces.records import main_metric_for_level

__all__ = [
    "CORPORA",
    "LEVELS",
    "CorpusInfo",
    "CorpusSpec",
    "corpus_info",
    "get_spec",
    "metric_for_level",
]

LEVELS = ("char", "word", "byte")
SPLITS = ("train", "valid", "test")
ALL = "all"  # the split key of single-file corpora

_WIKITEXT_FILES = {
    "train": ("wiki.train.tokens", "train.txt"),
    "valid": ("wiki.valid.tokens", "valid.txt"),
    "test": ("wiki.test.tokens", "test.txt"),
}
_S3 = "https://s3.amazonaws.com/research.metamind.io/wikitext"


@dataclass(frozen=True, kw_only=True)
class CorpusSpec:
    """Internal description of one corpus (see module docstring for the split rules)."""

    name: str
    level: str
    files: Mapping[str, tuple[str, ...]]  # split (or "all") -> accepted file names, canonical first
    url: str | None = None  # file or .zip archive
    known_hash: str | None = None  # pooch form "alg:hex" of the download; required with url
    members: Mapping[str, str] = field(default_factory=dict)  # canonical name -> archive member
    member_hashes: Mapping[str, str] = field(default_factory=dict)  # canonical -> "alg:hex"
    fixed_split: tuple[int, int] | None = None  # (n_train, n_valid) for single-file corpora
    expected_size: int | None = None  # bytes of the single file, checked after download
    vocab_size: int | None = None
    extra_dirs: tuple[str, ...] = ()  # more sub-folders of the data dir (partial copies)

    def __post_init__(self) -> None:
        if self.url is not None and self.known_hash is None:
            raise DataError(f"{self.name}: a download URL needs known_hash (got None)")
        if self.known_hash is not None:
            check_hash_form(self.known_hash, f"{self.name}.known_hash")
        for canonical, value in self.member_hashes.items():
            if canonical not in self.members:
                raise DataError(
                    f"{self.name}.member_hashes: got {canonical!r}, expected one "
                    f"of the members {sorted(self.members)}"
                )
            check_hash_form(value, f"{self.name}.member_hashes[{canonical!r}]")

    @property
    def single_file(self) -> bool:
        return ALL in self.files

    @property
    def archive_name(self) -> str | None:
        return None if self.url is None else self.url.rsplit("/", 1)[-1]


CORPORA: dict[str, CorpusSpec] = {
    spec.name: spec
    for spec in (
        CorpusSpec(
            name="tinyshakespeare",
            level="char",
            files={ALL: ("input.txt",)},
            url="https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
            "tinyshakespeare/input.txt",
            known_hash="sha256:86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
            vocab_size=65,
        ),
        CorpusSpec(
            name="wikitext-2",
            level="word",
            files=_WIKITEXT_FILES,
            url=f"{_S3}/wikitext-2-v1.zip",
            known_hash="sha1:3c914d17d80b1459be871a5039ac23e752a53cbe",
            members={n[0]: f"wikitext-2/{n[0]}" for n in _WIKITEXT_FILES.values()},
            vocab_size=33278,
            extra_dirs=("wikitext-2-eval",),
        ),
        CorpusSpec(
            name="wikitext-103",
            level="word",
            files=_WIKITEXT_FILES,
            url=f"{_S3}/wikitext-103-v1.zip",
            known_hash="sha1:0aec09a7537b58d4bb65362fee27650eeaba625a",
            members={n[0]: f"wikitext-103/{n[0]}" for n in _WIKITEXT_FILES.values()},
            vocab_size=267735,
        ),
        CorpusSpec(
            name="enwik8",
            level="byte",
            files={ALL: ("enwik8",)},
            url="https://mattmahoney.net/dc/enwik8.zip",
            # huggingface/datasets datasets/enwik8/dataset_infos.json (download_checksums)
            known_hash="sha256:547994d9980ebed1288380d652999f38a14fe291a6247c157c3d33d4932534bc",
            members={"enwik8": "enwik8"},
            # Mahoney's published SHA-1 of enwik8 (textdata.html, quoted by gluon-nlp)
            member_hashes={"enwik8": "sha1:57b8363b814821dc9d47aa4d41f58733519076b2"},
            fixed_split=(90_000_000, 5_000_000),
            expected_size=100_000_000,
        ),
        CorpusSpec(
            name="text8",
            level="char",
            files={ALL: ("text8",)},
            url="https://mattmahoney.net/dc/text8.zip",
            # dmlc/gluon-nlp gluonnlp/data/corpora/text8.py: archive_file and data_file sha1s
            known_hash="sha1:6c70299b93b7e1f927b42cd8f6ac1a31547c7a2e",
            members={"text8": "text8"},
            member_hashes={"text8": "sha1:0dc3edebc970dcc96137e7deda4d9995af9d93de"},
            fixed_split=(90_000_000, 5_000_000),
            expected_size=100_000_000,
            vocab_size=27,
        ),
        CorpusSpec(
            name="text-files",
            level="char",
            files={"train": ("train.txt",), "valid": ("valid.txt",), "test": ("test.txt",)},
        ),
    )
}


def get_spec(name: str) -> CorpusSpec:
    """The spec of a known corpus; DataError naming the choices otherwise."""
    try:
        return CORPORA[name]
    except (KeyError, TypeError):
        raise DataError(f"data.name: got {name!r}, expected one of {', '.join(CORPORA)}") from None


def metric_for_level(level: str) -> str:
    """Main validation metric: "val_ppl" for word level, "val_bpc" for char/byte."""
    if level not in LEVELS:
        raise DataError(f"data.level: got {level!r}, expected one of {', '.join(LEVELS)}")
    return main_metric_for_level(level)


@dataclass(frozen=True, kw_only=True)
class CorpusInfo:
    """What is known about a corpus without reading it."""

    name: str
    level: str
    vocab_size: int | None  # fixed, known size; None when it depends on the files
    files: tuple[str, ...]  # canonical file names (inside the corpus folder)
    url: str | None
    sha256: str | None  # sha256 of the downloaded file, when known
    known_hash: str | None  # the hash the download is checked against ("alg:hex")
    metric: str


def corpus_info(name: str) -> CorpusInfo:
    """Static facts about a registered corpus."""
    spec = get_spec(name)
    sha256 = None
    if spec.known_hash is not None and spec.known_hash.startswith("sha256:"):
        sha256 = spec.known_hash.split(":", 1)[1]
    return CorpusInfo(
        name=spec.name,
        level=spec.level,
        vocab_size=spec.vocab_size,
        files=tuple(names[0] for names in spec.files.values()),
        url=spec.url,
        sha256=sha256,
        known_hash=spec.known_hash,
        metric=metric_for_level(spec.level),
    )
