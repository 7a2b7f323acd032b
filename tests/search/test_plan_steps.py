"""Planning in three named steps: *validate* reads the file alone (no I/O at all),
*resolve* everything outside it, *expand* is pure; the steps of a run that change a plan
return a new one named in its history."""

from __future__ import annotations

import builtins
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.plan.expand import expand, model_configs
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.resolve import resolve
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import then
from sublayer_search.search.plan.validate import validate

REPO = Path(__file__).resolve().parents[2]


def _quickstart(tmp_path: Path, **changes: Any) -> Any:
    raw = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())
    raw.update({"tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
                "ray": {"storage_path": str(tmp_path / "ray")}, **changes})
    return parse_experiment(raw)


@pytest.fixture
def no_io(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket or file opened from here on fails the test."""
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"I/O during a pure step: {args[:1]}")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(builtins, "open", refuse)
    monkeypatch.setattr(Path, "open", refuse)


def test_validate_reads_the_file_alone(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """With an unreachable tracking server and no corpus on disk, validation finds the
    file's own problems only; it opens no socket and no file."""
    exp = _quickstart(tmp_path, search={"algorithm": "optuna"},
                      tracking={"uri": "http://127.0.0.1:9"},
                      data={"name": "tinyshakespeare", "data_dir": str(tmp_path / "none")})
    problems: list[Problem] = []
    request.getfixturevalue("no_io")
    validated = validate(exp, problems)
    assert [p.path for p in problems] == ["search.num_samples"]
    assert len(validated.pool) == 7 and validated.baseline is not None


def test_resolve_finds_what_is_outside_the_file(tmp_path: Path) -> None:
    exp = _quickstart(tmp_path, tracking={"uri": "http://127.0.0.1:9"})
    problems: list[Problem] = []
    resolve(validate(exp, problems), problems)
    assert [p.path for p in problems] == ["tracking.uri"]
    assert "reachable MLflow server" in problems[0].expected


def test_expand_is_pure_and_plans_as_the_three_steps_do(tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    exp = _quickstart(tmp_path)
    problems: list[Problem] = []
    validated = validate(exp, problems)
    resolved = resolve(validated, problems)
    models = model_configs(validated, resolved, problems)
    assert problems == []
    request.getfixturevalue("no_io")
    plan = expand(validated, resolved, models, "quickstart")
    again = expand(validated, resolved, models, "quickstart")
    assert [plan.row(t) for t in plan.trials] == [again.row(t) for t in again.trials]
    assert plan.history == ("validated", "resolved", "expanded")


def test_plan_sweep_is_the_three_steps(tmp_path: Path) -> None:
    exp = _quickstart(tmp_path)
    plan = plan_sweep(exp, "quickstart")
    assert plan.history == ("validated", "resolved", "expanded")
    assert len(plan.trials) == 10 and plan.algorithm == "grid"


def test_a_step_of_the_run_returns_a_new_plan_named_in_its_history(tmp_path: Path) -> None:
    plan = plan_sweep(_quickstart(tmp_path), "quickstart")
    kept = plan.trials[:4]
    after = then(plan, "reuse (6 trial(s) already finished)", trials=kept)
    assert after is not plan and plan.trials != kept and after.trials == kept
    assert after.history == (*plan.history, "reuse (6 trial(s) already finished)")
