"""``fill_checkpoint_gaps``: missing checkpoint indices below the newest get its content."""

from __future__ import annotations

import os
from pathlib import Path

from sublayer_search.search.run.checkpoints import MARKER, fill_checkpoint_gaps


def _checkpoint(trial: Path, index: int, payload: str) -> Path:
    path = trial / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "state.pt").write_text(payload)
    return path


def test_missing_indices_below_the_newest_are_filled_with_hard_links(tmp_path):
    trial = tmp_path / "train_trial_a"
    _checkpoint(trial, 3, "old")
    newest = _checkpoint(trial, 6, "newest")
    filled = fill_checkpoint_gaps(tmp_path)
    assert sorted(p.name for p in filled) == ["checkpoint_000004", "checkpoint_000005"]
    for path in filled:
        assert (path / "state.pt").read_text() == "newest"
        assert os.stat(path / "state.pt").st_ino == os.stat(newest / "state.pt").st_ino
        assert (path / MARKER).read_text().strip() == "checkpoint_000006"
    assert (trial / "checkpoint_000003" / "state.pt").read_text() == "old"  # left as it was
    assert not (trial / "checkpoint_000003" / MARKER).exists()


def test_lookback_bounds_the_filled_indices_and_other_trials_are_independent(tmp_path):
    _checkpoint(tmp_path / "a", 9, "a9")
    _checkpoint(tmp_path / "b", 0, "b0")
    (tmp_path / "c").mkdir()  # a trial that never checkpointed
    (tmp_path / "experiment_state.json").write_text("{}")
    filled = fill_checkpoint_gaps(tmp_path, lookback=2)
    assert sorted(str(p.relative_to(tmp_path)) for p in filled) == [
        "a/checkpoint_000007", "a/checkpoint_000008"]
    assert fill_checkpoint_gaps(tmp_path, lookback=2) == []  # idempotent
    assert list((tmp_path / "c").iterdir()) == []


def test_a_missing_run_directory_fills_nothing(tmp_path):
    assert fill_checkpoint_gaps(tmp_path / "absent") == []
