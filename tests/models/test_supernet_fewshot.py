"""Few-shot supernets: orders split by a prefix, one step budget shared by group size."""

from __future__ import annotations

import pytest

from sublayer_search.models.errors import ConfigError
from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.models.supernet.fewshot import share_steps, split_by_prefix


def test_split_by_prefix_groups_in_order_of_first_appearance() -> None:
    orders = ["sfsf", "fssf", "sffs", "fssf", "ssff"]
    assert split_by_prefix(orders, 1) == {"s": ("sfsf", "sffs", "ssff"), "f": ("fssf",)}
    assert split_by_prefix(orders, 2) == {
        "sf": ("sfsf", "sffs"),
        "fs": ("fssf",),
        "ss": ("ssff",),
    }
    assert split_by_prefix(orders, 0) == {"": ("sfsf", "fssf", "sffs", "ssff")}


@pytest.mark.parametrize(
    ("total", "sizes", "expected"),
    [(2000, [16, 29], [711, 1289]), (10, [1, 1, 1], [4, 3, 3]), (5, [1, 1, 100], [1, 1, 3])],
)
def test_share_steps_is_proportional_adds_up_and_leaves_no_group_out(
    total: int, sizes: list[int], expected: list[int]
) -> None:
    assert share_steps(total, sizes) == expected
    assert sum(expected) == total


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: split_by_prefix(["sf"], -1), "split"),
        (lambda: split_by_prefix([], 1), "orders"),
        (lambda: share_steps(2, [1, 1, 1]), "steps"),
        (lambda: share_steps(10, [0, 2]), "sizes"),
    ],
)
def test_bad_arguments_name_the_field(call, field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=field):
        call()


def test_tie_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="supernet.tie_sems"):
        SupernetConfig(tie_sems=-1.0)
    with pytest.raises(ConfigError, match="supernet.tie_extra"):
        SupernetConfig.from_dict({"tie_extra": 1.5})
    assert SupernetConfig.from_dict({"tie_extra": 0, "tie_sems": 1}).to_dict()["tie_extra"] == 0
