"""Adaptive search over IOT subsets: a subset is a model of its own, not its first order.

An IOT candidate is named after the first order of its subset, so the subsets {1, 2},
{1, 4} and {1, 6} of a decoder share it. Searchers used to key what one seed trains by
that order: Optuna gave a subset never trained a seed outside ``seeds`` (another subset
had "taken" seed 0), and the surrogate saw five points among fifteen subsets and stopped
after five trials. Real translation plans; no training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.variant import VariantCandidate, variant_key
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.searchers.registry import make_searcher
from sublayer_search.search.searchers.surrogate import SurrogateSearcher


def _plan(tmp_path: Path, algorithm: str, num_samples: int) -> SweepPlan:
    doc: dict[str, Any] = {
        "name": "iot_search", "task": "translation",
        "space": {"type": "iot_subsets", "stack": "decoder", "size": 2, "mode": "exhaustive",
                  "layers": 2},
        "seeds": [0], "baseline": {"seeds": 2},
        "model": {"preset": "debug", "d_model": 32, "n_heads": 2, "d_ff": 64},
        "data": {"name": "multi30k", "vocab_size": 500, "max_train_tokens": 30},
        "train": {"steps": 4, "eval_every": 2},
        "search": {"algorithm": algorithm, "num_samples": num_samples},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    return plan_sweep(parse_experiment(doc))


def _subset(cand: VariantCandidate) -> str | None:
    return cand.variant.subset.name if cand.variant.subset is not None else None


def _drive(searcher: Any, n: int, metric: str) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        got = searcher.suggest(f"t{i}")
        if not isinstance(got, dict):
            break
        out.append(got["trial"].describe())
        searcher.on_trial_complete(f"t{i}", result={metric: 10.0 + i})
    return out


@pytest.mark.parametrize("algorithm", ["optuna", "surrogate"])
def test_every_subset_trains_with_the_sweeps_seeds(tmp_path: Path, algorithm: str) -> None:
    plan = _plan(tmp_path, algorithm, num_samples=15)
    subsets = [c.variant.subset.name for c in plan.candidates if c.variant.subset is not None]
    assert len(subsets) == 15 and len({c.order for c in plan.candidates}) == 5
    trials = _drive(make_searcher(plan), 2 + 15, plan.metric)
    baseline, searched = trials[:2], trials[2:]
    assert [t["seed"] for t in baseline] == [0, 1] and baseline[0]["variant"]["subset"] is None
    seen: dict[str, int] = {}
    for t in searched:  # a subset's first trial has seed 0; only a replicate takes seed 1, 2 …
        subset = t["variant"]["subset"]["subset"]
        assert t["seed"] == seen.get(subset, 0), (subset, t["seed"], seen)
        seen[subset] = seen.get(subset, 0) + 1
    if algorithm == "surrogate":  # one seed: each of the 15 subsets once, then finished
        assert len(searched) == 15 and sorted(seen) == sorted(subsets)


def test_the_surrogate_sees_each_subset_as_its_own_point(tmp_path: Path) -> None:
    plan = _plan(tmp_path, "surrogate", num_samples=4)
    searcher = make_searcher(plan)
    inner = getattr(searcher, "inner", searcher)
    assert isinstance(inner, SurrogateSearcher)
    assert len(np.unique(np.round(inner.x, 9), axis=0)) == 15
    # an earlier run of the subset {2, 6} is placed at that subset, not at its first order
    cand = next(c for c in plan.candidates if _subset(c) == "26")
    other = next(c for c in plan.candidates if c.order == cand.order and _subset(c) != "26")
    inner.warm_start([Observation(order=cand.order, seed=0, identity="decoder:26", value=9.0)])
    at = inner.candidates.index(cand)
    assert inner.seen[-1][0] == list(inner.x[at])
    assert (variant_key(cand.order, "decoder:26"), 0) in inner.taken
    assert (variant_key(other.order, plan.task.identity(other.variant)), 0) not in inner.taken
