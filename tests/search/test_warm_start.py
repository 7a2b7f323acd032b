"""Warm start: finished trials of earlier sweeps are told to the searcher before it suggests,
and never trained again (the oracle here; a real sweep in ``test_multi_objective.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from sublayer_search.search.core.observation import Observation
from sublayer_search.search.recorded.oracle import OrderTable, drive
from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.search.searchers.surrogate import (
    SurrogateSearcher,
    expected_improvement,
    gp_predict,
)
from sublayer_search.spaces.registry import expand

POOL = expand("permutations", {"n_s": 4, "n_f": 4, "count": 30, "seed": 1})


def _value(order: str) -> float:
    """Synthetic loss: attention late is bad."""
    return sum(i for i, ch in enumerate(order) if ch == "s") / 10


def _warm(orders: list[str], seed: int = 0) -> list[Observation]:
    return [
        Observation(order=o, seed=seed, value=_value(o), name=f"old{i}")
        for i, o in enumerate(orders)
    ]


def test_surrogate_starts_from_the_warm_results() -> None:
    warm = _warm([c.order for c in POOL[:6]])
    searcher = SurrogateSearcher(POOL, num_samples=5, seeds=[0], metric="val_bpc", seed=0)
    searcher.warm_start(warm)
    first = searcher.suggest("t0")
    assert isinstance(first, dict)
    # no random start: the first suggestion is the expected-improvement argmax of the warm model
    x = np.array([f for f, _ in searcher.seen])
    y = np.array([loss for _, loss in searcher.seen])
    mean, sd = gp_predict(x, y, searcher.x[6:])
    ei = expected_improvement(mean, sd, float(y.min()))
    assert first["trial"].order == POOL[6 + int(np.argmax(ei))].order
    table = OrderTable.from_rows([(c.order, _value(c.order)) for c in POOL], metric="val_bpc")
    rest = drive(searcher, table, budget=10)
    assert not {o.order for o in warm} & {first["trial"].order, *rest}  # never retrained


def test_optuna_study_holds_the_warm_trials_and_replicates_take_new_seeds() -> None:
    searcher = OptunaTrials(POOL[:4], num_samples=8, seeds=[0, 1], metric="val_bpc", seed=0)
    outside = Observation(order="ffffssss", seed=0, value=0.1)  # not a candidate: skipped
    searcher.warm_start([*_warm([c.order for c in POOL[:3]]), outside])
    trials = searcher.study.trials
    assert len(trials) == 3 and all(t.state.name == "COMPLETE" for t in trials)
    assert sorted(t.params["candidate"] for t in trials) == sorted(c.name for c in POOL[:3])
    table = OrderTable.from_rows([(c.order, _value(c.order)) for c in POOL], metric="val_bpc")
    searcher.set_search_properties("val_bpc", "min", {})
    pairs = []
    for i in range(8):
        got = searcher.suggest(f"t{i}")
        assert isinstance(got, dict)
        pairs.append((got["trial"].order, got["trial"].seed))
        searcher.on_trial_complete(f"t{i}", result={"val_bpc": table.values[pairs[-1][0]]})
    assert not {(c.order, 0) for c in POOL[:3]} & set(pairs)  # warm (order, seed 0) never again
    assert len(set(pairs)) == len(pairs)


def test_evolution_breeds_from_the_best_warm_results() -> None:
    warm = _warm([c.order for c in POOL[:10]])
    searcher = EvolutionSearcher(
        POOL, num_samples=6, population=4, sample_size=4, seed=0, metric="val_bpc"
    )
    searcher.warm_start(warm)
    best4 = sorted(warm, key=lambda o: o.value)[:4]
    assert {p[0] for p in searcher.population} == {o.order for o in best4}
    first = searcher.suggest("t0")
    assert isinstance(first, dict) and first["trial"].space == "evolution"
    assert first["trial"].params["parent"] == best4[0].name  # the tournament of all four
    assert first["trial"].order not in {o.order for o in warm}


def test_unknown_warm_start_experiment_exits_2_before_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray

    from sublayer_search.search.cli.main import main

    doc = {
        "name": "warm",
        "space": {"type": "sandwich", "n": 2},
        "model": {"preset": "debug"},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": 10},
        "search": {"algorithm": "surrogate", "num_samples": 2, "warm_start": ["nope"]},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    path = tmp_path / "warm.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    assert (
        "search.warm_start: got 'nope', expected the name of an MLflow experiment in "
        f"sqlite:///{tmp_path}/mlflow.db"
        in err
        and "Traceback" not in err
    )
    assert not ray.is_initialized() and not (tmp_path / "ray").exists()
    assert not (tmp_path / "mlflow.db").exists()  # bad input creates nothing
