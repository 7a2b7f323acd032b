"""A fresh clone of this checkout, for the tests that run documented commands as written."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["fresh_clone"]


def fresh_clone(repo: Path, work: Path, venv: Path) -> Path:
    """``repo`` cloned into ``work`` with the working tree's state (committed or not: what
    is checked is what is here), and ``.venv`` linked to ``venv``."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(repo), str(work)], check=True,
                   timeout=120)
    # git -C, not cwd=repo: the hygiene watch counts subprocesses started inside the tree
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "--cached", "--others",
                             "--exclude-standard"], check=True, capture_output=True,
                            text=True).stdout
    for rel in listed.splitlines():
        source, target = repo / rel, work / rel
        if source.is_file() and not source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    for rel in subprocess.run(["git", "-C", str(repo), "ls-files", "--deleted"], check=True,
                              capture_output=True, text=True).stdout.splitlines():
        (work / rel).unlink(missing_ok=True)
    (work / ".venv").symlink_to(venv)
    return work
