"""Sublayer-order algebra and search spaces (pure Python: no torch, ray or mlflow)."""

from .budgeted import budgeted, count_budgeted, draw_budgeted, validate_budgeted
from .candidate import Candidate
from .cost import (
    STRADDLE,
    Halves,
    half_width,
    halves,
    order_params,
    sublayer_costs,
    unit_costs,
    units,
)
from .errors import OrderError, SpaceError
from .explicit import explicit
from .families import macaron, macaron_order, par, par_order, validate_macaron, validate_par
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
    HALF,
    KINDS,
    MAX_LENGTH,
    SYMBOLS,
    counts,
    interleaved,
    parse_order,
    sandwich_order,
)
from .permutations import count_permutations, permutations, validate_permutations
from .registry import ALL_SPACES, FAMILY_SPACES, SPACES, SpaceInfo, check_kind, expand, validate
from .sandwich import sandwich, validate_sandwich

__all__ = [
    "ALL_SPACES",
    "ALPHABETS",
    "DECODER_BLOCKS",
    "ENCODER_BLOCKS",
    "FAMILIES",
    "FAMILY_SPACES",
    "HALF",
    "IOT_MODES",
    "KINDS",
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
    "half_width",
    "halves",
    "interleaved",
    "iot_subsets",
    "macaron",
    "macaron_order",
    "moves",
    "mutate",
    "neighbour_swaps",
    "order_params",
    "par",
    "par_order",
    "parse_order",
    "permutations",
    "point_flips",
    "sandwich",
    "sandwich_order",
    "sublayer_costs",
    "unit_costs",
    "units",
    "validate",
    "validate_budgeted",
    "validate_iot",
    "validate_macaron",
    "validate_par",
    "validate_permutations",
    "validate_sandwich",
]
