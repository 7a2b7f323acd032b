"""Order families from peers: the PAR space and the half-width ``h`` of Macaron blocks."""

from __future__ import annotations

import pytest

from sublayer_search.spaces import (
    ALL_SPACES,
    FAMILY_SPACES,
    Halves,
    OrderError,
    SpaceError,
    counts,
    expand,
    halves,
    macaron_order,
    order_params,
    par,
    par_order,
    parse_order,
    sublayer_costs,
    unit_costs,
    units,
    validate,
)
from sublayer_search.spaces.generators.families import par_counts


def xtransformers_par(depth: int, par_ratio: int) -> str:
    """The layout x-transformers builds with ``par_ratio`` for a stack of ``depth``
    (attention, feedforward) blocks, restated here from reading its AttentionLayers:
    n_attn = 2·depth // ratio; the first two thirds are split into n_attn blocks of
    one attention and width−1 feedforwards; every remaining sublayer a feedforward."""
    total = 2 * depth
    assert 1 < par_ratio <= total
    n_attn = total // par_ratio
    cut = total * 2 // 3
    width = (cut + cut // n_attn) // n_attn
    assert width >= 1
    head = ("s" + "f" * (width - 1)) * n_attn
    return head + "f" * (total - len(head))


# -- h: the half-width feedforward -----------------------------------------------------------
@pytest.mark.parametrize("kind", ["lm", "encoder", "decoder"])
def test_h_is_in_every_alphabet(kind: str) -> None:
    assert parse_order("(hsh)^2", kind=kind) == "hshhsh"
    assert parse_order("h s h | f", kind=kind) == "hshf"


def test_h_costs_half_an_f() -> None:
    d, ff = 8, 32
    plain = sublayer_costs(d_model=d, d_ff=ff)
    assert plain["h"] == d * ff == plain["f"] // 2
    exact = sublayer_costs(d_model=d, d_ff=ff, exact=True)
    assert exact["h"] == (d * ff // 2 + ff // 2) + (ff // 2 * d + d) + 2 * d
    assert set(unit_costs(d_model=d, d_ff=ff)) == {"s", "f", "c"}  # the classic view
    assert order_params("hsh", d_model=d, d_ff=ff) == order_params("sf", d_model=d, d_ff=ff)
    assert units("hsh") == units("sf") == 3
    assert units("h", f_units=3) == 1.5


def test_counts_name_h_only_when_present() -> None:
    assert counts("hshf") == {"s": 1, "f": 1, "c": 0, "h": 2}
    assert counts("sf") == {"s": 1, "f": 1, "c": 0}
    with pytest.raises(OrderError, match="over s, c, f, h"):
        counts("sfx")


def test_halves_count_h_by_its_half_weight() -> None:
    result = halves("hshhsh")  # 6 units, cut at 3: h s h | h s h
    assert result.bottom == {"s": 1, "f": 0, "c": 0, "h": 2} == result.top
    split = halves("shh")  # s[0,1) h[1,2) h[2,3): cut at 1.5 splits the first h
    assert split.bottom["h"] == pytest.approx(0.5) and split.top["h"] == pytest.approx(1.5)
    assert halves("ssssff").bottom == {"s": 4, "f": 0, "c": 0}  # no h key without an h
    assert Halves(bottom={"h": 1}, top={}).top == {"s": 0, "f": 0, "c": 0, "h": 0}


# -- PAR ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("depth", "ratio"), [(5, 5), (6, 2), (6, 3), (6, 4), (8, 4), (12, 6),
                                              (12, 3), (16, 4), (24, 8)])
def test_par_order_is_the_xtransformers_layout(depth: int, ratio: int) -> None:
    expected = xtransformers_par(depth, ratio)
    n_s = expected.count("s")
    assert par_order(n_s, len(expected) - n_s) == expected


def test_par_space_keeps_the_budget_and_lays_attention_first() -> None:
    members = expand("par", {"n": 6})
    assert [c.name for c in members] == ["par18_s2", "par18_s4", "par18_s6"]
    assert [c.order for c in members] == ["sfffsfffff", "sfsfsfsffff", "s" * 6 + "f" * 6]
    for c in members:
        assert units(c.order) == 18 and c.family == "par" and c.params["budget_units"] == 18
        n = counts(c.order)
        assert c.params["par_ratio"] == pytest.approx((n["s"] + n["f"]) / n["s"])
        last_s = c.order.rindex("s")
        assert last_s < (2 * len(c.order)) // 3 or n["s"] >= n["f"]  # attention in the first 2/3
    # the x-transformers stack of depth 5, ratio 5 is the member with 2 s at 18 units
    assert members[0].order == xtransformers_par(5, 5)


def test_par_space_arguments() -> None:
    assert [c.order.count("s") for c in expand("par", {"budget_units": 30, "n_s": [4, 2]})] == [4, 2]
    assert [s for s, _, _ in par(budget_units=4)] == [2]  # no member with s <= f: all feasible
    assert all(s + 2 * f == 20 for s, f in par_counts(20))
    for order in (o for _, _, o in par(budget_units=60, n_s=list(range(2, 58, 2)))):
        assert units(order) == 60  # every member, clamped or not, spends the budget exactly
    with pytest.raises(SpaceError, match=r"n_s\[1\]: got 3, expected a count of s"):
        validate("par", {"n": 6, "n_s": [2, 3]})
    with pytest.raises(SpaceError, match="exactly one of n"):
        validate("par", {"n": 6, "budget_units": 18})
    with pytest.raises(SpaceError, match="exactly one of n"):
        validate("par", {})
    with pytest.raises(SpaceError, match="kind"):
        expand("par", {"n": 2}, kind="decoder")


# -- Macaron ------------------------------------------------------------------------------
@pytest.mark.parametrize(("kind", "block"), [("lm", "hsh"), ("encoder", "hsh"),
                                             ("decoder", "hsch")])
def test_macaron_space_matches_the_interleaved_budget(kind: str, block: str) -> None:
    members = expand("macaron", {"n": [2, 3, 2]}, kind=kind)
    assert [c.name for c in members] == ["macaron2", "macaron3"]
    assert [c.order for c in members] == [block * 2, block * 3]
    base = "scf" if kind == "decoder" else "sf"
    for c in members:
        n = c.params["n"]
        assert c.family == "macaron" and macaron_order(n, kind=kind) == c.order
        assert units(c.order) == units(base * n)
        assert order_params(c.order, d_model=16, d_ff=64) == order_params(base * n, d_model=16,
                                                                          d_ff=64)


def test_family_spaces_are_registered_apart() -> None:
    assert set(FAMILY_SPACES) == {"par", "macaron"} and set(FAMILY_SPACES) <= set(ALL_SPACES)
    assert FAMILY_SPACES["macaron"].required == ("n",)
    with pytest.raises(SpaceError, match="n: got 0"):
        validate("macaron", {"n": 0})
    with pytest.raises(SpaceError, match=r"n\[1\]"):
        validate("macaron", {"n": [1, "x"]})
