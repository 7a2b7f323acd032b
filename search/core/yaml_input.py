"""YAML documents of experiment and train config files: UTF-8, no key given twice, at most
:data:`MAX_DEPTH` deep; every failure is an :class:`ExperimentError` naming the file."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import yaml

from sublayer_search.search.core.problems import ExperimentError, Problem

__all__ = ["MAX_DEPTH", "nearest_file", "read_yaml"]

MAX_DEPTH = 32
"""Deepest nesting of an experiment file (mappings and lists)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader that refuses a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Mark] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base class reports it
                break
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _depth(value: Any) -> int:
    """Nesting depth of mappings and lists, without recursion."""
    deepest, stack = 0, [(value, 1)]
    seen: dict[int, int] = {}  # YAML aliases share objects: visit each at its deepest once
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict | list):
            if seen.get(id(item), 0) >= level:
                continue
            seen[id(item)] = level
            deepest = max(deepest, level)
            if level > MAX_DEPTH:
                break
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def nearest_file(path: str | os.PathLike[str]) -> str:
    """`` (did you mean 'configs/quickstart.yaml'?)`` for a missing ``path`` whose folder
    holds a file of a close name (the folder's own name is matched too); else ``""``."""
    p = Path(path)
    folder = p.parent
    if not folder.is_dir():  # a misspelt folder: its nearest sibling, when there is one
        above = folder.parent if folder.parent.is_dir() else None
        near = difflib.get_close_matches(folder.name, [d.name for d in above.iterdir()
                                                       if d.is_dir()], n=1) if above else []
        if not near:
            return ""
        folder = folder.parent / near[0]
    try:
        names = sorted(f.name for f in folder.iterdir() if f.is_file())
    except OSError:
        return ""
    near = difflib.get_close_matches(p.name, names, n=1)
    if not near or folder / near[0] == p:
        return ""
    shown = near[0] if str(p.parent) == "." else str(folder / near[0])
    return f" (did you mean {shown!r}?)"


def read_yaml(path: str | os.PathLike[str]) -> object:
    """The YAML document of ``path``: UTF-8, no duplicate keys, at most ``MAX_DEPTH`` deep."""
    p = Path(path)
    if not p.is_file():
        raise ExperimentError(str(path), [Problem("", str(path), "an existing experiment YAML "
                                                  "file" + nearest_file(path))])
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        hint = " (it looks like UTF-16)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ExperimentError(str(path), [Problem("", f"a byte 0x{data[err.start]:02x} at offset "
                                                      f"{err.start} that is not UTF-8{hint}",
                                                  "a UTF-8 text file")]) from None
    if "\x00" in text:
        raise ExperimentError(str(path), [Problem("", "a NUL byte", "a UTF-8 text file")])
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506  # a SafeLoader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "somewhere"
        problem = getattr(err, "problem", None)
        what = f"invalid YAML at {where}" + (f": {problem}" if problem else "")
        raise ExperimentError(str(path), [Problem("", what, "well-formed YAML")]) from None
    except RecursionError:
        doc = None
        depth = MAX_DEPTH + 1
    else:
        depth = _depth(doc)
    if depth > MAX_DEPTH:
        raise ExperimentError(str(path), [Problem("", f"a document nested more than {MAX_DEPTH} "
                                                      "levels deep", "a flatter YAML document")])
    return doc
