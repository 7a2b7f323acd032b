"""Make a killed sweep's trial checkpoints restorable again before ``--resume``.

Ray Tune deletes a trial's older checkpoint (``CheckpointConfig.num_to_keep``) as
soon as a newer one is registered, and only then writes the experiment snapshot
that names the newer one. A driver killed between the two leaves a snapshot that
names a deleted checkpoint, and Ray then refuses to restore the trial ("Could not
recover from checkpoint as it does not exist on storage anymore"; see
ray-project/ray#27790). Checkpoint names are ``checkpoint_%06d`` in order, so
the snapshot can only name a missing index below the newest one on disk.

:func:`fill_checkpoint_gaps` gives each such missing index the content of the
newest checkpoint the trial left (hard links, so no data is copied; in an object
store, server-side copies of its objects). The trial then resumes from its newest
state, which is at least as far as the one the snapshot named.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow.fs

__all__ = ["fill_checkpoint_gaps", "MARKER", "LOOKBACK"]

MARKER = ".sublayer_filled_from"
"""File written into a filled checkpoint; it holds the name of its source."""
LOOKBACK = 3
"""How many indices below the newest are filled (a snapshot lags by one or two)."""
_NAME = re.compile(r"checkpoint_(\d{6,})$")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # a filesystem without hard links
        shutil.copy2(src, dst)


def _missing(found: set[int], lookback: int) -> list[int]:
    newest = max(found)
    return [i for i in range(max(0, newest - lookback), newest) if i not in found]


def _fill_in_store(fs: Any, run_dir: str, lookback: int) -> list[str]:
    """:func:`fill_checkpoint_gaps` on a pyarrow filesystem (``run_dir`` as it names it)."""
    import pyarrow.fs

    root = run_dir.rstrip("/")
    files: dict[str, dict[int, list[str]]] = {}  # trial -> index -> object paths
    names: dict[tuple[str, int], str] = {}
    for info in fs.get_file_info(pyarrow.fs.FileSelector(root, recursive=True,
                                                         allow_not_found=True)):
        parts = info.path[len(root) + 1:].split("/")
        m = _NAME.match(parts[1]) if len(parts) >= 3 else None
        if m and info.type == pyarrow.fs.FileType.File:
            files.setdefault(parts[0], {}).setdefault(int(m.group(1)), []).append(info.path)
            names[(parts[0], int(m.group(1)))] = parts[1]
    filled: list[str] = []
    for trial, found in sorted(files.items()):
        newest = max(found)
        source = f"{root}/{trial}/{names[(trial, newest)]}"
        width = len(names[(trial, newest)]) - len("checkpoint_")
        for index in _missing(set(found), lookback):
            target = f"{root}/{trial}/checkpoint_{index:0{width}d}"
            for path in found[newest]:
                fs.copy_file(path, target + path[len(source):])
            with fs.open_output_stream(f"{target}/{MARKER}") as out:
                out.write(f"{names[(trial, newest)]}\n".encode())
            filled.append(target)
    return filled


def fill_checkpoint_gaps(run_dir: str | os.PathLike[str], *, lookback: int = LOOKBACK,
                         filesystem: pyarrow.fs.FileSystem | None = None) -> list[Path] | list[str]:
    """Fill the missing checkpoint indices just below each trial's newest; return them.

    With a pyarrow ``filesystem`` (an object store), ``run_dir`` is the run as that
    filesystem names it (``BUCKET/PREFIX/RUN``) and the filled paths are returned so."""
    if filesystem is not None:
        return _fill_in_store(filesystem, str(run_dir), lookback)
    root = Path(run_dir)
    if not root.is_dir():
        return []
    filled: list[Path] = []
    for trial in (p for p in sorted(root.iterdir()) if p.is_dir()):
        found = {int(m.group(1)): p for p in trial.iterdir()
                 if p.is_dir() and (m := _NAME.match(p.name))}
        if not found:
            continue
        source = found[max(found)]
        width = len(source.name) - len("checkpoint_")
        for index in _missing(set(found), lookback):
            target = trial / f"checkpoint_{index:0{width}d}"
            shutil.copytree(source, target, copy_function=_link_or_copy)
            (target / MARKER).write_text(source.name + "\n")
            filled.append(target)
    return filled
