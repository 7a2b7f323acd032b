"""Spaces over any alphabet (:mod:`spaces.kinds`): random permutations of a multiset of
kinds, and the placement of k attention layers among n layers of another sequence mixer.

* :func:`multiset` generalises the paper's study 1 (:mod:`.permutations`, ``s`` and ``f``
  only) to any counts: ``{s: 2, r: 6, f: 8}``.
* :func:`placement` asks the hybrid question directly (Jamba: one attention layer in
  eight; Samba; Nemotron-H): ``n`` layers, each a sequence mixer followed by a channel
  mixer (``rf``), ``k`` of whose sequence mixers are attention (``sf``), placed
  ``evenly`` (centred in k equal groups), at the ``bottom``, the ``top``, in the
  ``middle`` or at ``random``; a list of ``k`` makes the attention ratio an axis.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators import checks as _checks
from sublayer_search.spaces.order import MAX_LENGTH, alphabet_of

__all__ = ["PLACEMENTS", "attention_positions", "build_multiset", "build_placements",
           "check_multiset", "check_placements", "count_multiset", "multiset", "multiset_size",
           "placement", "placements_size", "validate_multiset", "validate_placement"]

PLACEMENTS = ("evenly", "bottom", "top", "middle", "random")
"""Where :func:`placement` puts the attention layers."""


def _counts(counts: object, kind: str) -> dict[str, int]:
    if not isinstance(counts, Mapping) or not counts:
        raise SpaceError("counts", counts, "a mapping of sublayer symbol to count, such as "
                                           "{s: 2, r: 6, f: 8}")
    alphabet = alphabet_of(kind)
    out: dict[str, int] = {}
    for symbol, n in counts.items():
        if not (isinstance(symbol, str) and len(symbol) == 1 and symbol in alphabet):
            raise SpaceError(f"counts.{symbol}", n, f"a count of a {kind} sublayer symbol, "
                                                    f"one of {', '.join(alphabet)}")
        out[symbol] = _checks.integer(f"counts.{symbol}", n, 0, MAX_LENGTH)
    total = sum(out.values())
    if not 1 <= total <= MAX_LENGTH:
        raise SpaceError("counts", dict(counts), f"counts summing to 1..{MAX_LENGTH}")
    return out


def count_multiset(counts: Mapping[str, int]) -> int:
    """Distinct orders of the multiset: the multinomial (Σ n)! / Π n!."""
    total, out = 0, 1
    for n in counts.values():
        total += n
        out *= math.comb(total, n)
    return out


def validate_multiset(counts: Mapping[str, int], count: int, seed: int = 0, *,
                      kind: str = "lm") -> dict[str, int]:
    """The checked counts; SpaceError naming the field of any bad argument."""
    checked = _counts(counts, kind)
    _checks.count(count)
    _checks.seed(seed)
    distinct = count_multiset(checked)
    if count > distinct:
        raise SpaceError("count", count, f"at most {distinct} (the number of distinct orders "
                                         f"of {_spelled(checked)})")
    return checked


def _spelled(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in counts.items())


def _all_orders(counts: Mapping[str, int]) -> Iterator[str]:
    """Every distinct order, lexicographically (one symbol at a time, each count once)."""
    left = dict(sorted(counts.items()))
    total = sum(left.values())
    prefix: list[str] = []

    def walk() -> Iterator[str]:
        if len(prefix) == total:
            yield "".join(prefix)
            return
        for symbol in left:
            if left[symbol]:
                left[symbol] -= 1
                prefix.append(symbol)
                yield from walk()
                prefix.pop()
                left[symbol] += 1

    return walk()


def multiset(counts: Mapping[str, int], count: int, seed: int = 0, *,
             kind: str = "lm") -> list[str]:
    """``count`` distinct uniformly random orders of the multiset ``counts`` (symbol to
    number), deterministic for ``seed``: all of them, sorted, when ``count`` is their
    number; a sample of all of them when more than half are wanted; else shuffles with
    duplicates skipped (as :func:`~.permutations.permutations`)."""
    checked = validate_multiset(counts, count, seed, kind=kind)
    distinct = count_multiset(checked)
    if count >= distinct:
        return list(_all_orders(checked))
    rng = random.Random(seed)
    if distinct <= 2 * count:
        return rng.sample(list(_all_orders(checked)), count)
    base = [s for s, n in checked.items() for _ in range(n)]
    seen: dict[str, None] = {}
    while len(seen) < count:
        rng.shuffle(base)
        seen.setdefault("".join(base), None)
    return list(seen)


def attention_positions(n: int, k: int, at: str, rng: random.Random) -> list[int]:
    """The ``k`` layer indices (of ``n``, input first) that hold attention."""
    if at == "evenly":  # centred in k equal groups: n 8, k 2 -> 2, 6
        return [math.floor((i + 0.5) * n / k) for i in range(k)]
    if at == "bottom":
        return list(range(k))
    if at == "top":
        return list(range(n - k, n))
    if at == "middle":
        start = (n - k) // 2
        return list(range(start, start + k))
    return sorted(rng.sample(range(n), k))


def _list(value: object) -> list[object]:
    return list(value) if isinstance(value, list | tuple) else [value]


def validate_placement(n: int, attention: int | Sequence[int], *, mixer: str = "r",
                       attend: str = "s", channel: str | None = "f",
                       at: str | Sequence[str] = "evenly", draws: int = 1, seed: int = 0,
                       kind: str = "lm") -> tuple[list[int], list[str]]:
    """The attention counts and placements, checked; SpaceError naming the field."""
    per_layer = 2 if channel else 1
    _checks.integer("n", n, 1, MAX_LENGTH // per_layer)
    ks = [_checks.integer(f"attention[{i}]" if isinstance(attention, list | tuple)
                          else "attention", k, 0, n)
          for i, k in enumerate(_list(attention))]
    wheres = [str(w) for w in _list(at)]
    for i, where in enumerate(wheres):
        if where not in PLACEMENTS:
            raise SpaceError(f"at[{i}]" if isinstance(at, list | tuple) else "at", where,
                             "one of " + ", ".join(PLACEMENTS))
    alphabet = alphabet_of(kind)
    for field, symbol in (("mixer", mixer), ("attend", attend), ("channel", channel)):
        if field == "channel" and symbol is None:
            continue
        if not (isinstance(symbol, str) and len(symbol) == 1 and symbol in alphabet):
            raise SpaceError(field, symbol, f"a {kind} sublayer symbol, one of "
                                            f"{', '.join(alphabet)}")
    if mixer == attend:
        raise SpaceError("attend", attend, f"a symbol other than the mixer's ({mixer!r})")
    _checks.integer("draws", draws, 1, 1000)
    _checks.seed(seed)
    return ks, wheres


def placement(n: int, attention: int | Sequence[int], *, mixer: str = "r", attend: str = "s",
              channel: str | None = "f", at: str | Sequence[str] = "evenly", draws: int = 1,
              seed: int = 0, kind: str = "lm") -> list[tuple[str, dict[str, object]]]:
    """(order, params) for each attention count and placement: ``n`` layers of
    ``mixer + channel`` (``channel: null``: the sequence mixer alone), ``k`` of whose
    mixers are ``attend``; ``random`` draws ``draws`` placements per count (seeded). An
    order met before (k = 0 or n places alike) is kept once, with its first name."""
    ks, wheres = validate_placement(n, attention, mixer=mixer, attend=attend, channel=channel,
                                    at=at, draws=draws, seed=seed, kind=kind)
    rng = random.Random(seed)
    out: dict[str, dict[str, object]] = {}
    for k in ks:
        for where in wheres:
            for draw in range(draws if where == "random" else 1):
                chosen = set(attention_positions(n, k, where, rng))
                order = "".join((attend if i in chosen else mixer) + (channel or "")
                                for i in range(n))
                params: dict[str, object] = {"n": n, "attention": k, "at": where}
                if where == "random":
                    params["draw"] = draw
                out.setdefault(order, params)
    return list(out.items())


# -- the registry's side (spaces.registry): argument checks, builders, sizes -------------
def _positive(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def check_multiset(*, kind: str, counts: Mapping[str, int], count: int, seed: int = 0) -> None:
    validate_multiset(counts, count, seed, kind=kind)


def build_multiset(*, kind: str, counts: Mapping[str, int], count: int,
                    seed: int = 0) -> list[Candidate]:
    orders = multiset(counts, count, seed, kind=kind)
    width = max(2, len(str(len(orders) - 1)))
    return [Candidate(order=o, space="multiset", name=f"mix{i:0{width}d}", params={"index": i})
            for i, o in enumerate(orders)]


def check_placements(*, kind: str, n: int, attention: int | Sequence[int], mixer: str = "r",
                     attend: str = "s", channel: str | None = "f",
                     at: str | Sequence[str] = "evenly", draws: int = 1,
                     seed: int = 0) -> None:
    validate_placement(n, attention, mixer=mixer, attend=attend, channel=channel, at=at,
                       draws=draws, seed=seed, kind=kind)


def build_placements(*, kind: str, n: int, attention: int | Sequence[int], mixer: str = "r",
                     attend: str = "s", channel: str | None = "f",
                     at: str | Sequence[str] = "evenly", draws: int = 1,
                     seed: int = 0) -> list[Candidate]:
    found = placement(n, attention, mixer=mixer, attend=attend, channel=channel, at=at,
                      draws=draws, seed=seed, kind=kind)
    return [Candidate(order=o, space="placements", params=p,
                      name=f"place{n}_{p['attention']}_{p['at']}"
                           + (str(p["draw"]) if "draw" in p else ""))
            for o, p in found]


def multiset_size(args: Mapping[str, Any]) -> tuple[str, int, int]:
    counts = args.get("counts")
    n = sum(_positive(v) for v in counts.values()) if isinstance(counts, Mapping) else 0
    return "count", _positive(args.get("count")), n


def placements_size(args: Mapping[str, Any]) -> tuple[str, int, int]:
    ks, at = args.get("attention"), args.get("at", "evenly")
    many = (len(ks) if isinstance(ks, list) else 1) * (len(at) if isinstance(at, list) else 1)
    return "attention", many * max(_positive(args.get("draws", 1)), 1), 2 * _positive(args.get("n"))
