"""Planning asks the searcher registry, never the name: no code outside
``search/searchers/registry.py`` compares ``search.algorithm`` with a searcher's name."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from sublayer_search.search.core.problems import ExperimentError
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.searchers.registry import (
    SearchAlgorithm,
    register_searcher,
    search_algorithm,
    searcher_names,
    unregister_searcher,
)

REPO = Path(__file__).resolve().parents[2]
REGISTRY = REPO / "search" / "searchers" / "registry.py"
ALGORITHM_NAMES = {"algorithm", "algo"}


def _names_a_searcher(node: ast.expr, names: set[str]) -> bool:
    """``x.algorithm``, a variable ``algorithm``/``algo``, a searcher's name, or a
    tuple/list/set holding one."""
    if isinstance(node, ast.Attribute):
        return node.attr in ALGORITHM_NAMES
    if isinstance(node, ast.Name):
        return node.id in ALGORITHM_NAMES
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str) and node.value in names
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_a_searcher(e, names) for e in node.elts)
    return False


def name_comparisons(source: str, names: set[str]) -> list[int]:
    """Lines of ``source`` that compare an algorithm name (==, !=, in, not in, is)."""
    return sorted(node.lineno for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Compare)
                  and any(_names_a_searcher(n, names) for n in [node.left, *node.comparators]))


def test_no_code_compares_the_algorithm_name_outside_the_registry() -> None:
    names = set(searcher_names())
    found = {str(p.relative_to(REPO)): lines
             for folder in ("spaces", "models", "search", "analysis")
             for p in sorted((REPO / folder).rglob("*.py"))
             if p != REGISTRY and (lines := name_comparisons(p.read_text(), names))}
    assert not found, f"ask the registry (search_algorithm(name).<capability>): {found}"


@pytest.mark.parametrize("source", [
    'if exp.search.algorithm == "grid": pass',
    'if algo not in ("grid", "oneshot"): pass',
    'ok = spec.algorithm != other',
    'if "evolution" == kind: pass',
    'if algorithm in PRIOR_ALGORITHMS: pass',
])
def test_the_scan_finds_a_comparison(source: str) -> None:
    assert name_comparisons(source, set(searcher_names())) == [1]


def test_the_scan_leaves_other_comparisons_alone() -> None:
    source = 'if spec.sampler == "tpe" and task == "lm" and searcher.needs_budget: pass'
    assert name_comparisons(source, set(searcher_names())) == []


BUILT_IN = ("grid", "optuna", "surrogate", "evolution", "oneshot")


def _built_in(names: tuple[str, ...]) -> tuple[str, ...]:
    """The built-in searchers among ``names``, in their order (a searcher added in the tree
    or by a plugin lists after them: CONTRIBUTING's recipe)."""
    return tuple(n for n in names if n in BUILT_IN)


def test_the_builtin_searchers_and_what_they_declare() -> None:
    assert _built_in(searcher_names()) == BUILT_IN
    assert searcher_names()[:len(BUILT_IN)] == BUILT_IN
    assert _built_in(searcher_names(needs_budget=True)) == ("optuna", "surrogate", "evolution")
    assert _built_in(searcher_names(takes_prior=True)) == ("grid", "surrogate", "evolution",
                                                           "oneshot")
    assert [n for n in _built_in(searcher_names())  # settings of its own, declared beside it
            if "objectives" in search_algorithm(n).settings.model_fields] == ["optuna"]
    assert _built_in(searcher_names(plans_every_trial=True)) == ("grid",)
    assert _built_in(searcher_names(supernet_stage=True)) == ("oneshot",)
    assert _built_in(searcher_names(resumable=False)) == ()
    assert search_algorithm("evolution").guided_candidates is False


@pytest.mark.parametrize("value", [3, True, None, ["grid"], "Grid"])
def test_an_unknown_algorithm_gets_the_literal_error_of_before(value: object) -> None:
    raw = {"name": "x", "space": {"type": "sandwich", "n": 2}, "data": {"name": "tinyshakespeare"},
           "search": {"algorithm": value}}
    with pytest.raises(ExperimentError) as err:
        parse_experiment(raw)
    quoted = [repr(n) for n in searcher_names()]  # the built-ins first, then any added
    assert quoted[:5] == ["'grid'", "'optuna'", "'surrogate'", "'evolution'", "'oneshot'"]
    assert f"search.algorithm: got {value!r}, expected one of {', '.join(quoted[:-1])} or " \
           f"{quoted[-1]}" in str(err.value)


def test_a_registered_searcher_is_an_allowed_algorithm_with_its_capabilities() -> None:
    raw = {"name": "x", "space": {"type": "sandwich", "n": 2}, "data": {"name": "tinyshakespeare"},
           "model": {"preset": "debug"}, "search": {"algorithm": "probe-searcher"}}
    with pytest.raises(ExperimentError, match="expected one of 'grid', 'optuna', 'surrogate', "
                                              "'evolution'"):  # then any other registered
        parse_experiment(raw)

    @register_searcher("probe-searcher")
    class Probe(SearchAlgorithm):
        needs_budget = False

        @classmethod
        def make(cls, plan: Any) -> Any:  # the contract: it builds a searcher
            return search_algorithm("grid").make(plan)

    try:
        assert parse_experiment(raw).search.algorithm == "probe-searcher"
        assert search_algorithm("probe-searcher") is Probe
        assert searcher_names().index("probe-searcher") >= 5  # unranked: after the built-ins
        assert "probe-searcher" not in searcher_names(needs_budget=True)
    finally:
        unregister_searcher("probe-searcher")
    with pytest.raises(ExperimentError):
        parse_experiment(raw)
