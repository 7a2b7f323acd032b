"""Whether ``--resume`` can read a sweep's saved Ray state.

Since the Trial change each trial's config holds a :class:`~sublayer_search.search.plan.
trial.Trial` object, which Tune's state file keeps pickled; a sweep started before it saved
plain dicts, and restoring one ends deep inside a trial. :func:`legacy_trials` reads the
newest ``experiment_state-*.json`` (Tune's file: a folder or an object store) and counts the
trials saved the old way, so the CLI can refuse the resume (exit 2) before Ray starts.
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

from sublayer_search.search.plan.storage import Storage

STATE_PREFIX = "experiment_state-"


def _newest_state(storage: Storage, ray_run: str) -> str | None:
    import pyarrow.fs

    fs = storage.filesystem()
    try:
        found = fs.get_file_info(pyarrow.fs.FileSelector(storage.path(ray_run)))
    except (FileNotFoundError, OSError):
        return None
    files = (PurePosixPath(info.path).name for info in found
             if info.type == pyarrow.fs.FileType.File)
    names = sorted(n for n in files if n.startswith(STATE_PREFIX) and n.endswith(".json"))
    return storage.read_text(ray_run, names[-1]) if names else None


def _is_legacy(trial_json: Any) -> bool:
    """A trial's saved config with the planned trial as a plain dict (no pickled object)."""
    state = json.loads(trial_json) if isinstance(trial_json, str) else trial_json
    config = state.get("config") if isinstance(state, dict) else None
    trial = config.get("trial") if isinstance(config, dict) else None
    return isinstance(trial, dict) and "_type" not in trial


def legacy_trials(storage: Storage, ray_run: str) -> int:
    """How many trials of the Ray run ``ray_run`` were saved before the Trial change (0 when
    none, or when the state cannot be read: Tune's own restore then reports it)."""
    text = _newest_state(storage, ray_run)
    if text is None:
        return 0
    try:
        rows = json.loads(text).get("trial_data", [])
        return sum(_is_legacy(row[0]) for row in rows if row)
    except (ValueError, TypeError, AttributeError, IndexError):
        return 0
