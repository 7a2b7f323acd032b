"""What a restored sweep unpickles: its callbacks as this run's live ones (no private Ray
attribute needed), and Trials saved under the module names they had before ``search/``
took its present layers."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import yaml

from sublayer_search.search.core.rebind import Rebound, rebinding
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.run.moved_modules import MOVED, moved_modules
from sublayer_search.search.run.retention import CheckpointRetention
from sublayer_search.search.searchers.grid_searcher import GridSearcher

REPO = Path(__file__).resolve().parents[2]


class Note(Rebound):
    def __init__(self, text: str) -> None:
        self.text = text


def test_a_rebound_object_unpickles_as_the_live_one_only_while_bound() -> None:
    saved = pickle.dumps({"callbacks": [Note("saved"), CheckpointRetention(keep=1)]})
    plain = pickle.loads(saved)
    assert plain["callbacks"][0].text == "saved" and plain["callbacks"][1].keep == 1
    live_note, live_keep = Note("live"), CheckpointRetention(keep=4)
    with rebinding(live_note, live_keep):
        restored = pickle.loads(saved)
    assert restored["callbacks"][0] is live_note and restored["callbacks"][1] is live_keep
    assert pickle.loads(saved)["callbacks"][0] is not live_note  # unbound again


def _old_names(data: bytes) -> bytes:
    """A protocol-0 pickle as a sweep saved it before the move (text module paths)."""
    for old, new in MOVED.items():
        for home in (new,) if isinstance(new, str) else new:
            data = data.replace(f"sublayer_search.search.{home}\n".encode(),
                                f"sublayer_search.search.{old}\n".encode())
    return data


def test_trials_saved_under_the_old_module_names_resume() -> None:
    raw = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    trial = plan_sweep(parse_experiment(raw), check_resources=False).trials[-1]
    old = _old_names(pickle.dumps(trial, protocol=0))
    assert b"sublayer_search.search.plan.trial\n" in old
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)
    with moved_modules():
        assert pickle.loads(old) == trial
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(old)  # the old names are gone again


def test_a_searcher_saved_before_its_module_was_split_resumes() -> None:
    raw = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    plan = plan_sweep(parse_experiment(raw), check_resources=False)
    searcher = GridSearcher(plan.trials, metric=plan.metric, mode=plan.mode)
    searcher.suggest("t0")
    old = pickle.dumps(searcher, protocol=0).replace(
        b"sublayer_search.search.searchers.grid_searcher\n",
        b"sublayer_search.search.searchers.tune\n")
    with moved_modules():
        restored = pickle.loads(old)
    assert isinstance(restored, GridSearcher)
    assert restored.suggest("t1") == searcher.suggest("t1")
