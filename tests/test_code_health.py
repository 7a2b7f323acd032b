"""The tree stays easy to change: small files. (mypy over every package: ``make lint``, run as
written by tests/test_first_hour_walk.py.)"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("spaces", "models", "search", "analysis")
MAX_LINES = 400


def test_no_source_file_over_400_lines():
    folders = (*PACKAGES, "tests", "benchmarks", "notebooks")
    long = {str(p.relative_to(REPO)): n for folder in folders
            for p in (REPO / folder).rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"
