"""Order-aware search (GP over order features), the tabular oracle, and evolution beyond
one LM space: on the paper's recorded tables, on a feature-driven table, on a translation
plan and in a real tiny Multi30k sweep."""

from __future__ import annotations

import random
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from sublayer_search.analysis.papers import press_paper as paper
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.recorded.oracle import OrderTable, drive, evaluations_to_top
from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher
from sublayer_search.search.searchers.grid_searcher import GridSearcher
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.search.searchers.registry import make_searcher
from sublayer_search.search.searchers.surrogate import (
    SurrogateSearcher,
    expected_improvement,
    gp_predict,
)
from sublayer_search.spaces.cost import f_units_for, units
from sublayer_search.spaces.features import order_features
from sublayer_search.spaces.registry import expand


def test_gp_fits_a_smooth_function_and_is_unsure_far_away() -> None:
    x = np.linspace(-2, 2, 9)[:, None]
    y = np.sin(x[:, 0])
    mean, sd = gp_predict(x, y, np.array([[0.25], [1.25], [8.0]]))
    assert mean[0] == pytest.approx(np.sin(0.25), abs=0.05)
    assert mean[1] == pytest.approx(np.sin(1.25), abs=0.05)
    assert sd[2] > 5 * max(sd[0], sd[1])


def test_expected_improvement_prefers_low_means_and_high_uncertainty() -> None:
    ei = expected_improvement(np.array([0.0, 1.0, 1.0, 2.0]), np.array([0.1, 0.1, 1.0, 0.0]), 1.0)
    assert ei[0] > ei[2] > ei[1] > 0 and ei[3] == pytest.approx(0.0, abs=1e-9)


def _paper_table() -> OrderTable:
    sandwich = paper.sandwich_points()
    rows = [(r.order, float(r.final)) for r in paper.pooled_trials().itertuples()]
    rows += [(r.order, float(r.final)) for r in sandwich[~sandwich["baseline"]].itertuples()]
    return OrderTable.from_rows(rows, metric="val_ppl")


def test_paper_table_as_an_oracle() -> None:
    table = _paper_table()
    # 40 random models, the baseline (5 seeds averaged), 2 sandwiches
    assert len(table.values) == 43
    assert table.values["sf" * 16] == pytest.approx(sum(paper.baseline_dev()) / 5)
    assert min(table.values.values()) == 17.84 and len(table.top(5)) == 5
    cands = table.candidates()
    factories = {
        "random": lambda s: GridSearcher(
            [Trial.of(c, 0) for c in random.Random(s).sample(cands, len(cands))], metric="val_ppl"
        ),
        "tpe": lambda s: OptunaTrials(cands, num_samples=200, seeds=[0], metric="val_ppl", seed=s),
        "surrogate": lambda s: SurrogateSearcher(
            cands, num_samples=200, seeds=[0], metric="val_ppl", seed=s
        ),
        "evolution": lambda s: EvolutionSearcher(
            cands, num_samples=200, seed=s, metric="val_ppl", domain=list(table.values)
        ),
    }
    for name, make in factories.items():
        for seed in range(2):
            orders = drive(make(seed), table, budget=86)
            assert set(orders) <= set(table.values), name
            assert evaluations_to_top(orders, table.top(5)) is not None, name
            if name != "tpe":  # TPE's replicates are the same order with another seed
                assert len(orders) == len(set(orders)) == 43, name


def test_surrogate_finds_the_top_of_a_feature_driven_table_faster_than_random() -> None:
    """A table whose value follows the features (attention low is good): averaged over 8
    seeds the surrogate needs far fewer evaluations than random order (~34 expected)."""
    pool = expand("permutations", {"n_s": 8, "n_f": 8, "count": 200, "seed": 5})
    noise = random.Random(0)
    table = OrderTable.from_rows(
        [
            (
                c.order,
                2 * order_features(c.order).values["s_q4"]
                + order_features(c.order).values["s_q3"]
                + noise.gauss(0, 0.05),
            )
            for c in pool
        ],
        metric="val_bpc",
    )
    top = table.top(5)
    found: dict[str, list[int]] = {"surrogate": [], "random": []}
    for seed in range(8):
        cands = table.candidates()
        surrogate = SurrogateSearcher(
            cands, num_samples=200, seeds=[0], metric="val_bpc", seed=seed
        )
        grid = GridSearcher(
            [Trial.of(c, 0) for c in random.Random(seed).sample(cands, 200)], metric="val_bpc"
        )
        for name, searcher in (("surrogate", surrogate), ("random", grid)):
            hit = evaluations_to_top(drive(searcher, table, budget=200, until=top), top)
            assert hit is not None
            found[name].append(hit)
    assert statistics.mean(found["surrogate"]) < 0.5 * statistics.mean(found["random"]), found


def test_order_table_from_a_sweep_csv(tmp_path: Path) -> None:
    path = tmp_path / "trials.csv"
    path.write_text(
        "name,order,status,final\n"
        "a@seed0,ssff,finished,2.0\na@seed1,s^2f^2,finished,3.0\n"
        "b@seed0,sfsf,failed,\nc@seed0,ffss,stopped,1.0\nd@seed0,fssf,finished,2.5\n"
    )
    table = OrderTable.from_csv(path)
    assert table.values == {"ssff": 2.5, "fssf": 2.5}  # seeds averaged; failed/stopped left out
    assert table.top(1) == {"ssff", "fssf"}  # ties with the k-th count
    with pytest.raises(ValueError, match="no column final"):
        OrderTable.from_csv(_without(path, tmp_path))
    with pytest.raises(ValueError, match="mode"):
        OrderTable(values={"sf": 1.0}, mode="up")  # type: ignore[arg-type]


def _without(path: Path, tmp_path: Path) -> Path:
    """The CSV without its last column."""
    lines = path.read_text().splitlines()
    out = tmp_path / "cut.csv"
    out.write_text("\n".join(line.rsplit(",", 1)[0] for line in lines) + "\n")
    return out


# -- evolution for translation and several spaces ----------------------------------------
TRANSLATION_SPACES = [
    {"type": "sandwich", "n": 2, "k": [1], "side": "decoder"},
    {"type": "explicit", "side": "encoder", "orders": ["ssff", "sffs"]},
]


def _translation_doc(tmp: Path, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "task": "translation",
        "space": TRANSLATION_SPACES,
        "seeds": [0],
        "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {
            "name": "multi30k",
            "vocab_size": 400,
            "max_train_pairs": 3000,
            "max_train_tokens": 30,
        },
        "train": {"steps": 20, "batch_size": 16, "eval_every": 10, "eval_batches": 2},
        "translation": {"beam": 1, "max_len": 20, "eval_sentences": 16},
        "search": {
            "algorithm": "evolution",
            "num_samples": 4,
            "population": 2,
            "sample_size": 2,
            "seed": 1,
        },
        "resources": {"cpu": 1},
        "max_concurrent": 2,
        "tracking": {"uri": f"sqlite:///{tmp}/mlflow.db"},
        "ray": {"storage_path": str(tmp / "ray")},
        **extra,
    }


def _check_children(trials: list[dict[str, Any]], plan: Any) -> None:
    f_units = f_units_for(plan.model.d_model, plan.model.d_ff)
    by_name = {c.name: c for c in plan.candidates}
    by_name.update({t["candidate"]: t for t in trials})  # type: ignore[misc]
    children = [t for t in trials if t["space"] == "evolution"]
    assert children, "evolution never mutated"
    for child in children:
        parent = by_name[child["params"]["parent"]]
        p_order = parent.order if hasattr(parent, "order") else parent["order"]
        p_side = parent.variant.side if hasattr(parent, "variant") else parent["variant"]["side"]
        assert child["variant"]["side"] == p_side
        assert units(child["order"], f_units=f_units) == units(p_order, f_units=f_units)
        assert ("c" in child["order"]) == (child["variant"]["side"] == "decoder")


def test_evolution_over_translation_spaces_keeps_side_and_budget(tmp_path: Path) -> None:
    plan = plan_sweep(
        parse_experiment(
            _translation_doc(
                tmp_path,
                "evo-mt",
                search={
                    "algorithm": "evolution",
                    "num_samples": 12,
                    "population": 3,
                    "sample_size": 2,
                },
                model={"preset": "debug", "src_vocab_size": 300, "tgt_vocab_size": 300},
            )
        )
    )
    searcher = make_searcher(plan)
    searcher.set_search_properties("val_bleu", "max", {})
    trials = []
    for i in range(12):
        got = searcher.suggest(f"t{i}")
        if not isinstance(got, dict):
            break
        trial = got["trial"].describe()
        trials.append(trial)
        # synthetic, no training: decoders ahead (the 6 encoder orders would run out first)
        bleu = ("c" in trial["order"]) * 5.0 + trial["order"].find("f") / len(trial["order"])
        searcher.on_trial_complete(f"t{i}", result={"val_bleu": bleu})
    assert len({(t["order"], t["variant"]["side"]) for t in trials}) == len(trials) >= 8
    _check_children(trials, plan)


@pytest.mark.slow
def test_real_evolution_sweep_on_multi30k(tmp_path: Path) -> None:
    import ray

    from sublayer_search.search.run.sweep import run_sweep

    path = tmp_path / "evo-mt.yaml"
    path.write_text(yaml.safe_dump(_translation_doc(tmp_path, "evo-mt")))
    from sublayer_search.search.plan.experiment import load_experiment

    plan = plan_sweep(load_experiment(path), str(path))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        outcome = run_sweep(plan)
    finally:
        ray.shutdown()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs(
        [outcome.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'",
    )
    assert len(runs) == 4 and all(r.data.tags["sublayer.status"] == "finished" for r in runs)
    assert all("final_val_bleu" in r.data.metrics for r in runs)
    assert any(r.data.tags["sublayer.space"] == "evolution" for r in runs)
    f_units = f_units_for(plan.model.d_model, plan.model.d_ff)
    budgets = {("c" in c.order, units(c.order, f_units=f_units)) for c in plan.candidates}
    for r in runs:  # each order trained on its own side of the model, at a budget of that side
        order = r.data.params["order"]
        side = "decoder" if "c" in order else "encoder"
        assert r.data.params[f"{side}_order"] == order
        assert ("c" in order, units(order, f_units=f_units)) in budgets
