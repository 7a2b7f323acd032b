"""Study functions on small hand-made frames with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_helpers import frame, trial
from scipy import stats

from sublayer_search.analysis import (
    AnalysisError,
    distribution,
    halves_study,
    position_map,
    sandwich_curve,
    seed_comparison,
)
from sublayer_search.spaces.cost import halves

BASE = (trial("sfsf", 10.0, baseline=True, seed=0), trial("sfsf", 12.0, baseline=True, seed=1))


# --- distribution ----------------------------------------------------------------------

def test_distribution_counts_and_order():
    f = frame(*BASE, trial("ssff", 9.0), trial("sffs", 10.0), trial("fssf", 11.0),
              trial("ffss", 11.5), trial("fsfs", 13.0),
              trial("sfsf", np.nan, status="failed"), trial("ssff", np.inf, status="diverged"))
    info = distribution(f)
    assert (info.baseline.mean, info.baseline.best) == (11.0, 10.0)
    assert info.n_models == 5 and info.n_unusable == 2
    assert info.count_at_least_average == 3  # 9, 10, 11 <= 11
    assert info.count_at_least_best == 2  # 9, 10 <= 10
    assert info.models["value"].tolist() == [9.0, 10.0, 11.0, 11.5, 13.0]
    assert info.summary()["best_order"] == "ssff"


def test_distribution_higher_is_better_metric():
    f = frame(trial("sfsf", 20.0, baseline=True, metric="val_bleu"),
              trial("sfsf", 22.0, baseline=True, metric="val_bleu"),
              trial("ssff", 21.0, metric="val_bleu"), trial("ffss", 25.0, metric="val_bleu"))
    info = distribution(f)
    assert info.baseline.best == 22.0
    assert info.count_at_least_average == 2 and info.count_at_least_best == 1
    assert info.models["value"].tolist() == [25.0, 21.0]


def test_distribution_bad_input():
    with pytest.raises(AnalysisError, match="no finished baseline"):
        distribution(frame(trial("ssff", 9.0), trial("ffss", 10.0)))
    with pytest.raises(AnalysisError, match="unknown metric 'val_bpc'"):
        distribution(frame(*BASE, trial("ssff", 9.0)), metric="val_bpc")
    with pytest.raises(AnalysisError, match="no usable non-baseline"):
        distribution(frame(*BASE))


# --- halves ----------------------------------------------------------------------------

def test_spaces_halves_hand_checked_including_a_straddling_f():
    h = halves("ssssff")
    assert (h.bottom["s"], h.bottom["f"], h.top["s"], h.top["f"]) == (4, 0, 0, 2)
    # ffss: 6 units, cut at 3; the second f spans [2, 4)
    h = halves("ffss")
    assert (h.bottom["f"], h.top["f"], h.top["s"]) == (1.5, 0.5, 2)
    assert halves("ffss", straddle="bottom").bottom["f"] == 2
    assert halves("ffss", straddle="top").top["f"] == 1
    assert halves("ffss", straddle="drop").bottom["f"] + halves("ffss", straddle="drop").top[
        "f"] == 1


HALVES_FRAME = (
    *BASE,
    trial("ssff", 9.0),     # better; bottom: s s + half an f
    trial("sssfff", 10.0),  # better; 9 units, cut 4.5: s s s + 3/4 of an f
    trial("ffss", 13.0),    # not better; bottom: f + half an f
    trial("fsfs", 12.0),    # not better; bottom: f s | top: f s (no straddle)
)


def test_halves_study_known_answer():
    h = halves_study(frame(*HALVES_FRAME))
    assert h.reference == 11.0
    assert h.group_sizes() == {"better": 2, "not better": 2}
    m = h.models.set_index("order")
    assert m.loc["ssff", "bottom_s"] == 2 and m.loc["ssff", "bottom_f"] == 0.5
    assert m.loc["sssfff", "bottom_s"] == 3 and m.loc["sssfff", "bottom_f"] == 0.75
    assert m.loc["fsfs", "bottom_s"] == 1 and m.loc["fsfs", "top_f"] == 1
    assert h.mean("better", "bottom", "s") == 2.5
    assert h.mean("not better", "bottom", "s") == 0.5
    assert h.mean("better", "top", "f") == pytest.approx((1.5 + 2.25) / 2)
    mw = h.mann_whitney
    assert mw.statistic == 4.0 and mw.rank_biserial == 1.0  # every better > every other
    expected = stats.mannwhitneyu([2, 3], [0, 1], alternative="two-sided").pvalue
    assert mw.pvalue == pytest.approx(expected)
    share = [1.0, 1.0, 0.0, 0.5]  # bottom s / n_s
    rho = stats.spearmanr([9.0, 10.0, 13.0, 12.0], share).statistic
    assert h.spearman.rho == pytest.approx(rho) and h.spearman.rho < 0


def test_halves_straddle_option_changes_counts():
    frac = halves_study(frame(*HALVES_FRAME)).models.set_index("order")
    drop = halves_study(frame(*HALVES_FRAME), straddle="drop").models.set_index("order")
    assert frac.loc["ffss", "bottom_f"] == 1.5 and drop.loc["ffss", "bottom_f"] == 1
    with pytest.raises(AnalysisError, match="straddle"):
        halves_study(frame(*HALVES_FRAME), straddle="middle")


def test_position_map_by_parameter_fraction():
    h = halves_study(frame(*HALVES_FRAME), bins=2)
    p = h.position.set_index(["group", "bin"])["p_s"]
    assert p[("better", 0)] == pytest.approx(2 / 3)
    assert p[("better", 1)] == pytest.approx(0.0)
    assert p[("not better", 0)] == pytest.approx(1 / 6)
    assert p[("not better", 1)] == pytest.approx(1 / 2)
    # an interleaved order has 1/3 of its parameters in s everywhere (f = 2 units)
    import pandas as pd

    flat = position_map(pd.DataFrame({"order": ["sfsfsfsf"], "group": ["better"]}), bins=4)
    assert np.allclose(flat["p_s"], 1 / 3)


def test_halves_one_group_empty_gives_no_test():
    h = halves_study(frame(*BASE, trial("ssff", 9.0), trial("sssfff", 10.0)))
    assert h.mann_whitney is None and h.spearman is None
    assert h.group_sizes() == {"better": 2, "not better": 0}


# --- sandwich ----------------------------------------------------------------------------

def test_sandwich_curve_known_answer():
    f = frame(*BASE, trial("sfsf", 11.0, k=0, seed=0), trial("sfsf", 11.5, k=0, seed=1),
              trial("ssff", 9.0, k=1, seed=0), trial("ssff", 10.0, k=1, seed=1),
              trial("ssff", 12.5, k=2, seed=0), trial("ffss", 20.0))  # no k: left out
    info = sandwich_curve(f)
    pts = info.points.set_index("k")
    assert pts["mean"].to_dict() == {0: 11.25, 1: 9.5, 2: 12.5}
    assert pts.loc[1, "sd"] == pytest.approx(np.sqrt(0.5))
    assert np.isnan(pts.loc[2, "sd"]) and pts.loc[2, "n"] == 1
    assert info.best_k == 1
    assert info.ks_beating("average") == [1] and info.ks_beating("best") == [1]
    with pytest.raises(AnalysisError, match="with a sandwich coefficient"):
        sandwich_curve(frame(*BASE, trial("ssff", 9.0)))


# --- seeds ---------------------------------------------------------------------------------

def test_seed_comparison_claims_only_with_welch_and_bootstrap():
    base = [10.0, 10.2, 9.9, 10.1, 10.0]
    good = [9.0, 9.1, 8.9, 9.05, 8.95]
    same = [10.0, 10.3, 9.8, 10.1, 10.05]
    f = frame(*(trial("sfsf", v, baseline=True, seed=i) for i, v in enumerate(base)),
              *(trial("ssff", v, seed=i, name=f"good@seed{i}") for i, v in enumerate(good)),
              *(trial("ffss", v, seed=i, name=f"same@seed{i}") for i, v in enumerate(same)),
              trial("fssf", 5.0, seed=0, name="single@seed0"))
    info = seed_comparison(f, n_resamples=999)
    good_row, same_row, single = info.row("good"), info.row("same"), info.row("single")
    welch = stats.ttest_ind(good, base, equal_var=False)
    assert good_row["welch_t"] == pytest.approx(welch.statistic)
    assert good_row["welch_p"] == pytest.approx(welch.pvalue)
    assert good_row["ci_low"] < good_row["difference"] < good_row["ci_high"] < 0
    assert bool(good_row["better"]) and "better than the baseline" in good_row["statement"]
    assert not bool(same_row["better"]) and same_row["verdict"] == "no evidence"
    assert "no evidence of a difference" in same_row["statement"]
    # a single seed, however good, is never claimed better
    assert not bool(single["better"]) and "no claim" in single["statement"]
    assert np.isnan(single["welch_p"])
    # deterministic for a seed
    again = seed_comparison(f, n_resamples=999)
    assert again.row("good")["ci_low"] == good_row["ci_low"]
