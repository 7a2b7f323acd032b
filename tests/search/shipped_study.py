"""A check shared by the tests of the studies shipped as exports: the export is the
programme its config plans, every trial finished, and every curve was recorded whole."""

from __future__ import annotations

from typing import Any

import pandas as pd

from sublayer_search.search.plan.steps import plan_sweep


def check_programme(shipped: Any, config: Any, *, baselines: int, metric: str) -> pd.DataFrame:
    """Assert ``shipped`` (a study export) is what ``config`` plans, with ``baselines``
    baseline seeds, FIFO and whole ``metric`` curves; its trials, indexed by name."""
    plan = plan_sweep(config, check_resources=False)
    trials = shipped.trials.set_index("name")
    assert sorted(trials.index) == sorted(t.name for t in plan.trials)
    assert (trials["status"] == "finished").all() and int(trials["baseline"].sum()) == baselines
    for t in plan.trials:
        assert trials.loc[t.name, "order"] == t.order
    curves = shipped.history[shipped.history["key"] == metric]
    every, steps = config.train.eval_every, config.train.steps
    for run_id, curve in curves.groupby("run_id"):
        assert sorted(curve["step"]) == list(range(every, steps + 1, every)), run_id
    assert shipped.meta["scheduler"] == "fifo"
    return trials
