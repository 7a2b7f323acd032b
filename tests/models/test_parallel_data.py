"""Parallel corpora: Multi30k from the shared data, BPE, caching, files, downloads, batching."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import threading
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch

from sublayer_search.models.data.errors import DataError
from sublayer_search.models.data.parallel import (
    PARALLEL_CORPORA,
    ParallelDataConfig,
    collate_pairs,
    eval_pair_batches,
    load_parallel,
    random_pairs,
    read_pairs,
)

M30K = dict(name="multi30k", vocab_size=1000, download=False)


@pytest.fixture(scope="module")
def m30k_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("m30k-cache")


@pytest.fixture(scope="module")
def m30k(shared_data, m30k_cache):
    return load_parallel(ParallelDataConfig(**M30K, cache_dir=str(m30k_cache)))


def test_multi30k_from_the_shared_data(m30k, shared_data):
    assert (m30k.src_lang, m30k.tgt_lang) == ("de", "en")
    assert len(m30k.train) == 29000  # the files' final blank line is dropped
    assert len(m30k.valid) == 1014 and len(m30k.test) == 1000
    assert m30k.src_vocab_size == m30k.tgt_vocab_size == 1000 and m30k.shared
    assert m30k.files["valid"][0] == shared_data / "multi30k" / "val.de"
    assert m30k.files["test"][1].name == "test2016.en"
    first = (shared_data / "multi30k" / "val.en").read_text(encoding="utf-8").split("\n")[0]
    assert m30k.valid.tgt_text[0] == first.strip()
    assert m30k.decode(m30k.valid.tgt(0)) == m30k.valid.tgt_text[0]


def test_bpe_round_trips_detokenised_text(m30k):
    exact = sum(m30k.decode(m30k.valid.tgt(i)) == m30k.valid.tgt_text[i]
                for i in range(len(m30k.valid)))
    assert exact >= 0.97 * len(m30k.valid)  # the rest hold characters unseen in training
    ids = m30k.encode_src(["Ein Mann fährt Fahrrad."])[0]
    assert m30k.decode_src(ids) == "Ein Mann fährt Fahrrad."
    assert all(i > 3 for i in ids)  # no specials, no <unk>


def test_cache_is_reused_and_bpe_is_deterministic(m30k, m30k_cache, tmp_path):
    again = load_parallel(ParallelDataConfig(**M30K, cache_dir=str(m30k_cache)))
    assert again.cache_path == m30k.cache_path
    assert np.array_equal(again.train.src_ids, m30k.train.src_ids)
    bpe_files = list((m30k_cache / "bpe").glob("multi30k-*/joint.json"))
    assert len(bpe_files) == 1
    fresh = load_parallel(ParallelDataConfig(**M30K, cache_dir=str(tmp_path)))
    assert next((tmp_path / "bpe").glob("multi30k-*/joint.json")).read_bytes() == \
        bpe_files[0].read_bytes()
    assert np.array_equal(fresh.valid.tgt_ids, m30k.valid.tgt_ids)
    other = load_parallel(ParallelDataConfig(**{**M30K, "vocab_size": 800},
                                             cache_dir=str(m30k_cache)))
    assert other.tgt_vocab_size == 800 and other.cache_path != m30k.cache_path


def test_filters_and_separate_vocabularies(m30k_cache, shared_data):
    c = load_parallel(ParallelDataConfig(**{**M30K, "shared_vocab": False, "vocab_size": 600,
                                            "max_train_tokens": 12, "max_train_pairs": 500},
                                         cache_dir=str(m30k_cache)))
    assert not c.shared and c.src_tokenizer is not c.tgt_tokenizer
    assert c.src_vocab_size == c.tgt_vocab_size == 600
    assert len(c.train) == 500
    assert c.train.src_lengths.max() <= 12 and c.train.tgt_lengths.max() <= 12
    assert len(c.valid) == 1014  # validation is never filtered


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_mismatched_parallel_files_name_both_files_and_counts(tmp_path):
    a = _write(tmp_path / "train.de", ["eins", "zwei", "drei"])
    b = _write(tmp_path / "train.en", ["one", "two"])
    with pytest.raises(DataError, match=r"train\.de has 3 lines but .*train\.en has 2 lines"):
        read_pairs(a, b)
    _write(tmp_path / "valid.de", ["vier"])
    _write(tmp_path / "valid.en", ["four"])
    with pytest.raises(DataError, match="has 3 lines but"):
        load_parallel(ParallelDataConfig(name="parallel-files", src_lang="de", tgt_lang="en",
                                         path=str(tmp_path), cache_dir=str(tmp_path / "c")))


def _toy(folder: Path, src: str, tgt: str, n: int = 60, marker: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    words = ["haus", "katze", "hund", "baum", "auto"]
    for split, count in (("train", n), ("valid", 8), ("test", 5)):
        a = [" ".join(words[(i + j) % 5] + (marker if j == 0 else "") + (" x" if marker else "")
                      for j in range(1 + i % 4)) for i in range(count)]
        _write(folder / f"{split}.{src}", a)
        _write(folder / f"{split}.{tgt}", [s.upper() for s in a])


def test_parallel_files_from_explicit_paths(tmp_path):
    _toy(tmp_path, "xx", "yy")
    cfg = ParallelDataConfig(
        name="parallel-files", train_src=str(tmp_path / "train.xx"),
        train_tgt=str(tmp_path / "train.yy"), valid_src=str(tmp_path / "valid.xx"),
        valid_tgt=str(tmp_path / "valid.yy"), vocab_size=60, cache_dir=str(tmp_path / "c"),
    )
    c = load_parallel(cfg)
    assert (len(c.train), len(c.valid), len(c.test)) == (60, 8, 0)
    assert c.decode(c.valid.tgt(3)) == c.valid.tgt_text[3] == c.valid.src_text[3].upper()


def test_fairseq_layout_bpe_markers_are_undone(tmp_path):
    folder = tmp_path / "data" / "iwslt14-de-en"
    _toy(folder, "de", "en", marker="@@")
    c = load_parallel(ParallelDataConfig(name="iwslt14-de-en", data_dir=str(tmp_path / "data"),
                                         cache_dir=str(tmp_path / "c"), vocab_size=60))
    assert (len(c.train), len(c.valid), len(c.test)) == (60, 8, 5)
    assert "@@" not in " ".join(c.valid.src_text)
    assert c.valid.src_text[1] == "katzex hund x"  # "katze@@ x hund x" joined back
    kept = load_parallel(ParallelDataConfig(name="iwslt14-de-en", data_dir=str(tmp_path / "data"),
                                            cache_dir=str(tmp_path / "c"), vocab_size=60,
                                            strip_bpe=False))
    assert kept.valid.src_text[1] == "katze@@ x hund x"
    assert PARALLEL_CORPORA["wmt14-en-de"].src_lang == "en" and PARALLEL_CORPORA[
        "wmt14-en-de"].fairseq_bpe


def test_missing_files_say_where_to_put_them(tmp_path):
    with pytest.raises(DataError, match=r"cannot find train\.en and train\.de .*prepare-wmt14"):
        load_parallel(ParallelDataConfig(name="wmt14-en-de", data_dir=str(tmp_path),
                                         cache_dir=str(tmp_path / "c")))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


def test_multi30k_download_from_a_local_mirror(tmp_path, monkeypatch, shared_data):
    mirror = tmp_path / "www"
    mirror.mkdir()
    hashes = {}
    for local, remote in (("train", "train"), ("val", "val"), ("test2016", "test_2016_flickr")):
        for lang in ("de", "en"):
            lines = (shared_data / "multi30k" / f"{local}.{lang}").read_bytes().split(b"\n")[:40]
            (mirror / f"{remote}.{lang}.gz").write_bytes(gzip.compress(b"\n".join(lines)))
            hashes[f"{local}.{lang}"] = "md5:" + hashlib.md5(
                (mirror / f"{remote}.{lang}.gz").read_bytes()).hexdigest()
    # downloads are verified: the mirror's files (heads of the corpus) get their own md5s
    monkeypatch.setitem(PARALLEL_CORPORA, "multi30k",
                        replace(PARALLEL_CORPORA["multi30k"], hashes=hashes))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(mirror)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", f"http://127.0.0.1:{httpd.server_address[1]}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
        monkeypatch.delenv("HTTP_PROXY", raising=False)
        monkeypatch.delenv("http_proxy", raising=False)
        cache = tmp_path / "cache"
        c = load_parallel(ParallelDataConfig(name="multi30k", data_dir=str(tmp_path / "none"),
                                             cache_dir=str(cache), vocab_size=200))
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
    assert (cache / "multi30k" / "test2016.en").is_file()
    assert not list((cache / "downloads").glob("*.gz"))
    assert len(c.train) == 40 and len(c.test) == 40
    assert c.files["train"][0] == cache / "multi30k" / "train.de"


def test_collate_pads_and_places_bos_and_eos(m30k):
    batch = collate_pairs(m30k.valid, [0, 1, 2])
    lengths = [len(m30k.valid.tgt(i)) for i in range(3)]
    assert batch.tgt_in.shape == batch.tgt_out.shape == (3, max(lengths) + 1)
    assert (batch.tgt_in[:, 0] == 1).all()
    for row, n in enumerate(lengths):
        assert batch.tgt_out[row, n] == 2 and (batch.tgt_out[row, n + 1 :] == 0).all()
        assert torch.equal(batch.tgt_in[row, 1 : n + 1], batch.tgt_out[row, :n])
        s = len(m30k.valid.src(row))
        assert batch.src[row, s] == 2 and (batch.src[row, s + 1 :] == 0).all()
    assert batch.n_tokens == sum(lengths) + 3
    short = collate_pairs(m30k.valid, [0], max_src=4, max_tgt=5)
    assert short.src.shape == (1, 4) and short.tgt_in.shape == (1, 5) and short.src[0, -1] == 2


def test_eval_batches_cover_the_first_pairs_in_order_and_random_pairs_are_seeded(m30k):
    batches = list(eval_pair_batches(m30k.valid, batch_size=7, limit=20))
    assert [len(b.index) for b in batches] == [7, 7, 6]
    assert torch.equal(torch.cat([b.index for b in batches]), torch.arange(20))
    a = random_pairs(m30k.train, batch_size=8, generator=torch.Generator().manual_seed(0))
    b = random_pairs(m30k.train, batch_size=8, generator=torch.Generator().manual_seed(0))
    assert torch.equal(a.src, b.src) and torch.equal(a.index, b.index)


@pytest.mark.parametrize("kw,match", [
    (dict(name="europarl"), r"data\.name: got 'europarl', expected one of multi30k"),
    (dict(name="multi30k", vocab_size=3), r"data\.vocab_size: got 3"),
    (dict(name="multi30k", train_src="a.de"), r"data\.train_tgt: got None, expected a file path"),
    (dict(name="multi30k", src_lang="en", tgt_lang="en"), r"data\.tgt_lang: got 'en'"),
    (dict(name="parallel-files"), r"data\.train_src: got None"),
    (dict(name="multi30k", max_train_tokens=0), r"data\.max_train_tokens: got 0"),
])
def test_bad_data_settings(kw, match):
    with pytest.raises(DataError, match=match):
        ParallelDataConfig(**kw)
    assert issubclass(DataError, ValueError)
