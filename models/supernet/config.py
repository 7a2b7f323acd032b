"""``SupernetConfig``: how a one-shot supernet trains and ranks (torch-free).

Re-exported by :mod:`models.supernet.train`; kept apart so that an experiment file's
``search.supernet`` section can be validated without importing torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sublayer_search.models.errors import (
    Checks,
    ConfigError,
    is_int,
    is_number,
    is_positive_int,
)

__all__ = ["SHARING", "SupernetConfig"]

SHARING = ("ordinal", "slot")
"""Weight-sharing schemes: ``ordinal`` indexes a sublayer's weights by (kind, how many of
that kind came before it in the order); ``slot`` by (kind, depth position)."""


@dataclass(frozen=True, kw_only=True)
class SupernetConfig:
    """Training and ranking settings of a weight-sharing supernet.

    ``from_dict``/``to_dict`` read and write the plain mapping of an experiment file;
    errors name the field as ``supernet.<name>``.
    """

    steps: int = 1000
    """Optimizer steps; each step trains the shared weights along ONE order drawn
    uniformly from the supernet's orders."""
    sharing: str = "ordinal"
    """``ordinal``: weights indexed by (kind, ordinal among that kind);
    ``slot``: by (kind, depth position)."""
    eval_batches: int = 20
    """Held-out (validation) batches per order when ranking."""
    seed: int = 0
    """Seeds the initial weights, the batch sampler and the order sampler."""
    eval_every: int | None = None
    """Steps between the supernet's learning-curve evaluations (default: the trials'
    ``train.eval_every``); a longer interval leaves more of the budget to training."""
    tie_extra: int = 3
    """Stage 2 trains, beyond the ``top_k`` by rank, at most this many more orders whose
    estimate the ranking cannot tell from the k-th's (see ``tie_sems``); 0: top_k only."""
    tie_sems: float = 2.0
    """An order ranked below k ties with the k-th when its mean exceeds the k-th's by at
    most ``tie_sems`` standard errors of the difference, sqrt(sem_i^2 + sem_k^2)."""
    prior_extra: int = 3
    """With ``search.prior``: stage 2 also trains at most this many orders that the prior
    ranks best and the supernet left out (a second opinion the supernet's bias does not
    share); 0: none. Without ``search.prior``, or a prior with no evidence: unused."""

    def __post_init__(self) -> None:
        checks = Checks()
        checks(is_positive_int(self.steps), "supernet.steps", self.steps, "a positive integer")
        checks(
            isinstance(self.sharing, str) and self.sharing in SHARING,
            "supernet.sharing",
            self.sharing,
            "one of " + ", ".join(SHARING),
        )
        checks(
            is_positive_int(self.eval_batches),
            "supernet.eval_batches",
            self.eval_batches,
            "a positive integer",
        )
        checks(is_int(self.seed) and self.seed >= 0, "supernet.seed", self.seed, "an integer >= 0")
        checks(self.eval_every is None or is_positive_int(self.eval_every),
               "supernet.eval_every", self.eval_every, "a positive integer (or unset)")
        checks(is_int(self.tie_extra) and self.tie_extra >= 0,
               "supernet.tie_extra", self.tie_extra, "an integer >= 0")
        checks(is_number(self.tie_sems, finite=True) and self.tie_sems >= 0,
               "supernet.tie_sems", self.tie_sems, "a finite number >= 0")
        checks(is_int(self.prior_extra) and self.prior_extra >= 0,
               "supernet.prior_extra", self.prior_extra, "an integer >= 0")
        checks.raise_any()

    def to_dict(self) -> dict[str, Any]:
        """The plain settings, the inverse of :meth:`from_dict`."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SupernetConfig:
        """Build from a plain mapping; unknown keys raise a ConfigError naming them."""
        if not isinstance(data, Mapping):
            raise ConfigError("supernet", data, "a mapping of supernet settings")
        accepted = tuple(f.name for f in dataclasses.fields(cls))
        checks = Checks()
        for key, value in data.items():
            checks(
                key in accepted,
                f"supernet.{key}",
                value,
                "one of the supernet settings: " + ", ".join(accepted),
            )
        checks.raise_any()
        return cls(**dict(data))
