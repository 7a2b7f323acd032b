"""The checked order value (issue 38, item 3): made by parsing, trusted by its holders,
plain text still parsed."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from sublayer_search.models.config import ModelConfig
from sublayer_search.search.core.variant import Variant
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import OrderError
from sublayer_search.spaces.order import Order, interleaved, parse_order, sandwich_order


def test_parsing_gives_a_checked_order_that_reads_as_the_plain_string() -> None:
    order = parse_order("(sf)^2")
    assert isinstance(order, Order) and order == "sfsf" and hash(order) == hash("sfsf")
    assert Order.parse("sfsf") == order and isinstance(Order.parse("sfsf"), Order)
    assert json.dumps({"order": order}) == '{"order": "sfsf"}'
    assert f"{order}" == "sfsf" and repr(order) == "'sfsf'" and type(str(order)) is str
    assert not isinstance(order[:2], Order) and not isinstance(order + "f", Order)


def test_an_order_is_never_made_from_unchecked_text() -> None:
    with pytest.raises(TypeError, match="parse_order"):
        Order("sx")


def test_the_families_are_checked_by_construction() -> None:
    assert isinstance(interleaved(3), Order) and interleaved(3) == "sfsfsf"
    assert isinstance(sandwich_order(4, 1, kind="decoder"), Order)


@pytest.mark.parametrize("copier", [lambda o: pickle.loads(pickle.dumps(o)), copy.copy,
                                    copy.deepcopy])
def test_a_copied_order_stays_checked(copier) -> None:  # type: ignore[no-untyped-def]
    order = parse_order("ssff")
    again = copier(order)
    assert again == order and isinstance(again, Order)


def test_of_trusts_a_checked_order_and_parses_text() -> None:
    order = parse_order("scf", kind="decoder")
    assert Order.of(order, kind="decoder") is order
    assert Order.of("(sf)^2") == "sfsf" and isinstance(Order.of("(sf)^2"), Order)
    with pytest.raises(OrderError, match="not allowed in an order for kind 'lm'"):
        Order.of(order, kind="lm")  # checked for a decoder: an LM still refuses its c
    with pytest.raises(OrderError, match="longer than 2"):
        Order.of(order, kind="decoder", max_length=2)
    assert parse_order("sf").fits("encoder") and not order.fits("encoder")


def test_holders_keep_the_checked_order_and_parse_plain_text() -> None:
    order = parse_order("sfsf")
    cand = Candidate(order=order, space="explicit", name="a")
    variant = Variant(order=cand.order)
    model = ModelConfig(order=variant.order, d_model=8, n_heads=2, d_ff=16, context=4)
    assert cand.order is order and variant.order is order and model.order is order
    assert Variant(order="(sf)^2").order == "sfsf"
    assert isinstance(ModelConfig(order="sf^2", d_model=8, n_heads=2, d_ff=16,
                                  context=4).order, Order)
    with pytest.raises(OrderError, match="unknown symbol 'x'"):
        Variant(order="sx")
