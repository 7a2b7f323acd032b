"""One point of a space: an order with a readable name."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.order import any_order, counts

__all__ = ["Candidate"]


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """An order proposed by a space.

    ``name`` is readable and unique within a space (``"sandwich16_6"``, ``"perm07"``,
    ``"iot1246"``); ``params`` holds what identifies it inside the space
    (``{"k": 6}``, ``{"index": 3}``, ``{"subset": "1246"}``). Sweeps mark the
    interleaved reference run with ``baseline=True``; its :attr:`family` is then
    ``"baseline"``.
    """

    order: str
    space: str
    name: str
    params: dict[str, Any] = field(default_factory=dict, hash=False)
    baseline: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", any_order(self.order))
        for name in ("space", "name"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise SpaceError(name, value, "a non-empty string")
        if not isinstance(self.params, dict):
            raise SpaceError("params", self.params, "a dict")

    @property
    def family(self) -> str:
        """``"baseline"`` for a sweep's baseline, else the family its order belongs to
        (``params["family"]``: an explicit order that is a sandwich), else the space."""
        if self.baseline:
            return "baseline"
        return str(self.params.get("family", self.space))

    @property
    def counts(self) -> dict[str, int]:
        """Sublayers of each kind (``{"s": …, "f": …, "c": …}``)."""
        return counts(self.order)
