"""Each strategy owns its checks: no space, task, searcher or stopping-rule name is compared
(``==``, ``in``, a key, a ``match`` case) in ``search/``, ``analysis/`` or ``models/``
outside the module that declares it and its registry. Code elsewhere asks the declaration
(a space's size or columns, a task's refusals, a searcher's capabilities, a rule's checks)
instead, so a new strategy touches its own module only."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from sublayer_search.search.searchers.registry import search_algorithm, searcher_names
from sublayer_search.search.stopping.registry import rule_names, stopping_rule
from sublayer_search.search.tasks import task_class, task_names
from sublayer_search.spaces.registry import ALL_SPACES

REPO = Path(__file__).resolve().parents[1]
SCANNED = ("search", "analysis", "models")

ELSEWHERE: dict[str, tuple[set[str], str]] = {
    "search/replay/settings.py": ({"curve"}, "sublayer replay's own catalogue of Ray "
                                  "Tune schedulers (--scheduler: asha-all, hyperband, median "
                                  "beside the sweep's asha and curve)"),
    "search/replay/engine.py": ({"asha", "curve"}, "builds the replay catalogue's schedulers"),
    "search/cli/replay.py": ({"curve"}, "the replay command's --rule applies to its curve"),
    "search/oneshot/writes.py": ({"curve"}, "the write journal's op for the supernet's "
                                 "learning curve: a word, not a stopping rule"),
    "analysis/store/iot_frame.py": ({"translation"}, "the recorded task param of a run: "
                                    "analysis imports no search code"),
}
"""Files that use a strategy's name for something else, with the reason."""


def _owners() -> dict[str, set[str]]:
    """Each name -> the files that may compare it: its declaring module and its registry."""
    rel = lambda obj: str(Path(inspect.getsourcefile(obj)).resolve().relative_to(REPO))  # noqa: E731
    owners: dict[str, set[str]] = {}
    for name in ALL_SPACES:
        owners.setdefault(name, set()).add("spaces/registry.py")
    for name in task_names():
        owners.setdefault(name, set()).update({rel(task_class(name)), "search/tasks/registry.py"})
    for name in searcher_names():
        owners.setdefault(name, set()).update({rel(search_algorithm(name)),
                                               "search/searchers/registry.py"})
    for name in rule_names():
        owners.setdefault(name, set()).update({rel(stopping_rule(name)),
                                               "search/stopping/registry.py"})
    return owners


def _compared(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, string) of every string constant compared, used as a key or matched."""
    found = []
    for node in ast.walk(tree):
        consts: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            consts = [node.left, *node.comparators]
        elif isinstance(node, ast.Subscript) and not (
                isinstance(node.value, ast.Name) and node.value.id == "Literal"):
            consts = [node.slice]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "get" and node.args:
            consts = [node.args[0]]
        elif isinstance(node, ast.match_case):
            consts = [node.pattern]
        for part in consts:
            for leaf in ast.walk(part):
                if isinstance(leaf, ast.Constant) and isinstance(leaf.value, str):
                    found.append((getattr(node, "lineno", getattr(part, "lineno", 0)), leaf.value))
    return found


def test_no_strategy_name_is_compared_outside_its_own_module() -> None:
    owners = _owners()
    offenders = []
    for package in SCANNED:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            allowed = ELSEWHERE.get(rel, (set(), ""))[0]
            for line, value in _compared(ast.parse(path.read_text())):
                if value in owners and rel not in owners[value] and value not in allowed:
                    offenders.append(f"{rel}:{line} compares {value!r}")
    assert not offenders, "ask the strategy's declaration instead:\n" + "\n".join(offenders)


def test_the_scan_sees_comparisons_keys_gets_and_matches() -> None:
    code = ("if x == 'sandwich' or y in ('lm', 'z'): pass\nd['curve']\nd.get('grid')\n"
            "match t:\n    case 'asha': pass\nT = Literal['fifo']\n")
    assert sorted(v for _, v in _compared(ast.parse(code))) == [
        "asha", "curve", "grid", "lm", "sandwich", "z"]


def test_every_exception_is_still_needed() -> None:
    """An allowance no file uses any more goes, so it cannot hide a new comparison."""
    for rel, (names, _) in ELSEWHERE.items():
        used = {v for _, v in _compared(ast.parse((REPO / rel).read_text()))}
        assert names <= used, f"{rel} no longer compares {sorted(names - used)}"
