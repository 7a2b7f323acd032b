"""Which new files in the working tree's output folders the test session wrote itself.

A user may run a documented command (``sublayer replay … --figure reports/replay.png``)
in the same checkout while ``make test`` runs: that file is theirs, not the tests'. So the
session watches its own writes with an audit hook (PEP 578): files opened for writing,
folders made, renames and SQLite databases opened under the tree's output folders, and
subprocesses started inside the tree (whatever those write counts as the session's).
At the end, new output files are the tests' fault only when the session wrote there;
anything else is named as another process's and does not fail the run.

What the hook cannot see: a C library writing by itself under an absolute path into the
tree (no such write happens in this suite: every test runs in a fresh folder of its own).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

__all__ = ["OUTPUTS", "TreeWatch", "fail_if_left", "note_worker", "tree_outputs"]

OUTPUTS = ("mlruns", "mlartifacts", "mlflow.db", "ray_results", "runs", "reports",
           ".sublayer_cache", "build")
"""What a sweep, an analysis or a build may leave in the working tree (all git-ignored)."""

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def tree_outputs(root: Path) -> set[str]:
    """The files (and empty folders) under ``root``'s :data:`OUTPUTS`, relative to ``root``."""
    found: set[str] = set()
    for name in OUTPUTS:
        top = root / name
        if top.is_file() or top.is_symlink():
            found.add(name)
        elif top.is_dir():
            found.add(name + "/")
            found.update(str(p.relative_to(root)) for p in top.rglob("*"))
    return found


class TreeWatch:
    """The session's own writes into ``root``'s output folders, seen by an audit hook."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.tops = tuple(str(self.root / name) for name in OUTPUTS)
        self.written: set[str] = set()
        """Paths (relative to ``root``) this process wrote, or began writing under."""
        self.in_tree: list[str] = []
        """Subprocesses this process started inside the tree."""
        self.before = tree_outputs(self.root)

    def install(self) -> TreeWatch:
        sys.addaudithook(self._hook)
        return self

    def _absolute(self, path: Any) -> str | None:
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str | os.PathLike):
            return None
        text = os.fspath(path)
        if text.startswith("file:"):  # sqlite3 URIs
            text = text[5:].split("?", 1)[0]
        return os.path.normpath(os.path.join(os.getcwd(), text))

    def _note(self, path: Any) -> None:
        full = self._absolute(path)
        if full is not None and full.startswith(self.tops):
            self.written.add(os.path.relpath(full, self.root))

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        try:
            if event == "open":
                path, mode, flags = args
                writing = (mode is not None and any(c in str(mode) for c in "wax+")) or \
                    (mode is None and isinstance(flags, int) and flags & _WRITE_FLAGS)
                if writing:
                    self._note(path)
            elif event in ("os.mkdir", "os.symlink", "os.link"):
                self._note(args[1] if event != "os.mkdir" else args[0])
            elif event in ("os.rename", "shutil.copyfile", "shutil.copytree", "shutil.move"):
                self._note(args[1])
            elif event == "sqlite3.connect":
                self._note(args[0])
            elif event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.system"):
                cwd = args[2] if event == "subprocess.Popen" and args[2] is not None else None
                where = os.path.realpath(os.fspath(cwd)) if cwd is not None else os.getcwd()
                if where == str(self.root) or where.startswith(str(self.root) + os.sep):
                    self.in_tree.append(f"{event} in {where}: {args[1]!r}"[:300])
        except Exception:  # noqa: BLE001 - an audit hook must never break the call it sees
            pass

    def verdict(self) -> tuple[list[str], list[str]]:
        """(new output paths the session wrote, new output paths some other process wrote)."""
        new = sorted(tree_outputs(self.root) - self.before)
        if self.in_tree:
            return new, []
        ours = [p for p in new if self._ours(p)]
        return ours, [p for p in new if p not in ours]

    def _ours(self, rel: str) -> bool:
        rel = rel.rstrip("/")
        return any(rel == w or rel.startswith(w + os.sep) or w.startswith(rel + os.sep)
                   for w in self.written)

    def report(self, stream: Any = None, *, also_ours: Iterable[str] = ()) -> bool:
        """Print what the session left (and, apart, what others wrote meanwhile); True
        when the session left something. ``also_ours``: paths the session's xdist workers
        left (they are not this process's writes, but the run's)."""
        stream = stream or sys.stderr
        ours, others = self.verdict()
        if also_ours:
            ours = sorted({*ours, *also_ours})
            others = [p for p in others if p not in ours]
        if others:
            print(f"\nhygiene: {len(others)} new path(s) in {self.root} were written by another "
                  f"process while the tests ran (not the tests'): {_shown(others)}", file=stream)
        if ours:
            why = f" (subprocesses started inside it: {self.in_tree[:3]})" if self.in_tree else ""
            print(f"\nHYGIENE: the tests left {len(ours)} path(s) in the working tree "
                  f"{self.root}{why}:\n  {_shown(ours, sep=chr(10) + '  ')}", file=stream)
        return bool(ours)


_WORKER_KEY = "hygiene_left"
"""The key under which a pytest-xdist worker hands the paths its tests left to the controller."""


def fail_if_left(session: pytest.Session, watch: TreeWatch) -> None:
    """At a session's end: report what its tests left in the tree, and fail it if anything.

    Under pytest-xdist (``make test`` runs two workers) each worker watches its own writes
    and hands the paths its tests left to the controller (:func:`note_worker`), which
    reports once for the whole run and fails it."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput[_WORKER_KEY] = watch.verdict()[0]
        return
    if watch.report(also_ours=getattr(session.config, "_hygiene_by_workers", ())):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def note_worker(node: Any) -> None:
    """A pytest-xdist worker ended (``pytest_testnodedown``): keep the paths its tests left."""
    left = getattr(node, "workeroutput", {}).get(_WORKER_KEY) or []
    config = node.config
    config._hygiene_by_workers = [*getattr(config, "_hygiene_by_workers", ()), *left]


def _shown(paths: Iterable[str], sep: str = ", ") -> str:
    items = list(paths)
    return sep.join(items[:20]) + (f"{sep}…" if len(items) > 20 else "")
