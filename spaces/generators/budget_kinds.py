"""Budgeted random draws over any alphabet: iso-parameter and iso-state orders.

The paper's study 2 (:mod:`.budgeted`) draws ``s`` or ``f`` until a parameter budget is
spent. Here any symbols of the model kind are drawn (``srf``, ``swre``), each weighed at
the model's dims as :mod:`spaces.kinds` accounts it: its weights in s-units (4d²) for
the parameter budget, and the numbers it keeps per sequence at inference for the state
budget (``s``: keys and values of the whole context, ``w``: of its window, ``r``: its
d·d/H state; channel mixers keep none). With ``state`` set every order also holds that
state, as MAD compares recurrent mixers at equal state (Poli et al., 2024).

A hybrid kind's weight is rarely a whole number of s-units (``r`` = 1 + H/4d), so an
order is kept when it lands within ``tolerance`` (relative) of each budget.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.kinds import Dims, kind_of
from sublayer_search.spaces.order import MAX_LENGTH, alphabet_of

__all__ = ["budget_costs", "budgeted_kinds", "build_budgeted_kinds", "budgeted_kinds_size",
           "check_budgeted_kinds", "validate_budgeted_kinds"]

def _attempts(count: int) -> int:
    """Draws allowed before the budgets are called out of reach (as :mod:`.budgeted`)."""
    return 10_000 + 100 * count


def budget_costs(symbols: str, dims: Dims) -> dict[str, tuple[float, int]]:
    """(s-units of weights, state numbers per sequence) of each symbol at ``dims``."""
    unit = 4 * dims.d_model**2
    return {sym: (kind_of(sym).weights(dims) / unit, kind_of(sym).state(dims))
            for sym in symbols}


def _symbols(symbols: object, kind: str) -> str:
    alphabet = alphabet_of(kind)
    text = "".join(symbols) if isinstance(symbols, list | tuple) and \
        all(isinstance(s, str) for s in symbols) else symbols
    if not isinstance(text, str) or not text or any(ch not in alphabet for ch in text) \
            or len(set(text)) != len(text):
        raise SpaceError("symbols", symbols, f"distinct {kind} sublayer symbols to draw "
                                             f"from, among {', '.join(alphabet)} (such as srf)")
    return text


def _fraction(field: str, value: object, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value < high:
        raise SpaceError(field, value, f"a number in [{low:g}, {high:g})")
    return float(value)


def validate_budgeted_kinds(symbols: object, budget_units: object, count: object,
                            seed: object = 0, *, state: object = None,
                            tolerance: object = 0.05, dims: Dims | None = None,
                            kind: str = "lm") -> tuple[str, dict[str, tuple[float, int]]]:
    """The checked symbols and their costs; SpaceError naming the field of a bad argument."""
    text = _symbols(symbols, kind)
    if isinstance(budget_units, bool) or not isinstance(budget_units, int | float) \
            or not 0 < budget_units <= MAX_LENGTH:
        raise SpaceError("budget_units", budget_units,
                         f"a parameter budget in s-units (4·d_model² each), in (0, {MAX_LENGTH}]")
    _checks.count(count)
    _checks.seed(seed)
    _fraction("tolerance", tolerance, 0.0, 1.0)
    if state is not None and (isinstance(state, bool) or not isinstance(state, int)
                              or state <= 0):
        raise SpaceError("state", state, "a positive integer: the numbers one sequence keeps "
                                         "at inference, summed over the sublayers")
    if dims is None:
        raise SpaceError("dims", None, "the model section's d_model, d_ff, n_heads, context "
                                       "and sublayer settings: this space weighs its kinds "
                                       "by them (an experiment's model section; `sublayer spaces sample` "
                                       "takes --preset)")
    costs = budget_costs(text, dims)
    if state is not None and not any(cost[1] for cost in costs.values()):
        raise SpaceError("state", state, f"no state budget: none of {text} keeps a state "
                                         "(add a sequence mixer: s, w or r)")
    return text, costs


def _draw(symbols: str, costs: Mapping[str, tuple[float, int]], budget: float,
          rng: random.Random) -> str:
    """Add a random symbol that fits the budget left, or overshoots it by less than it
    is short, until none does (with s = 1 and f = 2 units: the paper's draw)."""
    chars: list[str] = []
    left = budget
    while len(chars) < MAX_LENGTH:
        fitting = [s for s in symbols
                   if costs[s][0] <= left or abs(left - costs[s][0]) < abs(left)]
        if not fitting:
            break
        sym = rng.choice(fitting)
        chars.append(sym)
        left -= costs[sym][0]
    return "".join(chars)


def budgeted_kinds(symbols: str, budget_units: float, count: int, seed: int = 0, *,
                   state: int | None = None, tolerance: float = 0.05,
                   dims: Dims | None = None, kind: str = "lm") -> list[tuple[str, float, int]]:
    """``count`` distinct orders (with their s-units and state), deterministic for
    ``seed``: each draws a symbol uniformly among those that still fit until none does
    (:func:`_draw`),
    and is kept when its weights land within ``tolerance`` of ``budget_units`` and, with
    ``state``, its state within ``tolerance`` of ``state``. SpaceError when the budgets are
    out of reach in ``10000 + 100·count`` draws (a tighter tolerance or other symbols may fix it)."""
    text, costs = validate_budgeted_kinds(symbols, budget_units, count, seed, state=state,
                                          tolerance=tolerance, dims=dims, kind=kind)
    rng = random.Random(seed)
    slack = tolerance * budget_units
    kept: dict[str, tuple[float, int]] = {}
    for _ in range(_attempts(count)):
        order = _draw(text, costs, budget_units, rng)
        spent = sum(costs[ch][0] for ch in order)
        held = sum(costs[ch][1] for ch in order)
        if order and abs(spent - budget_units) <= slack and \
                (state is None or abs(held - state) <= tolerance * state):
            kept.setdefault(order, (spent, held))
            if len(kept) == count:
                return [(o, s, h) for o, (s, h) in kept.items()]
    each = ", ".join(f"{s} {c[0]:g} units / state {c[1]}" for s, c in costs.items())
    raise SpaceError("count", count, f"a count the budgets reach: {len(kept)} distinct orders in "
                     f"{_attempts(count)} draws ({each}; loosen tolerance, or change "
                     "budget_units, state or symbols)")


# -- the registry's side (spaces.registry) ------------------------------------------------
def check_budgeted_kinds(*, kind: str, symbols: str, budget_units: float, count: int,
                         seed: int = 0, state: int | None = None, tolerance: float = 0.05,
                         dims: Dims | None = None) -> None:
    validate_budgeted_kinds(symbols, budget_units, count, seed, state=state,
                            tolerance=tolerance, dims=dims, kind=kind)


def build_budgeted_kinds(*, kind: str, symbols: str, budget_units: float, count: int,
                         seed: int = 0, state: int | None = None, tolerance: float = 0.05,
                         dims: Dims | None = None) -> list[Candidate]:
    drawn = budgeted_kinds(symbols, budget_units, count, seed, state=state,
                           tolerance=tolerance, dims=dims, kind=kind)
    width = max(2, len(str(len(drawn) - 1)))
    return [Candidate(order=o, space="budgeted_kinds", name=f"draw{i:0{width}d}",
                      params={"index": i, "spent_units": round(spent, 4), "state": held})
            for i, (o, spent, held) in enumerate(drawn)]


def budgeted_kinds_size(args: Mapping[str, Any]) -> tuple[str, int, int]:
    count, budget = args.get("count"), args.get("budget_units")
    n = count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0
    b = int(budget) if isinstance(budget, int | float) and not isinstance(budget, bool) and \
        budget > 0 else 0
    return "count", n, min(4 * b, MAX_LENGTH)  # an estimate: 4 sublayers per s-unit
