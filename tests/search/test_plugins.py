"""Strategies from outside the package: a plugin module named by the experiment
(``plugins:``) or an installed distribution's entry points registers a space, a searcher
and a stopping rule; what is registered is listed with where it came from; a plugin that
cannot be used gets exit 2 naming it, and nothing is written.

The plugin is docs/plugin/blocks_plugin.py (the "Writing a plugin" page's), copied into a
temporary folder; "installed" is a ``*.dist-info`` folder beside it on ``PYTHONPATH``
(what ``pip install`` leaves; importlib.metadata reads it), so the test environment is
never changed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, run_cli, subprocess_env

from sublayer_search.search.core.plugins import PluginError, claim

SUBLAYER = str(Path(__import__("sys").executable).with_name("sublayer"))
PLUGIN = REPO / "docs" / "plugin" / "blocks_plugin.py"


def _experiment(folder: Path, **overrides: Any) -> Path:
    doc: dict[str, Any] = {
        "name": "plugged", "plugins": ["blocks_plugin"], "space": {"type": "blocks", "n": 2},
        "seeds": [0], "baseline": {"seeds": 1}, "model": {"preset": "debug"},
        "data": {"name": "tinyshakespeare"}, "train": {"steps": 4, "eval_every": 2},
        "search": {"algorithm": "reverse"}, "scheduler": {"type": "patience"},
        "tracking": {"uri": f"sqlite:///{folder}/mlflow.db"},
        "ray": {"storage_path": str(folder / "ray")}, **overrides}
    path = folder / "experiment.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(PLUGIN, code / PLUGIN.name)
    env = subprocess_env(tmp_path / "home")
    env["PYTHONPATH"] = f"{code}:{env['PYTHONPATH']}"
    return env


def _cli(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SUBLAYER, *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def _install(code: Path, entry_points: str, name: str = "blocks-plugin") -> None:
    info = code / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_a_named_plugin_plans_with_its_three_strategies(plugin_env, tmp_path):
    done = _cli(["sweep", str(_experiment(tmp_path)), "--dry-run"], plugin_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "blocks2_0@seed0" in done.stdout and "ssff" in done.stdout and "ffss" in done.stdout
    assert "scheduler: patience (every trial trains all its steps)" in done.stdout
    assert not (tmp_path / "mlflow.db").exists()


def test_installed_plugins_are_listed_with_where_they_came_from(plugin_env, tmp_path):
    code = Path(plugin_env["PYTHONPATH"].split(":")[0])
    _install(code, "[sublayer_search.spaces]\nblocks = blocks_plugin\n\n"
                   "[sublayer_search.searchers]\nreverse = blocks_plugin\n")
    listed = _cli(["spaces"], plugin_env, tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = {tuple(line.split()[:2]): line for line in listed.stdout.splitlines()[1:]}
    assert "plugin blocks-plugin 0.1 (entry point sublayer_search.spaces:blocks)" in \
        rows[("space", "blocks")]
    assert "plugin blocks-plugin 0.1" in rows[("searcher", "reverse")]
    assert rows[("space", "sandwich")].endswith("built in")
    helped = _cli(["sweep", "--help"], plugin_env, tmp_path)
    assert "reverse" in helped.stdout and "plugin blocks-plugin 0.1" in helped.stdout
    # installed, the experiment needs no plugins line
    path = _experiment(tmp_path, plugins=[])
    assert _cli(["sweep", str(path), "--dry-run"], plugin_env, tmp_path).returncode == 0


BROKEN_SEARCHER = '''
from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher

@register_searcher("lazy")
class Lazy(SearchAlgorithm):
    """Builds nothing."""
'''
TAKEN = '''
from sublayer_search.spaces.registry import SPACES, register_space
from dataclasses import replace

register_space(replace(SPACES["sandwich"], summary="another sandwich"))
'''


@pytest.mark.parametrize(("module", "text", "expected"), [
    ("missing_module", None, "(ModuleNotFoundError: No module named 'missing_module')"),
    ("nothing_here", "VALUE = 1\n", "it registered none"),
    ("lazy_searcher", BROKEN_SEARCHER, "a make(plan) that builds its Ray Tune searcher"),
    ("second_sandwich", TAKEN, "a name no other space has ('sandwich' is taken"),
])
def test_a_plugin_that_cannot_be_used_exits_2_naming_it(plugin_env, tmp_path, module, text,
                                                        expected):
    code = Path(plugin_env["PYTHONPATH"].split(":")[0])
    if text is not None:
        (code / f"{module}.py").write_text(text)
    path = _experiment(tmp_path, plugins=["blocks_plugin", module])
    done = _cli(["sweep", str(path)], plugin_env, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"plugins[1]: got '{module}', expected" in done.stderr and expected in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray").exists()


def test_a_broken_installed_plugin_is_named_by_its_entry_point(plugin_env, tmp_path):
    code = Path(plugin_env["PYTHONPATH"].split(":")[0])
    _install(code, "[sublayer_search.schedulers]\nslow = not_there.rules\n", name="slow-rules")
    done = _cli(["spaces"], plugin_env, tmp_path)
    assert done.returncode == 2
    assert ("entry point sublayer_search.schedulers:slow: got 'not_there.rules', expected a "
            "module of slow-rules 0.1 that registers a stopping rule") in done.stderr
    assert "Traceback" not in done.stderr


def test_a_taken_name_is_refused_naming_who_holds_it():
    from sublayer_search.search.searchers.registry import search_algorithm, searcher_names

    taken = {name: search_algorithm(name) for name in searcher_names()}
    with pytest.raises(PluginError) as err:
        claim("searcher", "grid", PluginError, taken, [])
    assert "a name no other searcher has ('grid' is Grid, built in)" in str(err.value)


@pytest.fixture
def loaded_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The plugin imported into this process (its strategies unregistered afterwards)."""
    import sys

    from sublayer_search.search.searchers.registry import unregister_searcher
    from sublayer_search.search.stopping.registry import unregister_rule
    from sublayer_search.spaces.registry import unregister_space

    shutil.copy(PLUGIN, tmp_path / PLUGIN.name)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(REPO / "tests" / "spaces"))  # the space contract
    yield
    unregister_space("blocks")
    unregister_searcher("reverse")
    unregister_rule("patience")
    sys.modules.pop("blocks_plugin", None)


def test_a_plugins_searcher_and_space_keep_the_shared_contracts(loaded_plugin, tmp_path):
    from space_contract import check_space
    from test_searchers import Case, check_contract

    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.searchers.registry import make_searcher

    exp = parse_experiment(yaml.safe_load(_experiment(tmp_path, space=[
        {"type": "blocks", "n": 2}, {"type": "sandwich", "n": 2, "k": [1]}]).read_text()))
    check_space("blocks", {"n": 3})
    plan = plan_sweep(exp, check_resources=False)
    check_contract(Case("plugin-reverse", lambda: make_searcher(plan),
                        budget=len(plan.trials), baseline_first=1))


@pytest.mark.slow
def test_a_plugins_strategies_run_a_real_sweep_then_analyze(plugin_env, tmp_path):
    """The space, searcher and stopping rule of a plugin on Ray Tune into MLflow."""
    path = _experiment(tmp_path)
    done = run_cli(["sweep", str(path)], env=plugin_env, log=tmp_path / "sweep.log",
                   timeout=600)
    assert done.returncode == 0, done.stdout
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("plugged")
    runs = client.search_runs([exp.experiment_id])
    orders = sorted(r.data.params.get("order", "") for r in runs if "order" in r.data.params)
    assert orders == ["ffss", "sfsf", "ssff"]
    assert all(r.info.status == "FINISHED" for r in runs)
    out = tmp_path / "report"
    analyzed = run_cli(["analyze", "--experiment", "plugged", "--tracking-uri",
                        f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)],
                       env=plugin_env, log=tmp_path / "analyze.log", timeout=600)
    assert analyzed.returncode == 0, analyzed.stdout
    assert any(out.iterdir())
