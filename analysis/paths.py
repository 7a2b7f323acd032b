"""Checks of output folders given on the command line (``--out``, ``--checkpoint-dir``)."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

__all__ = ["unusable_folder", "write_refused"]

_OWN_CAUSE = {errno.EROFS: "on a read-only file system", errno.ENOSPC: "on a full disk",
              errno.EDQUOT: "over its disk quota"}
"""Failures to create a file that have a cause of their own; any other (EACCES, or
ENOENT where a file system such as /proc takes no new files) is plainly "not writable"."""


def write_refused(folder: Path) -> str | None:
    """Why a file cannot be created in the existing ``folder``, or None when one can.

    ``os.access`` says yes to root everywhere, /proc and /sys included; so a nameless
    temporary file is made and dropped at once (nothing is left behind).
    """
    if not os.access(folder, os.W_OK | os.X_OK):
        return "not writable"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:  # one cause, never "not writable: No such file or directory"
        return _OWN_CAUSE.get(exc.errno or 0, "not writable")
    return None


def unusable_folder(path: Path) -> str | None:
    """Why ``path`` can neither be used nor created as a folder, or None when it can."""
    if path.is_dir():
        refused = write_refused(path)
        return None if refused is None else f"it is {refused}"
    if path.exists() or path.is_symlink():
        return "it is an existing file"
    parent = path.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"it cannot be created: {parent} is a file"
    refused = write_refused(parent)
    if refused:
        return f"it cannot be created: {parent} is {refused}"
    return None
