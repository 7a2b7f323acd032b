"""``CheckpointRetention``: a trial's older checkpoints go once a newer one has settled."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path
from types import SimpleNamespace

from ray import tune

from sublayer_search.search.run.retention import SETTLE_S, CheckpointRetention, default_settle_s


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _save(cb: CheckpointRetention, root: Path, trial: SimpleNamespace, index: int) -> Path:
    path = root / trial.trial_id / f"checkpoint_{index:06d}"
    path.mkdir(parents=True)
    (path / "state.pt").write_text(str(index))
    cb.on_checkpoint(0, [], trial, tune.Checkpoint.from_directory(str(path)))
    return path


def test_older_checkpoints_go_only_after_a_newer_one_settled(tmp_path):
    clock = Clock()
    cb = CheckpointRetention(settle_s=60, clock=clock)
    a, b = SimpleNamespace(trial_id="a", status="RUNNING"), SimpleNamespace(trial_id="b", status="RUNNING")
    a0, b0 = _save(cb, tmp_path, a, 0), _save(cb, tmp_path, b, 0)
    clock.now += 30
    a1 = _save(cb, tmp_path, a, 1)
    clock.now += 20
    a2 = _save(cb, tmp_path, a, 2)
    cb.on_step_end(0, [])
    assert a0.exists() and a1.exists() and a2.exists() and b0.exists()  # nothing settled yet
    clock.now += 15  # a0 and b0 settled (65 s): each is its trial's newest settled one
    cb.on_step_end(0, [])
    assert a0.exists() and b0.exists() and cb.deleted == 0
    clock.now += 25  # a1 settled (60 s old): a snapshot since names a1 or later, never a0
    cb.on_step_end(0, [])
    assert not a0.exists() and a1.exists() and a2.exists() and b0.exists()
    clock.now += 60
    cb.on_step_end(0, [])
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["checkpoint_000002"]
    assert cb.deleted == 2


def test_the_end_of_a_finished_sweep_keeps_each_trials_newest_only(tmp_path):
    cb = CheckpointRetention(settle_s=600, clock=Clock())
    a, b = SimpleNamespace(trial_id="a", status="RUNNING"), SimpleNamespace(trial_id="b", status="RUNNING")
    for i in range(3):
        _save(cb, tmp_path, a, i)
        _save(cb, tmp_path, b, i)
    cb.on_experiment_end([a, b])  # stopped with trials running (Ctrl-C): all kept
    assert len(list((tmp_path / "a").iterdir())) == 3
    a.status, b.status = "TERMINATED", "ERROR"
    cb.on_experiment_end([a, b])
    for trial in ("a", "b"):
        assert [p.name for p in (tmp_path / trial).iterdir()] == ["checkpoint_000002"]


def test_a_restored_sweep_starts_without_records_and_settle_follows_tune(tmp_path, monkeypatch):
    cb = CheckpointRetention(settle_s=1, clock=Clock())
    _save(cb, tmp_path, SimpleNamespace(trial_id="a", status="RUNNING"), 0)
    restored = pickle.loads(pickle.dumps(cb))
    assert restored._held == {} and not restored._arrivals and restored.settle_s == 1
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "3600")
    assert default_settle_s() == 7200
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "auto")
    assert default_settle_s() == SETTLE_S


def test_a_checkpoint_already_gone_is_no_error(tmp_path):
    clock = Clock()
    cb = CheckpointRetention(settle_s=1, clock=clock)
    trial = SimpleNamespace(trial_id="a", status="RUNNING")
    first = _save(cb, tmp_path, trial, 0)
    _save(cb, tmp_path, trial, 1)
    shutil.rmtree(first)
    clock.now += 5
    cb.on_step_end(0, [])
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["checkpoint_000001"]


def test_keep_n_keeps_each_trials_newest_n(tmp_path):
    """``ray.keep_checkpoints: 2``: settled older checkpoints go, the newest two stay."""
    clock = Clock()
    cb = CheckpointRetention(keep=2, settle_s=10, clock=clock)
    trial = SimpleNamespace(trial_id="a", status="RUNNING")
    for i in range(4):
        _save(cb, tmp_path, trial, i)
        clock.now += 20
    cb.on_step_end(0, [])  # all four settled: the newest two stay
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "checkpoint_000002", "checkpoint_000003"]
    _save(cb, tmp_path, trial, 4)
    cb.on_step_end(0, [])  # 4 has not settled: 2 stays too (older than the newest settled)
    assert len(list((tmp_path / "a").iterdir())) == 3
    trial.status = "TERMINATED"
    cb.on_experiment_end([trial])
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [
        "checkpoint_000003", "checkpoint_000004"]
    assert cb.deleted == 3


def test_keep_checkpoints_is_validated(tmp_path):
    import pytest

    from sublayer_search.search.plan.places import RaySection

    assert RaySection().keep_checkpoints == 1
    assert RaySection(keep_checkpoints=3).keep_checkpoints == 3
    with pytest.raises(ValueError, match="keep_checkpoints"):
        RaySection(keep_checkpoints=0)
    with pytest.raises(ValueError, match="at least 1"):
        CheckpointRetention(keep=0)
