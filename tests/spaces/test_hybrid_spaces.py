"""The spaces over any alphabet: permutations of a multiset of kinds, and k attention
layers placed among n layers of another sequence mixer."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.hybrid import (
    attention_positions,
    count_multiset,
    multiset,
    placement,
)
from sublayer_search.spaces.registry import expand


def test_multiset_draws_distinct_orders_of_exactly_the_counts() -> None:
    counts = {"s": 2, "r": 3, "f": 3}
    orders = multiset(counts, 20, seed=4)
    assert len(orders) == len(set(orders)) == 20
    assert all(Counter(o) == Counter(counts) for o in orders)
    assert multiset(counts, 20, seed=4) == orders != multiset(counts, 20, seed=5)
    assert count_multiset(counts) == 8 * 7 * 6 * 5 * 4 * 3 * 2 // (2 * 6 * 6) == 560
    every = multiset({"s": 1, "e": 1, "f": 1}, 6)
    assert every == sorted(every) and len(every) == 6  # all of them, in order


@pytest.mark.parametrize(("args", "message"), [
    ({"counts": {"s": 1, "c": 1}, "count": 1}, "counts.c: got 1, expected a count of a lm "
                                               "sublayer symbol, one of s, f, h, w, r, e"),
    ({"counts": {"s": -1, "f": 2}, "count": 1}, "counts.s: got -1, expected an integer in 0..1024"),
    ({"counts": {"s": 1, "f": 1}, "count": 3}, "count: got 3, expected at most 2 (the number "
                                               "of distinct orders of 1 s, 1 f)"),
    ({"counts": [2, 2], "count": 1}, "counts: got [2, 2], expected a mapping of sublayer symbol"),
])
def test_multiset_names_the_bad_argument(args, message) -> None:
    with pytest.raises(SpaceError) as err:
        multiset(**args)
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize(("at", "positions"), [
    ("evenly", [2, 6]), ("bottom", [0, 1]), ("top", [6, 7]), ("middle", [3, 4])])
def test_each_placement_puts_attention_where_it_says(at: str, positions: list[int]) -> None:
    assert attention_positions(8, 2, at, random.Random(0)) == positions
    [(order, params)] = placement(8, 2, at=at)
    layers = [order[i:i + 2] for i in range(0, 16, 2)]
    assert [i for i, layer in enumerate(layers) if layer == "sf"] == positions
    assert set(layers) == {"sf", "rf"} and params == {"n": 8, "attention": 2, "at": at}


def test_the_ratio_is_an_axis_and_shared_orders_are_kept_once() -> None:
    found = placement(6, [0, 1, 3, 6], at=["evenly", "bottom", "random"], draws=2, seed=1)
    orders = [o for o, _ in found]
    assert len(orders) == len(set(orders))
    assert orders[0] == "rf" * 6 and orders[-1] == "sf" * 6  # k = 0 and k = n: once each
    assert Counter(p["attention"] for _, p in found)[0] == 1
    assert {p["attention"] for _, p in found} == {0, 1, 3, 6}
    assert placement(6, [0, 1, 3, 6], at=["evenly", "bottom", "random"], draws=2, seed=1) == found
    alone = placement(4, 1, mixer="w", channel=None, at="top")
    assert alone == [("wwws", {"n": 4, "attention": 1, "at": "top"})]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"attention": 9}, "attention: got 9, expected an integer in 0..8"),
    ({"attention": [1, 9]}, "attention[1]: got 9, expected an integer in 0..8"),
    ({"attention": 1, "at": "sideways"}, "at: got 'sideways', expected one of evenly, bottom, "
                                         "top, middle, random"),
    ({"attention": 1, "mixer": "s"}, "attend: got 's', expected a symbol other than the "
                                     "mixer's ('s')"),
    ({"attention": 1, "mixer": "c"}, "mixer: got 'c', expected a lm sublayer symbol, one of "
                                     "s, f, h, w, r, e"),
])
def test_placement_names_the_bad_argument(kwargs, message) -> None:
    with pytest.raises(SpaceError) as err:
        placement(8, **kwargs)
    assert str(err.value).startswith(message), str(err.value)


def test_both_spaces_expand_as_candidates_of_their_space() -> None:
    cands = expand("placements", {"n": 4, "attention": [1, 2]})
    assert [c.name for c in cands] == ["place4_1_evenly", "place4_2_evenly"]
    assert {c.space for c in cands} == {"placements"} and cands[1].params["attention"] == 2
    mixed = expand("multiset", {"counts": {"s": 1, "r": 1}, "count": 2})
    assert [(c.name, c.order) for c in mixed] == [("mix00", "rs"), ("mix01", "sr")]
    with pytest.raises(SpaceError, match="kind"):
        expand("placements", {"n": 4, "attention": 1}, kind="decoder")


def test_the_sandwich_family_over_any_two_kinds() -> None:
    cands = expand("sandwich", {"n": 3, "ks": [0, 2], "mixer": "r"})
    assert [(c.name, c.order) for c in cands] == [("sandwich_rf3_0", "rfrfrf"),
                                                 ("sandwich_rf3_2", "rrrfff")]
    # its own family: the paper's sandwich study (s and f) never mixes them in
    assert {c.family for c in cands} == {"sandwich_rf"} and cands[1].params["k"] == 2
    classic = expand("sandwich", {"n": 3, "ks": [2]})
    assert (classic[0].name, classic[0].family, classic[0].params) == (
        "sandwich3_2", "sandwich", {"n": 3, "k": 2})
    assert [c.order for c in expand("sandwich", {"n": 2, "mixer": "w", "channel": "e"})] == [
        "wewe", "wwee"]
    with pytest.raises(SpaceError, match="mixer: got 'r', expected a decoder sublayer symbol"):
        expand("sandwich", {"n": 2, "mixer": "r"}, kind="decoder")
    with pytest.raises(SpaceError, match="mixer: got 'h', expected s with channel f for "
                                         "decoders"):
        expand("sandwich", {"n": 2, "mixer": "h"}, kind="decoder")
    with pytest.raises(SpaceError, match="channel: got 'r', expected a symbol other than"):
        expand("sandwich", {"n": 2, "mixer": "r", "channel": "r"})
