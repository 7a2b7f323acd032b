"""Every registered space keeps the space contract (tests/spaces/space_contract.py); a
space registered without sample arguments here is a failing case."""

from __future__ import annotations

from typing import Any

import pytest
from space_contract import check_space

from sublayer_search.spaces.registry import ALL_SPACES

SAMPLES: dict[str, tuple[dict[str, Any], str]] = {
    "permutations": ({"n_s": 2, "n_f": 2, "count": 3, "seed": 1}, "lm"),
    "budgeted": ({"budget_units": 12, "count": 3}, "lm"),
    "sandwich": ({"n": 3, "ks": [0, 1, 2]}, "lm"),
    "explicit": ({"orders": ["sf", "ssff", "sfsfsf"]}, "lm"),
    "iot_subsets": ({"size": 4, "layers": 2}, "decoder"),
    "par": ({"n": 6}, "lm"),
    "macaron": ({"n": 2}, "lm"),
    "multiset": ({"counts": {"s": 1, "r": 2, "f": 2}, "count": 4, "seed": 3}, "lm"),
    "budgeted_kinds": ({"symbols": "srf", "budget_units": 12, "count": 4, "seed": 2}, "lm"),
    "placements": ({"n": 4, "attention": [1, 2], "at": ["evenly", "random"], "draws": 2},
                   "lm"),
}


@pytest.mark.parametrize("name", sorted(ALL_SPACES))
def test_every_registered_space_keeps_the_contract(name: str) -> None:
    if name not in SAMPLES:
        pytest.fail(f"space {name!r} is registered but has no sample arguments in SAMPLES")
    args, kind = SAMPLES[name]
    check_space(name, args, kind)


def test_every_sample_is_of_a_registered_space() -> None:
    """A space's samples go with it: none stays behind for a space no longer registered."""
    assert set(SAMPLES) <= set(ALL_SPACES), sorted(set(SAMPLES) - set(ALL_SPACES))
