"""Issue 30, frictions 3 and 9: a report points only at sections it has; Fig. 5's strip
never counts k = 0 (the baseline order) as beating the baseline; Fig. 2/3 names its points."""

from __future__ import annotations

import pandas as pd
from analysis_helpers import frame, trial

from sublayer_search.analysis.figures.plots import distribution_labels, statement_rows
from sublayer_search.analysis.report.build import experiment_report
from sublayer_search.analysis.studies.distribution import distribution


def _sweep(seeds_per_order: int) -> pd.DataFrame:
    rows = [trial("sfsfsf", 10.0 + s, baseline=True, seed=s) for s in range(3)]
    for k, order in ((1, "ssfsff"), (2, "sssfff")):
        rows += [trial(order, 9.0 + k + 0.1 * s, k=k, seed=s) for s in range(seeds_per_order)]
    rows.append(trial("sffssf", 12.0, seed=0))
    return frame(*rows)


def test_a_one_seed_sweep_does_not_point_to_a_seeds_section(tmp_path):
    rep = experiment_report(_sweep(1), tmp_path, title="quick")
    html = rep.html.read_text()
    assert "Fig. 6" not in html and "seeds section" not in html
    assert html.count("this sweep trains one seed per order, so nothing is tested") == 2


def test_a_seeded_sweep_points_to_fig_6(tmp_path):
    rep = experiment_report(_sweep(2), tmp_path, title="seeded")
    html = rep.html.read_text()
    assert "Fig. 6: Sweep, over seeds" in html
    assert html.count("see Fig. 6, over seeds, for tests") == 2 and "seeds section" not in html


def test_k0_is_the_baseline_order_not_a_winner():
    statements = pd.DataFrame({"k": [0, 1, 2, 3], "beats_average": [True, True, True, False],
                               "beats_best": [False, True, False, False]})
    rows = {label: ks for label, ks, _ in statement_rows(statements)}
    assert rows["beats the best baseline"] == [1]
    assert rows["beats the average\nbaseline only"] == [2]
    assert rows["does not beat the\naverage baseline"] == [3]
    assert rows["k = 0: the baseline\norder itself"] == [0]


def test_the_distribution_names_its_points_and_the_sandwich_ones_by_k():
    info = distribution(_sweep(1))
    labels = dict(distribution_labels(info))
    names = info.models["name"].tolist()
    assert {labels[names.index(n)] for n in names} == {"k=1", "k=2", "sffssf"}
    many = distribution(frame(*[trial("sfsfsf", 10.0 + s, baseline=True, seed=s)
                                for s in range(3)],
                              *[trial("ssfsff", 9.0 + i / 100, name=f"perm{i}") for i in range(40)],
                              trial("sssfff", 11.0, k=2)))
    shown = [text for _, text in distribution_labels(many)]
    assert shown == ["perm0", "perm1", "perm2", "k=2"]  # the 3 best and every sandwich
