"""Budgeted draws over any alphabet: every order lands within tolerance of the parameter
budget (and of the state budget when one is set), weighed at the model's dims."""

from __future__ import annotations

import pytest

from sublayer_search.spaces.cost import units
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.budget_kinds import budget_costs, budgeted_kinds
from sublayer_search.spaces.generators.budgeted import budgeted
from sublayer_search.spaces.kinds import Dims, kind_of
from sublayer_search.spaces.registry import expand

DIMS = Dims(d_model=64, d_ff=256, n_heads=4, context=128)


def _state(order: str) -> int:
    return sum(kind_of(ch).state(DIMS) for ch in order)


def test_iso_parameter_draws_spend_the_budget_within_tolerance() -> None:
    drawn = budgeted_kinds("srfe", 24, 30, seed=3, tolerance=0.05, dims=DIMS)
    orders = [o for o, _, _ in drawn]
    assert len(set(orders)) == 30
    for order, spent, held in drawn:
        assert spent == pytest.approx(units(order, dims=DIMS))  # the accounting of the product
        assert abs(spent - 24) <= 0.05 * 24 and held == _state(order)
    assert set("".join(orders)) == set("srfe")  # every symbol is drawn


def test_iso_state_draws_hold_the_state_budget_too() -> None:
    budget = 2 * kind_of("s").state(DIMS) + 8 * kind_of("r").state(DIMS)
    drawn = budgeted_kinds("srf", 24, 10, seed=1, state=budget, tolerance=0.05, dims=DIMS)
    assert len(drawn) == 10
    for order, spent, held in drawn:
        assert abs(spent - 24) <= 1.2 and abs(held - budget) <= 0.05 * budget, order
        assert held == _state(order)


def test_with_s_and_f_alone_and_no_tolerance_it_is_the_papers_draw() -> None:
    """s = 1, f = 2 units, exact: the orders of the paper's study 2 (the same set)."""
    drawn = {o for o, _, _ in budgeted_kinds("sf", 6, 13, tolerance=0.0, dims=DIMS)}
    assert drawn == set(budgeted(6, 13))


def test_costs_follow_the_kinds_registry() -> None:
    costs = budget_costs("swrfe", DIMS)
    assert costs["s"] == (1.0, 2 * 128 * 64) and costs["f"] == (2.0, 0)
    assert costs["w"][1] == 2 * 16 * 64 and costs["r"] == (1 + 4 / (4 * 64), 64 * 16)


@pytest.mark.parametrize(("args", "field"), [
    ({"symbols": "sx", "budget_units": 8, "count": 2}, "symbols"),
    ({"symbols": "ss", "budget_units": 8, "count": 2}, "symbols"),
    ({"symbols": "sf", "budget_units": 0, "count": 2}, "budget_units"),
    ({"symbols": "sf", "budget_units": 8, "count": 2, "tolerance": 1.5}, "tolerance"),
    ({"symbols": "f", "budget_units": 8, "count": 1, "state": 100}, "state"),
    ({"symbols": "f", "budget_units": 3, "count": 1, "tolerance": 0.0}, "count"),
    ({"symbols": "sf", "budget_units": 8, "count": 2, "dims": {}}, "dims"),
])
def test_bad_arguments_are_named(args, field) -> None:
    with pytest.raises(SpaceError) as err:
        expand("budgeted_kinds", args, dims=DIMS)
    assert err.value.field == field, err.value


def test_without_the_models_dims_it_says_what_it_needs() -> None:
    with pytest.raises(SpaceError, match="d_model, d_ff, n_heads"):
        expand("budgeted_kinds", {"symbols": "srf", "budget_units": 8, "count": 2})
