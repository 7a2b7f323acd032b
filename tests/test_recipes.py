"""CONTRIBUTING's recipes are true: a throwaway strategy of each kind
(``tests/recipe_throwaways.py``), written into a copy of the tree by exactly the files its
recipe's ``Files:`` line names, passes the tests that know the registries; and leaving any
one of those files untouched fails a test (the file's guard)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from recipe_throwaways import THROWAWAYS, Edit

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("spaces", "models", "search", "analysis")
HEADINGS = {"space": "### A space", "searcher": "### A searcher",
            "stopping rule": "### A stopping rule", "task": "### A task"}
CHECKS = (
    "tests/spaces", "tests/search/test_searchers.py", "tests/search/test_searcher_registry.py",
    "tests/search/test_stopping_rules.py", "tests/search/test_bad_input.py",
    "tests/search/test_typed_experiment.py", "tests/search/test_help_texts.py",
    "tests/search/test_golden_dry_runs.py", "tests/search/test_plugins.py",
    "tests/search/test_task_seam.py", "tests/test_user_docs.py", "tests/test_strategy_names.py",
    "tests/test_layering.py",
)
"""The tests that read the registries (listings, contracts, docs, layering)."""


def recipe_files(kind: str) -> list[str]:
    """The paths of the recipe's ``Files:`` line, ``<name>`` as the throwaway's name."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    start = text.index(HEADINGS[kind])
    end = text.find("\n##", start + len(HEADINGS[kind]))
    section = text[start:end]
    line = re.search(r"^Files:(.*?)(?:\n\n|\Z)", section, flags=re.M | re.S)
    assert line, f"CONTRIBUTING's recipe {HEADINGS[kind]!r} has no Files: line"
    name = THROWAWAYS[kind][0]
    paths = re.findall(r"`([^`]*/[^`]*|[^`]*\.md)`", line.group(1))
    return [p.replace("<name>", name) for p in paths]


@pytest.mark.parametrize("kind", sorted(THROWAWAYS))
def test_each_recipe_lists_the_files_its_throwaway_touches(kind: str) -> None:
    _, edits = THROWAWAYS[kind]
    assert sorted(recipe_files(kind)) == sorted({e.path for e in edits})


def _copy(tree: Path) -> None:
    listed = subprocess.run(["git", "-C", str(REPO), "ls-files", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True,
                            text=True).stdout.splitlines()
    for rel in listed:
        source = REPO / rel
        if source.is_file() and not source.is_symlink():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, tree / rel)


def _apply(tree: Path, edits: list[Edit]) -> None:
    for edit in edits:
        path = tree / edit.path
        if edit.after is None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(edit.text)
            continue
        text = path.read_text()
        anchor = edit.after + "\n"
        assert anchor in text, f"{edit.path}: no line {edit.after!r} to insert after"
        path.write_text(text.replace(anchor, anchor + edit.text, 1))


def _restore(tree: Path, rel: str) -> None:
    if (REPO / rel).exists():
        shutil.copyfile(REPO / rel, tree / rel)
    else:
        (tree / rel).unlink()


def _pytest(tree: Path, ns: Path, home: Path, *targets: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "SUBLAYER_WRITE")) and k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(ns), HOME=str(home), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "-m", "not slow", "-o", "addopts=", *targets], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
def test_the_throwaways_need_exactly_their_recipes_files(tmp_path: Path) -> None:
    tree, ns, home = tmp_path / "main", tmp_path / "ns" / "sublayer_search", tmp_path / "home"
    tree.mkdir()
    ns.mkdir(parents=True)
    home.mkdir()
    (tmp_path / "shared").mkdir()  # beside the copy, as ../shared is beside the checkout
    for entry in (REPO.parent / "shared").glob("*"):
        (tmp_path / "shared" / entry.name).symlink_to(entry)
    _copy(tree)
    for package in PACKAGES:  # the copy's packages, imported before the installed tree's
        (ns / package).symlink_to(tree / package)
    edits = [e for _, kind_edits in THROWAWAYS.values() for e in kind_edits]
    _apply(tree, edits)
    done = _pytest(tree, ns.parent, home, *CHECKS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    for kind, (name, kind_edits) in sorted(THROWAWAYS.items()):
        for rel in dict.fromkeys(e.path for e in kind_edits):
            _restore(tree, rel)  # this kind's edits of the file left out, the others kept
            _apply(tree, [e for e in edits if e.path == rel and e not in kind_edits])
            guard = next(e.guard for e in kind_edits if e.path == rel)
            left_out = _pytest(tree, ns.parent, home, *shlex.split(guard))
            assert left_out.returncode not in (0, 5), (  # 5: the guard selected no test
                f"{kind} {name}: {rel} left untouched, yet {guard} passes: the recipe "
                "names a file nothing needs")
            _apply(tree, [e for e in kind_edits if e.path == rel])
