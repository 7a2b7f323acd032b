"""IOT block-order subsets."""

from __future__ import annotations

import pytest

from sublayer_search.spaces import DECODER_BLOCKS, SpaceError, iot_subsets


def test_paper_subsets() -> None:
    (subset,) = iot_subsets("decoder", 4, "paper")
    assert subset.id == "1246" and subset.codes == (1, 2, 4, 6)
    assert subset.blocks == ("scf", "fsc", "csf", "fcs")
    assert [iot_subsets("decoder", n)[0].id for n in range(2, 7)] == [
        "46", "146", "1246", "12456", "123456"]
    assert iot_subsets("encoder", 2)[0].blocks == ("sf", "fs")
    assert iot_subsets("encoder", 1)[0].id == "1"


def test_orders_stack_blocks() -> None:
    (subset,) = iot_subsets("decoder", 2)
    assert subset.orders(2) == ("csfcsf", "fcsfcs")
    with pytest.raises(SpaceError, match="layers"):
        subset.orders(0)


def test_exhaustive() -> None:
    subsets = iot_subsets("decoder", 2, "exhaustive")
    assert len(subsets) == 15
    assert [s.id for s in subsets] == sorted(s.id for s in subsets)
    assert subsets[0].id == "12" and subsets[-1].id == "56"


def test_random_is_seeded_and_distinct() -> None:
    a = iot_subsets("decoder", 3, "random", seed=1, count=5)
    assert a == iot_subsets("decoder", 3, "random", seed=1, count=5)
    assert len({s.id for s in a}) == 5
    assert [s.id for s in a] != [s.id for s in iot_subsets("decoder", 3, "random", 2, 5)]


def test_diverse_is_deterministic_and_spread() -> None:
    (subset,) = iot_subsets("decoder", 3, "diverse")
    assert subset == iot_subsets("decoder", 3, "diverse", seed=7)[0]
    # the three cyclic rotations differ in every position
    assert subset.id == "123"
    blocks = [DECODER_BLOCKS[c] for c in subset.codes]
    for i, a in enumerate(blocks):
        for b in blocks[i + 1:]:
            assert sum(x != y for x, y in zip(a, b, strict=True)) == 3


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"stack": "middle"}, "stack"),
        ({"size": 7}, "size"),
        ({"stack": "encoder", "size": 3}, "size"),
        ({"mode": "best"}, "mode"),
        ({"mode": "random"}, "count"),
        ({"mode": "random", "size": 6, "count": 2}, "count"),
        ({"mode": "paper", "count": 3}, "count"),
    ],
)
def test_errors(kwargs: dict, field: str) -> None:
    with pytest.raises(SpaceError) as info:
        iot_subsets(**kwargs)
    assert info.value.field == field
