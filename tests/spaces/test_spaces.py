"""The order-generating spaces: permutations, budgeted, sandwich, explicit."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sublayer_search.spaces import (
    OrderError,
    SpaceError,
    budgeted,
    count_budgeted,
    count_permutations,
    counts,
    draw_budgeted,
    explicit,
    permutations,
    sandwich,
    units,
)

# -- permutations ---------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 20), st.integers(0, 20), st.integers(1, 40), st.integers(0, 10**6))
def test_permutations_keep_counts_and_cost(n_s: int, n_f: int, count: int, seed: int) -> None:
    if n_s + n_f == 0:
        return
    orders = permutations(n_s, n_f, count, seed)
    assert len(orders) == min(count, math.comb(n_s + n_f, n_s))
    assert len(set(orders)) == len(orders)
    for order in orders:
        assert counts(order) == {"s": n_s, "f": n_f, "c": 0}
        assert units(order) == n_s + 2 * n_f


def test_permutations_deterministic_and_seed_dependent() -> None:
    a = permutations(16, 16, 20, seed=1)
    assert a == permutations(16, 16, 20, seed=1)
    assert a != permutations(16, 16, 20, seed=2)


def test_permutations_all_when_count_reaches_total() -> None:
    assert count_permutations(2, 2) == 6
    assert permutations(2, 2, 6) == ["ffss", "fsfs", "fssf", "sffs", "sfsf", "ssff"]
    assert permutations(2, 2, 100, seed=5) == permutations(2, 2, 6)
    # more than half wanted: sampled without replacement from all of them
    assert sorted(permutations(3, 3, 15, seed=3)) == sorted(set(permutations(3, 3, 15, seed=3)))


def test_permutations_are_roughly_uniform() -> None:
    # each of the 6 orders of 2 s + 2 f as first draw over many seeds
    firsts = Counter(permutations(2, 2, 1, seed=s)[0] for s in range(600))
    assert len(firsts) == 6 and min(firsts.values()) > 60


@pytest.mark.parametrize(
    ("args", "field", "expected"),
    [
        ((-1, 2, 3), "n_s", "an integer in 0..1024"),
        ((2, 2, 0), "count", "an integer in 1..100000"),
        ((0, 0, 1), "n_f", "n_s + n_f in 1..1024"),
        ((2, 2.5, 1), "n_f", "an integer in 0..1024"),
        ((2, 2, True), "count", "an integer"),
    ],
)
def test_permutations_errors(args: tuple, field: str, expected: str) -> None:
    with pytest.raises(SpaceError) as info:
        permutations(*args)
    assert info.value.field == field
    assert expected in str(info.value)


# -- budgeted -------------------------------------------------------------------------


def test_budgeted_spends_exactly_and_covers_depths() -> None:
    orders = budgeted(48, 200, seed=0)
    assert len(orders) == len(set(orders)) == 200
    depths = [len(o) for o in orders]
    assert all(units(o) == 48 for o in orders)
    assert all(24 <= d <= 48 for d in depths)
    # with p_s = 0.5 the depth concentrates near 32 (Table 2 of the paper: 29..38)
    assert min(depths) <= 30 and max(depths) >= 34
    assert 30 <= sum(depths) / len(depths) <= 34
    # the whole 24..48 range is reachable by moving p_s
    s_heavy = [len(o) for o in budgeted(48, 200, seed=0, p_s=0.9)]
    f_heavy = [len(o) for o in budgeted(48, 200, seed=0, p_s=0.1)]
    assert max(s_heavy) >= 42 and min(f_heavy) <= 28
    assert all(24 <= d <= 48 for d in s_heavy + f_heavy)


def test_budgeted_deterministic() -> None:
    assert budgeted(48, 20, seed=3) == budgeted(48, 20, seed=3)
    assert budgeted(48, 20, seed=3) != budgeted(48, 20, seed=4)


def test_budgeted_odd_budget_ends_with_forced_s() -> None:
    import random

    rng = random.Random(0)
    for _ in range(50):
        order = draw_budgeted(5, rng, p_s=0.01)  # f nearly always drawn
        assert units(order) == 5
    assert draw_budgeted(5, random.Random(0), p_s=1e-9) == "ffs"


def test_budgeted_small_budgets_enumerate() -> None:
    assert [count_budgeted(b) for b in range(1, 8)] == [1, 2, 3, 5, 8, 13, 21]
    assert budgeted(4, 5) == ["ff", "fss", "sfs", "ssf", "ssss"]
    some = budgeted(6, 10, seed=2)  # 13 distinct: sampled without replacement
    assert len(set(some)) == 10 and all(units(o) == 6 for o in some)


@pytest.mark.parametrize(
    ("kwargs", "field", "expected"),
    [
        ({"budget_units": 0, "count": 1}, "budget_units", "an integer in 1..1024"),
        ({"budget_units": 4.0, "count": 1}, "budget_units", "an integer"),
        ({"budget_units": 4, "count": 6}, "count", "at most 5 (the number of distinct orders"),
        ({"budget_units": 4, "count": 1, "p_s": 1.0}, "p_s", "strictly between 0 and 1"),
    ],
)
def test_budgeted_errors(kwargs: dict, field: str, expected: str) -> None:
    with pytest.raises(SpaceError) as info:
        budgeted(**kwargs)
    assert info.value.field == field
    assert expected in str(info.value)


def test_budgeted_skewed_probability_gives_up_cleanly() -> None:
    with pytest.raises(SpaceError, match="reachable with p_s"):
        budgeted(60, 500, seed=0, p_s=1e-6)


# -- sandwich -------------------------------------------------------------------------


def test_sandwich_orders() -> None:
    assert sandwich(16, [0])[0] == "sf" * 16
    assert sandwich(16, [15])[0] == "s" * 16 + "f" * 16
    assert sandwich(3, [1]) == ["ssfsff"]
    assert sandwich(3) == ["sfsfsf", "ssfsff", "sssfff"]
    assert sandwich(3, [2, 0, 2]) == ["sssfff", "sfsfsf"]
    for order in sandwich(16):
        assert counts(order) == {"s": 16, "f": 16, "c": 0}


def test_sandwich_errors() -> None:
    with pytest.raises(SpaceError) as info:
        sandwich(16, [0, 3, 16])
    assert str(info.value) == "k[2]: got 16, expected an integer in 0..15"
    with pytest.raises(SpaceError, match="n: got 0"):
        sandwich(0)
    with pytest.raises(SpaceError, match="ks: got"):
        sandwich(3, [])


# -- explicit -------------------------------------------------------------------------


def test_explicit_parses_and_dedupes() -> None:
    assert explicit(["sfsf", "s^2 f^2", "(sf)^2", "ssff"]) == ["sfsf", "ssff"]
    assert explicit(["scf"], kind="decoder") == ["scf"]


def test_explicit_errors_name_the_index() -> None:
    with pytest.raises(SpaceError) as info:
        explicit(["sfsf", "sfcf"])
    err = info.value
    assert err.field == "orders[1]"
    assert "position 2" in str(err) and "'c' is not allowed" in str(err)
    assert isinstance(err.__cause__, OrderError)
    with pytest.raises(SpaceError, match="orders: got 'sfsf', expected a non-empty list"):
        explicit("sfsf")
