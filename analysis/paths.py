"""Checks of output folders given on the command line (``--out``, ``--checkpoint-dir``)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["unusable_folder"]


def unusable_folder(path: Path) -> str | None:
    """Why ``path`` can neither be used nor created as a folder, or None when it can."""
    if path.is_dir():
        return None if os.access(path, os.W_OK) else "it is not writable"
    if path.exists() or path.is_symlink():
        return "it is an existing file"
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"it cannot be created: {parent} is a file"
    if not os.access(parent, os.W_OK):
        return f"it cannot be created: {parent} is not writable"
    return None
