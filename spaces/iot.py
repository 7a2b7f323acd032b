"""Block-order subsets as in IOT (Zhu et al., ICLR 2021).

IOT permutes the sublayers *inside* a block and stacks the same block ``L`` times; a
model holds a subset of such block orders that share weights.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass

from . import _checks
from .errors import SpaceError
from .order import MAX_LENGTH

__all__ = [
    "DECODER_BLOCKS",
    "ENCODER_BLOCKS",
    "IOT_MODES",
    "PAPER_SUBSETS",
    "IOTSubset",
    "iot_subsets",
    "validate_iot",
]

DECODER_BLOCKS: dict[int, str] = {1: "scf", 2: "fsc", 3: "cfs", 4: "csf", 5: "sfc", 6: "fcs"}
"""The paper's decoder block codes (1 is the standard decoder layer)."""
ENCODER_BLOCKS: dict[int, str] = {1: "sf", 2: "fs"}
"""The paper's encoder block codes."""
PAPER_SUBSETS: dict[str, dict[int, tuple[int, ...]]] = {
    "decoder": {1: (1,), 2: (4, 6), 3: (1, 4, 6), 4: (1, 2, 4, 6), 5: (1, 2, 4, 5, 6),
                6: (1, 2, 3, 4, 5, 6)},
    "encoder": {1: (1,), 2: (1, 2)},
}
"""Subsets used in the paper (size 1 is the plain Transformer, i.e. code 1)."""
IOT_MODES = ("paper", "exhaustive", "random", "diverse")

_BLOCKS = {"decoder": DECODER_BLOCKS, "encoder": ENCODER_BLOCKS}


@dataclass(frozen=True, kw_only=True)
class IOTSubset:
    """A subset of block orders: ``id`` is its sorted codes joined (``"1246"``)."""

    id: str
    codes: tuple[int, ...]
    blocks: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.codes or len(self.codes) != len(self.blocks):
            raise SpaceError("codes", self.codes, "one code per block, at least one")
        if self.id != "".join(str(c) for c in sorted(self.codes)):
            raise SpaceError("id", self.id, "the sorted codes joined, e.g. '1246'")

    def orders(self, layers: int) -> tuple[str, ...]:
        """Each block stacked ``layers`` times, e.g. ``scf`` × 2 → ``scfscf``."""
        longest = max(len(b) for b in self.blocks)
        _checks.integer("layers", layers, 1, MAX_LENGTH // longest)
        return tuple(block * layers for block in self.blocks)


def _subset(stack: str, codes: tuple[int, ...]) -> IOTSubset:
    codes = tuple(sorted(codes))
    blocks = tuple(_BLOCKS[stack][c] for c in codes)
    return IOTSubset(id="".join(str(c) for c in codes), codes=codes, blocks=blocks)


def _hamming(a: str, b: str) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def validate_iot(
    stack: str = "decoder",
    size: int = 4,
    mode: str = "paper",
    seed: int = 0,
    count: int | None = None,
) -> None:
    """Check the arguments of :func:`iot_subsets`."""
    if stack not in _BLOCKS:
        raise SpaceError("stack", stack, "one of decoder, encoder")
    n_codes = len(_BLOCKS[stack])
    _checks.integer("size", size, 1, n_codes)
    if mode not in IOT_MODES:
        raise SpaceError("mode", mode, "one of " + ", ".join(IOT_MODES))
    _checks.seed(seed)
    if mode == "paper" and size not in PAPER_SUBSETS[stack]:
        raise SpaceError("size", size, f"one of {sorted(PAPER_SUBSETS[stack])} for mode "
                                       f"'paper' with stack {stack!r}")
    if mode == "random":
        _checks.integer("count", count, 1, _n_subsets(n_codes, size))
    elif count is not None:
        raise SpaceError("count", count, f"no count for mode {mode!r} (only for 'random')")


def _n_subsets(n: int, size: int) -> int:
    return math.comb(n, size)


def iot_subsets(
    stack: str = "decoder",
    size: int = 4,
    mode: str = "paper",
    seed: int = 0,
    count: int | None = None,
) -> list[IOTSubset]:
    """Subsets of ``size`` block orders for the ``stack`` ("decoder" or "encoder").

    Modes:

    * ``"paper"``: the paper's subset of that size (decoder N=2 {4,6}, N=3 {1,4,6},
      N=4 {1,2,4,6}, N=5 {1,2,4,5,6}, N=6 all; encoder M=1 {1}, M=2 {1,2});
    * ``"exhaustive"``: every subset of that size, sorted by codes;
    * ``"random"``: ``count`` distinct random subsets, deterministic for ``seed``;
    * ``"diverse"`` (ours, not from the paper): one subset grown greedily from the
      standard block (code 1), each step adding the block whose minimum Hamming
      distance to the chosen ones is largest (ties: smallest code). Blocks stacked
      L times have L times the block distance, so the choice holds for any depth.
    """
    validate_iot(stack, size, mode, seed, count)
    blocks = _BLOCKS[stack]
    if mode == "paper":
        return [_subset(stack, PAPER_SUBSETS[stack][size])]
    combos = list(itertools.combinations(sorted(blocks), size))
    if mode == "exhaustive":
        return [_subset(stack, c) for c in combos]
    if mode == "random":
        assert count is not None
        return [_subset(stack, c) for c in random.Random(seed).sample(combos, count)]
    chosen = [1]
    while len(chosen) < size:
        rest = [c for c in sorted(blocks) if c not in chosen]
        best = max(rest, key=lambda c: (min(_hamming(blocks[c], blocks[o]) for o in chosen), -c))
        chosen.append(best)
    return [_subset(stack, tuple(chosen))]
