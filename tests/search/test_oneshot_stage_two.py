"""Stage 2 of a one-shot sweep trains more than the top_k by rank when the ranking
cannot tell the next orders from the k-th (``supernet.tie_extra`` / ``tie_sems``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from test_oneshot import ONESHOT, _doc

from sublayer_search.search.oneshot.stages import RANK_PARAM, chosen, stage_two
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep


def _rows(means: list[float], sems: list[float], orders: list[str]) -> list[dict[str, Any]]:
    return [
        {"order": o, "mean": m, "sem": s, "n_batches": 20, "rank": r}
        for r, (o, m, s) in enumerate(zip(orders, means, sems, strict=True), 1)
    ]


def test_chosen_adds_the_orders_within_the_tie_band_up_to_the_cap() -> None:
    # k-th (rank 2): mean 2.00, sem 0.03; the band at 2 sems of the difference:
    # rank 3 (gap 0.05 <= 2 * hypot(0.03, 0.03) = 0.085) ties, rank 4 (gap 0.20) does not,
    # rank 5 (gap 0.08, sem 0.04: band 0.10) ties
    rows = _rows([1.9, 2.0, 2.05, 2.2, 2.08], [0.03] * 4 + [0.04], list("abcde"))
    got = [r["order"] for r in chosen(rows, 2, extra=3, sems=2.0)]
    assert got == ["a", "b", "c", "e"]
    assert [r["order"] for r in chosen(rows, 2, extra=1, sems=2.0)] == ["a", "b", "c"]
    assert [r["order"] for r in chosen(rows, 2, extra=0, sems=2.0)] == ["a", "b"]
    assert [r["order"] for r in chosen(rows, 2, extra=3, sems=0.0)] == ["a", "b"]


def test_a_row_without_a_finite_sem_never_ties() -> None:
    rows = _rows([1.0, 1.0, 1.0], [0.1, math.nan, 0.1], list("abc"))
    rows[2]["sem"] = ""  # as read back from ranking.csv when missing
    assert [r["order"] for r in chosen(rows, 1, extra=2, sems=2.0)] == ["a"]


def test_stage_two_trains_the_tied_orders_with_their_rank(tmp_path: Path) -> None:
    search = {**ONESHOT, "top_k": 1, "supernet": {"steps": 30, "tie_extra": 2}}
    plan = plan_sweep(parse_experiment(_doc(tmp_path, search=search)), check_resources=False)
    # as read back from ranking.csv (strings): ranks 2 and 3 tie with rank 1, 4 does not
    orders = ["fsfs", "ffss", "ssff", "sffs", "sfsf"]
    ranking = [
        {"order": o, "mean": str(m), "sem": "0.02", "n_batches": "2", "rank": str(r)}
        for r, (o, m) in enumerate(zip(orders, [2.0, 2.01, 2.02, 2.5, 2.6], strict=True), 1)
    ]
    stage2 = stage_two(plan, ranking)
    picked = [(t.order, t.params[RANK_PARAM]) for t in stage2.trials if RANK_PARAM in t.params]
    assert picked == [("fsfs", 1), ("ffss", 2), ("ssff", 3)]
    plain = {**search, "supernet": {"steps": 30, "tie_extra": 0}}
    plan0 = plan_sweep(parse_experiment(_doc(tmp_path, search=plain)), check_resources=False)
    assert [t.order for t in stage_two(plan0, ranking).trials if not t.baseline] == ["fsfs"]


# -- a second opinion: the orders a prior from earlier studies ranks best ----------------
def test_prior_picks_the_best_prior_orders_the_ranking_left_out() -> None:
    from dataclasses import replace

    from sublayer_search.search.oneshot.stages import prior_picks
    from sublayer_search.search.searchers.prior import resolve_prior

    prior = resolve_prior("press2020")  # more s low and more f high ranks better
    assert prior.weight > 0
    rows = _rows([1.0, 1.1, 1.2, 1.3, 1.4], [0.01] * 5,
                 ["fsfsfs", "ffsfss", "sssfff", "fssfsf", "ssfsff"])
    score = prior.predict([r["order"] for r in rows])
    best_first = [rows[i]["order"] for i in sorted(range(5), key=lambda i: score[i])]
    assert best_first[0] == "sssfff"  # the sandwich-like order, which the ranking put 3rd
    got = [r["order"] for r in prior_picks(rows, rows[:1], prior, 2)]
    assert got == [o for o in best_first if o != "fsfsfs"][:2]
    assert prior_picks(rows, rows[:1], prior, 0) == []
    assert prior_picks(rows, rows[:1], None, 2) == []
    assert prior_picks(rows, rows[:1], replace(prior, weight=0.0), 2) == []  # no evidence
    assert prior_picks(rows, rows, prior, 2) == []  # nothing left


def test_stage_two_adds_the_prior_picks_marked_as_such(tmp_path: Path) -> None:
    from sublayer_search.search.oneshot.stages import PICK_PARAM
    from sublayer_search.search.searchers.prior import resolve_prior

    search = {**ONESHOT, "top_k": 1, "prior": "press2020",
              "supernet": {"steps": 30, "tie_extra": 0, "prior_extra": 1}}
    plan = plan_sweep(parse_experiment(_doc(tmp_path, search=search)), check_resources=False)
    orders = ["fsfs", "ffss", "sffs", "ssff", "sfsf"]  # the supernet puts ssff 4th
    ranking = _rows([2.0, 2.1, 2.2, 2.3, 2.4], [0.001] * 5, orders)
    stage2 = stage_two(plan, ranking, resolve_prior("press2020"))
    picked = [(t.order, t.params[RANK_PARAM], t.params.get(PICK_PARAM))
              for t in stage2.trials if RANK_PARAM in t.params]
    assert picked == [("fsfs", 1, None), ("ssff", 4, "prior")]
    assert [t.order for t in stage_two(plan, ranking).trials if not t.baseline] == ["fsfs"]


def test_the_dry_run_counts_the_prior_picks(tmp_path: Path, capsys: Any) -> None:
    from test_oneshot import _write

    from sublayer_search.search.cli.main import main

    search = {**ONESHOT, "prior": "press2020", "supernet": {"steps": 30, "prior_extra": 2}}
    assert main(["sweep", str(_write(tmp_path, _doc(tmp_path, search=search))),
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "+ up to 2 more the prior ranks best among the rest (search.prior, " \
           "supernet.prior_extra)" in out
    assert "(+ up to 2 by the prior)" in out and "search.prior: prior from press2020" in out


def test_the_oneshot_benchmark_judges_the_prior_without_the_judged_study(tmp_path: Path) -> None:
    """benchmarks/oneshot_judge.py: a renamed copy of the judged export is still left out,
    and stage 2 with the prior catches what the prior's best orders catch."""
    import importlib.util
    import shutil
    import sys

    import numpy as np

    bench_dir = Path(__file__).resolve().parents[2] / "benchmarks"
    sys.path.insert(0, str(bench_dir))
    try:
        spec = importlib.util.spec_from_file_location("oneshot_judge", bench_dir / "oneshot_judge.py")
        assert spec is not None and spec.loader is not None
        judge = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(judge)
    finally:
        sys.path.remove(str(bench_dir))
    data = bench_dir.parent / "analysis" / "data"
    for part in ("meta.json", "trials.csv", "curves.csv"):
        shutil.copy(data / f"mini_press2020_{part}", tmp_path / f"renamed_{part}")
    meta = str(tmp_path / "renamed_meta.json")
    prior = judge.judged_prior(meta, ["press2020", "mini_press2020"])
    assert all(s.startswith("press2020/") for s in prior.sources)  # by content, not name
    truth_by_order, _, _ = judge.truth_table(meta)
    judged = sorted(truth_by_order)
    truth = np.array([truth_by_order[o] for o in judged])
    alone = judge.prior_alone(prior, judged, truth, np.random.default_rng(0), 200)
    assert -1 <= alone["kendall_tau"] <= 1 and alone["sources"] == list(prior.sources)
    # a ranking that is the truth reversed: its top 5 and ties catch none of the true top 5
    worst_first = [judged[i] for i in np.argsort(-truth, kind="stable")]
    ranking = [{"order": o, "mean": float(r), "sem": 1e-9, "rank": r}
               for r, o in enumerate(worst_first, 1)]
    pick = judge.stage_two_pick(ranking, judged, truth, prior)
    assert pick["top5_caught"] == 0 and pick["picked"] == 5  # no ties at this sem
    score = dict(zip(judged, prior.predict(judged), strict=True))
    best = sorted((o for o in judged if o not in worst_first[:5]), key=score.__getitem__)[:3]
    top5 = {judged[i] for i in np.argsort(truth, kind="stable")[:5]}
    assert pick["picked_with_prior"] == 8
    assert pick["top5_caught_with_prior"] == len(top5 & set(best))
    assert judge.stage_two_pick(ranking, judged, truth)["top5_caught_with_prior"] == 0
