"""The halves study over hybrid orders: each kind weighed by the s-units its trial
recorded, counted per half, and tested per kind with Holm's adjustment."""

from __future__ import annotations

import pytest
from analysis_helpers import frame, trial

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.studies.halves import halves_study
from sublayer_search.analysis.studies.significance import adjust_pvalues
from sublayer_search.spaces.cost import halves, kind_units_of, parse_kind_units
from sublayer_search.spaces.kinds import Dims

DIMS = Dims(d_model=64, d_ff=256, n_heads=4)


def _trial(order: str, value: float, **kw: object) -> dict[str, object]:
    row = trial(order.replace("r", "s").replace("w", "s"), value, **kw)  # classic units
    row.update(order=order, name=kw.get("name") or order)
    weighed = kind_units_of(order, DIMS)
    if weighed:
        row["kind_units"] = weighed
    return row


# better models (lower ppl) hold the attention s at the bottom, the recurrence r on top
BETTER = ["ssrrffff", "srsrffff", "ssrfrfff", "sfsrrfff"]
WORSE = ["rrssffff", "rsrsffff", "rrfsfsff", "rfrsfsff"]


def _frame():
    rows = [_trial("sfsfsfsf", 10.0 + 0.1 * i, baseline=True, seed=i) for i in range(3)]
    rows += [_trial(o, 9.0 + 0.01 * i) for i, o in enumerate(BETTER)]
    rows += [_trial(o, 11.0 + 0.01 * i) for i, o in enumerate(WORSE)]
    return frame(*rows)


def test_the_recorded_s_units_cut_each_hybrid_order() -> None:
    assert kind_units_of("srfe", DIMS) == "r=1.015625,e=4.015625"
    assert kind_units_of("sfsf", DIMS) is None
    assert parse_kind_units("r=1.015625,e=4.015625") == {"r": 1.015625, "e": 4.015625}
    h = halves_study(_frame())
    models = h.models.set_index("order")
    for order in BETTER + WORSE:
        cut = halves(order, kind_units=parse_kind_units(kind_units_of(order, DIMS)))
        assert models.loc[order, "bottom_r"] == cut.bottom["r"]
        assert models.loc[order, "bottom_s"] == cut.bottom["s"]
    assert set(h.means["kind"]) == {"s", "f", "c", "r"}
    assert h.mean("better", "bottom", "s") > h.mean("not better", "bottom", "s")
    assert h.mean("better", "bottom", "r") < h.mean("not better", "bottom", "r")


def test_each_kind_is_tested_and_the_p_values_holm_adjusted() -> None:
    table = halves_study(_frame()).per_kind.set_index("kind")
    assert {"s", "r"} <= set(table.index) and "c" not in table.index  # c never varies
    assert table.loc["s", "rank_biserial"] > 0 > table.loc["r", "rank_biserial"]
    assert list(table["p_adjusted"]) == pytest.approx(list(adjust_pvalues(table["p"], "holm")))
    assert (table["p_adjusted"] >= table["p"]).all()


def test_a_hybrid_run_without_its_kind_units_is_refused_by_name() -> None:
    rows = [_trial("sfsfsfsf", 10.0, baseline=True, seed=0), _trial("srff", 9.0)]
    rows[1].pop("kind_units")
    with pytest.raises(AnalysisError, match="trial srff: its order srff holds hybrid kinds "
                                            "but its run records no kind_units"):
        halves_study(frame(*rows))


def test_attention_depth_and_share_of_an_order() -> None:
    from sublayer_search.analysis.studies.attention_depth import attention_depth, attention_share

    assert attention_depth("srrr") == 0.5 / 4 and attention_depth("rrrs") == 3.5 / 4
    assert attention_depth("rfrf") != attention_depth("rfrf")  # nan: no attention
    assert attention_share("sfrfrf") == 1 / 3 and attention_share("swfe") == 0.5


def test_the_depth_study_correlates_the_metric_with_where_attention_sits(tmp_path) -> None:
    from sublayer_search.analysis.report.build import experiment_report
    from sublayer_search.analysis.studies.attention_depth import attention_depth_study

    orders = ["sfrfrfrf", "rfsfrfrf", "rfrfsfrf", "rfrfrfsf", "sfsfrfrf", "rfrfsfsf"]
    rows = [_trial("sfsfsfsf", 10.0 + 0.1 * i, baseline=True, seed=i) for i in range(3)]
    # deeper attention, lower (better) values: rho of value vs depth is negative
    from sublayer_search.analysis.studies.attention_depth import attention_depth
    rows += [_trial(o, 10.0 - attention_depth(o) + 0.001 * i) for i, o in enumerate(orders)]
    study = attention_depth_study(frame(*rows))
    assert study is not None and len(study.models) == len(orders)
    tests = study.tests.set_index("measure")
    assert tests.loc["depth", "rho"] == pytest.approx(-1.0)
    assert tests.loc["depth", "ci_low"] <= tests.loc["depth", "rho"] <= tests.loc["depth",
                                                                                  "ci_high"]
    assert list(study.tests["p_adjusted"]) == pytest.approx(
        list(adjust_pvalues(study.tests["p"], "holm")))
    assert attention_depth_study(frame(*rows[:5])) is None  # fewer than 4 hybrid orders
    report = experiment_report(frame(*rows), tmp_path / "out", title="hybrid")
    assert any("metric vs attention depth" in k for k in report.numbers), report.numbers
    assert (tmp_path / "out" / "figures" / "attention_depth.png").is_file()


def test_the_shipped_hybrid_study_says_what_its_findings_say(tmp_path) -> None:
    """docs/findings.md's numbers on the shipped export: every hybrid order beats every
    baseline seed; no relation of the metric to where attention sits."""
    from sublayer_search.analysis.report.build import builtin_study_report

    report = builtin_study_report("hybrid_mini", tmp_path / "out", study="sweep")
    def number(label: str) -> str:
        [value] = [str(v) for k, v in report.numbers.items() if k.endswith(": " + label)]
        return value

    assert number("at least as good as the best baseline") == "30 of 30"
    depth = number("Spearman: metric vs attention depth")
    assert depth.startswith("rho = -0.14 (95 % CI -0.50 to +0.27)"), depth
    assert "Holm-adjusted p = 0.831" in depth
    text = (tmp_path / "out" / "report.html").read_text()
    assert "mean r bottom / top" in text
