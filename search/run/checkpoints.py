"""Make a killed sweep's trial checkpoints restorable again before ``--resume``.

Ray Tune deletes a trial's older checkpoint (``CheckpointConfig.num_to_keep``) as
soon as a newer one is registered, and only then writes the experiment snapshot
that names the newer one. A driver killed between the two leaves a snapshot that
names a deleted checkpoint, and Ray then refuses to restore the trial ("Could not
recover from checkpoint as it does not exist on storage anymore"; see
ray-project/ray#27790). Checkpoint names are ``checkpoint_%06d`` in order, so
the snapshot can only name a missing index below the newest one on disk.

:func:`fill_checkpoint_gaps` gives each such missing index the content of the
newest checkpoint the trial left (hard links, so no data is copied). The trial
then resumes from its newest state, which is at least as far as the one the
snapshot named.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

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


def fill_checkpoint_gaps(run_dir: str | os.PathLike[str], *, lookback: int = LOOKBACK) -> list[Path]:
    """Fill the missing checkpoint indices just below each trial's newest; return them."""
    root = Path(run_dir)
    if not root.is_dir():
        return []
    filled: list[Path] = []
    for trial in (p for p in sorted(root.iterdir()) if p.is_dir()):
        found = {int(m.group(1)): p for p in trial.iterdir()
                 if p.is_dir() and (m := _NAME.match(p.name))}
        if not found:
            continue
        newest = max(found)
        source = found[newest]
        width = len(source.name) - len("checkpoint_")
        for index in range(max(0, newest - lookback), newest):
            if index in found:
                continue
            target = trial / f"checkpoint_{index:0{width}d}"
            shutil.copytree(source, target, copy_function=_link_or_copy)
            (target / MARKER).write_text(source.name + "\n")
            filled.append(target)
    return filled
