"""The shipped 40-order study (``replay40``) is what ``configs/replay40.yaml`` trains, and
the replay target's figures on it (docs/search.md) hold.

``configs/replay40.yaml`` is the programme: 40 permutations of 6 s + 6 f that are not in
``mini_press2020`` and 4 baseline seeds, FIFO, so every curve is whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from shipped_study import check_programme

from sublayer_search.analysis.store.study_export import BUILTIN_EXPORTS, builtin_export
from sublayer_search.search.plan.experiment import load_experiment, parse_experiment
from sublayer_search.search.recorded.from_export import sweep_from_export
from sublayer_search.search.replay.engine import SchedulerSettings, replay

REPO = Path(__file__).resolve().parents[2]
METRIC = "val_bpc"
# measured on the shipped export (sublayer replay --builtin replay40 --scheduler curve):
# 28 trials stopped, the top 3 kept
KEPT, REGRET, COMPUTE, CANDIDATES = 3, 0.0, 0.5767, 0.5344


@pytest.fixture(scope="module")
def shipped() -> Any:
    assert "replay40" in BUILTIN_EXPORTS
    return builtin_export("replay40")


def test_the_shipped_study_is_the_programme_in_configs(shipped: Any) -> None:
    config = load_experiment(REPO / "configs" / "replay40.yaml")
    assert parse_experiment(yaml.safe_load(shipped.meta["experiment_yaml"])).model_dump() \
        == config.model_dump()
    trials = check_programme(shipped, config, baselines=4, metric=METRIC)
    assert len(trials) == 44


def test_its_orders_are_not_those_of_mini_press2020(shipped: Any) -> None:
    mini = builtin_export("mini_press2020").trials
    ours = shipped.trials[~shipped.trials["baseline"].astype(bool)]
    assert ours["order"].nunique() == 40
    assert not set(ours["order"]) & set(mini["order"])


def test_the_default_early_stopping_keeps_its_top3_with_the_baselines_whole(shipped: Any) -> None:
    sweep = sweep_from_export(shipped)
    report = replay(sweep.curves, SchedulerSettings(
        name="curve", max_t=sweep.steps, grace_period=sweep.eval_every, metric=METRIC,
        mode="min"))
    assert all(t.survived and t.steps == sweep.steps for t in report.trials if t.baseline)
    assert len(report.kept) == KEPT and report.regret == pytest.approx(REGRET, abs=1e-4)
    # the figures docs/search.md states (benchmarks/replay_asha.py, recorded arrival)
    assert report.compute_fraction == pytest.approx(COMPUTE, abs=0.0005)
    assert report.candidate_compute_fraction == pytest.approx(CANDIDATES, abs=0.0005)
