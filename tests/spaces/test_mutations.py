"""Mutations for evolutionary search."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sublayer_search.spaces import SpaceError, f_ss_moves, mutate, neighbour_swaps, units


def test_neighbour_swaps() -> None:
    assert neighbour_swaps("ssff") == ["sfsf"]
    assert neighbour_swaps("sfs") == ["fss", "ssf"]
    assert neighbour_swaps("ssss") == []


def test_f_ss_moves() -> None:
    assert f_ss_moves("sf") == ["sss"]
    assert sorted(f_ss_moves("ssf")) == ["ff", "ssss"]
    assert sorted(f_ss_moves("fss")) == ["ff", "ssss"]


@given(st.text(alphabet="sf", min_size=2, max_size=60), st.integers(0, 10**6))
def test_mutate_keeps_units_and_changes_the_order(order: str, seed: int) -> None:
    child = mutate(order, random.Random(seed))
    assert child != order
    assert units(child) == units(order)


def test_mutate_deterministic() -> None:
    order = "sfsfssff" * 4
    a = [mutate(order, random.Random(5)) for _ in range(3)]
    assert len(set(a)) == 1
    rng1, rng2 = random.Random(9), random.Random(9)
    assert [mutate(order, rng1) for _ in range(10)] == [mutate(order, rng2) for _ in range(10)]


def test_mutate_free_budget_and_dead_end() -> None:
    child = mutate("s", random.Random(0), keep_budget=False)
    assert child == "f"
    with pytest.raises(SpaceError, match="at least one possible move"):
        mutate("s", random.Random(0))
