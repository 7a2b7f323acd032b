"""A space's candidate that is another candidate's model (issue 39): the plan keeps one,
and the dry run says which one it kept.

mini_press2020's budgeted draw ``budget00`` is ``ffssfsfssffs``, the permutation
``perm17``: the plan trained it once, as perm17, and said nothing. Real plans (no Ray).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan

REPO = Path(__file__).resolve().parents[2]
PERMS = {"type": "permutations", "n_s": 3, "n_f": 3, "count": 4, "seed": 0}


def _doc(spaces: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"name": "dups", "space": spaces, "seeds": [0], "baseline": {"seeds": 2},
            "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"}, **more}


def _plan(doc: dict[str, Any], notes: list[str] | None = None) -> SweepPlan:
    return plan_sweep(parse_experiment(doc), check_resources=False, notes=notes)


def _perm(index: int) -> str:
    """The order of permutation ``index`` of :data:`PERMS`, drawn by the space itself."""
    plan = _plan(_doc([PERMS]))
    return next(c.order for c in plan.candidates if c.name == f"perm{index:02d}")


def _duplicated() -> tuple[dict[str, Any], str]:
    """Permutations, then an explicit list repeating perm02 beside an order of its own."""
    order = _perm(2)
    return {"type": "explicit", "orders": ["ssffsf" if order != "ssffsf" else "sfssff",
                                           order]}, order


def test_the_dry_run_names_the_duplicate_and_the_candidate_kept() -> None:
    explicit, order = _duplicated()
    notes: list[str] = []
    plan = _plan(_doc([PERMS, explicit]), notes)
    assert f"explicit candidate {order} ({order}) duplicates perm02 (permutations): kept perm02" \
        in notes
    (dup,) = plan.duplicates
    assert (dup.dropped.name, dup.kept.name, dup.seeds, dup.own) == (order, "perm02", (0,), ())
    # the plan holds the model once: one candidate, one trial, named after the kept one
    assert [c.name for c in plan.candidates if c.order == order] == ["perm02"]
    assert [t.name for t in plan.trials if t.order == order] == ["perm02@seed0"]
    assert len(plan.trials) == 2 + 4 + 1  # baseline seeds, permutations, the explicit's other


def test_the_real_plan_keeps_one_too() -> None:
    explicit, order = _duplicated()
    plan = plan_sweep(parse_experiment(_doc([PERMS, explicit])))  # resources checked, no notes
    assert [t.name for t in plan.trials if t.order == order] == ["perm02@seed0"]
    assert [c.name for c in plan.candidates if c.order == order] == ["perm02"]
    assert [d.dropped.name for d in plan.duplicates] == [order]


def test_the_first_space_listed_keeps_it() -> None:
    explicit, order = _duplicated()
    notes: list[str] = []
    plan = _plan(_doc([explicit, PERMS]), notes)
    assert f"permutations candidate perm02 ({order}) duplicates {order} (explicit): " \
        f"kept {order}" in notes
    assert [t.name for t in plan.trials if t.order == order] == [f"{order}@seed0"]


def test_a_duplicate_with_seeds_of_its_own_trains_those() -> None:
    explicit, order = _duplicated()
    notes: list[str] = []
    plan = _plan(_doc([PERMS, {**explicit, "seeds": 3}]), notes)
    assert (f"explicit candidate {order} ({order}) duplicates perm02 (permutations): kept "
            f"perm02 at seed(s) 0; {order} trains seed(s) 1, 2") in notes
    assert [t.name for t in plan.trials if t.order == order] == [
        "perm02@seed0", f"{order}@seed1", f"{order}@seed2"]


def test_a_space_order_that_is_the_baseline_is_noted() -> None:
    notes: list[str] = []
    plan = _plan(_doc([{"type": "sandwich", "n": 3, "k": [0, 1]}]), notes)
    assert ("sandwich candidate sandwich3_0 (sfsfsf) duplicates interleaved3 (baseline): "
            "kept interleaved3") in notes
    assert [t.name for t in plan.trials if t.order == "sfsfsf"] == [
        "interleaved3@seed0", "interleaved3@seed1"]
    assert plan.trials[0].params.get("k") == 0  # merged into the baseline trial, as before


def test_an_adaptive_search_draws_the_model_once() -> None:
    explicit, order = _duplicated()
    notes: list[str] = []
    plan = _plan(_doc([PERMS, explicit], search={"algorithm": "optuna", "num_samples": 3}),
                 notes)
    assert [c.name for c in plan.candidates if c.order == order] == ["perm02"]
    assert len(plan.candidates) == 5 and any("kept perm02" in n for n in notes)


def test_no_note_without_duplicates() -> None:
    notes: list[str] = []
    plan = _plan(_doc([{"type": "sandwich", "n": 3, "k": [1, 2]},
                       {"type": "explicit", "orders": ["ffsssf", "fsfsfs"]}]), notes)
    assert plan.duplicates == () and not any("duplicates" in n for n in notes)
    assert len(plan.candidates) == 4 and len(plan.trials) == 2 + 4


def test_mini_press2020_dry_run_says_which_budgeted_draw_it_dropped(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(REPO / "configs" / "mini_press2020.yaml"), "--dry-run"]) == 0
    out, err = capsys.readouterr()
    assert ("sublayer: note: budgeted candidate budget00 (ffssfsfssffs) duplicates perm17 "
            "(permutations): kept perm17") in err.splitlines()
    assert "budget00@seed0" not in out and "perm17@seed0" in out
    assert "62 trial(s)" in out
