"""User docs say what a thing does: no issue numbers, no commit hashes (dated figures and
their provenance live in benchmarks/RESULTS.md), and the search reference stays short
enough to read in ten minutes, its examples valid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from sublayer_search.search.cli.main import main

REPO = Path(__file__).resolve().parents[1]
USER_DOCS = ("README.md", "CONTRIBUTING.md",
             *sorted(f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")))
ISSUE = re.compile(r"\bissues? #?\d+", re.I)
HEX = re.compile(r"(?<![0-9a-f…])[0-9a-f]{7,40}(?![0-9a-f…])")
"""A commit hash (7 to 40 hex digits); a checksum cut short with an ellipsis is not one."""


def _hashes(line: str) -> list[str]:
    return [m for m in HEX.findall(line) if re.search(r"\d", m) and re.search(r"[a-f]", m)]


def test_the_patterns_catch_what_they_are_for() -> None:
    assert ISSUE.search("as issue 37 asked") and ISSUE.search("(issues #12, 13)")
    assert _hashes("landed in b0ac49e, see 061af70d") == ["b0ac49e", "061af70d"]
    assert not _hashes("sha256 `86c4e6aa…c565ed`") and not _hashes("1,874 tests in 66:14")


@pytest.mark.parametrize("name", USER_DOCS)
def test_no_issue_numbers_or_commit_hashes(name: str) -> None:
    found = [f"{name}:{n}: {line.strip()}" for n, line in
             enumerate((REPO / name).read_text().splitlines(), 1)
             if ISSUE.search(line) or _hashes(line)]
    assert not found, found


def test_the_search_reference_is_short() -> None:
    assert len((REPO / "docs" / "search.md").read_text().splitlines()) <= 200


def _snippets() -> list[str]:
    """The one-line ``search:`` / ``scheduler:`` examples of docs/search.md."""
    text = (REPO / "docs" / "search.md").read_text()
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
    return [line for block in blocks for line in block.splitlines()
            if line.startswith(("search:", "scheduler:"))]


def test_the_search_reference_has_its_examples() -> None:
    algorithms = {yaml.safe_load(s)["search"].get("algorithm", "grid")
                  for s in _snippets() if s.startswith("search:")}
    assert algorithms >= {"grid", "surrogate", "evolution", "optuna", "oneshot"}


@pytest.mark.parametrize("snippet", _snippets())
def test_each_search_example_plans_on_the_quickstart(snippet: str, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    raw.update(yaml.safe_load(snippet))
    (tmp_path / "x.yaml").write_text(yaml.safe_dump(raw))
    assert main(["sweep", str(tmp_path / "x.yaml"), "--dry-run"]) == 0, capsys.readouterr().err
    assert "nothing was run" in capsys.readouterr().out


def _section(path: str, heading: str) -> str:
    text = (REPO / path).read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:] if end < 0 else text[start:end]


def test_every_built_in_strategy_is_in_the_docs() -> None:
    """A space is listed under docs/experiments.md's "Spaces", a searcher and a stopping
    rule have a row in docs/search.md's tables, a task has its `task:` in some page
    (plugins document themselves)."""
    from sublayer_search.search.core.plugins import BUILT_IN, origin
    from sublayer_search.search.searchers.registry import searcher_names
    from sublayer_search.search.stopping.registry import rule_names
    from sublayer_search.search.tasks import task_names
    from sublayer_search.spaces.registry import ALL_SPACES

    spaces = _section("docs/experiments.md", "## Spaces")
    searchers = _section("docs/search.md", "## Searchers")
    rules = _section("docs/search.md", "## Stopping rules")
    pages = "\n".join((REPO / "docs" / p.name).read_text()
                      for p in (REPO / "docs").glob("*.md"))
    missing = [f"space {n}" for n in ALL_SPACES
               if origin("space", n) == BUILT_IN and f"`{n}`" not in spaces]
    missing += [f"searcher {n}" for n in searcher_names()
                if origin("searcher", n) == BUILT_IN and f"| `{n}`" not in searchers]
    missing += [f"stopping rule {n}" for n in rule_names()
                if origin("stopping rule", n) == BUILT_IN and f"| `{n}`" not in rules]
    missing += [f"task {n}" for n in task_names()
                if origin("task", n) == BUILT_IN and f"task: {n}" not in pages]
    assert not missing, f"not in the docs: {', '.join(missing)}"
    stale = [f"searcher {n}" for n in re.findall(r"^\| `(\w+)`", searchers, flags=re.M)
             if n not in searcher_names()]
    stale += [f"stopping rule {n}" for n in re.findall(r"^\| `(\w+)`", rules, flags=re.M)
              if n not in rule_names()]
    stale += [f"task {n}" for n in sorted(set(re.findall(r"\btask: (\w+)", pages)))
              if n not in task_names()]
    assert not stale, f"the docs name what is not registered: {', '.join(stale)}"
