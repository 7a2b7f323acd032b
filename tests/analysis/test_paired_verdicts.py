"""Paired verdicts (issue 39): where every arm's seeds are the baseline's (the shipped
sandwiches: seeds 0-2 against baseline seeds 0-7), the paired t-test on the per-seed
differences decides, Holm over the family, Welch's t beside it; figure titles and the
docs say only what those tests support. Against scipy, hand Holm and the shipped data."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analysis_helpers import sandwich_rows, seed_values
from scipy import stats

from sublayer_search.analysis.store.study_export import builtin_export
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison
from sublayer_search.analysis.studies.significance import decides

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
    assert decides([(3, 3), (3, 3)]) == "paired"  # every arm's seeds all matched
    assert decides([(3, 3), (3, 2)]).startswith("unpaired (not every")  # one seed unmatched
    assert decides([(3, 0), (2, 0)]) == "unpaired (no shared seeds)"
    assert decides([(1, 1)]) == "unpaired (not every arm's seeds all matched in the reference)"
    assert decides([]) == "unpaired (no shared seeds)"


def test_shared_seeds_make_the_paired_test_decide_with_holm(study) -> None:
    """Sandwich seeds 0-2 are baseline seeds: the paired t-test on the per-seed
    differences decides, Holm over the 5 k; only k = 2 survives. Welch beside it."""
    info = seed_comparison(sandwich_rows(study.trials), metric=METRIC)
    t = info.table.set_index("name")
    base = seed_values(study.trials, None)
    raw = {}
    for k in range(1, 6):
        v = seed_values(study.trials, k)
        assert list(v.index) == [0, 1, 2]
        raw[k] = stats.ttest_rel(v.to_numpy(), base.loc[v.index].to_numpy()).pvalue
    names = [f"sandwich6_{k}" for k in range(1, 6)]
    p = np.array([raw[k] for k in range(1, 6)])
    assert t.loc[names, "paired_p"].to_numpy() == pytest.approx(p)
    assert t.loc[names, "paired_p_adjusted"].to_numpy() == pytest.approx(_holm(p))
    assert set(t["decides"]) == {"paired"} and set(t["comparisons"]) == {5}
    assert (t["p_adjusted"] == t["paired_p_adjusted"]).all()
    assert (t["verdict"] == t["paired_verdict"]).all()
    assert list(t.loc[t["verdict"] == "better"].index) == ["sandwich6_2"]
    assert round(t.loc["sandwich6_2", "p_adjusted"], 5) == 0.00864
    assert set(np.round(t.loc[t["verdict"] != "better", "p_adjusted"], 4)) == {0.0971}
    # Welch beside it, adjusted over its own family: all five would be "better"
    welch = np.array([stats.ttest_ind(seed_values(study.trials, k), base, equal_var=False).pvalue
                      for k in range(1, 6)])
    assert t.loc[names, "welch_p_adjusted"].to_numpy() == pytest.approx(_holm(welch))
    assert set(t["welch_verdict"]) == {"better"}
    # an arm with a seed the baseline lacks: Welch decides for the whole family
    moved = sandwich_rows(study.trials).copy()
    moved.loc[(moved["k"] == 1) & (moved["seed"] == 2), "seed"] = 99
    other = seed_comparison(moved, metric=METRIC).table
    assert set(other["decides"]) == {"unpaired (not every arm's seeds all matched in the "
                                     "reference)"}
    assert (other["verdict"] == other["welch_verdict"]).all()
    assert set(other["verdict"]) == {"better"}


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
    assert "best k = 5: told apart from every other k" in title and "paired t, Holm" in title


def test_the_overview_names_each_ks_tested_verdict(study) -> None:
    from sublayer_search.analysis.figures.replication import plot_overview
    from sublayer_search.analysis.store.frame import baseline_stats

    frame = study.trials
    verdicts = seed_comparison(sandwich_rows(frame), metric=METRIC).table
    fig = plot_overview(frame, baseline_stats(frame, METRIC), None, metric=METRIC,
                        title="t", verdicts=verdicts)
    assert fig.axes[1].get_title().endswith(
        "vs baseline (paired t, Holm): better: k = 2; no evidence: k = 1, 3, 4, 5")
    plain = plot_overview(frame, baseline_stats(frame, METRIC), None, metric=METRIC, title="t")
    assert plain.axes[1].get_title() == "sandwich s^k (sf)^(n-k) f^k"


def _flat(path: str) -> str:
    return " ".join((REPO / path).read_text(encoding="utf-8").split())


def test_findings_say_which_test_decides_and_what_it_says(study) -> None:
    text = _flat("docs/findings.md").split("- **(c) Sandwich curve:**")[1].split("- **(d)")[0]
    t = seed_comparison(sandwich_rows(study.trials), metric=METRIC).table.set_index("name")
    better = [int(n.rsplit("_", 1)[1]) for n in t.index[t["verdict"] == "better"]]
    assert better == [2]
    k2, k5 = t.loc["sandwich6_2"], t.loc["sandwich6_5"]
    for phrase in (f"only k = {better[0]} is better than the baseline",
                   "the verdict is the paired t-test on the 3 per-seed differences, "
                   "Holm-adjusted over the 5 k",
                   f"adjusted p = {k2['p_adjusted']:.3g}",
                   f"k = 5: paired t p = {k5['paired_p']:.3g} before adjustment",
                   "Beside it, not deciding, Welch's t against all 8 baseline seeds",
                   "`decides`"):
        assert phrase in text, phrase
    assert "paired t p = 0.0435)" not in text  # the old quote that hid the adjustment


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
    from sublayer_search.search.plan.sweep_plan import plan_sweep
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
