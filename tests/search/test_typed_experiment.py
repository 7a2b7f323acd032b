"""One typed experiment, checked in one pass, with one problem type (issue 38, item 2).

The task reads its sections while the experiment validates (``exp.model`` is a
``ModelSection``, ``exp.data`` the task's data config, ``search.supernet`` a
``SupernetConfig``); the space names come from the registry; every bad-input error is a
``ProblemError`` carrying ``Problem`` s; and the task seam's base names no task.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from sublayer_search.models.config import ModelConfig
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.errors import ConfigError, ConfigErrors
from sublayer_search.models.specs import TranslationConfig
from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.search.plan.experiment import load_experiment, parse_experiment
from sublayer_search.search.plan.problems import ExperimentError, Problem, problems_from
from sublayer_search.search.plan.sweep_plan import plan_sweep
from sublayer_search.search.searchers.prior import PriorError
from sublayer_search.search.tasks import LMTask, TranslationTask, task_names
from sublayer_search.search.tasks.base import ModelSection
from sublayer_search.spaces.errors import SpaceError
from sublayer_search.spaces.problems import ProblemError
from sublayer_search.spaces.registry import ALL_SPACES

REPO = Path(__file__).resolve().parents[2]


def _doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"name": "typed", "space": {"type": "sandwich", "n": 4, "k": [1, 2]},
                           "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"}}
    return {**doc, **overrides}


def test_the_sections_are_the_tasks_configs() -> None:
    guidance = {"mode": "soft", "blocks": ["key_query"]}
    exp = parse_experiment(_doc(model={"preset": "debug", "guidance": guidance}))
    assert isinstance(exp.model, ModelSection) and isinstance(exp.model.template, ModelConfig)
    [(path, setting)] = exp.model.guidance.values()
    assert path == "model.guidance" and setting.mode == "soft"
    assert isinstance(exp.data, DataConfig) and exp.data.name == "tinyshakespeare"
    assert exp.translation is None and exp.search.supernet is None
    assert isinstance(exp.new_task(), LMTask)


def test_a_translation_experiment_is_typed_by_its_task() -> None:
    exp = load_experiment(REPO / "configs" / "press2020_translation.yaml")
    assert isinstance(exp.translation, TranslationConfig)
    assert type(exp.data).__name__ == "ParallelDataConfig"
    task = exp.new_task()
    assert isinstance(task, TranslationTask) and task is not exp.new_task()  # a plan's own
    assert pickle.loads(pickle.dumps(exp)).new_task().name == "translation"


def test_the_supernet_section_is_a_config() -> None:
    exp = parse_experiment(_doc(search={"algorithm": "oneshot",
                                        "supernet": {"steps": 30, "sharing": "slot"}}))
    assert exp.search.supernet == SupernetConfig(steps=30, sharing="slot")


def test_one_pass_reports_the_files_problems_with_the_plans() -> None:
    """An unknown key, a refused section and a cross-field problem, in one error."""
    found: list[Problem] = []
    exp = parse_experiment(_doc(colour="blue", model={"preset": "debug", "d_model": 30, "n_heads": 4},
                                search={"algorithm": "optuna"}), found=found)
    assert exp.model is None and [p.path for p in found] == ["colour", "model.d_model"]
    with pytest.raises(ExperimentError) as err:
        plan_sweep(exp, found=found)
    paths = [p.path for p in err.value.problems]
    assert paths[:2] == ["colour", "model.d_model"] and "search.num_samples" in paths


def test_without_a_found_list_every_problem_is_raised() -> None:
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(colour="blue", data={"name": "tinyshakespeare", "sise": 3}))
    assert [p.path for p in err.value.problems] == ["colour", "data.sise"]


def test_space_names_come_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(space={"type": "sandwhich", "n": 4}))
    listed = " or ".join([", ".join(repr(n) for n in list(ALL_SPACES)[:-1]),
                          repr(list(ALL_SPACES)[-1])])
    assert f"space.type: got 'sandwhich', expected one of {listed}" in str(err.value)
    monkeypatch.setitem(ALL_SPACES, "sandwhich", ALL_SPACES["sandwich"])  # a new space
    assert parse_experiment(_doc(space={"type": "sandwhich", "n": 4})).spaces[0].type == \
        "sandwhich"


@pytest.mark.parametrize("error", [
    SpaceError("k[3]", 16, "an integer in 0..15"),
    ConfigError("model.d_model", 30, "a multiple of n_heads (4)"),
    PriorError("nope", "a study"),
    ExperimentError("x.yaml", [Problem("seeds", -1, "an integer >= 0")]),
])
def test_every_bad_input_error_carries_problems(error: ProblemError) -> None:
    assert isinstance(error, ProblemError) and isinstance(error, ValueError)
    first = error.problems[0]
    assert (error.field, error.value, error.expected) == (first.path, first.value,
                                                          first.expected)
    again = pickle.loads(pickle.dumps(error))
    assert again.problems == error.problems and str(again) == str(error)


def test_a_config_with_several_errors_gives_each_under_its_section() -> None:
    errors = ConfigErrors([ConfigError("model.d_model", 30, "a multiple of n_heads (4)"),
                           ConfigError("model.dropout", 2.0, "a number in [0, 1)")])
    got = problems_from(errors, "model")
    assert [str(p) for p in got] == ["model.d_model: got 30, expected a multiple of n_heads (4)",
                                     "model.dropout: got 2.0, expected a number in [0, 1)"]
    assert [p.path for p in problems_from(SpaceError("k[0]", 9, "0..3"), "space[1]")] == \
        ["space[1].k[0]"]


def test_the_task_seam_names_no_task() -> None:
    text = (REPO / "search" / "tasks" / "base.py").read_text()
    for name in task_names():
        assert f"task: {name}" not in text
    assert "LMTask" not in text and "TranslationTask" not in text
