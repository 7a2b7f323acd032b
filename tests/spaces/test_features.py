"""Order features: quarter shares of ``s``, counts per half, depth and cost."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sublayer_search.spaces.cost import halves, units
from sublayer_search.spaces.errors import OrderError
from sublayer_search.spaces.features import (
    FEATURE_NAMES,
    OrderFeatures,
    feature_matrix,
    order_features,
)
from sublayer_search.spaces.order import sandwich_order


def test_worked_example() -> None:
    f = order_features("ssssffff").values  # 12 units, quarters of 3: s covers [0, 4)
    assert f["s_q1"] == 1.0 and f["s_q2"] == pytest.approx(1 / 3)
    assert f["s_q3"] == f["s_q4"] == 0.0
    assert (f["bottom_s"], f["bottom_f"], f["top_s"], f["top_f"]) == (4.0, 1.0, 0.0, 3.0)
    assert (f["depth"], f["cost"]) == (8.0, 12.0)


def test_straddling_sublayers_split_by_units() -> None:
    f = order_features("sfs").values  # s[0,1) f[1,3) s[3,4), quarters of 1
    assert [f[f"s_q{i}"] for i in range(1, 5)] == [1.0, 0.0, 0.0, 1.0]
    assert (f["bottom_f"], f["top_f"]) == (0.5, 0.5)


def test_sandwich_moves_attention_to_the_bottom() -> None:
    plain, sand = order_features(sandwich_order(8, 0)), order_features(sandwich_order(8, 6))
    assert sand.values["s_q1"] > plain.values["s_q1"]
    assert sand.values["s_q4"] < plain.values["s_q4"]
    assert sand.values["cost"] == plain.values["cost"] == 24.0


def test_decoder_and_macaron_orders_and_other_dims() -> None:
    f = order_features("scfscf").values
    assert (f["bottom_c"], f["top_c"]) == (1.0, 1.0)
    g = order_features("hshhsh").values  # h = 1 unit: 6 units, quarters of 1.5
    assert (g["bottom_h"], g["top_h"], g["cost"]) == (2.0, 2.0, 6.0)
    wide = order_features("sf", f_units=3.0).values  # d_ff = 6d
    assert wide["cost"] == 4.0 and wide["s_q1"] == 1.0 and wide["s_q2"] == 0.0


def test_vector_follows_feature_names_and_parses_shorthand() -> None:
    f = order_features("s^2 f^2")
    assert f.order == "ssff" and len(f.vector()) == len(FEATURE_NAMES)
    assert f.vector()[FEATURE_NAMES.index("depth")] == 4.0
    assert feature_matrix(["ssff", "sfsf"])[1] == order_features("sfsf").vector()


def test_bad_input() -> None:
    with pytest.raises(OrderError):
        order_features("sxf")
    with pytest.raises(ValueError, match="lacks"):
        OrderFeatures(order="sf", values={"depth": 2.0})


@given(st.text(alphabet="sf", min_size=1, max_size=40))
def test_invariants(order: str) -> None:
    f = order_features(order).values
    assert f["cost"] == units(order) and f["depth"] == len(order)
    shares = [f[f"s_q{i}"] for i in range(1, 5)]
    assert all(0.0 <= s <= 1.0 + 1e-9 for s in shares)
    assert sum(shares) * f["cost"] / 4 == pytest.approx(order.count("s"))  # all s units placed
    h = halves(order)
    assert f["bottom_s"] == h.bottom["s"] and f["top_f"] == h.top["f"]
