"""Stage 2 of a one-shot sweep trains more than the top_k by rank when the ranking
cannot tell the next orders from the k-th (``supernet.tie_extra`` / ``tie_sems``)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from test_oneshot import ONESHOT, _doc

from sublayer_search.search.oneshot.plan import RANK_PARAM, chosen, stage_two
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.sweep_plan import plan_sweep


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
