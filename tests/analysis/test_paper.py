"""The analysis reproduces the statements of Press et al. (2020) from their tables."""

from __future__ import annotations

import pandas as pd
import pytest

from sublayer_search.analysis import (
    distribution,
    halves_study,
    paper,
    sandwich_curve,
    seed_comparison_from_stats,
)


def test_packaged_csv_matches_shared_copy(papers_dir):
    shared = pd.read_csv(papers_dir / "press2020_tables.csv")
    t = pd.concat([paper.table1(), paper.table2()], ignore_index=True)
    assert list(t["order"]) == list(shared["order"])
    assert list(t["final"]) == list(shared["dev_ppl"])
    assert list(t["baseline"]) == list(shared["is_baseline"].astype(bool))


def test_tables_shape_and_source():
    for table, family, n_models in ((1, "permutations", 20), (2, "budgeted", 20)):
        t = paper.trials(table)
        assert len(t) == n_models + 5
        assert (t.loc[~t["baseline"], "family"] == family).all()
        assert (t.loc[t["baseline"], "family"] == "baseline").all()
        assert (t["source"] == f"Press et al. (2020), Table {table}").all()
        assert set(t["status"]) == {"finished"}
    assert paper.baseline_dev() == (19.13, 18.83, 18.54, 18.49, 18.25)
    # every Table 1 model is a permutation of 16 s + 16 f; every Table 2 model spends 48 units
    t1, t2 = paper.table1(), paper.table2()
    assert ((t1["n_s"] == 16) & (t1["n_f"] == 16)).all()
    assert (t2["units"] == 48).all()
    with pytest.raises(ValueError, match="tables 1 and 2"):
        paper.trials(3)


def test_table1_seven_of_twenty_at_least_as_good_best_1819():
    info = distribution(paper.table1())
    assert round(info.baseline.mean, 2) == 18.65
    assert round(info.baseline.sd, 2) == 0.34
    assert info.n_models == 20
    assert info.count_at_least_average == 7
    assert info.best_model["value"] == 18.19


def test_table2_four_beat_average_best_1812_has_12s_18f():
    t2 = paper.table2()
    info = distribution(t2)
    assert info.count_at_least_average == 4
    best = info.best_model
    assert best["value"] == 18.12
    row = t2[t2["run_id"] == best["run_id"]].iloc[0]
    assert (row["n_s"], row["n_f"]) == (12, 18)


@pytest.mark.parametrize("table", [1, 2])
def test_better_models_more_s_bottom_more_f_top(table):
    h = halves_study(paper.trials(table))
    assert h.group_sizes() == {"better": (7 if table == 1 else 4),
                               "not better": (13 if table == 1 else 16)}
    assert h.mean("better", "bottom", "s") > h.mean("not better", "bottom", "s")
    assert h.mean("better", "top", "f") > h.mean("not better", "top", "f")
    assert h.mann_whitney.rank_biserial > 0
    # lower perplexity goes with more of the attention in the bottom half
    assert h.spearman.rho < 0


def test_halves_conventions_all_agree_on_the_direction():
    for straddle in ("fractional", "bottom", "top", "drop"):
        h = halves_study(paper.table1(), straddle=straddle)
        assert h.mean("better", "bottom", "s") > h.mean("not better", "bottom", "s")


def test_sandwich_stated_points_and_statements():
    info = sandwich_curve(paper.sandwich_points())
    assert dict(zip(info.points["k"], info.points["mean"], strict=True)) == {6: 17.84, 15: 18.82}
    assert info.best_k == 6
    assert info.ks_beating("best") == [6]
    assert info.ks_beating("average") == [6]
    st = paper.sandwich_statements()
    assert list(st.loc[~st["beats_average"], "k"]) == [14, 15]
    assert list(st.loc[st["beats_best"], "k"]) == [5, 6, 8, 9, 10, 11]


def test_sandwich_16_6_over_seeds_is_better_from_summary_statistics():
    info = seed_comparison_from_stats(paper.sandwich_seed_summary())
    row = info.row("sandwich16_6")
    assert row["mean"] == 17.98 and row["n"] == 5
    assert row["difference"] == pytest.approx(17.98 - 18.648)
    assert row["welch_p"] < 0.05 and row["ci_high"] < 0
    assert bool(row["better"])
    assert "no bootstrap" in row["statement"]


def test_published_tables_have_sources_and_only_stated_numbers():
    tables = paper.published_tables()
    for name, t in tables.items():
        assert "source" in t.columns, name
        assert t["source"].str.startswith("Press et al. (2020)").all(), name
    att = tables["attention_distances"].set_index("model")["value"]
    assert att["baseline vs sandwich"] == pytest.approx(1.289e-3)
    test = tables["wikitext103_test"].set_index("model")["value"]
    assert test["sandwich16_6"] == 17.96 and test["kNN-LM"] == 15.79
    char = tables["character_level"]
    assert set(char["dataset"]) == {"text8", "enwik8"}
    tr = tables["translation"]
    assert tr["low"].min() == 28.45 and tr["high"].max() == 28.81
