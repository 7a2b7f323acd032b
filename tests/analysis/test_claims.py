"""Claims that never outrun the data (issues 26 and 39): t intervals for few seeds, the
paired test deciding where every arm's seeds are the baseline's (Holm over the family,
Welch beside it), leaders instead of a "best k", one-seed assumptions stated, each random
family alone, the scale next to every answer, post-hoc power labelled. Statistics against
scipy and hand computations; legends, titles, report and docs text by content."""

from __future__ import annotations

import math
import re
from html import unescape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import sandwich_rows, seed_values
from scipy import stats

from sublayer_search.analysis.store.study_export import builtin_export
from sublayer_search.analysis.studies.replication import by_family, scale_statement, single_runs
from sublayer_search.analysis.studies.sandwich import headline, leaders, sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison
from sublayer_search.analysis.studies.significance import (
    BATCHES_ONLY,
    design_power,
    paired,
    welch_interval,
)

METRIC = "val_bpc"


@pytest.fixture(scope="module")
def study():  # type: ignore[no-untyped-def]
    return builtin_export("mini_press2020")


def test_welch_interval_by_hand_and_wider_than_the_bootstrap_for_three_seeds(study) -> None:
    a, b = seed_values(study.trials, 5).to_numpy(), seed_values(study.trials, None).to_numpy()
    lo, hi = welch_interval(a, b, 0.95)
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 8
    dof = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 7)
    half = stats.t.ppf(0.975, dof) * math.sqrt(va + vb)
    assert (lo, hi) == pytest.approx((a.mean() - b.mean() - half, a.mean() - b.mean() + half))
    assert round(lo, 3) == -0.257 and round(hi, 3) == -0.041  # the Welch interval
    boot = stats.bootstrap((a, b), lambda x, y, axis=-1: x.mean(axis) - y.mean(axis),
                           vectorized=True, method="percentile", n_resamples=4999,
                           rng=np.random.default_rng(0)).confidence_interval
    assert boot.high - boot.low < 0.6 * (hi - lo)  # why the bootstrap is not used


def test_paired_tests_over_shared_seeds_match_scipy(study) -> None:
    k5, base = seed_values(study.trials, 5), seed_values(study.trials, None)
    pair = paired(k5.to_dict(), base.to_dict())
    assert pair is not None and pair.seeds == (0, 1, 2)
    d = (k5 - base.loc[[0, 1, 2]]).to_numpy()
    ref = stats.ttest_rel(k5.to_numpy(), base.loc[[0, 1, 2]].to_numpy())
    assert pair.difference == pytest.approx(d.mean())
    assert pair.t == pytest.approx(ref.statistic) and pair.p == pytest.approx(ref.pvalue)
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / math.sqrt(3)
    assert (pair.ci_low, pair.ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    assert pair.wilcoxon_p == pytest.approx(stats.wilcoxon(d).pvalue)
    assert pair.wilcoxon_p == pytest.approx(0.25)  # all three below 0: 2 / 2^3
    assert paired({0: 1.0}, {0: 2.0, 1: 3.0}) is None


def test_design_power_is_planned_power_for_a_stated_effect() -> None:
    # G*Power: two-sided two-sample t, d = 0.8, 20 per group, alpha 0.05 -> 0.6934
    assert design_power(20, 20, 0.8, 1.0) == pytest.approx(0.6934, abs=5e-4)
    dof, nc = 9, 1.0 / (1.0 * math.sqrt(1 / 3 + 1 / 8))
    crit = stats.t.ppf(0.975, dof)
    assert design_power(3, 8, 1.0, 1.0) == pytest.approx(
        stats.nct.sf(crit, dof, nc) + stats.nct.cdf(-crit, dof, nc))
    assert math.isnan(design_power(1, 8, 1.0, 1.0))


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm by hand: sorted p times (m, m-1, ...), running maximum, capped at 1."""
    order = np.argsort(p)
    stepped = np.minimum(1, np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)))
    return stepped[np.argsort(order)]


def test_seed_comparison_states_which_test_each_number_comes_from(study) -> None:
    info = seed_comparison(sandwich_rows(study.trials), metric=METRIC)
    row = info.row("sandwich6_5")
    assert row["ci_method"] == "Welch t interval"
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(welch_interval(
        seed_values(study.trials, 5).to_numpy(), seed_values(study.trials, None).to_numpy()))
    assert row["paired_n"] == 3 and row["paired_seeds"] == "0, 1, 2"
    ref = stats.ttest_rel(seed_values(study.trials, 5).to_numpy(),
                          seed_values(study.trials, None).loc[[0, 1, 2]].to_numpy())
    assert row["paired_p"] == pytest.approx(ref.pvalue)
    base_sd = float(np.std(seed_values(study.trials, None), ddof=1))
    assert row["effect"] == pytest.approx(base_sd)
    assert row["design_power"] == pytest.approx(design_power(3, 8, base_sd, base_sd))
    text = row["statement"]
    for phrase in ("difference -0.149, 95% Welch t interval [-0.257, -0.0414]; Welch t-test "
                   "t = ", "Holm-adjusted over 5 comparisons p = 0.0258 (alpha 0.05): better "
                   "than the baseline; decides: unpaired (shared seeds share the batch order, "
                   "not the initial weights)",
                   "paired alongside (does not decide): paired t over the 3 shared seeds "
                   "(0, 1, 2): mean difference -0.143, 95% paired t interval [-0.276, "
                   "-0.0103], paired t-test p = 0.0435, Holm-adjusted over 5 comparisons "
                   "p = 0.0971, paired verdict no evidence",
                   "Wilcoxon signed-rank p = 0.25 (unadjusted, shown only: it never decides)",
                   "post hoc (from the observed difference): 3 seeds per arm",
                   "planned power of this design (n=3 vs 8"):
        assert phrase in text, phrase
    boot = seed_comparison(sandwich_rows(study.trials), metric=METRIC, interval="bootstrap")
    assert "no bootstrap" in boot.row("sandwich6_5")["ci_method"]  # 3 < BOOTSTRAP_MIN_N


def test_no_best_k_without_a_test_among_the_leaders(study) -> None:
    info = sandwich_curve(sandwich_rows(study.trials), metric=METRIC)
    lead = leaders(info)
    assert lead.attrs["best_k"] == 5 == info.best_k
    # every k trained seeds 0-2, as k = 5 did, but a seed shares no initial weights
    assert lead.attrs["decides"] == BATCHES_ONLY
    assert sorted(lead.attrs["leaders"]) == [1, 2, 3, 4, 5]  # none told apart from k = 5
    row = lead.set_index("k")
    for k, p, q in ((3, 0.74, 0.69), (4, 0.84, 0.66)):  # k5 vs k3, k5 vs k4
        ref = stats.ttest_ind(seed_values(study.trials, k), seed_values(study.trials, 5),
                              equal_var=False)
        assert row.loc[k, "welch_p"] == pytest.approx(ref.pvalue)
        assert round(row.loc[k, "welch_p"], 2) == p
        pair = stats.ttest_rel(seed_values(study.trials, k), seed_values(study.trials, 5))
        assert row.loc[k, "paired_p"] == pytest.approx(pair.pvalue)
        assert round(row.loc[k, "paired_p"], 2) == q
    others = lead["k"] != 5
    for test in ("welch", "paired"):
        p = lead.loc[others, f"{test}_p"].to_numpy()
        assert lead.loc[others, f"{test}_p_adjusted"].to_numpy() == pytest.approx(_holm(p))
    assert (lead["p_adjusted"].dropna() == lead["welch_p_adjusted"].dropna()).all()
    assert round(lead.loc[others, "p_adjusted"].min(), 2) == 0.28
    assert headline(lead) == ("best mean at k = 5, not told apart from k = 1, 2, 3, 4\n"
                              "(Welch t, Holm-adjusted p >= 0.28): no best k claimed")
    # a k told apart: a clearly worse k with several seeds leaves the set
    far = info.trials.assign(value=np.where(info.trials["k"] == 1, 4.0 + info.trials["seed"]
                                            * 0.01, info.trials["value"]))
    moved = leaders(type(info)(metric=info.metric, baseline=info.baseline,
                               points=info.points, trials=far))
    assert 1 not in moved.attrs["leaders"] and bool(moved.set_index("k").loc[1, "told_apart"])


def test_single_runs_use_an_orders_own_variance_where_it_has_seeds(study) -> None:
    frame = study.trials.copy()
    runs = single_runs(frame, METRIC)
    assert set(runs["test"]) == {"prediction-interval t (one seed)"}
    assert set(runs["assumption"]) == {"its seed sd taken to be the baseline's 0.029"}
    # the sandwich orders (3 seeds each) treated as a random family: Welch, own variance
    as_random = frame.assign(family=frame["family"].replace("sandwich", "permutations"))
    runs = single_runs(as_random, METRIC).set_index("order")
    k5 = frame.loc[frame["k"] == 5, "order"].iloc[0]
    ref = stats.ttest_ind(seed_values(frame, 5), seed_values(frame, None), equal_var=False)
    assert runs.loc[k5, "n"] == 3 and runs.loc[k5, "test"] == "Welch t (own seed sd)"
    assert runs.loc[k5, "p"] == pytest.approx(ref.pvalue)
    assert runs.loc[k5, "sd"] == pytest.approx(0.0497, abs=1e-4)
    assert runs.loc[k5, "assumption"] == ""


def test_each_family_alone_and_pooled(study) -> None:
    fam = by_family(study.trials, METRIC).set_index("family")
    assert list(fam.index) == ["permutations", "budgeted", "pooled"]
    base = seed_values(study.trials, None).to_numpy()
    for name in ("permutations", "budgeted"):
        vals = study.trials.loc[study.trials["family"] == name, "final"].to_numpy(dtype=float)
        ratio = vals.var(ddof=1) / base.var(ddof=1)
        assert fam.loc[name, "variance_ratio"] == pytest.approx(ratio)
        dof = len(vals) - 1
        two_sided = 2 * min(stats.f.sf(ratio, dof, 7), stats.f.cdf(ratio, dof, 7))
        assert fam.loc[name, "ratio_p"] == pytest.approx(two_sided)
        assert fam.loc[name, "order_share"] == pytest.approx(1 - 1 / ratio)
        lo = ratio / stats.f.ppf(0.975, dof, 7)
        hi = ratio / stats.f.ppf(0.025, dof, 7)
        assert fam.loc[name, "share_ci_low"] == pytest.approx(max(0.0, 1 - 1 / lo))
        assert fam.loc[name, "share_ci_high"] == pytest.approx(1 - 1 / hi)
    assert round(fam.loc["permutations", "variance_ratio"], 1) == 3.6
    # two-sided: the permutations' ratio interval [0.81, 11.1] holds 1, p 0.088
    assert round(fam.loc["permutations", "ratio_p"], 3) == 0.088
    assert round(fam.loc["permutations", "ratio_ci_low"], 2) == 0.81
    assert fam.loc["permutations", "share_ci_low"] == 0.0
    assert round(fam.loc["permutations", "mann_whitney_p"], 4) == 0.0047
    assert round(fam.loc["permutations", "spearman_rho"], 2) == -0.78
    assert round(fam.loc["budgeted", "spearman_rho"], 2) == -0.17
    assert round(fam.loc["budgeted", "spearman_p"], 2) == 0.48
    assert round(fam.loc["pooled", "variance_ratio"], 1) == 8.1


def test_scale_statement(study) -> None:
    text = scale_statement(study.trials, study.history, METRIC)
    assert text == ("at this scale only: 312k parameters, 800 training steps; the curves end "
                    "at 0.17 of their early slope (median): not converged")


def test_fig4_legend_says_the_grouping_is_untested(study) -> None:
    from sublayer_search.analysis.figures.plots import plot_halves, plot_position_map
    from sublayer_search.analysis.studies.halves import halves_study

    frame = study.trials[study.trials["family"].isin(("permutations", "budgeted"))
                         | study.trials["baseline"]]
    h = halves_study(frame, metric=METRIC)
    for fig in (plot_halves(h), plot_position_map(h)):
        texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert "at least as good as the baseline mean, untested (n=12)" in texts
        assert "not as good as the baseline mean, untested (n=27)" in texts
        assert not any("better than the average baseline" in t for t in texts)


def _sections(html: str) -> dict[str, str]:
    """Each ``<h2>`` title -> its section's text (tags dropped, spaces collapsed)."""
    out = {}
    for part in html.split("<h2>")[1:]:
        head = unescape(part.split("</h2>")[0]).strip()
        out[head] = re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", " ", part)))
    return out


def test_the_shipped_report_says_nothing_its_tests_do_not_support(tmp_path: Path) -> None:
    from sublayer_search.analysis.report.build import builtin_study_report

    report = builtin_study_report("mini_press2020", tmp_path)
    sections = _sections(report.html.read_text())
    answers = [h for h in sections if h.startswith(("(a)", "(b)", "(c)", "(d)", "(b, d)",
                                                    "Fig. 6: (c)"))]
    assert len(answers) == 6
    for head in answers:  # the scale next to every answer
        assert "at this scale only: 312k parameters, 800 training steps" in sections[head], head
    sandwich = sections["(c) Fig. 5: sandwich coefficient"]
    assert ("k = 5 has the best mean, but k = 1, 2, 3, 4, 5 cannot be told apart from it "
            "(no best k claimed)") in sandwich
    assert f"decides {BATCHES_ONLY} (4 comparisons)" in sandwich
    single = sections["(a) Random orders against the average baseline, tested"]
    assert "39 of 39 orders have one seed: their seed sd is taken to be the baseline's 0.029" \
        in single
    assert "0.008 to 0.050 over 5 orders (baseline 0.029)" in single
    seeds = sections["Fig. 6: (c) sandwich coefficients, over seeds against the baseline"]
    assert "post hoc" in seeds and "Welch t interval" in seeds and "bootstrap (percentile)" \
        not in seeds and "Wilcoxon signed-rank p" in seeds
    assert ("Test that decides (unpaired: shared seeds share the batch order, not the initial "
            "weights): Welch's t-test per order against every baseline seed") in seeds
    assert f"decides {BATCHES_ONLY}: 5 better, 0 worse, 0 no evidence of 5" in seeds
    table = pd.read_csv(tmp_path / "tables" / "sandwich_seeds.csv")
    for column in ("welch_p_adjusted", "welch_verdict", "paired_p_adjusted",
                   "paired_verdict", "decides"):
        assert column in table.columns, column
    fam = sections["(b, d) Each family alone and pooled"]
    for phrase in ("permutations (n=20): Fig. 4 pattern Spearman rho = -0.78",
                   "budgeted (n=19): Fig. 4 pattern Spearman rho = -0.17, p = 0.48",
                   "permutations (n=20): variance ratio orders / seeds 3.6",
                   "two-sided F-test p = 0.088; share beyond seed noise 72% [95% CI 0%, 91%]",
                   "pooled (n=39): variance ratio orders / seeds 8.1"):
        assert phrase in fam, phrase
    assert "untested grouping" in sections[
        "(b) Fig. 4: random models of both tables pooled, sublayers in the bottom and top halves"]


def _numbers(text: str) -> set[str]:
    """Every number written in ``text`` (signs, decimals, exponents; thousands commas and a
    trailing full stop dropped)."""
    found = re.findall(r"(?<![\w^])[-+]?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?", text)
    return {n.replace(",", "").lstrip("+") for n in found}


def test_the_findings_cover_every_number_with_a_computation(study) -> None:
    """Every number of docs/findings.md's science section is recomputed from the shipped
    data (or is a setting of the shipped experiment or a figure of the paper)."""
    import yaml

    from sublayer_search.analysis.store.frame import baseline_stats
    from sublayer_search.analysis.studies.halves import halves_study
    from sublayer_search.analysis.studies.replication import RANDOM_FAMILIES, end_slopes, noise

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    text = doc.split("# What the product finds at small scale")[1].split("```bash")[0]
    frame, meta = study.trials, study.meta
    exp = yaml.safe_load(meta["experiment_yaml"])
    base = baseline_stats(frame, METRIC)
    runs = single_runs(frame, METRIC)
    pooled = frame[frame["family"].isin(RANDOM_FAMILIES) | frame["baseline"]]
    h = halves_study(pooled, metric=METRIC)
    fam = by_family(frame, METRIC).set_index("family")
    nz = noise(frame, METRIC)
    slopes = end_slopes(study.history, frame, METRIC)
    seeds = seed_comparison(sandwich_rows(frame), metric=METRIC).table.set_index("name")
    lead = leaders(sandwich_curve(sandwich_rows(frame), metric=METRIC)).set_index("k")
    k5, k2 = seeds.loc["sandwich6_5"], seeds.loc["sandwich6_2"]
    assert set(seeds["decides"]) == {BATCHES_ONLY} and lead.attrs["decides"] == BATCHES_ONLY
    assert set(seeds["verdict"]) == {"better"}
    k1 = seeds.loc["sandwich6_1"]
    shared = seed_values(frame, None).loc[[0, 1, 2]]
    good_budgeted = runs.loc[runs["beats_average"] & (runs["family"] == "budgeted"), "order"]
    corr = [np.corrcoef(seed_values(frame, k).to_numpy(), shared.to_numpy())[0, 1]
            for k in range(1, 6)]
    assert h.mann_whitney is not None and h.spearman is not None
    worse = runs[runs["verdict"] == "worse"]
    multi = frame[~frame["baseline"]].groupby("order")["final"].agg(["std", "count"])
    multi = multi[multi["count"] >= 2]["std"]
    computed = {
        f"{meta['wall_s'] / 60:.0f}", f"{meta['wall_s']:.0f}", f"{int(frame['params'].median())}"[:3],
        f"{int(frame['steps'].max())}", f"{slopes['end_to_early'].median():.2f}",
        f"{slopes['end_to_early'].max():.2f}", f"{-slopes['early_slope_per_1k'].median():.2f}",
        f"{-slopes['end_slope_per_1k'].median():.2f}", f"{base.mean:.3f}", f"{base.sd:.3f}",
        str(base.n), str(len(frame)), str(int(runs["beats_average"].sum())), str(len(runs)),
        *(str(int(runs.loc[runs["family"] == f, "beats_average"].sum())) for f in RANDOM_FAMILIES),
        *(str(int((runs["family"] == f).sum())) for f in RANDOM_FAMILIES),
        str(len(worse)), *(f"{v:.3f}" for v in worse["value"]),
        f"{multi.min():.3f}", f"{multi.max():.3f}",
        *(f"{h.mean(g, half, k):.2f}" for g in ("better", "not better") for half in
          ("bottom", "top") for k in "sf"),
        *(str(n) for n in h.group_sizes().values()),
        f"{h.mann_whitney.pvalue:.2g}", f"{h.mann_whitney.rank_biserial:.2f}",
        f"{h.spearman.rho:.2f}", f"{h.spearman.pvalue:.2g}",
        *(f"{fam.loc[f, 'spearman_rho']:.2f}" for f in RANDOM_FAMILIES),
        *(f"{fam.loc[f, 'spearman_p']:.2g}" for f in RANDOM_FAMILIES),
        f"{seeds['welch_p_adjusted'].max():.3g}",
        f"{seeds['welch_p_adjusted'].min():.7f}".rstrip("0"),
        f"{k5['mean']:.3f}", f"{k5['sd']:.3f}", f"{k5['difference']:.3f}",
        f"{k5['ci_low']:.3f}", f"{k5['ci_high']:.3f}", f"{k5['paired_p']:.3g}",
        f"{k5['paired_ci_low']:.3f}", f"{k5['paired_ci_high']:.3f}",
        f"{k5['wilcoxon_p']:.2f}", str(int(k5["paired_n"])),
        f"{k2['paired_difference']:.3f}", f"{k2['paired_ci_low']:.3f}",
        f"{k2['paired_ci_high']:.3f}", f"{k2['paired_p_adjusted']:.3g}",
        *(f"{p:.3g}" for p in seeds.loc[seeds["paired_verdict"] != "better",
                                        "paired_p_adjusted"]),
        f"{k1['difference']:.3f}", f"{k1['ci_low']:.3f}", f"{k1['ci_high']:.3f}",
        f"{k5['design_power']:.2f}", f"{shared.std(ddof=1):.3f}",
        *(f"{r:.2f}".lstrip("+") for r in corr),
        str(len(seeds)), str(int((seeds["welch_verdict"] == "better").sum())),
        f"{lead.loc[3, 'welch_p']:.2f}", f"{lead.loc[4, 'welch_p']:.2f}",
        str(int(lead["tested"].sum())), f"{lead['p_adjusted'].min():.2f}",
        f"{nz.seed_sd:.3f}", f"{nz.order_sd:.3f}", f"{nz.variance_ratio:.1f}",
        f"{nz.ratio_ci[0]:.1f}", f"{nz.ratio_ci[1]:.1f}", f"{nz.ratio_p:.2g}",
        f"{nz.order_share * 100:.0f}", f"{nz.share_ci[0] * 100:.0f}",
        f"{nz.share_ci[1] * 100:.0f}", f"{nz.anova_f:.1f}", f"{nz.anova_p:.2g}".replace(
            "e-06", "e-6"), f"{nz.icc:.2f}",
        *(f"{fam.loc[f, 'variance_ratio']:.1f}" for f in RANDOM_FAMILIES),
        *(f"{fam.loc[f, 'order_share'] * 100:.0f}" for f in RANDOM_FAMILIES),
        f"{fam.loc['permutations', 'ratio_p']:.2g}",
        *(f"{fam.loc[f, c]:.2g}" for f in RANDOM_FAMILIES for c in ("mann_whitney_p",
                                                                    "ratio_ci_low")),
        f"{fam.loc['permutations', 'ratio_ci_high']:.1f}",
        *(f"{fam.loc[f, c] * 100:.0f}" for f in RANDOM_FAMILIES
          for c in ("share_ci_low", "share_ci_high")),
        *(str(o.count("s")) for o in good_budgeted),
        f"{frame['final'].min():.1f}", f"{frame['final'].max():.1f}",
    }
    model = exp["model"]
    space = {s["type"]: s for s in exp["space"]}
    settings = {  # the shipped experiment's settings and the design they imply
        str(exp["baseline"]["seeds"]), str(exp["train"]["steps"]), str(model["context"]),
        str(exp["max_concurrent"]), *(str(s["count"]) for s in exp["space"] if "count" in s),
        str(space["sandwich"]["seeds"]), str(space["sandwich"]["n"]),
        *(str(k) for k in space["sandwich"]["k"]), "0", "64", "4", "256",  # the tiny preset
        "95", "1", "2", "3", "1000",  # 95% interval; first/last three evaluations; per 1,000
    }
    paper = {"2020", "16", "14", "15", "6"}  # Press et al. (2020): best k = 6 of 16
    uncovered = _numbers(text) - computed - settings - paper
    assert not uncovered, sorted(uncovered)
