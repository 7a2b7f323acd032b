"""Named spaces: argument checking and expansion to :class:`Candidate` lists.

``expand("sandwich", {"n": 16, "ks": [0, 6]})`` → candidates ``sandwich16_0`` and
``sandwich16_6``. The model kind (``"lm"``, ``"encoder"``, ``"decoder"``) is a keyword
of :func:`expand` / :func:`validate`, not a space argument: each space lists the kinds
it supports, and orders are checked against that kind's alphabet.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.generators.budget_kinds import (
    budgeted_kinds_size,
    build_budgeted_kinds,
    check_budgeted_kinds,
)
from sublayer_search.spaces.generators.budgeted import budgeted, validate_budgeted
from sublayer_search.spaces.generators.explicit import explicit
from sublayer_search.spaces.generators.families import (
    build_macaron,
    build_par,
    check_macaron,
    check_par,
)
from sublayer_search.spaces.generators.hybrid import (
    build_multiset,
    build_placements,
    check_multiset,
    check_placements,
    multiset_size,
    placements_size,
)
from sublayer_search.spaces.generators.iot_subsets import build_iot_space, check_iot_space
from sublayer_search.spaces.generators.permutations import (
    count_permutations,
    permutations,
    validate_permutations,
)
from sublayer_search.spaces.generators.sandwich import SANDWICH, sandwich, validate_sandwich
from sublayer_search.spaces.kinds import Dims
from sublayer_search.spaces.order import ALPHABETS, sandwich_k

__all__ = ["ALL_SPACES", "FAMILY_SPACES", "SPACES", "Alias", "SpaceInfo", "SpaceSize",
           "check_kind", "register_space", "unregister_space", "expand", "extra_columns", "integer_axis", "spelled", "validate"]

_SHORT_NAME = 16  # explicit orders up to this length are named by themselves


def _numbered(prefix: str, orders: list[str], space: str) -> list[Candidate]:
    width = max(2, len(str(len(orders) - 1)))
    return [
        Candidate(order=o, space=space, name=f"{prefix}{i:0{width}d}", params={"index": i})
        for i, o in enumerate(orders)
    ]


def _check_permutations(*, kind: str, n_s: int, n_f: int, count: int, seed: int = 0) -> None:
    validate_permutations(n_s, n_f, count, seed)
    distinct = count_permutations(n_s, n_f)
    if count > distinct:  # as budgeted does: a sweep never gets fewer orders than it asked for
        raise SpaceError("count", count, f"at most {distinct} (the number of distinct orders of "
                         f"{n_s} s and {n_f} f)")


def _build_permutations(*, kind: str, n_s: int, n_f: int, count: int,
                        seed: int = 0) -> list[Candidate]:
    return _numbered("perm", permutations(n_s, n_f, count, seed), "permutations")


def _check_budgeted(*, kind: str, budget_units: int, count: int, seed: int = 0,
                    p_s: float = 0.5) -> None:
    validate_budgeted(budget_units, count, seed, p_s)


def _build_budgeted(*, kind: str, budget_units: int, count: int, seed: int = 0,
                    p_s: float = 0.5) -> list[Candidate]:
    return _numbered("budget", budgeted(budget_units, count, seed, p_s), "budgeted")


def _check_sandwich(*, kind: str, n: int, ks: Sequence[int] | None = None, mixer: str = "s",
                    channel: str = "f") -> None:
    validate_sandwich(n, ks, kind=kind, mixer=mixer, channel=channel)


def _build_sandwich(*, kind: str, n: int, ks: Sequence[int] | None = None, mixer: str = "s",
                    channel: str = "f") -> list[Candidate]:
    chosen = list(dict.fromkeys(range(n) if ks is None else ks))
    orders = sandwich(n, chosen, kind=kind, mixer=mixer, channel=channel)
    if (mixer, channel) == ("s", "f"):
        return [Candidate(order=o, space=SANDWICH, name=f"{SANDWICH}{n}_{k}",
                          params={"n": n, "k": k}) for o, k in zip(orders, chosen, strict=True)]
    family = f"{SANDWICH}_{mixer}{channel}"  # not the paper's sandwich study's family
    return [Candidate(order=o, space=SANDWICH, name=f"{family}{n}_{k}",
                      params={"n": n, "k": k, "family": family})
            for o, k in zip(orders, chosen, strict=True)]


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _permutations_size(args: Mapping[str, Any]) -> SpaceSize:
    return "count", _count(args.get("count")), _count(args.get("n_s")) + _count(args.get("n_f"))


def _budgeted_size(args: Mapping[str, Any]) -> SpaceSize:  # at most one sublayer per unit
    return "count", _count(args.get("count")), _count(args.get("budget_units"))


def _sandwich_size(args: Mapping[str, Any]) -> SpaceSize:
    key = "ks" if "ks" in args and "k" not in args else "k"
    k = args.get(key)
    return key, len(k) if isinstance(k, list) else 1, 2 * _count(args.get("n"))


def _check_explicit(*, kind: str, orders: Sequence[str]) -> None:
    explicit(orders, kind=kind)  # parsing is cheap: this is the check


def _build_explicit(*, kind: str, orders: Sequence[str]) -> list[Candidate]:
    parsed = explicit(orders, kind=kind)
    width = max(2, len(str(len(parsed) - 1)))
    out = []
    for i, o in enumerate(parsed):
        params: dict[str, Any] = {"index": i}
        k = sandwich_k(o, kind=kind)
        if k is not None:  # a sandwich written out: the sandwich study counts it
            params.update(family=SANDWICH, k=k)
        out.append(Candidate(order=o, space="explicit", params=params,
                             name=o if len(o) <= _SHORT_NAME else f"explicit{i:0{width}d}"))
    return out


SpaceSize = tuple[str, int, int]
"""(the argument that sets the size, orders, sublayers of the longest order)."""


@dataclass(frozen=True)
class Alias:
    """Another spelling of a space argument (``k`` for the sandwich's ``ks``)."""

    argument: str
    one_as_list: bool = False
    """A single value given is a list of one (``k: 6`` is ``ks: [6]``)."""


@dataclass(frozen=True, kw_only=True)
class SpaceInfo:
    """A named space: its builder, argument check, supported model kinds and what the
    rest of the product needs to know of it (its size, columns, spellings).

    ``build`` and ``check`` take keyword arguments (the space's arguments plus
    ``kind``); calling the info itself builds.
    """

    name: str
    build: Callable[..., list[Candidate]]
    check: Callable[..., None]
    kinds: tuple[str, ...]
    summary: str
    size: Callable[[Mapping[str, Any]], SpaceSize] | None
    """How many orders (and how long) the arguments as written ask for, before any is
    drawn: planning refuses a sweep too big to plan. ``None`` only for a space whose
    orders are bounded by what the file itself lists."""
    aliases: Mapping[str, Alias] = field(default_factory=dict)
    """Other spellings of arguments a user may write."""
    columns: tuple[str, ...] = ()
    """Integer parameters of its candidates shown as trial-table columns (and searched as
    an integer axis when a sweep holds this space alone): the sandwich's ``k``."""
    order_facts: tuple[str, ...] = ()
    """Parameters that describe a candidate's order rather than the space's model (an
    explicit order recognised as a sandwich): a guided copy drops them."""
    order_sets: bool = False
    """A candidate is a set of orders (IOT subsets), not one order."""
    weighs: bool = False
    """Its build and check take the model's ``dims`` (:class:`~spaces.kinds.Dims`):
    planning passes those of the experiment's model section."""

    def __post_init__(self) -> None:
        if set(self.kinds) - set(ALPHABETS):
            raise SpaceError("kinds", self.kinds, "kinds among " + ", ".join(ALPHABETS))

    @property
    def arguments(self) -> dict[str, Any]:
        """Argument names mapped to their default (``inspect.Parameter.empty`` if required)."""
        params = inspect.signature(self.build).parameters
        hidden = ("kind", "dims") if self.weighs else ("kind",)
        return {k: p.default for k, p in params.items() if k not in hidden}

    @property
    def required(self) -> tuple[str, ...]:
        return tuple(k for k, v in self.arguments.items() if v is inspect.Parameter.empty)

    def __call__(self, args: Mapping[str, Any], *, kind: str = "lm") -> list[Candidate]:
        return expand(self.name, args, kind=kind)


SPACES: dict[str, SpaceInfo] = {
    info.name: info
    for info in (
        SpaceInfo(name="permutations", build=_build_permutations, check=_check_permutations,
                  kinds=("lm", "encoder"), size=_permutations_size,
                  summary="random permutations of n_s s and n_f f sublayers"),
        SpaceInfo(name="budgeted", build=_build_budgeted, check=_check_budgeted,
                  kinds=("lm", "encoder"), size=_budgeted_size,
                  summary="random s/f draws until a parameter budget is spent"),
        SpaceInfo(name=SANDWICH, build=_build_sandwich, check=_check_sandwich,
                  kinds=("lm", "encoder", "decoder"), size=_sandwich_size,
                  aliases={"k": Alias("ks", one_as_list=True)}, columns=("k",),
                  summary="sandwich transformers s^k (sf)^(n-k) f^k"),
        SpaceInfo(name="explicit", build=_build_explicit, check=_check_explicit,
                  kinds=("lm", "encoder", "decoder"), size=None, order_facts=("family", "k"),
                  summary="a given list of orders"),
        SpaceInfo(name="multiset", build=build_multiset, check=check_multiset,
                  kinds=("lm",), size=multiset_size,
                  summary="random permutations of any counts of sublayer kinds "
                          "(counts={s: 2, r: 6, f: 8})"),
        SpaceInfo(name="placements", build=build_placements, check=check_placements,
                  kinds=("lm",), size=placements_size,
                  summary="k attention layers (attend, s) among n layers of a mixer (r), "
                          "each then a channel mixer (f), placed evenly, bottom, top, "
                          "middle or at random"),
        SpaceInfo(name="budgeted_kinds", build=build_budgeted_kinds,
                  check=check_budgeted_kinds, kinds=("lm",), size=budgeted_kinds_size,
                  weighs=True,
                  summary="random draws over any symbols (symbols=srf) until a parameter "
                          "budget (budget_units) and, with state, a state budget are spent, "
                          "within tolerance, weighed at the model's dims"),
        SpaceInfo(name="iot_subsets", build=build_iot_space, check=check_iot_space,
                  kinds=("lm", "encoder", "decoder"), size=None, order_sets=True,
                  summary="IOT block-order subsets stacked `layers` times (size=4 "
                          "mode=paper by default, or codes=[[1,4,6],[1,2]], 1-based; "
                          "code_base=0: the authors' 0-based codes)"),
    )
}
"""Space name → :class:`SpaceInfo`."""

FAMILY_SPACES: dict[str, SpaceInfo] = {
    info.name: info
    for info in (
        SpaceInfo(name="par", build=build_par, check=check_par, kinds=("lm", "encoder"),
                  size=None,
                  summary="PAR: fewer s, attention first, at a budget (n=layers of (sf)^n "
                          "or budget_units; n_s=count(s) or a list)"),
        SpaceInfo(name="macaron", build=build_macaron, check=check_macaron,
                  kinds=("lm", "encoder", "decoder"), size=None,
                  summary="Macaron blocks h s h (decoder h s c h), h a half-width f"),
    )
}
"""Order families from peers (:mod:`spaces.generators.families`), kept apart from :data:`SPACES`."""
ALL_SPACES: dict[str, SpaceInfo] = {**SPACES, **FAMILY_SPACES}
"""Every space :func:`expand` knows: :data:`SPACES` and :data:`FAMILY_SPACES`."""


def register_space(info: SpaceInfo, *, family: bool = False) -> SpaceInfo:
    """Make ``info`` the space of ``space.type: <info.name>`` (``family``: an order family
    from another paper, listed with :data:`FAMILY_SPACES`). A plugin's spaces register
    so; a name another space holds is refused."""
    if not isinstance(info, SpaceInfo):
        raise SpaceError("space", info, "a SpaceInfo (spaces.registry) to register")
    held = ALL_SPACES.get(info.name)
    if held is not None and held != info:
        raise SpaceError("name", info.name, f"a name no other space has ({info.name!r} is "
                                            f"taken: {held.summary})")
    (FAMILY_SPACES if family else SPACES)[info.name] = info
    ALL_SPACES[info.name] = info
    return info


def unregister_space(name: str) -> None:
    for table in (SPACES, FAMILY_SPACES, ALL_SPACES):
        table.pop(name, None)


def _info(name: str) -> SpaceInfo:
    try:
        return ALL_SPACES[name]
    except (KeyError, TypeError):
        raise SpaceError("name", name, "one of " + ", ".join(sorted(ALL_SPACES))) from None


def check_kind(name: str, kind: str) -> None:
    """Raise :class:`SpaceError` unless space ``name`` supports model ``kind``."""
    info = _info(name)
    if kind not in ALPHABETS:
        raise SpaceError("kind", kind, "one of " + ", ".join(ALPHABETS))
    if kind not in info.kinds:
        raise SpaceError("kind", kind, f"one of {', '.join(info.kinds)} for space {name!r}")


def _arguments(name: str, args: Mapping[str, Any], kind: str) -> tuple[SpaceInfo, dict[str, Any]]:
    info = _info(name)
    check_kind(name, kind)
    if not isinstance(args, Mapping):
        raise SpaceError("args", args, "a mapping of argument names to values")
    allowed = info.arguments
    for key, value in args.items():
        if key not in allowed:
            raise SpaceError(str(key), value, f"no such argument for space {name!r} "
                                              f"(expected one of {', '.join(allowed)})")
    for key in info.required:
        if key not in args:
            raise SpaceError(key, None, f"a value: {key!r} is required by space {name!r}")
    return info, dict(args)


def spelled(name: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` with the space's other spellings (:attr:`SpaceInfo.aliases`) replaced by
    the arguments they stand for (``k: 6`` of a sandwich is ``ks: [6]``)."""
    out = dict(args)
    info = ALL_SPACES.get(name)
    for alias, target in (info.aliases if info is not None else {}).items():
        if alias in out and target.argument not in out:
            value = out.pop(alias)
            out[target.argument] = [value] if target.one_as_list and isinstance(value, int) \
                else value
    return out


def integer_axis(candidates: Sequence[Candidate]) -> str | None:
    """The column a search can treat as one integer axis over ``candidates``: that of their
    one space when it declares exactly one and every candidate has a whole number there
    (the sandwich's ``k``); else ``None``."""
    spaces = {c.space for c in candidates}
    info = ALL_SPACES.get(next(iter(spaces))) if len(spaces) == 1 else None
    if info is None or len(info.columns) != 1:
        return None
    column = info.columns[0]
    values = [c.params.get(column) for c in candidates]
    return column if all(isinstance(v, int) and not isinstance(v, bool) for v in values) else None


def extra_columns() -> tuple[str, ...]:
    """Every space's :attr:`SpaceInfo.columns`, in registry order (the trial table's)."""
    return tuple(dict.fromkeys(c for info in ALL_SPACES.values() for c in info.columns))


def _with_dims(info: SpaceInfo, kwargs: dict[str, Any], dims: Dims | None) -> dict[str, Any]:
    return {**kwargs, "dims": dims} if info.weighs else kwargs


def validate(name: str, args: Mapping[str, Any], *, kind: str = "lm",
             dims: Dims | None = None) -> None:
    """Check a space's name, kind and arguments without generating its orders (``dims``:
    the model's, for a space that weighs its kinds by them)."""
    info, kwargs = _arguments(name, args, kind)
    info.check(kind=kind, **_with_dims(info, kwargs, dims))


def expand(name: str, args: Mapping[str, Any], *, kind: str = "lm",
           dims: Dims | None = None) -> list[Candidate]:
    """The candidates of space ``name`` with ``args`` (checked first) for model ``kind``
    (``dims``: the model's, for a space that weighs its kinds by them)."""
    info, kwargs = _arguments(name, args, kind)
    kwargs = _with_dims(info, kwargs, dims)
    info.check(kind=kind, **kwargs)
    return info.build(kind=kind, **kwargs)
