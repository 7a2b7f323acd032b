"""Sublayer-order algebra and search spaces (pure Python: no torch, ray or mlflow)."""

from .budgeted import budgeted, count_budgeted, draw_budgeted, validate_budgeted
from .candidate import Candidate
from .cost import STRADDLE, Halves, halves, order_params, unit_costs, units
from .errors import OrderError, SpaceError
from .explicit import explicit
from .iot import (
    DECODER_BLOCKS,
    ENCODER_BLOCKS,
    IOT_MODES,
    PAPER_SUBSETS,
    IOTSubset,
    iot_subsets,
    validate_iot,
)
from .mutations import f_ss_moves, moves, mutate, neighbour_swaps, point_flips
from .order import (
    ALPHABETS,
    FAMILIES,
    MAX_LENGTH,
    SYMBOLS,
    counts,
    interleaved,
    parse_order,
    sandwich_order,
)
from .permutations import count_permutations, permutations, validate_permutations
from .registry import SPACES, SpaceInfo, check_kind, expand, validate
from .sandwich import sandwich, validate_sandwich

__all__ = [
    "ALPHABETS",
    "DECODER_BLOCKS",
    "ENCODER_BLOCKS",
    "FAMILIES",
    "IOT_MODES",
    "MAX_LENGTH",
    "PAPER_SUBSETS",
    "SPACES",
    "STRADDLE",
    "SYMBOLS",
    "Candidate",
    "Halves",
    "IOTSubset",
    "OrderError",
    "SpaceError",
    "SpaceInfo",
    "budgeted",
    "check_kind",
    "count_budgeted",
    "count_permutations",
    "counts",
    "draw_budgeted",
    "expand",
    "explicit",
    "f_ss_moves",
    "halves",
    "interleaved",
    "iot_subsets",
    "moves",
    "mutate",
    "neighbour_swaps",
    "order_params",
    "parse_order",
    "permutations",
    "point_flips",
    "sandwich",
    "sandwich_order",
    "unit_costs",
    "units",
    "validate",
    "validate_budgeted",
    "validate_iot",
    "validate_permutations",
    "validate_sandwich",
]
