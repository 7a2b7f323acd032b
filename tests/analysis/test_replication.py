"""The replication studies: tested single runs, seed noise, learning-curve slopes, report."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sublayer_search.analysis.report.replication import replication_report
from sublayer_search.analysis.store.frame import trials_frame
from sublayer_search.analysis.studies.replication import end_slopes, noise, single_runs
from sublayer_search.spaces.order import interleaved, sandwich_order

BASE = [3.00, 3.02, 2.98, 3.01, 2.99]  # mean 3.00, sd 0.0158


def _frame() -> pd.DataFrame:
    rows = [dict(name=f"interleaved4@seed{i}", order=interleaved(4), family="baseline",
                 seed=i, baseline=True, final=v) for i, v in enumerate(BASE)]
    perms = {"ssssffff": 2.80, "ffffssss": 3.40, "sfsffssf": 3.01, "ssfsffsf": 2.99}
    rows += [dict(name=f"perm{i:02d}@seed0", order=o, family="permutations", seed=0,
                  baseline=False, final=v) for i, (o, v) in enumerate(perms.items())]
    budgeted = {"sssfffs": 3.05, "fsfsfsss": 2.97}
    rows += [dict(name=f"budget{i:02d}@seed0", order=o, family="budgeted", seed=0,
                  baseline=False, final=v) for i, (o, v) in enumerate(budgeted.items())]
    for k, values in {1: [2.95, 2.96, 2.97], 2: [2.90, 2.92, 2.91]}.items():
        rows += [dict(name=f"sandwich4_{k}@seed{i}", order=sandwich_order(4, k), k=k,
                      family="sandwich", seed=i, baseline=False, final=v)
                 for i, v in enumerate(values)]
    for i, row in enumerate(rows):
        row.update(run_id=f"r{i}", metric="val_bpc", status="finished", best=row["final"])
    return trials_frame(rows)


def test_single_runs_are_prediction_interval_tests_adjusted_over_orders() -> None:
    runs = single_runs(_frame(), "val_bpc", adjust="holm")
    assert len(runs) == 6 and set(runs["family"]) == {"permutations", "budgeted"}
    n, sd = len(BASE), float(np.std(BASE, ddof=1))
    scale = sd * math.sqrt(1 + 1 / n)
    best = runs.iloc[0]
    assert best["order"] == "ssssffff" and best["difference"] == pytest.approx(-0.20)
    p = 2 * stats.t.sf(0.20 / scale, n - 1)
    assert best["p"] == pytest.approx(p)
    crit = stats.t.ppf(0.975, n - 1)
    assert best["ci_high"] == pytest.approx(-0.20 + crit * scale)
    # Holm: ffffssss (0.40 off) has the smallest p, this one the second: times m - 1 = 5
    assert runs["p"].min() < p and best["p_adjusted"] == pytest.approx(min(1.0, 5 * p))
    assert best["verdict"] == "better"
    worst = runs.iloc[-1]
    assert worst["order"] == "ffffssss" and worst["verdict"] == "worse"
    assert set(runs.iloc[1:-1]["verdict"]) == {"no evidence"}
    assert int(runs["beats_average"].sum()) == 3  # 2.80, 2.99, 2.97 <= 3.00


def test_noise_compares_order_spread_with_seed_spread() -> None:
    frame = _frame()
    study = noise(frame, "val_bpc")
    orders = [2.80, 3.40, 3.01, 2.99, 3.05, 2.97]
    ratio = np.var(orders, ddof=1) / np.var(BASE, ddof=1)
    assert study.seed_n == 5 and study.order_n == 6
    assert study.variance_ratio == pytest.approx(ratio)
    assert study.ratio_p == pytest.approx(2 * stats.f.sf(ratio, 5, 4))  # two-sided
    assert study.ratio_ci[0] < ratio < study.ratio_ci[1]
    assert study.order_share == pytest.approx(1 - 1 / ratio)
    groups = [BASE, [2.95, 2.96, 2.97], [2.90, 2.92, 2.91]]
    res = stats.f_oneway(*groups)
    assert study.anova_groups == 3 and study.anova_f == pytest.approx(res.statistic)
    assert study.anova_p == pytest.approx(res.pvalue) and 0 < study.icc <= 1
    assert len(study.rows()) == 15


def test_end_slopes_fit_lines_to_the_first_and_last_evaluations() -> None:
    frame = _frame()
    steps = np.arange(100, 1001, 100)
    values = 4.0 * np.exp(-steps / 200) + 2.0  # fast early, flat at the end
    history = pd.DataFrame({"run_id": "r0", "key": "val_bpc", "step": steps, "value": values})
    slopes = end_slopes(history, frame, "val_bpc")
    row = slopes.iloc[0]
    assert row["name"] == "interleaved4@seed0"
    early = stats.linregress(steps[:3], values[:3]).slope * 1000
    late = stats.linregress(steps[-3:], values[-3:]).slope * 1000
    assert row["early_slope_per_1k"] == pytest.approx(early)
    assert row["end_slope_per_1k"] == pytest.approx(late)
    assert 0 < row["end_to_early"] < 0.05


def test_replication_report_answers_the_four_questions(tmp_path: Path) -> None:
    frame = _frame()
    steps = np.arange(100, 601, 100)
    history = pd.concat([pd.DataFrame({"run_id": r, "key": "val_bpc", "step": steps,
                                       "value": v + 1 / steps * 100})
                         for r, v in zip(frame["run_id"], frame["final"], strict=True)])
    report = replication_report(frame, history, tmp_path, title="synthetic")
    html = report.html.read_text()
    for heading in ("(a) Random orders against the average baseline, tested", "(b) Fig. 4",
                    "(c) Fig. 5", "(d) Seed noise", "Learning curves: where training"):
        assert heading in html, heading
    names = {p.name for p in report.figures}
    assert {"overview.png", "random_orders_tested.png", "fig4_halves.png",
            "sandwich.png"} <= names
    tested = pd.read_csv(tmp_path / "tables" / "random_orders_tested.csv")
    assert len(tested) == 6 and "p_adjusted" in tested


def test_analyze_study_replication_on_a_sweep(mlflow_store: str, tmp_path: Path) -> None:
    """`sublayer analyze --study replication` on a store's sweep (sandwiches with seeds, no
    random orders): the sections that apply, histories loaded without --history."""
    import argparse

    from analysis_helpers import SWEEP

    from sublayer_search.analysis.cli import add_arguments, run_analyze

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    out = tmp_path / "rep"
    args = parser.parse_args(["--experiment", SWEEP, "--tracking-uri", mlflow_store,
                              "--out", str(out), "--study", "replication", "--no-attach"])
    assert run_analyze(args) == 0
    html = (out / "report.html").read_text()
    assert "(c) Fig. 5: sandwich coefficient" in html and "(d) Seed noise" in html
    assert "(a) Random orders" not in html  # none in this sweep
    assert (out / "figures" / "overview.png").exists()
    assert (out / "figures" / "history.png").exists()


def test_the_readme_states_what_the_shipped_study_says() -> None:
    """The numbers of "What the product finds at small scale" (docs/findings.md, linked
    from the README) come from the data."""
    from sublayer_search.analysis.store.frame import baseline_stats
    from sublayer_search.analysis.store.study_export import builtin_export
    from sublayer_search.analysis.studies.halves import halves_study
    from sublayer_search.analysis.studies.replication import RANDOM_FAMILIES

    findings = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    text = findings.split("# What the product finds at small scale")[1]
    study = builtin_export("mini_press2020")
    frame, metric = study.trials, study.metric
    base = baseline_stats(frame, metric)
    assert f"baseline {base.mean:.3f} ± {base.sd:.3f}" in text
    assert f"**{study.meta['wall_s'] / 60:.0f} min**" in text
    runs = single_runs(frame, metric)
    verdicts = runs["verdict"].value_counts()
    assert f"{int(runs['beats_average'].sum())} of {len(runs)} random orders" in text
    assert f"none is better and {int(verdicts.get('worse', 0))} are worse" in text
    assert "better" not in set(runs["verdict"])
    pooled = frame[frame["family"].isin(RANDOM_FAMILIES) | frame["baseline"]]
    halves = halves_study(pooled, metric=metric)
    assert halves.mann_whitney is not None and halves.spearman is not None
    assert f"p = {halves.mann_whitney.pvalue:.2g}" in text
    assert f"rho = {halves.spearman.rho:.2f}" in text
    study_noise = noise(frame, metric)
    assert f"variance ratio of {study_noise.variance_ratio:.1f}" in text
    assert f"{study_noise.order_share:.0%}".replace("%", " %") in text
    slopes = end_slopes(study.history, frame, metric)
    assert f"end/early {slopes['end_to_early'].median():.2f}" in text


@pytest.mark.parametrize("sandwiches", [True, False])
def test_overview_draws_the_sandwich_panel_only_for_sandwiches(sandwiches: bool) -> None:
    from sublayer_search.analysis.figures.replication import plot_overview
    from sublayer_search.analysis.store.frame import baseline_stats
    from sublayer_search.analysis.studies.halves import halves_study

    frame = _frame()
    if not sandwiches:
        frame = frame[frame["family"] != "sandwich"]
    fig = plot_overview(frame, baseline_stats(frame, "val_bpc"),
                        halves_study(frame, metric="val_bpc"), metric="val_bpc", title="t")
    titles = [ax.get_title() for ax in fig.axes]
    assert ("sandwich s^k (sf)^(n-k) f^k" in titles) is sandwiches, titles
    assert len(fig.axes) == (3 if sandwiches else 2)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks[0] == "baseline seeds\n(n=5)" and "permutations\n(n=4)" in ticks
    assert any(t.startswith("sandwich") for t in ticks) is sandwiches  # no empty group
    assert "random models: attention in the bottom half" in fig.axes[-1].get_title()
