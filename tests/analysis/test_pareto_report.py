"""The report's Pareto section: a front whenever the metric and a cost vary, a reason otherwise;
the shipped study's FLOPs-bpc front; ``--study`` with ``--paper`` works or is refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from sublayer_search.analysis.report.pareto import pareto_reasons, pareto_section
from sublayer_search.analysis.report.writer import Writer
from sublayer_search.analysis.store.frame import trials_frame


def _frame(rows: list[tuple[str, str, float, float, float]]) -> pd.DataFrame:
    """Rows of (name, order, params, flops_per_token, final val_bpc)."""
    return trials_frame([
        {"run_id": n, "name": n, "order": o, "family": "explicit", "space": "explicit",
         "params": p, "flops_per_token": f, "metric": "val_bpc", "final": v,
         "status": "finished", "baseline": False}
        for n, o, p, f, v in rows])


def _sections(frame: pd.DataFrame, tmp_path: Path) -> dict[str, list[tuple[str, object]]]:
    w = Writer(tmp_path, "t")
    pareto_section(w, frame, metric="val_bpc")
    return {s.title: s.numbers for s in w.sections}


def test_equal_costs_leave_no_front_and_say_why(tmp_path: Path) -> None:
    frame = _frame([("a", "ssff", 100, 200, 3.0), ("b", "sfsf", 100, 200, 2.9),
                    ("c", "fssf", 100, 200, 2.8)])
    got = _sections(frame, tmp_path)
    assert list(got) == ["Pareto front: not drawn (val_bpc against cost)"]
    why = dict(got["Pareto front: not drawn (val_bpc against cost)"])
    assert why == {
        "against FLOPs per token": "all 3 usable trials have the same FLOPs per token (200): "
                                   "no trade-off against it",
        "against parameters": "all 3 usable trials have the same parameters (100): "
                              "no trade-off against it"}
    assert not (tmp_path / "figures").exists() or not list((tmp_path / "figures").iterdir())


def test_one_usable_trial_or_one_metric_value_say_why() -> None:
    one = _frame([("a", "sf", 10, 20, 3.0)])
    assert pareto_reasons(one, metric="val_bpc")["params"] == (
        "one finished trial with a final val_bpc and a known params: a front needs two")
    flat = _frame([("a", "sf", 10, 20, 3.0), ("b", "ssf", 12, 25, 3.0)])
    assert pareto_reasons(flat, metric="val_bpc")["flops_per_token"] == (
        "all 2 usable trials have the same final val_bpc (3): nothing to trade")
    assert pareto_reasons(one.drop(columns=["params"]), metric="val_bpc")["params"] == (
        "no finished trial with a final val_bpc has a known params")


def test_a_front_where_one_cost_varies_and_why_not_the_other(tmp_path: Path) -> None:
    frame = _frame([("a", "sf", 100, 20, 3.0), ("b", "ssf", 100, 25, 2.9),
                    ("c", "sff", 100, 30, 2.95)])
    got = _sections(frame, tmp_path)
    assert list(got) == ["Pareto front: val_bpc against FLOPs per token"]
    numbers = dict(got["Pareto front: val_bpc against FLOPs per token"])
    assert numbers["on the front (FLOPs per token)"] == "a (sf: 3 at 20), b (ssf: 2.9 at 25)"
    assert numbers["no front against parameters"] == (
        "all 3 usable trials have the same parameters (100): no trade-off against it")
    assert (tmp_path / "figures" / "pareto_flops_per_token.png").stat().st_size > 0


@pytest.mark.slow  # the shipped study's whole report: seconds
def test_the_shipped_study_draws_its_flops_front(tmp_path: Path) -> None:
    from sublayer_search.analysis.report.build import builtin_study_report
    from sublayer_search.analysis.store.study_export import builtin_export

    report = builtin_study_report("mini_press2020", tmp_path)
    trials = builtin_export("mini_press2020").trials
    assert (tmp_path / "figures" / "pareto_flops_per_token.png").stat().st_size > 0
    points = pd.read_csv(tmp_path / "tables" / "pareto_flops_per_token.csv")
    assert len(points) == int((trials["status"] == "finished").sum()) == 62
    # the front, recomputed here: no other trial as cheap and as good, better on one
    t = trials[["name", "flops_per_token", "final"]].to_numpy()
    expect = {n for n, c, v in t
              if not any(c2 <= c and v2 <= v and (c2 < c or v2 < v) for _, c2, v2 in t)}
    assert set(points.loc[points["on_front"], "name"]) == expect
    assert expect == {"budget08@seed0", "budget10@seed0", "sandwich6_5@seed1"}
    html = report.html.read_text()
    assert "Pareto front: val_bpc against FLOPs per token" in html
    assert all(name in html for name in expect)


@pytest.mark.parametrize("paper", ["press2020", "zhu2021", "crossformer"])
def test_study_with_a_published_paper_is_refused(
    paper: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sublayer_search.analysis.cli import main

    assert main(["--paper", paper, "--study", "sweep", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert f"--study: got 'sweep' with --paper {paper}, expected no --study" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.slow  # the shipped study's whole report: seconds
@pytest.mark.parametrize("study", ["sweep", "replication"])
def test_study_with_the_shipped_study_chooses_its_report(study: str, tmp_path: Path) -> None:
    from sublayer_search.analysis.cli import main

    out = tmp_path / study
    assert main(["--paper", "mini_press2020", "--study", study, "--out", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "Pareto front: val_bpc against FLOPs per token" in html
    replication = "(d) Seed noise against the differences between orders" in html
    assert replication == (study == "replication")
    assert ("Fig. 2/3: Sweep, every model against the baseline seeds" in html) == (
        study == "sweep")
