"""Issue 40, item 3: a dry run never downloads or builds a corpus cache. It notes once what
the sweep will fetch, and marks (``~``) the counts that rest on a vocabulary it has not
built yet; with the vocabulary in the cache its counts are the sweep's, unmarked."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.search.cli.main import main

REPO = Path(__file__).resolve().parents[2]
MULTI30K_CONFIGS = ("iot_multi30k.yaml", "crossformer_multi30k.yaml")
FETCH_NOTE = "the sweep downloads it"
FOOTER = "~ params and flops_per_token assume a vocabulary of"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every way out to the network refused at once, and recorded: the tests never wait
    on a timeout, and an attempt fails them even where a network is there."""
    attempts: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        attempts.append(repr((args, kwargs))[:300])
        raise OSError("network blocked by the test")

    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    from sublayer_search.models.data import download
    from sublayer_search.models.data.parallel import files

    for module in (download, files):  # a download never starts, refused or not
        monkeypatch.setattr(module, "retrieve", refuse)
    return attempts


@pytest.fixture
def first_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A first-time user: an empty HOME, no local corpora, the cache in a fresh folder
    (returned; it does not exist yet)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SUBLAYER_DATA_DIR", raising=False)
    monkeypatch.delenv("SUBLAYER_DOWNLOAD_BASE", raising=False)
    monkeypatch.setenv("SUBLAYER_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _table(out: str) -> list[dict[str, str]]:
    """The dry run's trial table, cut at the header's column starts."""
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("name "))
    names = lines[head].split()
    starts = [lines[head].index(f"{n} ") if n != names[-1] else lines[head].rindex(n)
              for n in names]
    rows = []
    for line in lines[head + 1:]:
        if line.startswith("~ ") or "trial(s)" in line:
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        rows.append(dict(zip(names, cells, strict=True)))
    assert rows, out
    return rows


def _files(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize("config", MULTI30K_CONFIGS)
def test_a_first_dry_run_fetches_nothing_and_marks_the_counts(
        config: str, first_time: Path, offline: list[str], capfd: pytest.CaptureFixture[str]
) -> None:
    assert main(["sweep", str(REPO / "configs" / config), "--dry-run"]) == 0
    out, err = capfd.readouterr()
    assert offline == []
    for text in ("Downloading", "Download failed", "not readable"):
        assert text not in out + err
    assert err.count(FETCH_NOTE) == 1, err
    assert f"multi30k is not on disk here; {FETCH_NOTE} into {first_time / 'multi30k'}" in err
    rows = _table(out)
    assert all(r["params"].startswith("~") and r["flops_per_token"].startswith("~")
               for r in rows), out
    assert all(not r["units"].startswith("~") for r in rows)
    assert out.count(FOOTER) == 1 and f"{FOOTER} 2000 (data.vocab_size)" in out
    assert not first_time.exists()  # no cache, no staging folder, no empty folder
    assert not any(Path.home().iterdir())


def test_a_corpus_on_disk_is_not_tokenised_by_a_dry_run(
        first_time: Path, offline: list[str], monkeypatch: pytest.MonkeyPatch,
        shared_data: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """The files are there, the BPE vocabulary is not: nothing to fetch, nothing built,
    the counts marked as estimates."""
    monkeypatch.setenv("SUBLAYER_DATA_DIR", str(shared_data))
    assert main(["sweep", str(REPO / "configs" / "crossformer_multi30k.yaml"), "--dry-run"]) == 0
    out, err = capfd.readouterr()
    assert offline == []
    assert FETCH_NOTE not in err and "Downloading" not in out + err
    assert all(r["params"].startswith("~") for r in _table(out))
    assert out.count(FOOTER) == 1
    assert not first_time.exists()


def _tiny_experiment(tmp_path: Path) -> Path:
    """The Crossformer file on a tiny corpus of its own (seconds to learn its BPE)."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for split, n in (("train", 60), ("valid", 4), ("test", 4)):
        for side, words in (("src", "hallo schöne welt"), ("tgt", "hello nice world")):
            (folder / f"{split}.{side}").write_text("".join(f"{words} {i}\n" for i in range(n)))
    doc = yaml.safe_load((REPO / "configs" / "crossformer_multi30k.yaml").read_text())
    doc["data"] = {"name": "parallel-files", "path": str(folder), "src_lang": "src",
                   "tgt_lang": "tgt", "vocab_size": 500}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_vocabulary_in_the_cache_gives_the_sweeps_counts(
        tmp_path: Path, first_time: Path, offline: list[str],
        capfd: pytest.CaptureFixture[str]) -> None:
    """Before the BPE is learned: marked estimates at data.vocab_size and no cache. After a
    sweep's planning learned it: the real counts, unmarked, and the cache untouched."""
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.plan.sweep_plan import trial_table

    path = _tiny_experiment(tmp_path)
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out, err = capfd.readouterr()
    assert FETCH_NOTE not in err and f"{FOOTER} 500 (data.vocab_size)" in out
    assert all(r["params"].startswith("~") for r in _table(out))
    assert not first_time.exists()

    swept = plan_sweep(load_experiment(str(path)), str(path), check_resources=False)
    assert swept.model.src_vocab_size < 500  # learned: a tiny corpus has few tokens
    cache = _files(first_time)
    assert any(name.startswith("bpe/") for name in cache)

    assert main(["sweep", str(path), "--dry-run"]) == 0
    out, _ = capfd.readouterr()
    assert FOOTER not in out
    rows = _table(out)
    assert [(r["name"], r["params"], r["flops_per_token"]) for r in rows] == [
        (r["name"], str(r["params"]), str(r["flops_per_token"])) for r in trial_table(swept)]
    assert _files(first_time) == cache
    assert offline == []


def test_a_language_model_on_text_files_builds_no_token_cache(
        tmp_path: Path, first_time: Path, offline: list[str],
        capfd: pytest.CaptureFixture[str]) -> None:
    """Its vocabulary depends on the files: the dry run counts it without caching, and
    its counts are the sweep's."""
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.plan.sweep_plan import trial_table

    for split, text in (("train", "to be or not to be\n" * 50), ("valid", "be not\n" * 5)):
        (tmp_path / f"{split}.txt").write_text(text)
    doc = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    doc["data"] = {"name": "text-files", "train_path": str(tmp_path / "train.txt"),
                   "valid_path": str(tmp_path / "valid.txt")}
    path = tmp_path / "text.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out, _ = capfd.readouterr()
    assert not first_time.exists()
    assert FOOTER not in out
    shown = [(r["name"], r["params"]) for r in _table(out)]
    swept = plan_sweep(load_experiment(str(path)), str(path), check_resources=False)
    assert first_time.exists()  # the sweep's planning tokenised it
    assert shown == [(r["name"], str(r["params"])) for r in trial_table(swept)]
    assert offline == []
