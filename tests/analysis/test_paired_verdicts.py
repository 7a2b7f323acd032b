"""Which test decides (issues 39, 46): a shared seed shares the batch order but not the
initial weights (tests/models/test_seed_sharing.py), so Welch's t over every baseline
seed decides, Holm over the family, and the paired t-test over shared seeds (the shipped
sandwiches: seeds 0-2 of baseline seeds 0-7) is shown beside it, never deciding; the CI
and power columns are the deciding test's; figure titles and the docs say only what those
tests support. Against scipy, hand Holm and the shipped data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analysis_helpers import sandwich_rows, seed_values
from scipy import stats

from sublayer_search.analysis.store.study_export import builtin_export
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison
from sublayer_search.analysis.studies.significance import (
    BATCHES_ONLY,
    decides,
    design_power,
    welch_interval,
)

METRIC = "val_bpc"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def study():  # type: ignore[no-untyped-def]
    return builtin_export("mini_press2020")


def _holm(p: np.ndarray) -> np.ndarray:
    """Holm by hand: sorted p times (m, m-1, ...), running maximum, capped at 1."""
    order = np.argsort(p)
    stepped = np.minimum(1, np.maximum.accumulate(p[order] * np.arange(len(p), 0, -1)))
    return stepped[np.argsort(order)]


def test_the_rule_that_picks_the_deciding_test() -> None:
    # shared seeds that share the batches only (this product): Welch decides
    assert decides([(3, 3), (3, 3)]) == BATCHES_ONLY
    assert decides([(3, 3), (3, 2)]) == BATCHES_ONLY
    assert decides([(3, 0), (2, 0)]) == "unpaired (no shared seeds)"
    assert decides([]) == "unpaired (no shared seeds)"
    # where a seed fixes the initial weights too, full matching makes the pairing decide
    assert decides([(3, 3), (3, 3)], shares_weights=True) == "paired"
    assert decides([(3, 3), (3, 2)], shares_weights=True).startswith("unpaired (not every")
    assert decides([(1, 1)], shares_weights=True) == (
        "unpaired (not every arm's seeds all matched in the reference)")


def test_welch_over_every_baseline_seed_decides_paired_beside_it(study) -> None:
    """Sandwich seeds 0-2 are baseline seeds, but the pairing is not real: Welch's t
    against all 8 baseline seeds decides, Holm over the 5 k, and all five are better;
    the paired t-test over seeds 0-2 (only k = 2 after Holm) is shown, never deciding.
    The interval and power columns are Welch's / the two-sample design's."""
    info = seed_comparison(sandwich_rows(study.trials), metric=METRIC)
    t = info.table.set_index("name")
    base = seed_values(study.trials, None)
    assert len(base) == 8
    names = [f"sandwich6_{k}" for k in range(1, 6)]
    welch = np.array([stats.ttest_ind(seed_values(study.trials, k), base, equal_var=False).pvalue
                      for k in range(1, 6)])
    assert t.loc[names, "welch_p"].to_numpy() == pytest.approx(welch)
    assert t.loc[names, "welch_p_adjusted"].to_numpy() == pytest.approx(_holm(welch))
    assert set(t["decides"]) == {BATCHES_ONLY} and set(t["comparisons"]) == {5}
    assert (t["p_adjusted"] == t["welch_p_adjusted"]).all()
    assert (t["verdict"] == t["welch_verdict"]).all()
    assert set(t["verdict"]) == {"better"}
    assert round(t.loc["sandwich6_5", "p_adjusted"], 4) == 0.0258
    for k, name in enumerate(names, start=1):
        lo, hi = welch_interval(seed_values(study.trials, k), base)
        assert (t.loc[name, "ci_low"], t.loc[name, "ci_high"]) == pytest.approx((lo, hi))
        assert t.loc[name, "design_power"] == pytest.approx(
            design_power(3, 8, float(base.std(ddof=1)), float(base.std(ddof=1))))
        assert "decides: unpaired (shared seeds share the batch order" in t.loc[name,
                                                                                "statement"]
        assert "paired alongside (does not decide)" in t.loc[name, "statement"]
    # the paired t-test beside it, adjusted over its own family: only k = 2
    raw = {}
    for k in range(1, 6):
        v = seed_values(study.trials, k)
        assert list(v.index) == [0, 1, 2]
        raw[k] = stats.ttest_rel(v.to_numpy(), base.loc[v.index].to_numpy()).pvalue
    p = np.array([raw[k] for k in range(1, 6)])
    assert t.loc[names, "paired_p"].to_numpy() == pytest.approx(p)
    assert t.loc[names, "paired_p_adjusted"].to_numpy() == pytest.approx(_holm(p))
    assert list(t.index[t["paired_verdict"] == "better"]) == ["sandwich6_2"]


def test_titles_say_only_what_a_test_supports(study) -> None:
    """The sandwich figure's default title: no "best k" without a test telling it apart."""
    from sublayer_search.analysis.figures.plots import plot_sandwich
    from sublayer_search.analysis.papers import press_paper

    published = sandwich_curve(press_paper.sandwich_points())
    title = plot_sandwich(published).axes[0].get_title()
    assert "best k =" not in title
    assert "best mean at k = 6 of the 2 k with a value" in title and "untested" in title
    mine = plot_sandwich(sandwich_curve(sandwich_rows(study.trials), metric=METRIC))
    title = mine.axes[0].get_title()
    assert "best k =" not in title and "not told apart from k = 1, 2, 3, 4" in title
    # a k told apart from every other: then, and only then, "best k"
    t = sandwich_rows(study.trials).copy()
    t.loc[t["k"] == 5, "final"] -= 1.0
    title = plot_sandwich(sandwich_curve(t, metric=METRIC)).axes[0].get_title()
    assert "best k = 5: told apart from every other k" in title and "Welch t, Holm" in title


def test_the_overview_names_each_ks_tested_verdict(study) -> None:
    from sublayer_search.analysis.figures.replication import plot_overview
    from sublayer_search.analysis.store.frame import baseline_stats

    frame = study.trials
    verdicts = seed_comparison(sandwich_rows(frame), metric=METRIC).table
    fig = plot_overview(frame, baseline_stats(frame, METRIC), None, metric=METRIC,
                        title="t", verdicts=verdicts)
    assert fig.axes[1].get_title().endswith(
        "vs baseline (Welch t, Holm): better: k = 1, 2, 3, 4, 5")
    plain = plot_overview(frame, baseline_stats(frame, METRIC), None, metric=METRIC, title="t")
    assert plain.axes[1].get_title() == "sandwich s^k (sf)^(n-k) f^k"


def _flat(path: str) -> str:
    return " ".join((REPO / path).read_text(encoding="utf-8").split())


def test_findings_say_which_test_decides_and_what_it_says(study) -> None:
    text = _flat("docs/findings.md").split("- **(c) Sandwich curve:**")[1].split("- **(d)")[0]
    t = seed_comparison(sandwich_rows(study.trials), metric=METRIC).table.set_index("name")
    assert set(t["verdict"]) == {"better"}
    k2, k5 = t.loc["sandwich6_2"], t.loc["sandwich6_5"]
    for phrase in ("Tested with Welch's t against all 8 baseline seeds, Holm-adjusted over "
                   "the 5 k, all five are better than the baseline",
                   f"adjusted p {t['p_adjusted'].min():.3g}".replace("5.35e-05", "0.0000535"),
                   f"to {t['p_adjusted'].max():.3g}",
                   f"[{k5['ci_low']:.3f}, {k5['ci_high']:.3f}]",
                   "a seed fixes the batch order only", "`tests/models/test_seed_sharing.py`",
                   f"paired Holm-adjusted p = {k2['paired_p_adjusted']:.3g}",
                   "never deciding", "`decides`"):
        assert phrase in text, phrase
    assert "only k = 2 is better than the baseline" not in text


def test_analysis_doc_says_what_the_code_does() -> None:
    doc = _flat("docs/analysis.md").split("## How claims are tested")[1].split("##")[0]
    assert "bootstrap confidence interval" not in doc
    for phrase in ("`scipy.stats.ttest_rel`", "`scipy.stats.ttest_ind(equal_var=False)`",
                   "the column `decides`", "Each test is adjusted over its own family",
                   "no bootstrap"):
        assert phrase in doc, phrase


def test_findings_name_the_dropped_draw_as_the_dry_run_does(study) -> None:
    """The budgeted space's first draw is perm17's order: dropped, and the dry run's note
    (the plan's own words) is quoted in docs/findings.md."""
    import yaml

    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.spaces.generators.budgeted import budgeted

    exp = yaml.safe_load(study.meta["experiment_yaml"])
    space = next(s for s in exp["space"] if s["type"] == "budgeted")
    first = budgeted(space["budget_units"], space["count"], seed=space["seed"],
                     p_s=space["p_s"])[0]
    trials = study.trials
    perm17 = trials.loc[trials["name"] == "perm17@seed0", "order"].item()
    assert first == perm17 == "ffssfsfssffs"
    assert not trials["name"].str.startswith("budget00").any()
    assert (trials["family"] == "budgeted").sum() == 19
    notes: list[str] = []
    plan_sweep(parse_experiment(exp), check_resources=False, notes=notes)
    (note,) = [n for n in notes if "duplicates" in n]
    assert note == ("budgeted candidate budget00 (ffssfsfssffs) duplicates perm17 "
                    "(permutations): kept perm17")
    findings = _flat("docs/findings.md")
    assert f"`{note}`" in findings
    assert "the first draw, `budget00`, is `ffssfsfssffs`, the same order as the permutation " \
           "`perm17`, so it was dropped and 19 were trained" in findings
    assert "counts as a baseline" not in findings


def test_fig4_is_claimed_per_family_and_every_noise_share_has_its_interval(study) -> None:
    """Issue 46, items 4 and 5: (b) states the Fig. 4 pattern per family (the families'
    attention budgets differ), the pooled figure shown, not claimed; every share "beyond
    seed noise" in docs/findings.md names a two-sided test and its interval, and the
    permutations' ratio interval, which holds 1, is called no evidence."""
    from sublayer_search.analysis.studies.replication import by_family

    text = _flat("docs/findings.md")
    fig4 = text.split("- **(b) Fig. 4 at this scale:**")[1].split("- **(c)")[0]
    fam = by_family(study.trials, METRIC).set_index("family")
    for phrase in ("the claim is made per family, not pooled",
                   "Mann–Whitney on bottom-half s between the 10 at least as good",
                   f"p = {fam.loc['permutations', 'mann_whitney_p']:.2g}",
                   "Pooled as the paper defines Fig. 4 (shown, not claimed)"):
        assert phrase in fig4, phrase
    noise = text.split("- **(d) Seed noise against order differences:**")[1].split("- **")[0]
    assert noise.count("beyond seed noise") == 2 and noise.count("two-sided F-test") == 2
    perm = fam.loc["permutations"]
    assert perm["ratio_ci_low"] < 1 < perm["ratio_ci_high"]
    assert (f"ratio is 3.6 [{perm['ratio_ci_low']:.2f}, {perm['ratio_ci_high']:.1f}] "
            f"(two-sided F-test p = {perm['ratio_p']:.2g}): the interval includes 1, so "
            "there is no evidence") in noise
    assert "one-sided" not in text and "F-test p = 0.044" not in text
