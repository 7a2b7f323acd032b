"""Issue 38, item 3: an order is checked once. Planning ``press2020_permutations`` as
``sublayer sweep --dry-run`` does (the trial table included) parses each distinct order
at most once; candidates, variants, model configs and the cost functions trust the
checked :class:`~spaces.order.Order` they are handed."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import sublayer_search.search.plan.sweep_plan  # noqa: F401  (planning's modules, imported)
import sublayer_search.search.tasks.lm  # noqa: F401
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.spaces import order as order_module

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "configs" / "press2020_permutations.yaml"


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Every call of ``parse_order``, by its text: the function is wrapped in
    ``spaces.order`` and in every module that imported it by name."""
    original = order_module.parse_order
    calls: Counter[str] = Counter()

    def counted(text: Any, *args: Any, **kwargs: Any) -> Any:
        calls[str(text)] += 1
        return original(text, *args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "parse_order", None) is original:
            monkeypatch.setattr(module, "parse_order", counted)
    return calls


def _space_orders() -> set[str]:
    exp = load_experiment(str(CONFIG))
    plan = plan_sweep(exp, str(CONFIG), check_resources=False, notes=[])
    return {t.order for t in plan.trials if not t.baseline}


def test_planning_the_permutations_parses_each_order_once(
        parses: Counter[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sweep", str(CONFIG), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("perm") >= 20, out  # the table was printed: 20 permutations
    counted = Counter(parses)
    parses.clear()
    orders = _space_orders()
    assert len(orders) == 20
    assert max(counted.values()) == 1, counted.most_common(3)
    # each proposed order was checked, once; the baseline and the model template's stand-in
    # are made by spaces.interleaved, checked by construction
    assert set(counted) == orders, counted
