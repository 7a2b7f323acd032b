"""Trustworthy answers: the paper's Fig. 4 pooled over Tables 1 and 2, sweeps pooled into
one study, claims with adjusted p-values, effects, intervals and power, figures and
sections named by the paper's numbers."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import NO_BASELINE, SWEEP, frame, trial
from scipy import stats

from sublayer_search.analysis import AnalysisError, halves_study, seed_comparison
from sublayer_search.analysis.cli import add_arguments, run_analyze
from sublayer_search.analysis.papers import press_paper as paper
from sublayer_search.analysis.store.pooling import pool
from sublayer_search.analysis.studies.significance import (
    adjust_pvalues,
    power,
    seeds_for_power,
    verdict,
)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


# --- Fig. 4 as the paper defines it ----------------------------------------------------

def test_pooled_fig4_is_40_models_split_11_vs_29():
    pooled = paper.pooled_trials()
    assert (~pooled["baseline"]).sum() == 40 and pooled["baseline"].sum() == 5
    h = halves_study(pooled)
    assert h.reference == pytest.approx(18.648)
    assert h.group_sizes() == {"better": 11, "not better": 29}
    # the pooled means are the model-weighted means of the two tables' means
    t1, t2 = halves_study(paper.table1()), halves_study(paper.table2())
    for group, n1, n2 in (("better", 7, 4), ("not better", 13, 16)):
        for half in ("bottom", "top"):
            for kind in "sf":
                both = (n1 * t1.mean(group, half, kind) + n2 * t2.mean(group, half, kind))
                assert h.mean(group, half, kind) == pytest.approx(both / (n1 + n2))
    assert h.mean("better", "bottom", "s") == pytest.approx(10.0)
    assert h.mean("better", "top", "f") > h.mean("not better", "top", "f")


def test_paper_report_writes_fig4_csv_and_figure(tmp_path):
    assert run_analyze(_args("--paper", "press2020", "--out", str(tmp_path))) == 0
    means = pd.read_csv(tmp_path / "tables" / "fig4_halves_means.csv")
    assert list(means.columns) == ["group", "half", "kind", "mean", "n"]
    assert set(means["kind"]) == {"s", "f"}  # no c in a language model
    assert dict(zip(means["group"], means["n"], strict=False)) == {"better": 11,
                                                                     "not better": 29}
    assert len(means) == 8
    assert (tmp_path / "figures" / "fig4_halves.png").stat().st_size > 1000
    html = (tmp_path / "report.html").read_text()
    for title in ("Fig. 2: Table 1", "Fig. 3: Table 2", "Fig. 4: Tables 1 and 2 pooled",
                  "Fig. 4, Table 1 alone", "Fig. 5: sandwich coefficient", "Fig. 6:",
                  "Table 7: attention distance"):
        assert f"<h2>{title}" in html, title
    # the existing per-table views stay where they were
    assert (tmp_path / "tables" / "table1_halves_means.csv").exists()
    # every claim states the test, the adjusted p, the effect with its interval, the
    # baseline's seed sd and the seeds for 80 % power
    assert "Welch t-test" in html and "Holm-adjusted" in html
    assert "baseline seed sd" in html and "at 80% power" in html
    seeds = pd.read_csv(tmp_path / "tables" / "sandwich16_6_seeds.csv")
    for column in ("welch_p", "p_adjusted", "adjust", "difference", "ci_low", "ci_high",
                   "baseline_sd", "seeds_for_80_power", "verdict"):
        assert column in seeds.columns, column
    assert seeds.loc[0, "verdict"] == "better" and seeds.loc[0, "adjust"] == "holm"


def test_paper_report_adjust_bh_and_none(tmp_path):
    assert run_analyze(_args("--paper", "press2020", "--adjust", "bh",
                             "--out", str(tmp_path / "bh"))) == 0
    assert "Benjamini–Hochberg" in (tmp_path / "bh" / "report.html").read_text()
    assert run_analyze(_args("--paper", "press2020", "--adjust", "none",
                             "--out", str(tmp_path / "none"))) == 0
    seeds = pd.read_csv(tmp_path / "none" / "tables" / "sandwich16_6_seeds.csv")
    assert seeds.loc[0, "p_adjusted"] == seeds.loc[0, "welch_p"]
    with pytest.raises(SystemExit):
        _args("--paper", "press2020", "--adjust", "bonferroni", "--out", str(tmp_path))


# --- statistics --------------------------------------------------------------------------

def test_adjustments_by_hand_and_nan_left_out():
    p = [0.01, 0.04, 0.03, 0.005, float("nan")]
    holm = adjust_pvalues(p, "holm")
    assert holm[:4] == pytest.approx([0.03, 0.06, 0.06, 0.02]) and np.isnan(holm[4])
    bh = adjust_pvalues(p, "bh")
    assert bh[:4] == pytest.approx(stats.false_discovery_control(p[:4], method="bh"))
    assert bh[:4] == pytest.approx([0.02, 0.04, 0.04, 0.02])
    assert adjust_pvalues(p, "none")[:4] == pytest.approx(p[:4])
    assert adjust_pvalues([0.9, 0.8], "holm") == pytest.approx([1.0, 1.0])
    with pytest.raises(AnalysisError, match="unknown adjustment"):
        adjust_pvalues(p, "sidak")


def test_verdicts_use_the_adjusted_p_and_the_interval_side():
    assert verdict(0.01, -2.0, -1.0, alpha=0.05, lower=True) == "better"
    assert verdict(0.01, 1.0, 2.0, alpha=0.05, lower=True) == "worse"
    assert verdict(0.01, 1.0, 2.0, alpha=0.05, lower=False) == "better"
    assert verdict(0.06, -2.0, -1.0, alpha=0.05, lower=True) == "no evidence"
    assert verdict(0.01, -1.0, 1.0, alpha=0.05, lower=True) == "no evidence"
    assert verdict(float("nan"), -2.0, -1.0, alpha=0.05, lower=True) == "no evidence"


def test_seeds_for_80_power_noncentral_t():
    # d = 1: the textbook 17 per arm (two-sided alpha 0.05); d = 0.5: 64
    assert seeds_for_power(1.0, 1.0, 1.0) == 17
    assert seeds_for_power(-0.5, 1.0, 1.0) == 64
    assert power(17, 1.0) >= 0.8 > power(16, 1.0)
    assert seeds_for_power(1.0, float("nan"), 1.0) == 17  # one arm's sd when the other is unknown
    assert np.isnan(seeds_for_power(0.0, 1.0, 1.0))
    assert seeds_for_power(1e-4, 1.0, 1.0) == float("inf")


BASE = [10.0, 10.2, 9.9, 10.1, 10.0]
NOISE = [10.0, 10.3, 9.8, 10.1, 10.05]


def _two_orders() -> pd.DataFrame:
    # raw Welch p 0.035 and 0.048: both below 0.05, neither after Holm over 2 comparisons.
    # The orders train seeds 10-14, none of the baseline's: Welch's t decides
    return frame(*(trial("sfsf", v, baseline=True, seed=i) for i, v in enumerate(BASE)),
                 *(trial("ssff", v - 0.26, seed=10 + i, name=f"a@seed{10 + i}") for i, v in
                   enumerate(NOISE)),
                 *(trial("ffss", v - 0.24, seed=10 + i, name=f"b@seed{10 + i}") for i, v in
                   enumerate(NOISE)),
                 *(trial("fssf", v + 1.0, seed=10 + i, name=f"w@seed{10 + i}") for i, v in
                   enumerate(NOISE)))


def test_seed_verdicts_change_with_the_adjustment():
    f = _two_orders()
    none = seed_comparison(f, n_resamples=999, adjust="none")
    holm = seed_comparison(f, n_resamples=999)
    bh = seed_comparison(f, n_resamples=999, adjust="bh")
    for name in ("a", "b"):
        assert none.row(name)["welch_p"] < 0.05 and none.row(name)["verdict"] == "better"
        assert holm.row(name)["p_adjusted"] > 0.05
        assert holm.row(name)["verdict"] == "no evidence" and not holm.row(name)["better"]
        assert "Holm-adjusted over 3 comparisons" in holm.row(name)["statement"]
        assert holm.row(name)["decides"] == "unpaired (no shared seeds)"
        assert holm.row(name)["p_adjusted"] == holm.row(name)["welch_p_adjusted"]
    raw = holm.table["welch_p"].to_numpy()
    assert holm.table["p_adjusted"].to_numpy() == pytest.approx(adjust_pvalues(raw, "holm"))
    assert bh.table["p_adjusted"].to_numpy() == pytest.approx(adjust_pvalues(raw, "bh"))
    worse = holm.row("w")
    assert worse["verdict"] == "worse" and "worse than the baseline" in worse["statement"]
    assert worse["difference"] == pytest.approx(np.mean(NOISE) + 1.0 - np.mean(BASE))
    assert worse["ci_low"] > 0 and worse["comparisons"] == 3
    assert worse["seeds_for_80_power"] == seeds_for_power(
        worse["difference"], worse["sd"], worse["baseline_sd"])


# --- pooled sweeps -----------------------------------------------------------------------

def _sweep(metric: str, offset: float) -> pd.DataFrame:
    return frame(trial("sfsf", 10.0 + offset, baseline=True, seed=0, metric=metric),
                 trial("sfsf", 11.0 + offset, baseline=True, seed=1, metric=metric),
                 trial("ssff", 9.0 + offset, metric=metric))


def test_pool_frames_same_metric_and_refusal_naming_each_sweep():
    pooled = pool({"A": _sweep("val_ppl", 0.0), "B": _sweep("val_ppl", 1.0)})
    assert len(pooled) == 6 and list(pooled["experiment"]) == ["A"] * 3 + ["B"] * 3
    assert halves_study(pooled).reference == pytest.approx(11.0)
    with pytest.raises(AnalysisError) as err:
        pool({"A": _sweep("val_ppl", 0.0), "B": _sweep("val_bpc", 0.0)})
    assert "'A': val_ppl" in str(err.value) and "'B': val_bpc" in str(err.value)


def test_analyze_refuses_sweeps_of_different_metrics_exit_2(mlflow_store, tmp_path, capsys,
                                                            monkeypatch):
    from sublayer_search.analysis.store import runs

    fakes = {"A": _sweep("val_ppl", 0.0), "B": _sweep("val_bpc", 0.0)}
    monkeypatch.setattr(runs, "load", lambda name, uri, **kw: fakes[name])
    code = run_analyze(_args("--experiment", "A", "--experiment", "B", "--tracking-uri",
                             mlflow_store, "--out", str(tmp_path), "--no-attach"))
    err = capsys.readouterr().err
    assert code == 2 and "share one main metric" in err
    assert "'A': val_ppl" in err and "'B': val_bpc" in err
    assert not (tmp_path / "report.html").exists()


def test_analyze_pools_two_real_sweeps(mlflow_store, tmp_path, capsys):
    out = tmp_path / "pooled"
    code = run_analyze(_args("--experiment", SWEEP, "--experiment", NO_BASELINE,
                             "--tracking-uri", mlflow_store, "--out", str(out)))
    printed = capsys.readouterr()
    assert code == 0, printed.err
    trials = pd.read_csv(out / "tables" / "trials.csv")
    # NO_BASELINE holds SWEEP's trials 2-4 again (same order, seed and settings): replays,
    # one sample each, the latest finished kept (issue 46), and the output says so
    assert len(trials) == 8
    assert trials["experiment"].value_counts().to_dict() == {SWEEP: 5, NO_BASELINE: 3}
    assert ("3 trial(s) were trained more than once; the latest finished of each is kept "
            "and 3 earlier replay(s) left out") in printed.out
    html = (out / "report.html").read_text()
    assert f"Sweeps &#x27;{SWEEP}&#x27;, &#x27;{NO_BASELINE}&#x27; pooled" in html
    dist = pd.read_csv(out / "tables" / "sweep_distribution.csv")
    assert len(dist) == 3
    assert printed.out.count("attached the report to sweep run") == 2
