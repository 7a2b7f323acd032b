"""Translation / IOT studies: hand-made frames with known answers, the MLflow loader on a
small translation store with routing_bleu.json artifacts, the report and `--paper zhu2021`."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import (
    SWEEP,
    TRANSLATION_NO_BASELINE,
    TRANSLATION_SWEEP,
    frame,
    trial,
)
from scipy import stats

from sublayer_search.analysis import (
    AnalysisError,
    experiment_report,
    iot_baseline,
    iot_paper,
    is_translation,
    lower_is_better,
    paper,
    routing_matrix,
    routing_shares,
    runs,
    subset_study,
    translation_seeds,
)
from sublayer_search.analysis.cli import add_arguments, run_analyze
from sublayer_search.analysis.studies.significance import BATCHES_ONLY

BLEU = "val_bleu"


def iot(subset: str, value: float, *, seed: int = 0, shares: dict[int, float] | None = None,
        **fields: object) -> dict[str, object]:
    row = trial("csf" * 2, value, seed=seed, metric=BLEU, name=f"iot{subset}@seed{seed}")
    row.update(family="iot_subsets", space="iot_subsets", task="translation", subset=subset,
               subset_size=len(subset), stack="decoder", **fields)
    for code, share in (shares or {}).items():
        row[f"route_share_{code}"] = share
    return row


def base(value: float, seed: int) -> dict[str, object]:
    row = trial("scf" * 2, value, baseline=True, seed=seed, metric=BLEU,
                name=f"transformer@seed{seed}")
    row.update(task="translation")
    return row


BASE = (base(20.0, 0), base(21.0, 1), base(22.0, 2))


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


# --- conventions -----------------------------------------------------------------------

def test_bleu_is_higher_is_better_and_detects_translation():
    for name in ("val_bleu", "best_val_bleu", "final_val_bleu", "bleu", "sacrebleu", "val_bleu4"):
        assert not lower_is_better(name), name
    assert lower_is_better("val_ppl") and lower_is_better("val_loss")
    assert is_translation(frame(*BASE))
    assert not is_translation(frame(trial("sfsf", 10.0, baseline=True)))


# --- subsets and sizes -----------------------------------------------------------------

def test_subset_study_known_means_and_sizes():
    f = frame(*BASE, iot("46", 22.0), iot("46", 23.0, seed=1), iot("14", 20.0),
              iot("146", 24.0), iot("12", 21.0, status="failed"))
    info = subset_study(f)
    assert info.metric == BLEU and info.baseline_source == "baseline trials"
    assert (info.baseline.mean, info.baseline.best, info.baseline.sd) == (21.0, 22.0, 1.0)
    s46 = info.subset("46")
    assert (s46["n"], s46["mean"], s46["size"], s46["codes"]) == (2, 22.5, 2, "4,6")
    assert s46["sd"] == pytest.approx(math.sqrt(0.5))
    assert s46["blocks"] == "csf fcs" and bool(s46["paper_subset"])
    assert not bool(info.subset("14")["paper_subset"])
    assert bool(info.subset("146")["paper_subset"])  # the paper's N = 3 subset
    assert info.subset("146")["difference"] == 3.0
    assert "12" not in set(info.subsets["subset"])  # failed trials are dropped
    sizes = info.sizes.set_index("size")
    # size 2: trials 22, 23, 20 (two subsets): mean 21.667, sd over all three trials
    assert sizes.loc[2, "n"] == 3 and sizes.loc[2, "n_subsets"] == 2
    assert sizes.loc[2, "mean"] == pytest.approx(65 / 3)
    assert sizes.loc[2, "sd"] == pytest.approx(np.std([22.0, 23.0, 20.0], ddof=1))
    assert sizes.loc[2, "sd_between_subsets"] == pytest.approx(np.std([22.5, 20.0], ddof=1))
    assert sizes.loc[2, "best_subset"] == "46"
    assert math.isnan(sizes.loc[3, "sd"]) and sizes.loc[3, "mean"] == 24.0
    assert info.best_subset == "146" and info.best_size == 3
    beats = dict(zip(info.subsets["subset"], info.subsets["beats_average"], strict=True))
    assert beats == {"14": False, "46": True, "146": True}
    assert dict(zip(info.subsets["subset"], info.subsets["beats_best"], strict=True))["46"]


def test_subset_one_stands_in_for_missing_baseline_trials():
    f = frame(iot("1", 30.0), iot("1", 32.0, seed=1), iot("46", 33.0))
    stats_, source = iot_baseline(f)
    assert source == "subset {1} trials" and stats_.values == (30.0, 32.0)
    info = subset_study(f)
    assert info.baseline.mean == 31.0 and set(info.subsets["subset"]) == {"1", "46"}


def test_subset_study_bad_input():
    with pytest.raises(AnalysisError, match="need a BLEU metric"):
        subset_study(frame(trial("sfsf", 10.0, baseline=True), trial("ssff", 9.0)))
    with pytest.raises(AnalysisError, match="no finished baseline.*no trial of subset"):
        subset_study(frame(iot("46", 22.0), iot("146", 23.0)))
    with pytest.raises(AnalysisError, match="no usable IOT trial"):
        subset_study(frame(*BASE))
    bad = iot("46", 22.0)
    bad["subset_size"] = 3
    with pytest.raises(AnalysisError, match="does not match subset"):
        subset_study(frame(*BASE, bad))


# --- routing shares --------------------------------------------------------------------

def test_routing_shares_mean_over_seeds_and_missing_codes_count_zero():
    f = frame(*BASE, iot("46", 22.0, shares={4: 0.6, 6: 0.4}),
              iot("46", 23.0, seed=1, shares={4: 0.8, 6: 0.2}),
              iot("146", 24.0, shares={4: 0.75, 6: 0.25}))  # code 1 never chosen
    info = routing_shares(f)
    m = info.matrix()
    assert m.loc["46", 4] == pytest.approx(0.7) and m.loc["46", 6] == pytest.approx(0.3)
    assert m.loc["146", 1] == 0.0 and math.isnan(m.loc["46", 1])
    row = info.shares[(info.shares["subset"] == "46") & (info.shares["code"] == 4)].iloc[0]
    assert row["n"] == 2 and row["block"] == "csf"
    assert row["sd"] == pytest.approx(np.std([0.6, 0.8], ddof=1))
    assert np.allclose(info.totals["total"], 1.0)
    dom = info.dominant().set_index("subset")
    assert dom.loc["46", "code"] == 4 and dom.loc["146", "code"] == 4


def test_routing_shares_bad_input():
    with pytest.raises(AnalysisError, match="no routing shares"):
        routing_shares(frame(*BASE, iot("46", 22.0)))
    with pytest.raises(AnalysisError, match=r"code\(s\) \[2\] outside"):
        routing_shares(frame(iot("46", 22.0, shares={2: 0.5, 4: 0.5})))


# --- routing matrix --------------------------------------------------------------------

def _routing(run_id, subset, matrix, seed=0):
    return runs.routing_rows(matrix, run_id=run_id, subset=subset, seed=seed)


def test_routing_matrix_means_and_diagonal():
    rows = (_routing("a", "46", {"4": {"4": 30.0, "6": 25.0}, "6": {"4": 20.0, "6": 28.0}})
            + _routing("b", "46", {"4": {"4": 32.0, "6": 27.0}, "6": {"4": 22.0, "6": 18.0}},
                       seed=1)
            + _routing("c", None, {"1": {"1": 10.0, "4": 12.0}, "4": {"1": 5.0, "4": 6.0}}))
    info = routing_matrix(pd.DataFrame(rows))
    assert info.subsets == ["14", "46"]  # no subset param: the codes the matrix covers
    m = info.matrix("46")
    assert (m.loc[4, 4], m.loc[4, 6], m.loc[6, 4], m.loc[6, 6]) == (31.0, 26.0, 21.0, 23.0)
    d = info.diagonal.set_index(["subset", "routed"])
    assert d.loc[("46", 4), "margin"] == 5.0 and d.loc[("46", 6), "margin"] == 2.0
    assert bool(d.loc[("46", 6), "diagonal_best"])
    assert not bool(d.loc[("14", 1), "diagonal_best"]) and d.loc[("14", 1), "best_forced"] == 4
    assert info.diagonal_share == 0.75
    cell = info.cells[(info.cells["subset"] == "46") & (info.cells["routed"] == 6)
                      & (info.cells["forced"] == 6)].iloc[0]
    assert cell["n"] == 2 and cell["sd"] == pytest.approx(np.std([28.0, 18.0], ddof=1))


def test_routing_matrix_bad_input():
    with pytest.raises(AnalysisError, match="not in its subset"):
        routing_matrix(pd.DataFrame(_routing("a", "46", {"4": {"1": 3.0}})))
    with pytest.raises(AnalysisError, match="missing column"):
        routing_matrix(pd.DataFrame({"run_id": ["a"]}))
    with pytest.raises(AnalysisError, match="is not a code with a BLEU"):
        runs.routing_rows({"4": {"6": "high"}}, run_id="a")
    with pytest.raises(AnalysisError, match="routing_bleu.json of run a"):
        runs.routing_rows([1, 2], run_id="a")


# --- seeds -----------------------------------------------------------------------------

def test_translation_seeds_higher_is_better_and_grouped_by_subset():
    # iot46 and iot14 share the decoder order (csf x 2) but are different candidates
    f = frame(*BASE, iot("46", 25.0), iot("46", 25.5, seed=1), iot("46", 26.0, seed=2),
              iot("14", 19.0), iot("14", 20.0, seed=1), iot("14", 21.0, seed=2))
    info = translation_seeds(f, n_resamples=999)
    assert not info.lower_is_better and list(info.table["name"]) == ["iot46", "iot14"]
    good, bad = info.row("iot46"), info.row("iot14")
    expected = stats.ttest_ind([25.0, 25.5, 26.0], [20.0, 21.0, 22.0], equal_var=False)
    assert good["welch_p"] == pytest.approx(expected.pvalue)
    assert good["difference"] == 4.5 and good["ci_low"] > 0 and bool(good["better"])
    assert bad["difference"] == -1.0 and not bool(bad["better"])
    assert bad["verdict"] == "no evidence" and "no evidence of a difference" in bad["statement"]
    # iot14 is the baseline minus 1 at every seed: no paired p; Welch decides anyway
    assert set(info.table["decides"]) == {BATCHES_ONLY}


def test_translation_seeds_show_the_paired_test_beside_welch_over_shared_seeds():
    f = frame(*BASE, iot("46", 25.0), iot("46", 25.5, seed=1), iot("46", 26.5, seed=2),
              iot("14", 19.0), iot("14", 20.5, seed=1), iot("14", 21.0, seed=2))
    info = translation_seeds(f, n_resamples=999)
    good = info.row("iot46")
    expected = stats.ttest_rel([25.0, 25.5, 26.5], [20.0, 21.0, 22.0])
    # a shared seed shares the batches, not the initial weights: Welch decides
    assert good["decides"] == BATCHES_ONLY and good["paired_p"] == pytest.approx(expected.pvalue)
    assert good["p_adjusted"] == good["welch_p_adjusted"] and good["comparisons"] == 2
    assert good["verdict"] == good["welch_verdict"]
    # reference = subset {1} when there are no baseline trials: paired against its seeds
    g = frame(iot("1", 30.0), iot("1", 32.0, seed=1), iot("46", 33.0), iot("46", 34.5, seed=1))
    row = translation_seeds(g, n_resamples=999).row("iot46")
    assert row["decides"] == BATCHES_ONLY and row["paired_seeds"] == "0, 1"


def test_translation_seeds_bad_input():
    with pytest.raises(AnalysisError, match="need a BLEU metric"):
        translation_seeds(frame(trial("sfsf", 10.0, baseline=True), trial("ssff", 9.0)))
    with pytest.raises(AnalysisError, match="no finished baseline"):
        translation_seeds(frame(iot("46", 22.0)))


# --- the paper's numbers ---------------------------------------------------------------

def test_zhu2021_table3_numbers_subsets_and_no_table13():
    t3 = iot_paper.table3().set_index("size")
    assert t3["value"].to_dict() == {1: 34.64, 2: 35.32, 3: 35.58, 4: 35.62, 5: 35.65,
                                     6: 35.60}
    assert t3["subset"].to_dict() == {1: "1", 2: "46", 3: "146", 4: "1246", 5: "12456",
                                      6: "123456"}
    assert (t3["source"] == "Zhu et al. (2021), Table 3 (IWSLT14 De→En)").all()
    assert t3.loc[4, "gain"] == 0.98
    info = subset_study(iot_paper.trials())
    assert info.baseline.values == (34.64,) and info.best_size == 5
    assert info.subsets["paper_subset"].all()
    tables = iot_paper.published_tables()
    assert "Table 13" in iot_paper.__doc__ and "not" in iot_paper.__doc__
    assert not any("13" in name for name in tables)
    tr = tables["press2020_translation"]
    assert tr.equals(paper.translation()) and tr["value"].iloc[0] == 28.74
    cost = tables["zhu2021_training_cost"].set_index("size")
    assert cost.loc[2, "per_epoch"] == 1.72 and cost.loc[3, "total"] == 1.44


def test_analyze_paper_zhu2021_writes_tables_and_figure(tmp_path, capsys):
    assert run_analyze(_args("--paper", "zhu2021", "--out", str(tmp_path))) == 0
    html = (tmp_path / "report.html").read_text()
    assert "35.62" in html and "34.64" in html and "Table 13" in html and "28.74" in html
    assert (tmp_path / "figures" / "zhu2021_bleu_by_size.png").stat().st_size > 1000
    assert "figures/zhu2021_bleu_by_size.svg" in html
    for name in ("zhu2021_table3", "zhu2021_training_cost", "press2020_translation"):
        assert (tmp_path / "tables" / f"{name}.csv").exists()
    t3 = pd.read_csv(tmp_path / "tables" / "zhu2021_table3.csv")
    assert t3["value"].tolist() == [34.64, 35.32, 35.58, 35.62, 35.65, 35.60]
    svg = (tmp_path / "figures" / "zhu2021_bleu_by_size.svg").read_text()
    assert "average baseline" in svg
    assert "report.html" in capsys.readouterr().out


# --- MLflow store ----------------------------------------------------------------------

def test_load_translation_trials(translation_store):
    t = runs.load(TRANSLATION_SWEEP, translation_store)
    assert len(t) == 9
    by = t.set_index("name")
    row = by.loc["iot146@seed0"]
    assert (row["task"], row["subset"], row["subset_size"], row["codes"], row["stack"]) == (
        "translation", "146", 3, "1,4,6", "decoder")
    assert (row["metric"], row["final"], row["best"], row["family"]) == (
        "val_bleu", 24.0, 24.0, "iot_subsets")
    assert row["route_share_1"] == 0.2 and row["route_share_4"] == 0.5  # final values
    assert [c for c in t.columns if c.startswith("route_share_")] == [
        "route_share_1", "route_share_4", "route_share_6"]
    assert by.loc["iot1246@seed0", "status"] == "failed"
    assert by.loc["sandwich_enc1@seed0", "side"] == "encoder"
    assert by.loc["sandwich_enc1@seed0", "k"] == 1
    assert bool(by.loc["transformer@seed0", "baseline"])


def test_lm_frames_get_no_translation_columns(mlflow_store):
    t = runs.load(SWEEP, mlflow_store)
    assert "subset" not in t.columns and "task" not in t.columns
    assert not any(c.startswith("route_share_") for c in t.columns)


def test_load_routing_downloads_artifacts(translation_store):
    r = runs.load_routing(TRANSLATION_SWEEP, translation_store)
    assert list(r.columns) == list(runs.ROUTING_COLUMNS)
    assert set(r["name"]) == {"iot46@seed0", "iot46@seed1", "iot146@seed0"}
    assert len(r) == 4 + 4 + 9
    cell = r[(r["name"] == "iot146@seed0") & (r["routed"] == 4) & (r["forced"] == 1)]
    assert cell["bleu"].tolist() == [20.0] and cell["subset"].tolist() == ["146"]
    info = routing_matrix(r)
    assert info.matrix("46").loc[4, 4] == 31.0
    assert int(info.diagonal["diagonal_best"].sum()) == 4 and len(info.diagonal) == 5


def test_analyze_translation_sweep_writes_iot_sections(translation_store, tmp_path, capsys):
    out = tmp_path / "report"
    code = run_analyze(_args("--experiment", TRANSLATION_SWEEP, "--tracking-uri",
                             translation_store, "--out", str(out)))
    assert code == 0, capsys.readouterr().err
    html = (out / "report.html").read_text()
    for stem in ("iot_bleu_by_size", "iot_bleu_by_subset", "iot_route_shares",
                 "iot_routing_bleu", "sweep_distribution", "sandwich_decoder", "sandwich_encoder",
                 "translation_seeds"):
        assert (out / "figures" / f"{stem}.png").stat().st_size > 1000, stem
        assert f"figures/{stem}.svg" in html
    assert not (out / "figures" / "sweep_halves.png").exists()  # no halves for translation
    subsets = pd.read_csv(out / "tables" / "iot_subsets.csv", dtype={"subset": str})
    assert dict(zip(subsets["subset"], subsets["mean"], strict=True)) == {"46": 22.5,
                                                                          "146": 24.0}
    comparison = pd.read_csv(out / "tables" / "iot_paper_comparison.csv")
    assert comparison.set_index("size").loc[3, "paper_bleu"] == 35.58
    assert comparison.set_index("size").loc[2, "ours_gain"] == 1.5
    # the scorer and split beside every comparison with the paper (issue 46): these runs
    # predate translation.bleu_tokenize, so sacrebleu's 13a on the validation split
    assert set(comparison["ours_scored"]) == {"sacrebleu 13a, validation split"}
    assert set(comparison["paper_scored"]) == {
        "multi-bleu.perl on tokenised text (sacrebleu tokenize none), test split"}
    assert "ours (sacrebleu 13a, validation split) vs Zhu et al. (2021)" in html
    assert "4 of 5" in html and "Zhu et al. (2021) Table 3" in html
    shares = pd.read_csv(out / "tables" / "iot_route_shares.csv", dtype={"subset": str})
    assert shares[(shares["subset"] == "46") & (shares["code"] == 4)]["mean"].iloc[0] == (
        pytest.approx(0.65))
    seeds = pd.read_csv(out / "tables" / "translation_seeds.csv")
    assert "iot46" in set(seeds["name"]) and not seeds["better"].any()
    svg = (out / "figures" / "iot_bleu_by_size.svg").read_text()
    assert "average baseline" in svg and "best baseline" in svg


def test_translation_report_bad_input(translation_store, tmp_path, capsys):
    code = run_analyze(_args("--experiment", TRANSLATION_NO_BASELINE, "--tracking-uri",
                             translation_store, "--out", str(tmp_path), "--no-attach"))
    assert code == 2 and "no finished baseline" in capsys.readouterr().err
    f = frame(*BASE, iot("46", 22.0))
    with pytest.raises(AnalysisError, match="BLEU metric"):
        experiment_report(f.assign(metric="val_loss"), tmp_path / "x", title="loss")


def test_translation_report_draws_the_bleu_front_or_says_why(tmp_path):
    """Higher BLEU is better on the front; equal costs get a reason, not silence."""
    rows = [dict(r, params=1000, flops_per_token=2000) for r in BASE]
    rows += [iot("46", 23.0, params=1500, flops_per_token=2000),  # dearer, better: on it
             iot("146", 21.0, seed=1, params=1800, flops_per_token=2000)]  # dominated
    report = experiment_report(frame(*rows), tmp_path / "r", title="t", metric=BLEU)
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Pareto front: val_bleu against parameters" in html
    front = pd.read_csv(tmp_path / "r" / "tables" / "pareto_params.csv")
    on = front[front["on_front"]]
    assert set(on["name"]) == {"transformer@seed2", "iot46@seed0"}
    assert "iot146@seed1" not in set(on["name"])
    assert "all 5 usable trials have the same FLOPs per token (2,000)" in html
    assert {f.name for f in report.figures} >= {"pareto_params.png", "pareto_params.svg"}
    flat = [dict(r, params=1000, flops_per_token=2000) for r in BASE]
    experiment_report(frame(*flat), tmp_path / "flat", title="t", metric=BLEU)
    assert "Pareto front: not drawn (val_bleu against cost)" in (
        tmp_path / "flat" / "report.html").read_text()
