"""One typed experiment, checked in one pass, with one problem type.

``task:`` selects the experiment's type (a discriminated union of the tasks' types: ``exp.model``
is a ``ModelSection``, ``exp.data`` the task's data config); ``search.algorithm`` selects
the searcher's own settings model (``search.supernet`` a ``SupernetConfig``); the space names
come from the registry; every bad-input error is a ``ProblemError`` carrying ``Problem`` s;
and the task seam's base names no task.
"""

from __future__ import annotations

import pickle
import typing
from pathlib import Path
from typing import Any

import pytest

import sublayer_search.search.plan.experiment as experiment_module
from sublayer_search.models.config import ModelConfig
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.errors import ConfigError, ConfigErrors
from sublayer_search.models.specs import TranslationConfig
from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.search.core.problems import ExperimentError, Problem, problems_from
from sublayer_search.search.core.section import Refused
from sublayer_search.search.plan.experiment import (
    Experiment,
    load_experiment,
    parse_experiment,
    typed_experiment,
)
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.searchers.algorithms.oneshot import OneShotSettings
from sublayer_search.search.searchers.prior import PriorError
from sublayer_search.search.searchers.registry import search_algorithm, searcher_names
from sublayer_search.search.searchers.settings import SearchSection
from sublayer_search.search.tasks import LMTask, TranslationTask, task_class, task_names
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
    assert exp.translation is None and type(exp.search) is SearchSection  # grid: no settings
    assert isinstance(exp.new_task(), LMTask)
    assert type(exp).__name__ == "LMExperiment" and isinstance(exp, Experiment)


def test_the_task_selects_the_experiment_type() -> None:
    """``task:`` picks a member of a discriminated union, each typed by its task's configs;
    a task no one registered leaves the base type and is the one problem of the file."""
    for name in task_names():
        typed = typed_experiment(name)
        model_t, data_t, _ = task_class(name).section_types()
        assert issubclass(typed, Experiment) and typed is not Experiment
        assert data_t in typing.get_args(typed.model_fields["data"].annotation)
        assert getattr(experiment_module, typed.__name__) is typed  # what pickle finds
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(task="lmm", model={"d_model": "x"}))
    assert [p.path for p in err.value.problems] == ["task"]


def test_a_refused_section_carries_its_problems() -> None:
    """No side channel: a section's reader returns its problems in the value."""
    from sublayer_search.search.tasks.sections import section_reader

    value = section_reader(LMTask, "data")({"name": "tinyshakespeare", "sise": 3})
    assert isinstance(value, Refused) and [p.path for p in value.problems] == ["data.sise"]


def test_a_translation_experiment_is_typed_by_its_task() -> None:
    exp = load_experiment(REPO / "configs" / "press2020_translation.yaml")
    assert isinstance(exp.translation, TranslationConfig)
    assert type(exp.data).__name__ == "ParallelDataConfig"
    task = exp.new_task()
    assert isinstance(task, TranslationTask) and task is not exp.new_task()  # a plan's own
    assert pickle.loads(pickle.dumps(exp)).new_task().name == "translation"


@pytest.mark.parametrize("space", sorted(ALL_SPACES))
def test_a_space_section_is_typed_by_its_generator(space: str) -> None:
    """``space.type`` picks the space's section, whose fields are its generator's arguments
    (the values stay as written: the generator checks them, with the task's model kind)."""
    exp = parse_experiment(_doc(space={"type": space}), found=[])
    [section] = exp.spaces
    assert type(section).__name__.endswith("Space") and section.type == space
    declared = set(type(section).model_fields) - {"type", "seeds"}
    assert declared == set(ALL_SPACES[space].arguments) - {"seeds"}


@pytest.mark.parametrize(("section", "key"), [
    ({"search": {"algorithm": "evolution", "num_samples": 2, "population": 10**10}},
     "search.population"),
    ({"search": {"algorithm": "oneshot", "top_k": 10**10}}, "search.top_k"),
    ({"scheduler": {"type": "asha", "grace_period": 10**10}}, "scheduler.grace_period"),
])
def test_a_count_is_declared_beside_its_setting(section: dict[str, Any], key: str) -> None:
    """A strategy's count is marked where it is declared (``Count``), not listed by name."""
    from sublayer_search.search.core.scalars import COUNTS, MAX_COUNT

    assert key.split(".")[-1] not in COUNTS
    with pytest.raises(ExperimentError) as err:
        parse_experiment(_doc(**section))
    [problem] = [p for p in err.value.problems if p.path == key]
    assert f"at most {MAX_COUNT:,}" in problem.expected


def test_space_arguments_keep_the_files_order() -> None:
    exp = parse_experiment(_doc(space={"type": "sandwich", "k": [1], "n": 4}))
    assert list(exp.spaces[0].args) == ["k", "n"]


def test_the_supernet_section_is_a_config() -> None:
    exp = parse_experiment(_doc(search={"algorithm": "oneshot",
                                        "supernet": {"steps": 30, "sharing": "slot"}}))
    assert isinstance(exp.search, OneShotSettings)
    assert exp.search.supernet == SupernetConfig(steps=30, sharing="slot")


@pytest.mark.parametrize("name", ["grid", "optuna", "surrogate", "evolution", "oneshot"])
def test_the_algorithm_selects_its_searchers_settings(name: str) -> None:
    """Each searcher's settings model is declared beside it; ``search`` is read as the one
    ``algorithm`` names, and another searcher's setting is refused, naming its owner."""
    searcher = search_algorithm(name)
    exp = parse_experiment(_doc(search={"algorithm": name, "num_samples": 2}))
    assert type(exp.search) is searcher.settings
    assert searcher.settings is SearchSection or \
        searcher.settings.__module__ == searcher.__module__  # declared beside its searcher
    others = {k for other in searcher_names() for k in search_algorithm(other).settings.model_fields
              if k not in searcher.settings.model_fields}
    for key in sorted(others):
        found: list[Problem] = []
        parse_experiment(_doc(search={"algorithm": name, "num_samples": 2, key: 2}), found=found)
        owners = [o for o in searcher_names() if key in search_algorithm(o).settings.model_fields]
        assert [p.path for p in found] == [f"search.{key}"]
        assert name in found[0].expected and owners[0] in found[0].expected


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
