"""Multi-objective search (``search.objectives``) and the Pareto front: the searcher on
synthetic results, the front on a frame, and a real tiny sweep followed by a warm-started
evolution over the same list of spaces and ``sublayer analyze``."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import optuna
import pandas as pd
import pytest
import yaml

from sublayer_search.analysis.store.frame import trials_frame
from sublayer_search.analysis.studies.pareto import pareto_front, plot_pareto
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.spaces.registry import expand

SPACES = [
    {"type": "sandwich", "n": 2, "k": [1]},
    {"type": "explicit", "orders": ["sff", "ssf", "ssff", "sfsfsf", "sssfff"]},
]


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_optuna_trials_tell_every_objective(sampler: str) -> None:
    cands = expand("explicit", {"orders": ["sf", "ssf", "sff", "ssff", "sfsf", "sssf"]})
    statics = {c.order: {"params": float(len(c.order))} for c in cands}
    searcher = OptunaTrials(
        cands,
        num_samples=6,
        seeds=[0],
        metric="val_bpc",
        objectives=["val_bpc", "params"],
        statics=statics,
        sampler=sampler,
    )
    assert [d.name for d in searcher.study.directions] == ["MINIMIZE", "MINIMIZE"]
    assert isinstance(searcher.study.sampler, {"tpe": optuna.samplers.TPESampler,
                                               "nsga2": optuna.samplers.NSGAIISampler}[sampler])
    for i in range(6):
        got = searcher.suggest(f"t{i}")
        assert isinstance(got, dict)
        order = got["trial"].order
        result = None if i == 2 else {"val_bpc": 3.0 - order.count("s") / len(order)}
        searcher.on_trial_complete(f"t{i}", result=result, error=result is None)
    done = [t for t in searcher.study.trials if t.state.name == "COMPLETE"]
    pruned = [t for t in searcher.study.trials if t.state.name == "PRUNED"]
    assert len(done) == 5 and len(searcher.study.trials) == 6 + len(pruned) == 6 + searcher.pruned
    for t in done:  # the second objective is the order's parameter count, from the statics
        cand = next(c for c in cands if c.name == t.params["candidate"])
        assert t.values[1] == len(cand.order)
    front = searcher.study.best_trials
    assert front and all(t in done for t in front)


def _mo_searcher(sampler: str, seed: int, **kwargs: Any) -> tuple[OptunaTrials, dict]:
    """Eight orders in three static groups (parameters 2, 3 and 4 units: 1 + 2 + 5 orders)."""
    cands = expand("explicit", {"orders": ["sf", "ssf", "sff", "ssff", "sfsf", "sssf", "sfff",
                                           "fssf"]})
    statics = {c.order: {"params": float(len(c.order))} for c in cands}
    searcher = OptunaTrials(cands, metric="val_bpc", objectives=["val_bpc", "params"],
                            statics=statics, sampler=sampler, seed=seed, **kwargs)
    return searcher, statics


def _drive(searcher: OptunaTrials, limit: int = 50) -> list[tuple[str, int]]:
    """Suggest until FINISHED, two trials in flight; each told a value from its order."""
    out: list[tuple[str, int]] = []
    live: list[str] = []
    for i in range(limit):
        got = searcher.suggest(f"t{i}")
        if not isinstance(got, dict):
            break
        trial = got["trial"]
        trial = trial if hasattr(trial, "order") else SimpleNamespace(**trial)
        out.append((trial.order, trial.seed))
        live.append(f"t{i}:{trial.order}")
        if len(live) == 2:
            tid, order = live.pop(0).split(":")
            searcher.on_trial_complete(tid, result={"val_bpc": 3.0 - order.count("s") / 10})
    return out


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
@pytest.mark.parametrize("seed", range(6))
def test_multi_objective_measures_new_points_and_no_replicates(sampler: str, seed: int) -> None:
    searcher, statics = _mo_searcher(sampler, seed, num_samples=20, seeds=[0, 1])
    assert searcher.replicates == 1
    out = _drive(searcher)
    orders = [o for o, _ in out]
    # no order twice (no replicate unless asked), so the space (8 orders) ends the search
    assert sorted(orders) == sorted(statics) and {s for _, s in out} == {0}
    assert searcher.suggest("after") == "FINISHED"
    # the first three samples are the three static points: none spent on a measured one
    assert {statics[o]["params"] for o in orders[:3]} == {2.0, 3.0, 4.0}


def test_a_warm_started_point_is_measured() -> None:
    from sublayer_search.search.core.observation import Observation

    searcher, statics = _mo_searcher("nsga2", 1, num_samples=20, seeds=[0])
    searcher.warm_start([Observation(order="ssf", seed=0, value=2.5)])  # params 3: measured
    out = [o for o, _ in _drive(searcher)]
    assert "ssf" not in out and len(out) == len(statics) - 1
    assert {statics[o]["params"] for o in out[:2]} == {2.0, 4.0}  # sff (3) waits its turn


@pytest.mark.parametrize("space", ["explicit", "sandwich"])
def test_enqueued_fallback_when_the_sampler_keeps_to_measured_points(
    space: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sublayer_search.search.searchers import optuna_study

    monkeypatch.setattr(optuna_study, "MAX_ASKS", 0)  # every suggestion is an enqueued one
    if space == "explicit":
        searcher, statics = _mo_searcher("nsga2", 2, num_samples=20, seeds=[0])
    else:  # the study's parameter is the integer k
        cands = expand("sandwich", {"n": 4, "ks": [0, 1, 2, 3]})
        statics = {c.order: {"params": float(min(c.params["k"], 2))} for c in cands}  # 3 groups
        searcher = OptunaTrials(cands, metric="val_bpc", objectives=["val_bpc", "params"],
                                statics=statics, sampler="nsga2", seed=2, num_samples=20,
                                seeds=[0])
        assert searcher.by_value is not None
    out = [o for o, _ in _drive(searcher)]
    assert sorted(out) == sorted(statics) and searcher.pruned == 0
    assert len({statics[o]["params"] for o in out[:3]}) == 3
    assert all(t.state.name == "COMPLETE" for t in searcher.study.trials[:-2])


def test_multi_objective_replicates_when_asked() -> None:
    searcher, statics = _mo_searcher("nsga2", 0, num_samples=40, seeds=[0, 1, 2], replicates=2)
    out = _drive(searcher)
    assert len(out) == 2 * len(statics) and len(set(out)) == len(out)
    assert all(sum(o == order for o, _ in out) == 2 for order in statics)
    assert {s for _, s in out} == {0, 1}


def test_single_objective_keeps_replicates_unless_capped() -> None:
    cands = expand("explicit", {"orders": ["sf", "ssf"]})
    free = OptunaTrials(cands, num_samples=6, seeds=[0], metric="val_bpc")
    assert free.replicates is None and len(_drive(free)) == 6  # 2 orders, 3 seeds each
    capped = OptunaTrials(cands, num_samples=6, seeds=[0], metric="val_bpc", replicates=1)
    assert sorted(o for o, _ in _drive(capped)) == ["sf", "ssf"]


def test_replicates_from_the_experiment_and_refused_below_one() -> None:
    from pydantic import ValidationError

    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.searchers.registry import make_searcher

    raw: dict[str, Any] = {
        "name": "mo", "space": SPACES, "seeds": [0], "baseline": {"enabled": False},
        "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"},
        "search": {"algorithm": "optuna", "num_samples": 4, "sampler": "nsga2",
                   "objectives": ["val_bpc", "params"], "replicates": 3},
    }
    searcher = make_searcher(plan_sweep(parse_experiment(raw)))
    searcher = getattr(searcher, "inner", searcher)  # WithBaseline may wrap it
    assert isinstance(searcher, OptunaTrials) and searcher.replicates == 3
    raw["search"]["replicates"] = 0
    with pytest.raises((ValidationError, ValueError), match="replicates"):
        parse_experiment(raw)
    raw["search"] = {"algorithm": "surrogate", "num_samples": 4, "replicates": 2}
    with pytest.raises(ValueError, match=r"search.replicates: got 2, expected no replicates "
                                         r"for search.algorithm surrogate"):
        plan_sweep(parse_experiment(raw))


def _frame() -> pd.DataFrame:
    rows = [
        ("a", "sf", 10, 3.0),
        ("b", "ssf", 12, 2.5),
        ("c", "sff", 14, 2.6),
        ("d", "ssff", 16, 2.0),
        ("e", "sfsf", 16, 2.2),
        ("f", "sssf", 20, 2.0),
    ]
    return trials_frame(
        [
            {
                "run_id": n,
                "name": n,
                "order": o,
                "family": "explicit",
                "space": "explicit",
                "params": p,
                "flops_per_token": 2 * p,
                "metric": "val_bpc",
                "final": v,
                "status": "finished",
                "baseline": False,
            }
            for n, o, p, v in rows
        ]
    )


def test_pareto_front_of_a_frame() -> None:
    info = pareto_front(_frame(), metric="val_bpc", cost="params")
    assert list(info.front["name"]) == ["a", "b", "d"]  # c, e, f are dominated
    assert info.points.set_index("name")["on_front"].to_dict() == {
        "a": True,
        "b": True,
        "c": False,
        "d": True,
        "e": False,
        "f": False,
    }
    bleu = _frame().assign(metric="val_bleu")  # higher is better: a, cheapest and best, wins
    assert list(pareto_front(bleu, metric="val_bleu", cost="flops_per_token").front["name"]) == [
        "a"
    ]
    fig = plot_pareto(info, title="t")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 3 and texts[0].startswith("a\nsf")


@pytest.mark.slow
def test_dry_run_names_every_objective_with_its_direction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sublayer_search.search.cli.main import main

    path = tmp_path / "mo.yaml"
    path.write_text(yaml.safe_dump({
        "name": "mo", "space": SPACES, "seeds": [0], "baseline": {"enabled": False},
        "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"},
        "search": {"algorithm": "optuna", "num_samples": 4, "sampler": "nsga2",
                   "objectives": ["val_bpc", "params"]},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert ("objectives val_bpc (min), params (min): a Pareto front (nsga2 sampler); "
            "nothing was run") in out, out
    assert not (tmp_path / "mlflow.db").exists()


def test_real_multi_objective_sweep_then_warm_evolution(tmp_path: Path) -> None:
    import ray
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.cli.main import main
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.steps import plan_sweep
    from sublayer_search.search.run.sweep import run_sweep

    def doc(name: str, search: dict[str, Any], baseline: dict[str, Any]) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            yaml.safe_dump(
                {
                    "name": name,
                    "space": SPACES,
                    "seeds": [0],
                    "baseline": baseline,
                    "model": {"preset": "debug", "dropout": 0.0},
                    "data": {"name": "tinyshakespeare"},
                    "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 2},
                    "search": search,
                    "resources": {"cpu": 1},
                    "max_concurrent": 2,
                    "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
                    "ray": {"storage_path": str(tmp_path / "ray")},
                }
            )
        )
        return path

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")

    def trials(outcome: Any) -> list[Any]:
        return client.search_runs(
            [outcome.experiment_id],
            filter_string=(f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'"),
        )

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        first = doc(
            "mo",
            {
                "algorithm": "optuna",
                "sampler": "nsga2",
                "num_samples": 4,
                "seed": 3,
                "objectives": ["val_bpc", "params"],
            },
            {"seeds": 1, "order": "sfsf"},
        )
        out1 = run_sweep(plan_sweep(load_experiment(first), str(first)))
        second = doc(
            "mo-warm",
            {
                "algorithm": "evolution",
                "num_samples": 2,
                "population": 2,
                "sample_size": 2,
                "warm_start": "mo",
            },
            {"enabled": False},
        )
        plan2 = plan_sweep(load_experiment(second), str(second))
        out2 = run_sweep(plan2)
    finally:
        ray.shutdown()
    runs1, runs2 = trials(out1), trials(out2)
    assert len(runs1) == 5 and all(r.data.tags["sublayer.status"] == "finished" for r in runs1)
    # several objectives: no order twice, and each of the 4 samples a new point: sff, ssf and
    # sssfff are the three costs the baseline sfsf has not measured, ssff (sfsf's cost) last
    samples = [r.data.params["order"] for r in runs1 if r.data.tags["sublayer.baseline"] != "true"]
    assert sorted(samples) == ["sff", "ssf", "ssff", "sssfff"]
    # warm start: the evolution sweep breeds from the first sweep's trials, never retrains them
    first_pairs = {(r.data.params["order"], r.data.params["seed"]) for r in runs1}
    assert len(runs2) == 2
    assert not first_pairs & {(r.data.params["order"], r.data.params["seed"]) for r in runs2}
    assert all(r.data.tags["sublayer.space"] == "evolution" for r in runs2)
    # the Pareto front of the first sweep: computed from its runs, drawn and named by analyze
    out = tmp_path / "report"
    assert (
        main(
            [
                "analyze",
                "--experiment",
                "mo",
                "--tracking-uri",
                f"sqlite:///{tmp_path}/mlflow.db",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    points = pd.read_csv(out / "tables" / "pareto_params.csv")
    assert (out / "figures" / "pareto_params.png").stat().st_size > 0
    finals = {r.info.run_name: r.data.metrics["final_val_bpc"] for r in runs1}
    params = {r.info.run_name: int(r.data.params["params"]) for r in runs1}
    expect = {
        o
        for o in finals
        if not any(
            params[p] <= params[o]
            and finals[p] <= finals[o]
            and (params[p] < params[o] or finals[p] < finals[o])
            for p in finals
        )
    }
    assert set(points.loc[points["on_front"], "name"]) == expect and expect
    html = (out / "report.html").read_text()
    assert "Pareto front: val_bpc against parameters" in html
    assert all(name in html for name in expect) and not math.isnan(min(finals.values()))
