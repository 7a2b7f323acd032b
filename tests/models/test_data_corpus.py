"""Tiny Shakespeare, text files, caching and the file resolution order."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from sublayer_search.models.data import (
    CORPORA,
    DataConfig,
    DataError,
    corpus_info,
    load_corpus,
    metrics_from_loss,
    split_sizes,
)

TS_CHARS = 1_115_394


@pytest.fixture(autouse=True)
def _no_network(monkeypatch):
    # any accidental download goes to a closed local port, never the internet
    monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", "http://127.0.0.1:9/none")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture(scope="module")
def ts_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("ts-cache")


def test_tinyshakespeare_from_shared_data(shared_data, ts_cache):
    cfg = DataConfig(name="tinyshakespeare", cache_dir=str(ts_cache), download=False)
    corpus = load_corpus(cfg)  # SUBLAYER_DATA_DIR points at shared_data (tests/conftest.py)
    assert corpus.files["all"] == shared_data / "tinyshakespeare" / "input.txt"
    assert corpus.vocab_size == 65 == corpus_info("tinyshakespeare").vocab_size
    assert corpus.level == "char" and corpus.metric == "val_bpc"
    sizes = (len(corpus.train), len(corpus.valid), len(corpus.test))
    assert sizes == (1_003_854, 55_769, 55_771) and sum(sizes) == TS_CHARS
    for split in (corpus.train, corpus.valid, corpus.test):
        assert isinstance(split, np.memmap) and split.dtype == np.uint16
    assert not corpus.train.flags.writeable
    text = (shared_data / "tinyshakespeare" / "input.txt").read_text()
    assert corpus.decode(corpus.train[:40]) == text[:40]
    assert corpus.decode(corpus.test) == text[-55_771:]
    assert corpus.itos == tuple(sorted(set(text)))


def test_token_cache_is_reused(ts_cache):
    cfg = DataConfig(name="tinyshakespeare", cache_dir=str(ts_cache), download=False)
    first = load_corpus(cfg)
    files = sorted(first.cache_path.iterdir())
    assert [p.name for p in files] == ["meta.json", "test.npy", "train.npy", "valid.npy"]
    stamps = {p: p.stat().st_mtime_ns for p in files}
    second = load_corpus(cfg)
    assert second.cache_path == first.cache_path
    assert {p: p.stat().st_mtime_ns for p in files} == stamps  # not rewritten
    assert np.array_equal(second.valid, first.valid)
    assert first.cache_path.parent == ts_cache / "tokens"


def _ts(folder: Path, text: str) -> Path:
    (folder / "tinyshakespeare").mkdir(parents=True, exist_ok=True)
    path = folder / "tinyshakespeare" / "input.txt"
    path.write_text(text * 20, encoding="utf-8")
    return path


def test_resolution_order(tmp_path, monkeypatch):
    env, data, explicit, cache = (tmp_path / n for n in ("env", "data", "explicit", "cache"))
    paths = {n: _ts(f, n + " text\n") for n, f in
             [("env", env), ("data", data), ("explicit", explicit), ("cache", cache)]}  # fmt: skip
    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(env))

    def used(**kw) -> Path:
        cfg = DataConfig(name="tinyshakespeare", cache_dir=str(cache), download=False, **kw)
        return load_corpus(cfg).files["all"]

    folder = str(explicit / "tinyshakespeare")
    assert used(path=folder, data_dir=str(data)) == paths["explicit"]
    assert used(path=str(paths["explicit"])) == paths["explicit"]  # the file itself
    assert used(data_dir=str(data)) == paths["data"]  # data_dir overrides the env var
    assert used() == paths["env"]
    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(tmp_path / "nowhere"))
    assert used() == paths["cache"]
    monkeypatch.delenv("SUBLAYER_DATA_DIR")
    assert used() == paths["cache"]
    # different content -> different token cache entries
    a = load_corpus(DataConfig(name="tinyshakespeare", data_dir=str(data), cache_dir=str(cache)))
    b = load_corpus(DataConfig(name="tinyshakespeare", data_dir=str(env), cache_dir=str(cache)))
    assert a.cache_path != b.cache_path
    assert a.decode(a.train[:4]) == "data" and b.decode(b.train[:3]) == "env"


def test_explicit_path_is_exclusive(tmp_path):
    _ts(tmp_path / "data", "hello\n")
    (tmp_path / "explicit").mkdir()
    cfg = DataConfig(
        name="tinyshakespeare",
        path=str(tmp_path / "explicit"),
        data_dir=str(tmp_path / "data"),
        cache_dir=str(tmp_path / "cache"),
    )
    with pytest.raises(DataError, match="input.txt") as info:
        load_corpus(cfg)
    assert "data.path" in str(info.value)


def test_missing_offline_names_the_file(tmp_path, monkeypatch):
    monkeypatch.delenv("SUBLAYER_DATA_DIR")
    cfg = DataConfig(name="text8", cache_dir=str(tmp_path / "cache"), download=False)
    with pytest.raises(DataError) as info:
        load_corpus(cfg)
    text = str(info.value)
    assert "cannot find text8" in text
    assert str(tmp_path / "cache" / "text8") in text
    assert "SUBLAYER_DATA_DIR" in text and "not set" in text
    assert "data.download=false" in text and "mattmahoney.net" in text


def test_text_files_char_level(tmp_path):
    train, valid = tmp_path / "a.txt", tmp_path / "b.txt"
    train.write_text("hello wörld\n", encoding="utf-8")
    valid.write_text("hold the line\n", encoding="utf-8")
    cfg = DataConfig(
        name="text-files", train_path=str(train), valid_path=str(valid), cache_dir=str(tmp_path)
    )
    corpus = load_corpus(cfg)
    assert corpus.level == "char"
    assert corpus.decode(corpus.train) == "hello wörld\n"
    assert corpus.decode(corpus.valid) == "hold the line\n"
    assert len(corpus.test) == 0
    assert corpus.itos == tuple(sorted(set("hello wörld\nhold the line\n")))


def test_text_files_word_level_from_folder(tmp_path):
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "train.txt").write_text("the cat\nthe dog\n", encoding="utf-8")
    (folder / "valid.txt").write_text("the bird\n", encoding="utf-8")
    (folder / "test.txt").write_text("\ncat\n", encoding="utf-8")
    cfg = DataConfig(name="text-files", path=str(folder), level="word", cache_dir=str(tmp_path))
    corpus = load_corpus(cfg)
    assert corpus.level == "word" and corpus.metric == "val_ppl"
    assert corpus.itos == ("</s>", "the", "cat", "dog", "<unk>")
    assert corpus.decode(corpus.valid) == "the <unk> </s>"
    assert corpus.decode(corpus.test) == "</s> cat </s>"


def test_byte_level_enwik8_split(tmp_path, monkeypatch):
    # a small stand-in file with the same byte-level path (the real split is 90M/5M/rest)
    monkeypatch.setitem(CORPORA, "enwik8", replace(CORPORA["enwik8"], fixed_split=(90, 5)))
    data = bytes(range(200, 250)) + b"<page>wiki</page>" * 3
    folder = tmp_path / "enwik8"
    folder.mkdir()
    (folder / "enwik8").write_bytes(data)
    cfg = DataConfig(name="enwik8", data_dir=str(tmp_path), cache_dir=str(tmp_path / "c"))
    corpus = load_corpus(cfg)
    assert corpus.level == "byte" and corpus.metric == "val_bpc"
    assert (len(corpus.train), len(corpus.valid), len(corpus.test)) == (90, 5, len(data) - 95)
    assert corpus.vocab_size == len(set(data))
    assert corpus.decode(corpus.train).encode("latin-1") == data[:90]


def test_split_sizes_standard_rules():
    assert split_sizes(100_000_000, CORPORA["text8"]) == (90_000_000, 5_000_000, 5_000_000)
    assert split_sizes(TS_CHARS, CORPORA["tinyshakespeare"]) == (1_003_854, 55_769, 55_771)
    with pytest.raises(DataError, match="expected more than 95000000"):
        split_sizes(1000, CORPORA["enwik8"])


def test_data_config_validation():
    with pytest.raises(DataError) as info:
        DataConfig(name="foo")
    assert str(info.value) == (
        "data.name: got 'foo', expected one of tinyshakespeare, wikitext-2, wikitext-103, "
        "enwik8, text8, text-files"
    )
    with pytest.raises(DataError, match=r"^data\.train_path: got None"):
        DataConfig(name="text-files", valid_path="v.txt")
    with pytest.raises(DataError, match=r"^data\.level: got 'word', expected null or 'char'"):
        DataConfig(name="tinyshakespeare", level="word")
    with pytest.raises(DataError, match=r"^data\.level: got 'byte'"):
        DataConfig(name="text-files", path="x", level="byte")
    with pytest.raises(DataError, match=r"^data\.train_path: .*one file split by position"):
        DataConfig(name="enwik8", train_path="x")
    with pytest.raises(DataError, match=r"^data\.cache_dir: got ''"):
        DataConfig(name="text8", cache_dir="")
    with pytest.raises(DataError, match=r"^data\.download"):
        DataConfig(name="text8", download="yes")  # type: ignore[arg-type]
    with pytest.raises(DataError, match=r"^data\.valid_path: got 'nope.txt'"):
        load_corpus(DataConfig(name="text-files", train_path=__file__, valid_path="nope.txt"))
    assert isinstance(DataError("x"), ValueError)


def test_corpus_info():
    ts = corpus_info("tinyshakespeare")
    assert (ts.level, ts.files, ts.metric) == ("char", ("input.txt",), "val_bpc")
    assert ts.sha256 == "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
    wt2 = corpus_info("wikitext-2")
    assert (wt2.level, wt2.vocab_size, wt2.metric) == ("word", 33278, "val_ppl")
    assert wt2.files == ("wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens")
    assert wt2.url.endswith("wikitext-2-v1.zip") and wt2.known_hash.startswith("sha1:")
    assert corpus_info("wikitext-103").vocab_size == 267735
    assert corpus_info("text8").vocab_size == 27
    e8 = corpus_info("enwik8")
    assert (e8.level, e8.vocab_size, e8.metric) == ("byte", None, "val_bpc")
    assert e8.url.startswith("https://") and e8.sha256 == e8.known_hash.split(":")[1]
    with pytest.raises(DataError, match="data.name: got 'ptb'"):
        corpus_info("ptb")


def test_wikitext_eval_member_hashes_match_registry_source(shared_data):
    # GluonNLP's sha1 of wiki.valid.tokens, the source of the registry's archive sha1s
    digest = hashlib.sha1((shared_data / "wikitext-2-eval" / "valid.txt").read_bytes())
    assert digest.hexdigest() == "0418625c8b4da6e4b5c7a0b9e78d4ae8f7ee5422"


def test_metrics_from_loss():
    assert metrics_from_loss(np.log(100.0), "word") == pytest.approx(
        {"loss": np.log(100), "ppl": 100}
    )
    m = metrics_from_loss(np.log(2.0) * 1.5, "char")
    assert set(m) == {"loss", "bpc", "ppl"} and m["bpc"] == pytest.approx(1.5)
    assert metrics_from_loss(2.0, "byte")["bpc"] == pytest.approx(2.0 / np.log(2))
    assert metrics_from_loss(1e4, "word")["ppl"] == float("inf")
    with pytest.raises(DataError):
        metrics_from_loss(1.0, "bpe")
