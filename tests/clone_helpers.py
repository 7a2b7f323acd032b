"""A fresh clone of this checkout, for the tests that run documented commands as written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

__all__ = ["fresh_clone", "user_clone"]


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


def user_clone(repo: Path, root: Path, venv: Path, data: Path) -> tuple[Path, dict[str, str]]:
    """A clone laid out as a user's under ``root`` (``main/`` beside ``shared/data``, so the
    Makefile finds the local corpora as it does here; ``.venv`` linked to ``venv``, up to
    date for ``make install``) and the environment of a fresh shell there: its own HOME,
    no SUBLAYER_DATA_DIR, nothing of pytest's or make's."""
    (root / "shared").mkdir(parents=True)
    (root / "shared" / "data").symlink_to(data)
    for entry in (repo.parent / "shared").glob("*"):  # the papers' facts the tests read
        if not (root / "shared" / entry.name).exists():
            (root / "shared" / entry.name).symlink_to(entry)
    work = fresh_clone(repo, root / "main", venv)
    stamp = venv / ".installed"
    assert stamp.exists(), f"{stamp} is missing: run `make install` first"
    old = stamp.stat().st_mtime - 60  # the clone's pyproject is no newer than the install
    os.utime(work / "pyproject.toml", (old, old))
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("SUBLAYER_DATA_DIR", "VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS",
                        "MAKELEVEL", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")}
    env.update(HOME=str(home), MLFLOW_DISABLE_TELEMETRY="true", RAY_USAGE_STATS_ENABLED="0")
    return work, env
