"""Order families from peers: PAR (fewer attention sublayers, attention first) and
Macaron (half-width feedforwards around every attention).

**PAR** — "Pay Attention when Required" (Mandava et al. 2020) keeps a few
self-attention sublayers near the input and spends the rest of the model on
feedforwards. :func:`par` is a space over the number of ``s`` sublayers at a fixed
parameter budget (``s`` = 1 unit, ``f`` = 2 units, as :mod:`spaces.generators.budgeted`): with
``n_s`` attention sublayers there are ``n_f = (budget - n_s) / 2`` feedforwards.

Each member is laid out the way x-transformers lays out a stack built with
``par_ratio`` (lucidrains/x-transformers, ``AttentionLayers.__init__``, read for this
module): of a stack of ``T`` sublayers, ``T // par_ratio`` are attention; the first
two thirds of the depth (``cut = 2T // 3``, the cutoff the PAR paper suggests) are
split into equal blocks of ``width = (cut + cut // n_attn) // n_attn`` sublayers, each
an attention followed by ``width - 1`` feedforwards, and every remaining sublayer is a
feedforward. :func:`par_order` applies that rule with ``T = n_s + n_f`` and
``n_attn = n_s``, so the x-transformers stack of depth ``T/2`` and ratio ``T/n_s`` is
exactly the member with those counts (``s f f f s f f f f f`` for depth 5, ratio 5).
Where x-transformers refuses the ratio (``width < 1``: attention in more than the first
two thirds) or builds more than ``T`` sublayers (one attention in a deep stack), the
width is clamped to ``1 .. T // n_s``, which keeps exactly ``n_s`` and ``n_f``.

**Macaron** — Macaron-Net (Lu et al. 2019; x-transformers' ``macaron=True``) puts a
feedforward before and after each attention. Here the two are half-width
feedforwards ``h`` (d_ff/2 each), so a block ``h s h`` costs what ``s f`` costs and
``macaron(n)`` matches the interleaved baseline ``(sf)^n`` parameter for parameter;
decoders use ``h s c h``. (x-transformers keeps full-width feedforwards and halves
their residual instead; half widths keep the parameter budget.)
"""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH, alphabet_of

__all__ = [
    "build_macaron",
    "build_par",
    "check_macaron",
    "check_par",
    "macaron",
    "macaron_order",
    "par",
    "par_counts",
    "par_order",
    "validate_macaron",
    "validate_par",
]


def par_order(n_s: int, n_f: int) -> str:
    """``n_s`` attention and ``n_f`` feedforward sublayers in the PAR layout (see the
    module docstring): attention spread over the first two thirds, feedforwards after."""
    _checks.integer("n_s", n_s, 1, MAX_LENGTH)
    _checks.integer("n_f", n_f, 0, MAX_LENGTH - n_s)
    total = n_s + n_f
    cut = total * 2 // 3
    width = max(1, min((cut + cut // n_s) // n_s, total // n_s))
    head = ("s" + "f" * (width - 1)) * n_s
    return head + "f" * (total - len(head))


def par_counts(budget_units: int) -> list[tuple[int, int]]:
    """Every ``(n_s, n_f)`` with ``n_s ≥ 1``, ``n_f ≥ 1`` and ``n_s + 2·n_f = budget_units``."""
    return [(n_s, (budget_units - n_s) // 2) for n_s in range(1, budget_units - 1)
            if (budget_units - n_s) % 2 == 0]


def _budget(n: int | None, budget_units: int | None) -> int:
    if (n is None) == (budget_units is None):
        raise SpaceError("budget_units", budget_units,
                         "exactly one of n (layers of the interleaved baseline: 3n units) "
                         "or budget_units")
    if n is not None:
        return 3 * _checks.integer("n", n, 1, MAX_LENGTH // 3)
    return _checks.integer("budget_units", budget_units, 3, MAX_LENGTH)


def _attention_counts(n_s: int | Sequence[int] | None) -> list[int] | None:
    if n_s is None:
        return None
    if isinstance(n_s, int) and not isinstance(n_s, bool):
        return [n_s]
    if isinstance(n_s, str | bytes) or not isinstance(n_s, Sequence) or not n_s:
        raise SpaceError("n_s", n_s, "an integer or a non-empty list of integers")
    return list(n_s)


def validate_par(n: int | None = None, budget_units: int | None = None,
                 n_s: int | Sequence[int] | None = None) -> None:
    """Check the arguments of :func:`par`."""
    budget = _budget(n, budget_units)
    chosen = _attention_counts(n_s)
    if chosen is None:
        return
    feasible = {s for s, _ in par_counts(budget)}
    many = not isinstance(n_s, int)
    for i, value in enumerate(chosen):
        field = f"n_s[{i}]" if many else "n_s"
        _checks.integer(field, value, 1, budget - 2)
        if value not in feasible:
            raise SpaceError(field, value, f"a count of s that leaves an even number of units "
                                           f"for f at a budget of {budget} units (one of "
                                           f"{', '.join(str(s) for s in sorted(feasible))})")


def par(n: int | None = None, budget_units: int | None = None,
        n_s: int | Sequence[int] | None = None) -> list[tuple[int, int, str]]:
    """PAR members ``(n_s, n_f, order)`` at a budget of ``budget_units`` (or ``3n``: the
    interleaved ``(sf)^n``) for each ``n_s`` given, in the given order, duplicates
    dropped; by default every feasible ``n_s`` with no more ``s`` than ``f`` ("fewer
    attention sublayers"), fewest first. The member with ``n_s = n_f`` is ``s^n f^n``.
    """
    validate_par(n, budget_units, n_s)
    budget = _budget(n, budget_units)
    chosen = _attention_counts(n_s)
    if chosen is None:
        feasible = par_counts(budget)
        chosen = [s for s, f in feasible if s <= f] or [s for s, _ in feasible]
    out = []
    for s in dict.fromkeys(chosen):
        f = (budget - s) // 2
        out.append((s, f, par_order(s, f)))
    return out


def _block(kind: str) -> str:
    return "hsch" if "c" in alphabet_of(kind) else "hsh"


def macaron_order(n: int, *, kind: str = "lm") -> str:
    """``n`` Macaron blocks ``h s h`` (decoders: ``h s c h``), as many parameters as
    ``interleaved(n)``."""
    block = _block(kind)
    _checks.integer("n", n, 1, MAX_LENGTH // len(block))
    return block * n


def _sizes(n: int | Sequence[int]) -> list[int]:
    if isinstance(n, int) and not isinstance(n, bool):
        return [n]
    if isinstance(n, str | bytes) or not isinstance(n, Sequence) or not n:
        raise SpaceError("n", n, "a positive integer or a non-empty list of them")
    return list(n)


def validate_macaron(n: int | Sequence[int], *, kind: str = "lm") -> None:
    """Check the arguments of :func:`macaron`."""
    high = MAX_LENGTH // len(_block(kind))
    sizes = _sizes(n)
    for i, value in enumerate(sizes):
        _checks.integer("n" if isinstance(n, int) else f"n[{i}]", value, 1, high)


def macaron(n: int | Sequence[int], *, kind: str = "lm") -> list[tuple[int, str]]:
    """``(n, order)`` of a Macaron model for ``n`` (one depth or a list), duplicates
    dropped."""
    validate_macaron(n, kind=kind)
    return [(size, macaron_order(size, kind=kind)) for size in dict.fromkeys(_sizes(n))]


# -- registry entries (spaces.registry.FAMILY_SPACES): keyword arguments plus ``kind`` ----
def check_par(*, kind: str, n: int | None = None, budget_units: int | None = None,
              n_s: int | Sequence[int] | None = None) -> None:
    validate_par(n, budget_units, n_s)


def build_par(*, kind: str, n: int | None = None, budget_units: int | None = None,
              n_s: int | Sequence[int] | None = None) -> list[Candidate]:
    """``par<budget>_s<n_s>`` candidates; params: budget_units and the x-transformers
    ``par_ratio`` (sublayers per attention) of the member."""
    budget = _budget(n, budget_units)
    return [Candidate(order=order, space="par", name=f"par{budget}_s{s}",
                      params={"budget_units": budget, "par_ratio": round((s + f) / s, 4)})
            for s, f, order in par(n, budget_units, n_s)]


def check_macaron(*, kind: str, n: int | Sequence[int]) -> None:
    validate_macaron(n, kind=kind)


def build_macaron(*, kind: str, n: int | Sequence[int]) -> list[Candidate]:
    """``macaron<n>`` candidates; params: n (blocks)."""
    return [Candidate(order=order, space="macaron", name=f"macaron{size}", params={"n": size})
            for size, order in macaron(n, kind=kind)]
