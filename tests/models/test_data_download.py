"""Downloads against a real HTTP server on 127.0.0.1 (no network needed)."""

from __future__ import annotations

import hashlib
import http.server
import shutil
import socket
import threading
import zipfile
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from sublayer_search.models.data import (
    CORPORA,
    DataConfig,
    DataError,
    download_url,
    fetch,
    load_corpus,
)

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
    cache = tmp_path / "cache" / "tinyshakespeare"
    assert not (cache / "input.txt").exists()
    assert list(cache.iterdir()) == []  # no temporary leftovers either
    assert not (tmp_path / "cache" / "tokens").exists()


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
    assert list((tmp_path / "cache" / "downloads").iterdir()) == []  # archive + scratch gone
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
    cache = tmp_path / "cache"
    assert not (cache / "wikitext-2").exists() or list((cache / "wikitext-2").iterdir()) == []
    assert list((cache / "downloads").iterdir()) == []
