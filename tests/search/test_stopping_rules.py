"""Stopping rules as strategies (``scheduler.type``): each declares its settings beside it,
its checks, its dry-run line and its Ray Tune scheduler; the experiment's ``scheduler``
section is the union the registry builds, and a setting of another rule is named as such."""

from __future__ import annotations

import pickle
import typing
from collections.abc import Callable
from pathlib import Path

import pytest
from bad_input_cases import _base, check_bad_sweep
from ray.tune.schedulers import TrialScheduler
from test_bad_input import _write, untouched  # noqa: F401  # the fixture

from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.stopping.curve import CurveStopping
from sublayer_search.search.stopping.registry import rule_names, stopping_rule
from sublayer_search.search.stopping.rule import CurveReadingRule
from sublayer_search.search.stopping.rules.fifo import FifoSettings

TRAIN = TrainConfig(steps=100, eval_every=10)


def test_the_registry_lists_the_built_in_rules_in_order() -> None:
    """First, in this order; a rule added in the tree or by a plugin lists after them."""
    assert rule_names()[:3] == ("fifo", "asha", "curve")


@pytest.mark.parametrize("name", rule_names())
def test_every_rule_keeps_the_contract(name: str) -> None:
    """Its settings are typed by its name, its defaults pass its own checks, it describes
    itself in one line and builds a Ray Tune scheduler."""
    rule = stopping_rule(name)
    assert typing.get_args(rule.settings.model_fields["type"].annotation) == (name,)
    settings = rule.settings()
    assert settings.type == name
    assert rule.problems(settings, TRAIN) == []
    line = rule.describe(settings, TRAIN)
    assert line.startswith((f"{name} ", f"{name},")) and "\n" not in line
    assert isinstance(rule.make(settings, TRAIN), TrialScheduler)


@pytest.mark.parametrize("name", [n for n in rule_names()
                                  if issubclass(stopping_rule(n), CurveReadingRule)])
def test_curve_reading_rules_check_grace_and_metric(name: str) -> None:
    rule = stopping_rule(name)
    bad = rule.settings(grace_period=11, metric="val_bpc")
    assert [p.path for p in rule.problems(bad, TRAIN)] == ["scheduler.metric",
                                                           "scheduler.grace_period"]
    assert "grace 2 evaluation(s) (20 steps)" in rule.describe(rule.settings(grace_period=2),
                                                               TRAIN)  # evaluations -> steps


def test_the_section_is_chosen_by_type_and_defaults_to_fifo(tmp_path: Path) -> None:
    raw = _base(tmp_path)
    assert isinstance(parse_experiment(raw).scheduler, FifoSettings)
    raw["scheduler"] = {"type": "curve", "z": 1.5}
    got = parse_experiment(raw).scheduler
    assert type(got).__name__ == "CurveSettings" and got.z == 1.5 and got.top_k == 3


@pytest.mark.parametrize(("scheduler", "message"), [
    ({"grace_period": 2}, "scheduler.grace_period: got 2, expected no grace_period with type "
                          "fifo (a setting of asha or curve)"),
    ({"type": "asha", "z": 2, "top_k": 4}, "scheduler.z: got 2, expected no z with type asha "
                                           "(a setting of curve)"),
])
def test_a_setting_of_another_rule_is_named(scheduler: dict[str, object], message: str,
                                            tmp_path: Path, untouched: Callable[[set[str]], None],  # noqa: F811
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def spoil(cfg: dict[str, object], tmp: Path) -> None:
        cfg["scheduler"] = scheduler

    check_bad_sweep(_write(tmp_path, spoil), tmp_path, (message,), capsys, untouched)


def test_curve_stopping_saved_before_the_shared_base_resumes() -> None:
    """Tune pickles the scheduler with a sweep: one saved when the reference curves were
    called ``_references`` restores with them."""
    rule = CurveStopping(max_t=100, grace_period=10)
    rule._finished.append("t1")
    state = rule.__getstate__()
    state["_references"] = state.pop("_finished")
    old = CurveStopping.__new__(CurveStopping)
    old.__setstate__(state)
    assert old._finished == ["t1"] and pickle.loads(pickle.dumps(old))._finished == ["t1"]
