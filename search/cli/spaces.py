"""``sublayer spaces sample``: print a space's orders with their counts and costs."""

from __future__ import annotations

import argparse
from typing import Any

from sublayer_search.search.cli.output import bad as _bad
from sublayer_search.search.cli.output import print_table as _print_table
from sublayer_search.spaces.exit_codes import ExitCode
from sublayer_search.spaces.kinds import hybrid_kinds

__all__ = ["cmd_registered", "cmd_spaces_sample", "registered_text", "shown_order",
           "spaces_epilog"]

_SPACE_ARG_EXAMPLE = "e.g. n=16, k=[0,6] or orders=[sfsf,ssff]"


def _parse_value(text: str, name: str = "value") -> Any:
    """The YAML value of the space argument ``name=text``; a ValueError names it."""
    import yaml

    if not text.strip():
        raise ValueError(f"space argument {name!r}: got an empty value, expected NAME=VALUE "
                         f"with a value ({_SPACE_ARG_EXAMPLE})")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ValueError(f"space argument {name!r}: got {text!r} ({problem}), expected a number, "
                         f"a word or a closed [list] ({_SPACE_ARG_EXAMPLE})") from None
    except RecursionError:
        raise ValueError(f"space argument {name!r}: got a value nested too deeply, expected a "
                         f"number, a word or a flat [list] ({_SPACE_ARG_EXAMPLE})") from None


def _as_typed(exc: ValueError, typed: dict[str, Any], space: str) -> ValueError:
    """The error in the user's words: an argument as typed (the sandwich's ``k``) rather than
    the one it stands for (``ks``)."""
    from sublayer_search.spaces.errors import SpaceError
    from sublayer_search.spaces.registry import ALL_SPACES

    info = ALL_SPACES.get(space)
    for alias, target in (info.aliases if info is not None else {}).items():
        name = target.argument
        if not isinstance(exc, SpaceError) or alias not in typed or name in typed:
            continue
        field = exc.field
        if field == name:
            field = alias
        elif field == f"{alias}[0]" and not isinstance(typed[alias], list):  # one value typed
            field, exc = alias, SpaceError(alias, typed[alias], exc.expected)
        return SpaceError(field, exc.value, exc.expected.replace(name, alias))
    return exc


def shown_order(order: str, params: dict[str, Any]) -> str:
    """The order column: an IOT subset shows all its block orders (``(scf|csf|fcs)^2``),
    other candidates their order; counts and units stay those of one path."""
    if "subset" not in params or "codes" not in params:
        return order
    from sublayer_search.spaces.generators.iot_subsets import (
        DECODER_BLOCKS,
        ENCODER_BLOCKS,
        subset_label,
    )

    blocks = DECODER_BLOCKS if params.get("stack", "decoder") == "decoder" else ENCODER_BLOCKS
    return subset_label([blocks[c] for c in params["codes"]], int(params.get("layers", 1)))


def spaces_epilog() -> str:
    """Each space with its arguments and their defaults, for ``spaces sample --help``."""
    import inspect

    from sublayer_search.spaces.registry import ALL_SPACES

    lines = ["spaces and their arguments (NAME=VALUE; no default: required):"]
    for name, info in ALL_SPACES.items():
        shown = []
        spelling = {target.argument: alias for alias, target in info.aliases.items()}
        for arg, default in info.arguments.items():
            arg = spelling.get(arg, arg)
            shown.append(arg if default is inspect.Parameter.empty else f"{arg}={default}")
        lines.append(f"  {name:<13} {' '.join(shown)}")
        lines.append(f"  {'':<13} {info.summary.replace('`', '')}; kinds: {', '.join(info.kinds)}")
    lines.append("example: sublayer spaces sample sandwich n=16 k=[0,6,15]  (k: one value or a "
                 "list; default every k in 0..n-1)")
    lines.append("example: sublayer spaces sample budgeted_kinds symbols=srf budget_units=8 "
                 "count=4 --preset tiny  (weighed at the tiny preset's dims)")
    return "\n".join(lines)


def _kind_hint(exc: ValueError, kind: str, kwargs: dict[str, Any]) -> str:
    """Where the space refused the model kind: the ``--kind`` that takes these orders."""
    if f"kind {kind!r}" not in str(exc):
        return ""
    stack = kwargs.get("stack")
    wanted = stack if stack in ("encoder", "decoder") and stack != kind else (
        "decoder" if kind != "decoder" and "'c'" in str(exc) else None)
    return f"; give --kind {wanted} for {wanted} orders" if wanted else ""


def cmd_spaces_sample(args: argparse.Namespace) -> int:
    from sublayer_search.spaces.cost import units
    from sublayer_search.spaces.registry import ALL_SPACES, expand, spelled

    kwargs: dict[str, Any] = {}
    for item in args.args:
        if "=" not in item:
            return _bad(f"space argument {item!r}: expected NAME=VALUE (e.g. n=16)")
        key, value = item.split("=", 1)
        if not key.strip():
            return _bad(f"space argument {item!r}: got no NAME, expected NAME=VALUE (e.g. n=16)")
        try:
            kwargs[key] = _parse_value(value, key)
        except ValueError as exc:
            return _bad(str(exc))
    dims = None
    if args.preset is not None:
        from sublayer_search.models.config import PRESETS

        if args.preset not in PRESETS:
            return _bad(f"--preset: got {args.preset!r}, expected one of {', '.join(PRESETS)}")
        dims = PRESETS[args.preset].dims
    try:
        cands = expand(args.space, spelled(args.space, kwargs), kind=args.kind, dims=dims)
    except ValueError as exc:
        known = ", ".join(f"{n} ({i.summary})" for n, i in ALL_SPACES.items())
        return _bad(f"{_as_typed(exc, kwargs, args.space)}{_kind_hint(exc, args.kind, kwargs)}\n  spaces: {known}")
    hybrid = list(hybrid_kinds("".join(c.order for c in cands)))
    rows = [{"name": c.name, "order": shown_order(c.order, c.params), "n_s": c.counts["s"],
             "n_f": c.counts["f"], "n_c": c.counts["c"], "n_h": c.counts.get("h", 0),
             **{f"n_{k}": c.counts.get(k, 0) for k in hybrid},
             # a hybrid kind weighs by a model's dims: --preset's, else none here
             "units": units(c.order, dims=dims) if dims is not None or not hybrid_kinds(c.order)
             else None} for c in cands]
    cols = ["name", "n_s", "n_f"] + (["n_c"] if args.kind == "decoder" else [])
    cols += (["n_h"] if any(r["n_h"] for r in rows) else []) + [f"n_{k}" for k in hybrid]
    cols += ["units", "order"]
    _print_table(rows, cols)
    print(f"{len(rows)} order(s)")
    return ExitCode.OK


def registered_text() -> str:
    """Every registered space, searcher, stopping rule and task, with where it came from
    (built in, or the plugin that registered it)."""
    from sublayer_search.search.core.plugins import origin
    from sublayer_search.search.searchers.registry import searcher_names
    from sublayer_search.search.stopping.registry import rule_names
    from sublayer_search.search.tasks.registry import task_names
    from sublayer_search.spaces.registry import ALL_SPACES

    kinds = {"space": tuple(ALL_SPACES), "searcher": searcher_names(),
             "stopping rule": rule_names(), "task": task_names()}
    width = max(len(n) for names in kinds.values() for n in names)
    lines = ["registered (kind, name: where it came from):"]
    for kind, names in kinds.items():
        lines += [f"  {kind:13} {name:{width}}  {origin(kind, name)}" for name in names]
    return "\n".join(lines)


def cmd_registered(args: argparse.Namespace) -> int:
    """``sublayer spaces`` alone: what is registered and where it came from."""
    print(registered_text())
    return ExitCode.OK
