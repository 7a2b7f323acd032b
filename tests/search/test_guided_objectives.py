"""Multi-objective search and warm start over guided variants (``model.guidance`` as an axis).

A hard-guided model shares matrices, so it has fewer parameters than its order unguided:
the study must tell each variant's own ``params``, and an earlier guided run is a variant
of its own (never told, or marked taken, as the unguided one). Real plans, a real Optuna
study, real MLflow runs in a SQLite store.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mlflow.entities import Metric, Param, RunTag

from sublayer_search.models.guidance.config import GuidanceConfig
from sublayer_search.search.core.guidance_axis import cross
from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Variant, VariantCandidate, variant_key
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.plan.warm_start import warm_observations
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.search.searchers.registry import make_searcher
from sublayer_search.search.searchers.surrogate import SurrogateSearcher
from sublayer_search.search.tracking.runs import ensure_store
from sublayer_search.spaces.records import Role, Tag, TrialStatus, final
from sublayer_search.spaces.registry import expand

HARD = "hg-kq+ffn"
GUIDED = f"decoder+{HARD}"  # the LM task's identity of a hard-guided model
ORDERS = ["sfsf", "ssff", "sffs", "fssf", "fsfs", "sfsfsf", "ssfsff", "sssfff"]


def _plan(tmp_path: Path, **search: Any) -> SweepPlan:
    doc = {"name": "guided_mo", "space": {"type": "sandwich", "n": 3, "k": [1, 2]},
           "seeds": [0, 1], "baseline": {"enabled": False},
           "model": {"preset": "debug",
                     "guidance": [{"mode": "none"}, {"mode": "hard", "blocks": ["ffn", "key_query"]}]},
           "data": {"name": "tinyshakespeare"}, "train": {"steps": 4, "eval_every": 2},
           "search": {"algorithm": "optuna", "num_samples": 8,
                      "objectives": ["val_bpc", "params"], **search},
           "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
           "ray": {"storage_path": str(tmp_path / "ray")}}
    return plan_sweep(parse_experiment(doc))


def _params_of(plan: SweepPlan) -> dict[str, float]:
    """variant key → the exact parameter count of its model (the trial table's)."""
    return {variant_key(c.order, plan.task.identity(c.variant)):
            float(plan.row(Trial.of(c, 0))["params"]) for c in plan.candidates}


def test_each_guided_variant_is_told_its_own_parameter_count(tmp_path: Path) -> None:
    plan = _plan(tmp_path, replicates=2)  # several objectives: one seed each unless asked
    exact = _params_of(plan)
    assert exact["ssfsff"] > exact[f"ssfsff|{GUIDED}"]  # hard guidance shares matrices
    searcher = make_searcher(plan)
    inner = getattr(searcher, "inner", searcher)  # WithBaseline gives trials their specs
    assert isinstance(inner, OptunaTrials)
    seen: set[tuple[str, int]] = set()
    for i in range(8):  # 2 orders x 2 labels x 2 seeds: every variant and seed once
        got = searcher.suggest(f"t{i}")
        assert isinstance(got, dict), got
        trial = got["trial"].describe()
        key = variant_key(trial["order"], plan.task.identity(got["trial"].variant))
        assert (key, trial["seed"]) not in seen
        seen.add((key, trial["seed"]))
        searcher.on_trial_complete(f"t{i}", result={"val_bpc": 3.0 - i / 100})
    done = [t for t in inner.study.trials if t.state.name == "COMPLETE"]
    assert len(done) == 8
    assert inner.by_value is not None  # one sandwich space: the study's parameter is k
    for t in done:
        order = inner.by_value[t.params["k"]].order
        guidance = GuidanceConfig.from_label(t.params["guidance"])  # the study's choice
        ident = plan.task.identity(Variant(order=order, guidance=guidance))
        assert t.values[1] == exact[variant_key(order, ident)]
    assert {t.values[1] for t in done} == set(exact.values())  # both counts, not one of them


def test_a_guided_earlier_run_is_told_as_its_own_variant(tmp_path: Path) -> None:
    plan = _plan(tmp_path)
    exact = _params_of(plan)
    searcher = make_searcher(plan)
    inner = getattr(searcher, "inner", searcher)  # WithBaseline gives trials their specs
    assert isinstance(inner, OptunaTrials)
    inner.warm_start([Observation(order="ssfsff", seed=0, identity=GUIDED, guidance=HARD,
                                  value=2.5),
                      Observation(order="sssfff", seed=0, value=2.7)])
    told = {(t.params["guidance"], t.values[1]) for t in inner.study.trials}
    assert told == {(HARD, exact[f"ssfsff|{GUIDED}"]), ("none", exact["sssfff"])}
    assert inner.taken == {(f"ssfsff|{GUIDED}", 0), ("sssfff", 0)}  # unguided ssfsff is free


@pytest.mark.parametrize("algorithm", ["optuna", "surrogate"])
def test_warm_start_reads_the_guidance_of_earlier_runs(tmp_path: Path, algorithm: str) -> None:
    """Two earlier runs of one order and seed, unguided and hard-guided, are two
    observations (they used to collapse into one, told as unguided)."""
    plan = _plan(tmp_path, algorithm=algorithm, warm_start="earlier",
                 **({} if algorithm == "optuna" else {"objectives": None}))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = ensure_store(uri)
    exp_id = client.create_experiment("earlier")
    for label, value in [("none", 2.4), (HARD, 2.6)]:
        run = client.create_run(exp_id, tags={Tag.STATUS: TrialStatus.FINISHED.value,
                                              Tag.ROLE: Role.TRIAL.value})
        params = {"order": "ssfsff", "seed": "0", "config_hash": plan.config_hash,
                  "candidate": "sandwich3_1", "params": str(int(_params_of(plan)[
                      variant_key("ssfsff", "decoder" if label == "none" else GUIDED)]))}
        # as a trial run logs them: the label (display) and the setting (what reuse reads)
        setting = GuidanceConfig() if label == "none" else GuidanceConfig.from_label(label)
        params.update({k: str(v) for k, v in setting.flat().items()})
        if label != "none":
            params["guidance"] = label
        client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()],
                         metrics=[Metric(final("val_bpc"), value, 0, 0)],
                         tags=[RunTag("mlflow.runName", label)])
        client.set_terminated(run.info.run_id, "FINISHED")
    observations = warm_observations(client, plan, uri)
    assert sorted((o.order, o.seed, o.identity, o.guidance, o.value) for o in observations) == [
        ("ssfsff", 0, "decoder", "none", 2.4), ("ssfsff", 0, GUIDED, HARD, 2.6)]
    searcher = make_searcher(plan)
    inner = getattr(searcher, "inner", searcher)  # WithBaseline gives trials their specs
    inner.warm_start(observations)
    assert {("ssfsff", 0), (f"ssfsff|{GUIDED}", 0)} <= inner.taken


def test_the_surrogate_tells_a_guided_variant_from_its_order_unguided(tmp_path: Path) -> None:
    """Earlier runs say hard guidance is worth 0.5 on every order: the GP's first pick is
    a guided variant (without the label feature both variants of an order are one point)."""
    plan = _plan(tmp_path, algorithm="surrogate", objectives=None, num_samples=4)
    pool = [VariantCandidate.of(c) for c in expand("explicit", {"orders": ORDERS})]
    plan = replace(plan, candidates=cross(pool, [GuidanceConfig(), GuidanceConfig.from_label(HARD)]))
    searcher = make_searcher(plan)
    inner = getattr(searcher, "inner", searcher)  # WithBaseline gives trials their specs
    assert isinstance(inner, SurrogateSearcher)
    rows = {(c.order, c.variant.label): tuple(x) for c, x in zip(inner.candidates, inner.x,
                                                                     strict=True)}
    assert rows[("sfsf", "none")] != rows[("sfsf", HARD)]
    warm = [Observation(order=o, seed=0, identity="decoder" if label == "none" else GUIDED,
                        guidance=label, value=2.0 + 0.1 * i - (0.5 if label == HARD else 0.0))
            for i, o in enumerate(ORDERS[:4]) for label in ("none", HARD)]
    inner.warm_start(warm)
    assert len(inner.seen) == 8
    picks = []
    for i in range(2):
        got = searcher.suggest(f"t{i}")
        assert isinstance(got, dict)
        picks.append(got["trial"].guidance)
        searcher.on_trial_complete(f"t{i}", result={"val_bpc": 1.0})
    assert picks == [HARD, HARD]
