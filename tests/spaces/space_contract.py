"""The contract every registered space keeps (built in or a plugin's): its arguments are
its builder's, checked by its check; it expands deterministically into candidates of its
name whose orders are valid for the kind, with distinct names; its declared size bounds
what it expands to; an unknown argument is named."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.kinds import Dims
from sublayer_search.spaces.order import parse_order
from sublayer_search.spaces.registry import ALL_SPACES, expand, validate

__all__ = ["check_space"]


SAMPLE_DIMS = Dims(d_model=64, d_ff=256, n_heads=4, context=128)
"""The model dims a space that weighs its kinds (``SpaceInfo.weighs``) is checked at."""


def check_space(name: str, args: Mapping[str, Any], kind: str = "lm") -> None:
    info = ALL_SPACES[name]
    dims = SAMPLE_DIMS if info.weighs else None
    if info.weighs:  # without the model's dims it names what it needs
        with pytest.raises(SpaceError, match="dims"):
            validate(name, dict(args), kind=kind)
    validate(name, dict(args), kind=kind, dims=dims)
    first = expand(name, dict(args), kind=kind, dims=dims)
    again = expand(name, dict(args), kind=kind, dims=dims)
    assert first and [c.order for c in first] == [c.order for c in again]  # deterministic
    assert all(c.space == name for c in first)
    assert len({c.name for c in first}) == len(first), "candidate names repeat"
    for cand in first:
        assert parse_order(cand.order, kind=kind) == cand.order
    if info.size is not None:
        _, orders, longest = info.size(dict(args))
        assert len(first) <= orders and max(len(c.order) for c in first) <= longest
    with pytest.raises(SpaceError, match="no such argument"):
        validate(name, {**args, "no_such_argument": 1}, kind=kind, dims=dims)
