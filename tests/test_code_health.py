"""The tree stays easy to change: typed (mypy clean on every package) and in small files."""

from __future__ import annotations

import subprocess
import sys
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


def test_mypy_is_clean_on_every_package(tmp_path):
    """As ``make lint``: the folders linked under their installed names, pyproject's config."""
    links = REPO / ".mypy_path" / "sublayer_search"
    links.mkdir(parents=True, exist_ok=True)
    for pkg in PACKAGES:
        link = links / pkg
        if not link.is_symlink():
            link.symlink_to(Path("..", "..", pkg))
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache")],
                          cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Success: no issues found" in done.stdout
    checked = int(done.stdout.split(" in ")[-1].split()[0])
    assert checked >= len(list((REPO / "models").rglob("*.py")))  # it saw the packages
