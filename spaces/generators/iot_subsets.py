"""Block-order subsets as in IOT (Zhu et al., ICLR 2021).

IOT permutes the sublayers *inside* a block and stacks the same block ``L`` times; a
model holds a subset of such block orders that share weights.

Codes come in two forms. The product's (and the paper's) are **1-based**: decoder 1
``scf`` … 6 ``fcs``, encoder 1 ``sf``, 2 ``fs``. The authors' code (``--decoder-orders
0 3 5``, ``--encoder-orders 0 1``) numbers the same blocks **0-based**, so their
``0 3 5`` is the product's {1, 4, 6}. :func:`explicit_subsets` takes either
(``code_base`` 1 or 0) and always returns 1-based subsets.
"""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import dataclass
from typing import Any

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH

__all__ = [
    "build_iot_space",
    "check_iot_space",
    "DECODER_BLOCKS",
    "ENCODER_BLOCKS",
    "IOT_MODES",
    "PAPER_SUBSETS",
    "IOTSubset",
    "explicit_subsets",
    "iot_subsets",
    "subset_label",
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


def _code_forms(stack: str, base: int, *, plural: bool = False) -> str:
    n = len(_BLOCKS[stack])
    what = "codes" if plural else "code"
    lead = "" if plural else "a "
    if base == 1:
        return f"{lead}1-based {what} in 1..{n} (code_base: 1, the product's codes)"
    return f"{lead}0-based {what} in 0..{n - 1} (code_base: 0, the authors' --{stack}-orders)"


def explicit_subsets(stack: str, codes: object, code_base: object = 1) -> list[IOTSubset]:
    """The subsets the user wrote: ``codes`` is one subset (``[1, 4, 6]``) or a list of
    them (``[[1, 4, 6], [1, 2]]``), in the product's 1-based codes (``code_base=1``) or
    the authors' 0-based ``--decoder-orders`` form (``code_base=0``: ``[0, 3, 5]`` is
    {1, 4, 6}). Errors name the field (``codes[1][0]``) and say which form was read;
    refused: an empty list or subset, codes out of range for the ``stack``, a code twice
    in a subset, the same subset twice. Subsets keep the given order; codes are sorted.
    """
    if stack not in _BLOCKS:
        raise SpaceError("stack", stack, "one of decoder, encoder")
    base = _checks.integer("code_base", code_base, 0, 1)
    n = len(_BLOCKS[stack])
    forms = _code_forms(stack, base, plural=True)
    if isinstance(codes, str | bytes) or not isinstance(codes, list | tuple) or not codes:
        raise SpaceError("codes", codes, f"a non-empty list: one subset ([1, 4, 6]) or several "
                                         f"([[1, 4, 6], [1, 2]]) of {forms}")
    nested = any(isinstance(c, list | tuple) for c in codes)
    groups = list(codes) if nested else [codes]
    out: list[IOTSubset] = []
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        field = f"codes[{i}]" if nested else "codes"
        if isinstance(group, str | bytes) or not isinstance(group, list | tuple):
            raise SpaceError(field, group, "a list of codes: every item of codes a subset "
                                           "([[1, 4, 6], [1, 2]]) or every item a code")
        if not group:
            raise SpaceError(field, group, f"a non-empty subset of {forms}")
        for j, c in enumerate(group):
            if isinstance(c, bool) or not isinstance(c, int) or not base <= c < n + base:
                hint = ("; 0 is an authors' 0-based code: set code_base: 0 for their form"
                        if base == 1 and c == 0 else "")
                raise SpaceError(f"{field}[{j}]", c, f"{_code_forms(stack, base)} for stack "
                                                     f"{stack!r}{hint}")
        if len(set(group)) != len(group):
            twice = sorted({c for c in group if list(group).count(c) > 1})
            raise SpaceError(field, group, f"distinct codes ({', '.join(map(str, twice))} "
                                           f"given twice; code_base: {base})")
        subset = _subset(stack, tuple(c + 1 - base for c in group))
        if subset.id in seen:
            raise SpaceError(field, group, f"a subset not given before (codes[{seen[subset.id]}] "
                                           f"is the same subset, 1-based {list(subset.codes)})")
        seen[subset.id] = i
        out.append(subset)
    return out


def subset_label(blocks: tuple[str, ...] | list[str], layers: int = 1) -> str:
    """The whole subset for tables: ``scf|csf|fcs``; stacked, ``(scf|csf|fcs)^6`` (every
    block of the subset repeated 6 times, the README's ``(sc)^n`` notation)."""
    joined = "|".join(blocks)
    return joined if layers == 1 else f"({joined})^{layers}"


# -- the registry's side (spaces.registry) ------------------------------------------------
def _iot_stack(kind: str, stack: str | None) -> str:
    if stack is None:
        return "decoder" if kind == "decoder" else "encoder"
    if stack == "decoder" and kind != "decoder":
        raise SpaceError("stack", stack, f"'encoder' for kind {kind!r} (decoder blocks hold c)")
    return stack


def _iot_selected(stack: str, size: int | None, mode: str | None, seed: int,
                  count: int | None, codes: Any, code_base: int | None) -> list[IOTSubset] | None:
    """Check the arguments; explicit ``codes`` give the subsets (``None``: size and mode)."""
    if codes is None:
        if code_base is not None:
            raise SpaceError("code_base", code_base, "no code_base without codes (it says "
                             "whether codes are 1-based, the default, or 0-based)")
        validate_iot(stack, 4 if size is None else size, mode or "paper", seed, count)
        return None
    for name, value in (("size", size), ("mode", mode), ("count", count)):
        if value is not None:
            raise SpaceError(name, value, f"no {name} with codes (codes give the subsets; "
                                          "size and mode choose them instead)")
    return explicit_subsets(stack, codes, 1 if code_base is None else code_base)


def check_iot_space(*, kind: str, stack: str | None = None, size: int | None = None,
               mode: str | None = None, seed: int = 0, count: int | None = None,
               layers: int = 6, codes: Any = None, code_base: int | None = None) -> None:
    stack = _iot_stack(kind, stack)
    _iot_selected(stack, size, mode, seed, count, codes, code_base)
    iot_subsets(stack, 1, "exhaustive")[0].orders(layers)  # checks layers


def build_iot_space(*, kind: str, stack: str | None = None, size: int | None = None,
               mode: str | None = None, seed: int = 0, count: int | None = None,
               layers: int = 6, codes: Any = None,
               code_base: int | None = None) -> list[Candidate]:
    """Default: the paper's subset of size 4; ``codes`` (with ``code_base``) give subsets
    explicitly (see :func:`explicit_subsets`). ``params["codes"]`` is 1-based,
    ``params["codes0"]`` the authors' 0-based form of the same subset."""
    stack = _iot_stack(kind, stack)
    subsets = _iot_selected(stack, size, mode, seed, count, codes, code_base)
    if subsets is None:
        subsets = iot_subsets(stack, 4 if size is None else size, mode or "paper", seed, count)
    out = []
    for subset in subsets:
        orders = subset.orders(layers)
        out.append(Candidate(
            order=orders[0], space="iot_subsets", name=f"iot{subset.id}",
            params={"subset": subset.id, "codes": list(subset.codes),
                    "codes0": [c - 1 for c in subset.codes], "stack": stack,
                    "layers": layers, "orders": list(orders)},
        ))
    return out
