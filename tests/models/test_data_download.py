"""Downloads against a real HTTP server on 127.0.0.1 (no network needed)."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import shutil
import socket
import threading
import tracemalloc
import zipfile
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from sublayer_search.models.data import (
    CORPORA,
    PARALLEL_CORPORA,
    DataConfig,
    DataError,
    ParallelDataConfig,
    download_url,
    fetch,
    load_corpus,
    load_parallel,
)
from sublayer_search.models.data.parallel import fetch_parallel

TS_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # keep pytest output clean
        pass


@pytest.fixture
def server(tmp_path, monkeypatch):
    """Serve ``tmp_path / "www"``; yields (folder, base URL) and sets SUBLAYER_DOWNLOAD_BASE."""
    root = tmp_path / "www"
    root.mkdir()
    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_QuietHandler, directory=str(root))
    )
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    base = f"http://127.0.0.1:{httpd.server_address[1]}/mirror"
    # the handler serves "/mirror/x" from root/mirror/x
    (root / "mirror").mkdir()
    monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", base)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    monkeypatch.delenv("http_proxy", raising=False)
    yield root / "mirror", base
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


def _cfg(tmp_path: Path, name: str = "tinyshakespeare", **kw) -> DataConfig:
    empty = tmp_path / "empty-data"
    empty.mkdir(exist_ok=True)
    return DataConfig(name=name, data_dir=str(empty), cache_dir=str(tmp_path / "cache"), **kw)


def test_download_url_default_and_override(monkeypatch):
    spec = CORPORA["tinyshakespeare"]
    monkeypatch.delenv("SUBLAYER_DOWNLOAD_BASE", raising=False)
    assert download_url(spec) == spec.url
    assert "karpathy/char-rnn" in spec.url
    assert download_url(spec, "http://h/x/") == "http://h/x/input.txt"
    monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", "http://mirror")
    assert download_url(CORPORA["enwik8"]) == "http://mirror/enwik8.zip"


def test_good_checksum_lands_in_cache(server, tmp_path, shared_data):
    folder, _ = server
    shutil.copy(shared_data / "tinyshakespeare" / "input.txt", folder / "input.txt")
    corpus = load_corpus(_cfg(tmp_path))
    target = tmp_path / "cache" / "tinyshakespeare" / "input.txt"
    assert corpus.files["all"] == target
    assert hashlib.sha256(target.read_bytes()).hexdigest() == TS_SHA256
    assert corpus.vocab_size == 65
    assert sorted(p.name for p in target.parent.iterdir()) == ["input.txt"]


def test_bad_checksum_is_refused_and_not_cached(server, tmp_path):
    folder, base = server
    (folder / "input.txt").write_text("not shakespeare\n" * 100)
    with pytest.raises(DataError, match="checksum mismatch") as info:
        load_corpus(_cfg(tmp_path))
    assert f"{base}/input.txt" in str(info.value)
    # no file, no temporary leftovers, and no empty folder: the cache was never made
    assert not (tmp_path / "cache").exists()


def test_404_names_the_url(server, tmp_path):
    _, base = server
    with pytest.raises(DataError) as info:
        load_corpus(_cfg(tmp_path))
    text = str(info.value)
    assert f"{base}/input.txt" in text
    assert "404" in text
    assert "input.txt" in text and "SUBLAYER_DATA_DIR" in text


def test_offline_names_file_and_folders(tmp_path, monkeypatch):
    with socket.socket() as sock:  # a port with nobody listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("SUBLAYER_DOWNLOAD_BASE", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    with pytest.raises(DataError) as info:
        load_corpus(_cfg(tmp_path))
    text = str(info.value)
    assert "input.txt" in text
    assert str(tmp_path / "empty-data" / "tinyshakespeare") in text
    assert str(tmp_path / "cache" / "tinyshakespeare") in text
    assert "SUBLAYER_DATA_DIR" in text
    assert "offline" in text


def _wikitext_zip(path: Path) -> None:
    lines = {
        "train": " = Title = \n\n the cat sat on the mat <unk> \n",
        "valid": " the dog sat \n",
        "test": " the cat \n\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for split, text in lines.items():
            zf.writestr(f"wikitext-2/wiki.{split}.tokens", text)
        zf.writestr("wikitext-2/README", "other member, not extracted")


def test_fetch_zip_extracts_members_into_cache(server, tmp_path):
    folder, base = server
    _wikitext_zip(folder / "wikitext-2-v1.zip")
    digest = hashlib.sha256((folder / "wikitext-2-v1.zip").read_bytes()).hexdigest()
    spec = replace(CORPORA["wikitext-2"], known_hash=f"sha256:{digest}")
    dest = tmp_path / "cache" / "wikitext-2"
    placed = fetch(spec, dest, url=download_url(spec))
    assert sorted(p.name for p in placed) == [
        "wiki.test.tokens",
        "wiki.train.tokens",
        "wiki.valid.tokens",
    ]
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in placed)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["wikitext-2"]  # staging gone
    # the cache folder is now found without any download
    corpus = load_corpus(_cfg(tmp_path, "wikitext-2", download=False))
    assert corpus.files["train"] == dest / "wiki.train.tokens"
    assert "dog" not in corpus.itos  # vocabulary from train only
    assert corpus.decode(corpus.valid) == "the <unk> sat </s>"


def test_zip_with_wrong_hash_is_refused(server, tmp_path):
    folder, _ = server
    _wikitext_zip(folder / "wikitext-2-v1.zip")  # not the real archive: its sha1 differs
    with pytest.raises(DataError, match="checksum mismatch"):
        load_corpus(_cfg(tmp_path, "wikitext-2"))
    assert not (tmp_path / "cache").exists()


# -- every download carries a checksum -----------------------------------------------------
def test_every_registered_download_is_https_and_verified():
    for spec in CORPORA.values():
        if spec.url is not None:
            assert spec.url.startswith("https://"), spec.url
            assert spec.known_hash is not None, spec.name
    for pspec in PARALLEL_CORPORA.values():
        assert set(pspec.hashes) == set(pspec.urls), pspec.name
        assert all(url.startswith("https://") for url in pspec.urls.values()), pspec.name
    # the two archives that had only a size check now carry hashes of the archive and member
    for name in ("enwik8", "text8"):
        assert CORPORA[name].known_hash and CORPORA[name].member_hashes[name]


def test_a_download_without_a_hash_is_refused_at_registration():
    spec = CORPORA["tinyshakespeare"]
    with pytest.raises(DataError, match=r"tinyshakespeare: a download URL needs known_hash"):
        replace(spec, known_hash=None)
    with pytest.raises(DataError, match=r"tinyshakespeare\.known_hash: got 'sha256:abc'"):
        replace(spec, known_hash="sha256:abc")
    with pytest.raises(DataError, match=r"multi30k\.hashes: got \[\], expected one known hash"):
        replace(PARALLEL_CORPORA["multi30k"], hashes={})


def _zip_of(path: Path, member: str, data: bytes) -> str:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, data)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_wrong_enwik8_archive_is_refused_and_leaves_no_folder(server, tmp_path):
    folder, base = server
    _zip_of(folder / "enwik8.zip", "enwik8", b"<mediawiki>" * 1000)
    with pytest.raises(DataError, match="checksum mismatch") as info:
        load_corpus(_cfg(tmp_path, "enwik8"))
    assert f"{base}/enwik8.zip" in str(info.value)
    assert not (tmp_path / "cache").exists()


def test_member_hash_is_checked_after_extraction(server, tmp_path):
    folder, _ = server
    data = b"anarchism originated as a term " * 10
    digest = _zip_of(folder / "text8.zip", "text8", data)  # the archive hash matches ...
    spec = replace(CORPORA["text8"], known_hash=f"sha256:{digest}", expected_size=None)
    dest = tmp_path / "cache" / "text8"
    with pytest.raises(DataError, match=r"text8: text8 from .* checksum mismatch \(sha1 "):
        fetch(spec, dest)  # ... but the extracted file is not Mahoney's text8
    assert not (tmp_path / "cache").exists()
    good = replace(spec, member_hashes={"text8": f"sha1:{hashlib.sha1(data).hexdigest()}"})
    assert fetch(good, dest) == [dest / "text8"]
    assert (dest / "text8").read_bytes() == data
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["text8"]


# -- Multi30k: verified .gz files, decompressed as a stream ---------------------------------
def _gz_mirror(folder: Path, shared_data: Path, lines: int = 40) -> dict[str, str]:
    """Gzipped heads of the shared Multi30k files under their upstream names; md5s."""
    hashes = {}
    for local, remote in (("train", "train"), ("val", "val"), ("test2016", "test_2016_flickr")):
        for lang in ("de", "en"):
            text = (shared_data / "multi30k" / f"{local}.{lang}").read_bytes()
            packed = folder / f"{remote}.{lang}.gz"
            packed.write_bytes(gzip.compress(b"\n".join(text.split(b"\n")[:lines])))
            hashes[f"{local}.{lang}"] = "md5:" + hashlib.md5(packed.read_bytes()).hexdigest()
    return hashes


def test_multi30k_with_the_wrong_files_is_refused(server, tmp_path, shared_data):
    folder, base = server
    _gz_mirror(folder, shared_data)  # not the upstream files: torchtext's md5s differ
    with pytest.raises(DataError, match="checksum mismatch") as info:
        load_parallel(
            ParallelDataConfig(
                name="multi30k", data_dir=str(tmp_path / "none"), cache_dir=str(tmp_path / "cache")
            )
        )
    assert f"{base}/train.de.gz" in str(info.value)
    assert not (tmp_path / "cache").exists()


def test_multi30k_from_a_verified_mirror(server, tmp_path, shared_data):
    folder, _ = server
    spec = replace(PARALLEL_CORPORA["multi30k"], hashes=_gz_mirror(folder, shared_data))
    dest = tmp_path / "cache" / "multi30k"
    placed = fetch_parallel(spec, dest)
    assert sorted(p.name for p in placed) == sorted(spec.urls)
    head = (shared_data / "multi30k" / "val.en").read_bytes().split(b"\n")[:40]
    assert (dest / "val.en").read_bytes() == b"\n".join(head)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == ["multi30k"]  # no staging left
    assert fetch_parallel(spec, dest) == []  # already there: nothing downloaded again


def test_multi30k_is_decompressed_as_a_stream(server, tmp_path):
    folder, _ = server
    block = b"Ein Hund rennt durch das hohe Gras .\n" * 28_000  # ~1 MiB
    with gzip.open(folder / "train.de.gz", "wb", compresslevel=1) as out:
        for _ in range(32):  # 32 MiB of text, a small .gz
            out.write(block)
    md5 = hashlib.md5((folder / "train.de.gz").read_bytes()).hexdigest()
    url = PARALLEL_CORPORA["multi30k"].urls["train.de"]
    spec = replace(
        PARALLEL_CORPORA["multi30k"], urls={"train.de": url}, hashes={"train.de": f"md5:{md5}"}
    )
    tracemalloc.start()
    try:
        fetch_parallel(spec, tmp_path / "cache" / "multi30k")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = (tmp_path / "cache" / "multi30k" / "train.de").stat().st_size
    assert size == 32 * len(block)
    assert peak < size // 4, f"peak {peak:,} bytes of Python memory for a {size:,}-byte file"


def test_a_broken_gzip_leaves_no_partial_file(server, tmp_path):
    folder, _ = server
    whole = gzip.compress(b"zwei Hunde spielen im Schnee .\n" * 5000)
    (folder / "val.de.gz").write_bytes(whole[: len(whole) // 2])  # truncated
    md5 = hashlib.md5((folder / "val.de.gz").read_bytes()).hexdigest()
    url = PARALLEL_CORPORA["multi30k"].urls["val.de"]
    spec = replace(
        PARALLEL_CORPORA["multi30k"], urls={"val.de": url}, hashes={"val.de": f"md5:{md5}"}
    )
    with pytest.raises(DataError, match=r"multi30k: .*val\.de\.gz: not a readable gzip file"):
        fetch_parallel(spec, tmp_path / "cache" / "multi30k")
    assert not (tmp_path / "cache").exists()
