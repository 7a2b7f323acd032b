"""WikiText parsing on the real valid/test files, and word-level corpora."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sublayer_search.models.data import (
    EOS,
    UNK,
    DataConfig,
    DataError,
    load_corpus,
    read_wikitext_tokens,
    tokenize_wikitext_lines,
)

VALID_WORDS, VALID_LINES = 213_886, 3_760
TEST_WORDS, TEST_LINES = 241_211, 4_358


def test_tokenize_lines_appends_eos_to_every_line_including_blank_ones():
    lines = [" = Title = \n", "\n", " a <unk> @-@ b \n", "last"]
    assert tokenize_wikitext_lines(lines) == [
        "=", "Title", "=", EOS,
        EOS,
        "a", UNK, "@-@", "b", EOS,
        "last", EOS,
    ]  # fmt: skip
    assert tokenize_wikitext_lines([]) == []


@pytest.mark.parametrize(
    ("fname", "words", "lines"),
    [("valid.txt", VALID_WORDS, VALID_LINES), ("test.txt", TEST_WORDS, TEST_LINES)],
)
def test_real_split_token_count_is_words_plus_lines(shared_data, fname, words, lines):
    path = shared_data / "wikitext-2-eval" / fname
    text = path.read_text(encoding="utf-8")
    assert len(text.split()) == words and text.count("\n") == lines  # the file's own facts
    tokens = read_wikitext_tokens(path)
    assert len(tokens) == words + lines  # valid: 217,646 as fairseq reports for WikiText
    assert tokens.count(EOS) == lines
    assert tokens.count(UNK) > 1000  # <unk> kept as a token
    assert tokens[:5] == [EOS, "=", "Homarus", "gammarus", "="] or fname == "test.txt"


def test_wikitext_without_train_split_fails_clearly(shared_data, tmp_path):
    cfg = DataConfig(
        name="wikitext-2", data_dir=str(shared_data), cache_dir=str(tmp_path), download=False
    )
    with pytest.raises(DataError) as info:
        load_corpus(cfg)
    text = str(info.value)
    assert "wiki.train.tokens" in text and "train split" in text
    assert "read_wikitext_tokens" in text
    assert str(shared_data / "wikitext-2-eval" / "valid.txt") in text


def test_wikitext2_explicit_train_with_eval_splits_from_data_dir(shared_data, tmp_path):
    train = tmp_path / "train.txt"
    train.write_text(" = Homarus gammarus = \n\n the lobster , the sea <unk> \n", encoding="utf-8")
    cfg = DataConfig(
        name="wikitext-2",
        train_path=str(train),
        data_dir=str(shared_data),
        cache_dir=str(tmp_path / "cache"),
        download=False,
    )
    corpus = load_corpus(cfg)
    assert corpus.level == "word" and corpus.metric == "val_ppl"
    assert corpus.files["valid"] == shared_data / "wikitext-2-eval" / "valid.txt"
    assert corpus.files["train"] == train
    # vocabulary from train only, by descending frequency: </s> (3) and "the"/"=" (2) first
    assert corpus.itos[:4] == (EOS, "=", "the", ",")
    assert set(corpus.itos) == {EOS, UNK, "=", "the", ",", "Homarus", "gammarus", "lobster", "sea"}
    assert (
        corpus.decode(corpus.train)
        == "= Homarus gammarus = </s> </s> the lobster , the sea <unk> </s>"
    )
    assert len(corpus.valid) == VALID_WORDS + VALID_LINES
    assert len(corpus.test) == TEST_WORDS + TEST_LINES
    assert corpus.valid.dtype == np.uint16 and isinstance(corpus.valid, np.memmap)
    # unknown words map to <unk>; known ones keep their ids
    valid = read_wikitext_tokens(corpus.files["valid"])
    stoi = {w: i for i, w in enumerate(corpus.itos)}
    expected = np.array([stoi.get(w, stoi[UNK]) for w in valid])
    assert np.array_equal(np.asarray(corpus.valid), expected)


def test_wikitext103_accepts_plain_split_names(tmp_path):
    folder = tmp_path / "data" / "wikitext-103"
    folder.mkdir(parents=True)
    for split, text in {"train": "a b a\n\nc\n", "valid": "a d\n", "test": "b\n"}.items():
        (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    cfg = DataConfig(
        name="wikitext-103",
        data_dir=str(tmp_path / "data"),
        cache_dir=str(tmp_path / "cache"),
        download=False,
    )
    corpus = load_corpus(cfg)
    assert corpus.files["test"] == folder / "test.txt"
    assert corpus.itos == (EOS, "a", "b", "c", UNK)
    assert corpus.decode(corpus.valid) == f"a {UNK} {EOS}"
    assert len(corpus.train) == 4 + 3  # 4 words + one eos per line (blank one included)


def test_wikitext_prefers_canonical_names_and_folder_order(tmp_path, shared_data):
    # data_dir/wikitext-2 (full) is searched before data_dir/wikitext-2-eval
    data = tmp_path / "data"
    full = data / "wikitext-2"
    full.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (full / f"wiki.{split}.tokens").write_text("x y\n", encoding="utf-8")
    (data / "wikitext-2-eval").symlink_to(Path(shared_data) / "wikitext-2-eval")
    corpus = load_corpus(
        DataConfig(
            name="wikitext-2", data_dir=str(data), cache_dir=str(tmp_path / "c"), download=False
        )
    )
    assert all(p.parent == full for p in corpus.files.values())
    assert len(corpus.valid) == 3
