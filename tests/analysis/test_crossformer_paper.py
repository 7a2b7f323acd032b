"""The Crossformer paper's Tables 1, 2, 3 and 6 are built in, and `sublayer analyze --paper
crossformer` writes them as CSVs and figures."""

from __future__ import annotations

import argparse
import re

import pandas as pd
import pytest

from sublayer_search.analysis import AnalysisError
from sublayer_search.analysis.cli import add_arguments, run_analyze
from sublayer_search.analysis.papers import crossformer_paper


def _section4(papers_dir) -> str:
    text = (papers_dir / "README.md").read_text(encoding="utf-8")
    return text.split("## 4.", 1)[1].split("## 5.", 1)[0]


def test_every_number_is_in_the_sources(papers_dir):
    """Each BLEU and parameter count of the built-in tables is printed in §4 of the
    project's paper notes, in its table's paragraph."""
    section = _section4(papers_dir)
    paragraphs = {n: section.split(f"Table {n}", 1)[1].split("\n- ", 1)[0] for n in (1, 2, 3, 6)}
    for n in crossformer_paper.TABLES:
        t = crossformer_paper.table(n)
        for r in t.itertuples():
            assert f"{r.bleu:.2f}" in paragraphs[n], (n, r.model)
            if pd.notna(r.params_m):
                assert re.search(rf"\b{r.params_m:.0f}M", paragraphs[n]), (n, r.model)


def test_table1_statements():
    t1 = crossformer_paper.table1().set_index("label")
    assert list(t1.index) == ["none", "sg-ffn", "sg-v", "sg-kq", "hg-ffn", "hg-v", "hg-kq"]
    assert t1.loc["none", "bleu"] == 33.64 and t1.loc["none", "params_m"] == 52
    # every guided model beats the Transformer; soft Key-Query is best (+0.87)
    assert (t1.drop("none")["bleu_gain"] > 0).all()
    assert t1["bleu"].idxmax() == "sg-kq" and t1.loc["sg-kq", "bleu_gain"] == 0.87
    # soft guidance keeps the parameters; hard FFN saves 13M of 52M, Key-Query and Value 4M
    assert (t1.loc[["sg-ffn", "sg-v", "sg-kq"], "params_saved_m"] == 0).all()
    assert t1.loc["hg-ffn", "params_saved_m"] == 13
    assert t1.loc["hg-kq", "params_saved_m"] == t1.loc["hg-v", "params_saved_m"] == 4


def test_tables2_3_hard_guidance_beats_the_transformer_with_fewer_params():
    for t in (crossformer_paper.table2(), crossformer_paper.table3()):
        assert set(t["dataset"]) == {"wmt14-en-de", "wmt14-en-fr"}
        guided = t[t["mode"] == "hard"]
        assert set(guided["mode"]) == {"hard"} and (guided["bleu_gain"] > 0).all()
        assert (guided["params_saved_m"] > 0).all()
        for _, per in t.groupby("dataset"):  # Key-Query is the best single block
            single = per[per["blocks"].isin(["key_query", "value", "ffn"])]
            assert single.loc[single["bleu"].idxmax(), "blocks"] == "key_query"
    t2 = crossformer_paper.table2()
    deep = t2[t2["layers"] == "16"]
    assert list(deep["label"]) == ["hg-kq+v+ffn"] * 2 and deep["encoder_layers"].isna().all()
    assert list(deep["bleu"]) == [27.90, 39.63]  # the best of Table 2 in both languages
    assert list(t2.groupby("dataset")["bleu"].max()) == [27.90, 39.63]
    t3 = crossformer_paper.table3()
    assert set(t3["encoder_layers"]) == {36} and set(t3["decoder_layers"]) == {6}


def test_table6_the_paper_fixes_its_best_pairings():
    t6 = crossformer_paper.table6()
    assert (t6["mode"] == "hard").all() and t6["params_m"].isna().all()
    best = t6.loc[t6.groupby("blocks")["bleu"].idxmax(), ["blocks", "pairing"]]
    assert dict(best.itertuples(index=False)) == {"key_query": "key_query", "ffn": "w2_w1"}
    # the chosen pairings are the Table 1 hard-guidance models
    t1 = crossformer_paper.table1().set_index("label")
    chosen = t6[t6["pairing"].isin(["key_query", "w2_w1"])].set_index("label")
    assert chosen.loc["hg-kq", "bleu"] == t1.loc["hg-kq", "bleu"]
    assert chosen.loc["hg-ffn", "bleu"] == t1.loc["hg-ffn", "bleu"]
    assert (t6["reference_bleu"] == 33.64).all()
    assert set(t6["label"]) >= {"hg-kq.qq", "hg-kq.kk", "hg-kq.qk", "hg-ffn.w1w2"}


def test_labels_and_bad_table():
    assert crossformer_paper.guidance_label("hard", "key_query+ffn") == "hg-kq+ffn"
    assert crossformer_paper.guidance_label("soft", "value", "query_key+w2_w1") == "sg-v.qk"
    assert crossformer_paper.guidance_label("none", "") == "none"
    with pytest.raises(AnalysisError, match="guidance blocks: got 'attn'"):
        crossformer_paper.guidance_label("hard", "attn")
    with pytest.raises(AnalysisError, match="Crossformer tables built in: 1, 2, 3, 6; got 4"):
        crossformer_paper.table(4)


def test_analyze_paper_crossformer_writes_tables_and_figures(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--paper", "crossformer", "--out", str(tmp_path)])
    assert run_analyze(args) == 0, capsys.readouterr().err
    for n in crossformer_paper.TABLES:
        written = pd.read_csv(tmp_path / "tables" / f"crossformer_table{n}.csv")
        assert list(written["bleu"]) == list(crossformer_paper.table(n)["bleu"])
    html = (tmp_path / "report.html").read_text()
    for stem in ("crossformer_table1", "crossformer_tables2_3_params", "crossformer_table6"):
        assert (tmp_path / "figures" / f"{stem}.png").stat().st_size > 1000
        assert f"figures/{stem}.svg" in html
    assert "34.51 (+0.87)" in html and "&lt;NA&gt;" not in html
    svg = (tmp_path / "figures" / "crossformer_table1.svg").read_text()
    assert "Transformer (33.64 BLEU, 52M)" in svg
