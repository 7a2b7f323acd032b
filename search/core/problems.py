"""Validation problems with YAML paths, collected from pydantic and our own checks.

:class:`Problem` (``path``, ``value``, ``expected``) is the one problem type of every layer
(:mod:`sublayer_search.spaces.problems`); here: the experiment file's error and pydantic's
errors in its words."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from collections.abc import Iterable, Sequence
from typing import Any

import pydantic

from sublayer_search.spaces.problems import NO_VALUE, Problem, ProblemError, short_repr

_FIELD_MESSAGE = re.compile(r"^([A-Za-z_][\w.\[\]-]*): (got .*)$", re.S)

__all__ = ["Problem", "ExperimentError", "NO_VALUE", "UNKNOWN_KEY", "path_str",
           "from_validation_error", "from_exception", "problems_from", "short_repr",
           "unknown_key", "keys_at"]

UNKNOWN_KEY = "unknown key (remove it or check its spelling)"


def unknown_key(key: str, known: Iterable[str]) -> str:
    """What an unknown ``key`` should be: the nearest known name when one is close (a
    misspelling: ``trian`` -> ``train``), else :data:`UNKNOWN_KEY`."""
    names = [str(k) for k in known]
    # a part of one name (``grace`` of ``grace_period``, ``samples`` of ``num_samples``),
    # else the nearest spelling
    part = [k for k in names if len(key) >= 4 and k != key
            and (k.startswith(key + "_") or k.endswith("_" + key))]
    near = part if len(part) == 1 else difflib.get_close_matches(key, names, n=1)
    return f"unknown key (did you mean {near[0]!r}?)" if near else UNKNOWN_KEY


def _fields(tp: Any) -> dict[str, Any]:
    """The keys of a pydantic model or dataclass type (and each key's type), looking
    through ``Annotated`` and unions; {} for anything else."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _fields(typing.get_args(tp)[0])
    if origin is not None:  # a union, list[...]: the keys of every member with keys
        merged: dict[str, Any] = {}
        for member in typing.get_args(tp):
            merged = {**_fields(member), **merged}
        return merged
    if isinstance(tp, type) and issubclass(tp, pydantic.BaseModel):
        return {**{f.alias: f.annotation for f in tp.model_fields.values() if f.alias},
                **{k: f.annotation for k, f in tp.model_fields.items()}}
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        try:
            return dict(typing.get_type_hints(tp))
        except Exception:  # noqa: BLE001 - a hint that does not resolve: the names only
            return {f.name: Any for f in dataclasses.fields(tp)}
    return {}


def keys_at(tp: object, loc: Sequence[str | int]) -> list[str]:
    """The keys allowed at location ``loc`` (a YAML path's parts) below type ``tp``."""
    for part in loc:
        if isinstance(part, int):
            args = [a for a in typing.get_args(tp) if typing.get_origin(a) is list] or [tp]
            inner = typing.get_args(args[0])
            tp = inner[0] if inner else tp
            continue
        tp = _fields(tp).get(part)
        if tp is None:
            return []
    return list(_fields(tp))


class ExperimentError(ProblemError):
    """An experiment file with one or more problems (the CLI exits with status 2)."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        super().__init__(problems)
        self.args = (source, list(problems))
        self.source = source

    def __str__(self) -> str:
        lines = [f"{self.source}: {len(self.problems)} problem(s)"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)


def path_str(loc: Iterable[str | int]) -> str:
    """``("space", "k", 3)`` -> ``space.k[3]``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def problems_from(exc: BaseException, prefix: str = "", value: object = NO_VALUE) -> list[Problem]:
    """Every problem an error carries, under ``prefix`` (a config's ``ConfigErrors`` holds
    several); another error is one problem at ``prefix`` with ``value``."""
    if isinstance(exc, ProblemError):
        return exc.under(prefix)
    return [Problem(prefix, value, str(exc))]


def from_exception(exc: BaseException, prefix: str = "", value: object = NO_VALUE) -> Problem:
    """The (first) problem of an error, under ``prefix``."""
    return problems_from(exc, prefix, value)[0]


_TYPE_WORDS = {
    "int_parsing": "an integer", "int_type": "an integer", "int_from_float": "an integer",
    "float_parsing": "a number", "float_type": "a number", "bool_parsing": "true or false",
    "bool_type": "true or false", "string_type": "a string", "list_type": "a list",
    "tuple_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "dataclass_type": "a mapping", "too_short": "a non-empty list",
    "string_too_short": "a non-empty string",
}
_BOUND_WORDS = {  # constraint errors: the phrase and the ctx key holding the bound
    "greater_than": ("a number > {}", "gt"), "greater_than_equal": ("a number >= {}", "ge"),
    "less_than": ("a number < {}", "lt"), "less_than_equal": ("a number <= {}", "le"),
    "string_pattern_mismatch": ("a string matching {!r}", "pattern"),
    "string_too_long": ("a string of at most {} characters", "max_length"),
    "too_long": ("a list of at most {} items", "max_length"),
}


def _is_union_tag(part: str | int) -> bool:
    """pydantic names the member of a union in ``loc`` (``int``, ``list[int]``, ``SpaceSection``)."""
    return isinstance(part, str) and (
        part[:1].isupper() or "[" in part or part.startswith("constrained-")
        or part in ("int", "float", "str", "bool", "none"))


def _is_mismatch(kind: str) -> bool:
    return kind.endswith(("_type", "_parsing")) or kind == "int_from_float"


def _merge_unions(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One error per union: the member the value was meant for, else "an X or a Y".

    For ``seeds: 'x'`` (``int | list[int]``) pydantic reports both members; when every
    member rejects the value's type they become one item, otherwise the members that
    merely rejected the type (``list_type`` for ``seeds: -1``) are dropped.
    """
    def tags(item: dict[str, Any]) -> list[int]:
        loc = item["loc"]
        if item["type"] in ("extra_forbidden", "unexpected_keyword_argument"):  # the user's key
            loc = loc[:-1]
        return [j for j, part in enumerate(loc) if _is_union_tag(part)]

    def nested(item: dict[str, Any]) -> list[int]:  # a top-level member (the task's type) is
        return [j for j in tags(item) if j > 0]     # one value, not a union to merge

    groups: dict[tuple[Any, ...], list[int]] = {}
    out = []
    for i, item in enumerate(items):
        found = nested(item)
        if found:
            groups.setdefault(tuple(item["loc"][:found[0]]), []).append(i)
        out.append({**item, "loc": tuple(p for j, p in enumerate(item["loc"])
                                         if j not in tags(item))})
    drop: set[int] = set()
    for root, members in groups.items():
        depth = len([p for p in root if not _is_union_tag(p)])  # where the union's value is
        shallow = [i for i in members
                   if len(out[i]["loc"]) == depth and _is_mismatch(items[i]["type"])]
        if len(shallow) < len(members):
            drop.update(shallow)
            continue
        words = list(dict.fromkeys(_TYPE_WORDS.get(items[i]["type"], items[i]["msg"])
                                   for i in shallow))
        out[shallow[0]] = {**out[shallow[0]], "type": "union_mismatch",
                           "msg": " or ".join(words)}
        drop.update(shallow[1:])
    return [item for i, item in enumerate(out) if i not in drop]


def from_validation_error(err: pydantic.ValidationError, prefix: str = "",
                          strip: int = 0, model: object = None) -> list[Problem]:
    """Turn pydantic's errors into problems with YAML paths and plain words.

    ``strip`` drops that many leading parts of each error location (a wrapper's field);
    ``model``, the type validated (below the stripped parts), names the nearest valid key
    for an unknown one.
    """
    problems: list[Problem] = []
    for item in _merge_unions([dict(e) for e in err.errors()]):
        loc = path_str(item["loc"][strip:])
        path = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        kind = item["type"]
        value = item.get("input", NO_VALUE)
        cause = (item.get("ctx") or {}).get("error")
        if kind in ("extra_forbidden", "unexpected_keyword_argument"):
            loc_parts = item["loc"][strip:]
            known = keys_at(model, loc_parts[:-1]) if model is not None and loc_parts else []
            problems.append(Problem(path, NO_VALUE, unknown_key(str(loc_parts[-1]), known)
                                    if known else UNKNOWN_KEY))
        elif kind in ("missing", "missing_keyword_argument", "missing_argument"):
            problems.append(Problem(path, NO_VALUE, "a value for this required key"))
        elif isinstance(cause, ProblemError):
            problems.extend(cause.under(path))
        elif isinstance(cause, BaseException) and _FIELD_MESSAGE.match(str(cause)):
            field, rest = _FIELD_MESSAGE.match(str(cause)).groups()  # type: ignore[union-attr]
            problems.append(Problem(field, NO_VALUE, rest).under(path))
        elif isinstance(cause, BaseException):
            problems.append(Problem(path, value, str(cause)))
        elif kind == "literal_error":
            problems.append(Problem(path, value, f"one of {item['ctx']['expected']}"))
        elif kind == "union_mismatch":
            problems.append(Problem(path, value, item["msg"]))
        elif kind in _BOUND_WORDS and _BOUND_WORDS[kind][1] in (item.get("ctx") or {}):
            phrase, key = _BOUND_WORDS[kind]
            problems.append(Problem(path, value, phrase.format(item["ctx"][key])))
        else:
            problems.append(Problem(path, value, _TYPE_WORDS.get(kind, item["msg"])))
    return problems
