"""One contract every registered searcher must pass, driven in-process (no Ray cluster, no
training; the driver: ``searcher_contract.py``).

``CASES`` holds one or more cases per registered searcher (``search.algorithm``): each
factory builds a searcher from a real sweep plan (``plan_sweep`` on an in-memory
experiment) or from space candidates. The parametrisation comes from the registry: a
registered searcher without a case is a failing test.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import deque
from pathlib import Path
from typing import Any

import pytest
import ray
from searcher_contract import FINISHED, METRIC, Case, Driver, objective

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.oneshot.stages import stage_two
from sublayer_search.search.plan.experiment import parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.searchers.base import Stateful
from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher
from sublayer_search.search.searchers.grid_searcher import GridSearcher
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.search.searchers.registry import (
    SearchAlgorithm,
    make_searcher,
    register_searcher,
    search_algorithm,
    searcher_names,
    unregister_searcher,
)
from sublayer_search.search.searchers.surrogate import SurrogateSearcher
from sublayer_search.search.searchers.with_baseline import WithBaseline
from sublayer_search.spaces.cost import units
from sublayer_search.spaces.order import interleaved, parse_order, sandwich_order
from sublayer_search.spaces.registry import expand


def _plan(space: Any, *, algorithm: str = "grid", num_samples: int | None = None,
          seeds: Any = 1, baseline: Any = None, **search: Any) -> SweepPlan:
    raw: dict[str, Any] = {
        "name": "contract", "space": space, "seeds": seeds,
        "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"},
        "search": {"algorithm": algorithm, **search},
    }
    if num_samples is not None:
        raw["search"]["num_samples"] = num_samples
    if baseline is not None:
        raw["baseline"] = baseline
    return plan_sweep(parse_experiment(raw))


SANDWICH = {"type": "sandwich", "n": 4, "k": [0, 1, 2, 3]}
PERMS = {"type": "permutations", "n_s": 4, "n_f": 4, "count": 12, "seed": 3}


def _grid_plan() -> SweepPlan:
    return _plan([SANDWICH, {"type": "explicit", "orders": ["ssffsfsf", "sfsfssff"]}],
                 seeds=2, baseline={"seeds": 3})


def _evolution_direct() -> EvolutionSearcher:
    cands = expand("permutations", {"n_s": 4, "n_f": 4, "count": 12, "seed": 3})
    return EvolutionSearcher(cands, num_samples=20, population=4, sample_size=2, seed=5,
                             trial_seed=1, metric=METRIC, mode="min")


def _optuna_direct() -> OptunaTrials:
    cands = expand("permutations", {"n_s": 3, "n_f": 3, "count": 5, "seed": 0})
    return OptunaTrials(cands, num_samples=9, seeds=[0, 1], metric=METRIC, seed=7)


def _oneshot_stage_two() -> SweepPlan:
    """A one-shot plan after stage 1: a synthetic supernet ranking (the objective below)."""
    plan = _plan(PERMS, algorithm="oneshot", top_k=3, seeds=[0, 1], baseline={"seeds": 2})
    orders = sorted({c.order for c in plan.candidates}, key=objective)
    ranking = [{"order": o, "mean": objective(o), "sem": 0.01, "n_batches": 4, "rank": i + 1}
               for i, o in enumerate(orders)]
    return stage_two(plan, ranking)


CASES: dict[str, list[Case]] = {  # by registered searcher: every one needs a case
    "grid": [
        Case("grid", lambda: make_searcher(_grid_plan()), budget=len(_grid_plan().trials)),
        Case("grid-direct", lambda: GridSearcher(_grid_plan().trials, metric=METRIC),
             budget=len(_grid_plan().trials)),
        Case("baseline+grid", lambda: WithBaseline(
            GridSearcher([t for t in _grid_plan().trials if not t.baseline], metric=METRIC),
            [t for t in _grid_plan().trials if t.baseline]),
            budget=len(_grid_plan().trials), baseline_first=3),
    ],
    "optuna": [
        Case("optuna-direct", _optuna_direct, budget=9),
        Case("optuna-plan", lambda: make_searcher(
            _plan({**SANDWICH, "k": [1, 2, 3]}, algorithm="optuna", num_samples=8, seeds=[0, 1],
                  seed=2)),
            budget=3 + 8, baseline_first=3),
        Case("optuna-nsga2-objectives", lambda: make_searcher(  # one seed per order: runs out
            _plan([SANDWICH, {"type": "explicit", "orders": ["ssf", "sff", "sssff"]}],
                  algorithm="optuna", num_samples=8, seed=4, sampler="nsga2",
                  objectives=[METRIC, "flops_per_token"],
                  baseline={"seeds": 2, "order": "sfsfsfsf"})),
            budget=2 + 8, exhaustible=True, baseline_first=2),
    ],
    "surrogate": [
        Case("surrogate-direct", lambda: SurrogateSearcher(
            expand("permutations", {"n_s": 4, "n_f": 4, "count": 12, "seed": 3}),
            num_samples=10, seeds=[0], metric=METRIC, seed=4), budget=10),
        Case("surrogate-plan", lambda: make_searcher(
            _plan([SANDWICH, PERMS], algorithm="surrogate", num_samples=9, seeds=[0, 1], seed=3,
                  baseline={"seeds": 2})),
            budget=2 + 9, baseline_first=2),
        Case("surrogate-prior-plan", lambda: make_searcher(
            _plan([SANDWICH, PERMS], algorithm="surrogate", num_samples=9, seeds=[0, 1], seed=3,
                  baseline={"seeds": 2}, prior=["press2020", "mini_press2020"])),
            budget=2 + 9, baseline_first=2),
    ],
    "evolution": [
        Case("evolution-direct", _evolution_direct, budget=20, exhaustible=True),
        Case("evolution-two-spaces", lambda: make_searcher(
            _plan([SANDWICH, PERMS], algorithm="evolution", num_samples=14, population=3,
                  sample_size=2, seed=2, baseline={"seeds": 1})),
            budget=1 + 14, exhaustible=True, baseline_first=1),
        Case("evolution-plan", lambda: make_searcher(
            _plan(PERMS, algorithm="evolution", num_samples=15, population=4, sample_size=2,
                  seed=1, seeds=[5], baseline={"seeds": 2})),
            budget=2 + 15, exhaustible=True, baseline_first=2),
        Case("evolution-prior-plan", lambda: make_searcher(
            _plan(PERMS, algorithm="evolution", num_samples=15, population=4, sample_size=2,
                  seed=1, seeds=[5], baseline={"seeds": 2}, prior="mini_press2020")),
            budget=2 + 15, exhaustible=True, baseline_first=2),
    ],
    "oneshot": [  # stage 2 (stage 1 trains a supernet: tests/search/test_oneshot.py)
        Case("oneshot-stage-two", lambda: search_algorithm("oneshot").make(_oneshot_stage_two()),
             budget=len(_oneshot_stage_two().trials), baseline_first=2),
    ],
}


def registered_cases(cases: dict[str, list[Case]], **capabilities: Any) -> list[Any]:
    """Every case of every registered searcher (with ``capabilities``, of those declaring
    them); a registered searcher without a case is a case that fails."""
    out = []
    for name in searcher_names(**capabilities):
        out += [pytest.param((name, c), id=c.name) for c in cases.get(name, [])] or [
            pytest.param((name, None), id=f"{name}-has-no-case")]
    return out


def _found(name: str, case: Case | None) -> Case:
    if case is None:
        pytest.fail(f"searcher {name!r} is registered but has no Case in CASES: give it one")
    return case


@pytest.fixture(params=registered_cases(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return _found(*request.param)


@pytest.fixture(params=registered_cases(CASES, resumable=True))
def resumable_case(request: pytest.FixtureRequest) -> Case:
    return _found(*request.param)


@pytest.mark.parametrize("entry", registered_cases(CASES))
def test_a_searcher_has_the_warm_start_hook_it_declares(entry: tuple[str, Case | None]) -> None:
    name = entry[0]
    searcher = _found(*entry).make()
    inner = searcher.inner if isinstance(searcher, WithBaseline) else searcher
    assert isinstance(inner, Stateful)  # save/restore for --resume, the hooks
    told = type(inner).warm_start is not Stateful.warm_start
    assert told == search_algorithm(name).takes_warm_start, (name, type(inner))


def test_every_case_is_of_a_registered_searcher() -> None:
    assert set(CASES) <= set(searcher_names()), sorted(set(CASES) - set(searcher_names()))


def test_a_registered_searcher_without_a_case_gets_a_failing_one() -> None:
    @register_searcher("contract-probe")
    class Probe(SearchAlgorithm):
        make = search_algorithm("grid").make  # it builds one (the registry's contract)

    try:
        params = registered_cases(CASES)
        assert [p.values for p in params if p.id == "contract-probe-has-no-case"] == [
            (("contract-probe", None),)]
    finally:
        unregister_searcher("contract-probe")
    assert "contract-probe" not in searcher_names()


def test_contract(case: Case) -> None:
    check_contract(case)


def check_contract(case: Case) -> None:
    """The shared contract (a plugin's searcher is held to it too: test_plugins.py)."""
    searcher = case.make()
    out = Driver(searcher).run()
    trials = []
    for got in out:
        assert set(got) == {"trial"}, got
        trial = got["trial"]
        assert isinstance(trial, Trial)  # the object itself travels, never a dict
        assert parse_order(trial.order, kind="lm") == trial.order
        trials.append(trial)
    names = [t.name for t in trials]
    assert len(set(names)) == len(names), "duplicate trial names"
    pairs = [(t.order, t.seed) for t in trials]
    dupes = {p for p in pairs if pairs.count(p) > 1}
    assert not dupes, f"(order, seed) suggested twice: {dupes}"
    if case.exhaustible:
        assert case.baseline_first < len(trials) <= case.budget
    else:
        assert len(trials) == case.budget
    assert all(t.baseline for t in trials[:case.baseline_first])
    assert not any(t.baseline for t in trials[case.baseline_first:]) or case.name.startswith("grid")
    # FINISHED stays FINISHED
    assert searcher.suggest("after-the-end") == FINISHED
    assert not ray.is_initialized()


def test_grid_suggests_exactly_the_plan() -> None:
    plan = _grid_plan()
    out = Driver(make_searcher(plan), concurrency=3).run()
    assert [o["trial"] for o in out] == list(plan.trials)


@pytest.mark.parametrize("split", [0, 3, 7])
def test_save_restore_continues_identically(resumable_case: Case, split: int,
                                            tmp_path: Path) -> None:
    case = resumable_case
    original = Driver(case.make())
    for _ in range(split):
        original.step()
    path = tmp_path / "searcher.pkl"
    original.searcher.save(str(path))
    fresh = case.make()
    fresh.restore(str(path))
    restored = Driver(fresh)
    restored.live, restored.calls = deque(original.live), original.calls
    restored.finished = original.finished
    assert restored.run() == original.run()[split:]


def test_restore_replaces_state_of_a_used_searcher(tmp_path: Path) -> None:
    """restore() into a searcher that already ran must not mix in its own history."""
    a = Driver(_evolution_direct())
    for _ in range(6):
        a.step()
    a.searcher.save(str(tmp_path / "s.pkl"))
    b = Driver(_evolution_direct())
    for _ in range(2):
        b.step()
    b.searcher.restore(str(tmp_path / "s.pkl"))
    b.live, b.calls, b.suggested = deque(a.live), a.calls, []
    assert b.run() == a.run()[6:]


# -- evolution ---------------------------------------------------------------------------
def _parent_orders(out: list[dict[str, Any]]) -> dict[str, str]:
    return {o["trial"].candidate: o["trial"].order for o in out}


def test_evolution_children_keep_budget_and_never_repeat() -> None:
    cands = expand("budgeted", {"budget_units": 14, "count": 10, "seed": 2})
    assert len({units(c.order) for c in cands}) == 1
    searcher = EvolutionSearcher(cands, num_samples=40, population=5, sample_size=2, seed=3,
                                 metric=METRIC, mode="min")
    out = Driver(searcher, concurrency=3).run()
    orders = [o["trial"].order for o in out]
    assert len(orders) == 40 and len(set(orders)) == len(orders)
    by_name = _parent_orders(out)
    children = [o["trial"] for o in out if o["trial"].space == "evolution"]
    assert len(children) >= 25  # 10 initial candidates at most, the rest mutations
    for child in children:
        parent = by_name[child.params["parent"]]
        assert units(child.order) == units(parent) == 14
        assert child.seed == 0 and child.order != parent


def test_evolution_beats_random_sampling_on_average() -> None:
    """Same number of trained orders: evolution's best beats a random sample's best.

    Soft (averaged over 10 fixed seeds) but it fails for a searcher that ignores results:
    measured margin ~0.03, evolution ahead on 9 of 10 seeds.
    """
    pool = expand("permutations", {"n_s": 8, "n_f": 8, "count": 300, "seed": 11})
    evo_best, rand_best = [], []
    for seed in range(10):
        searcher = EvolutionSearcher(pool, num_samples=60, population=8, sample_size=3,
                                     seed=seed, metric=METRIC, mode="min")
        out = Driver(searcher).run()
        assert len(out) == 60
        evo_best.append(min(objective(o["trial"].order) for o in out))
        sample = random.Random(seed).sample(pool, 60)
        rand_best.append(min(objective(c.order) for c in sample))
    wins = sum(e < r for e, r in zip(evo_best, rand_best, strict=True))
    assert statistics.mean(evo_best) < statistics.mean(rand_best) - 0.01, (evo_best, rand_best)
    assert wins >= 6, (evo_best, rand_best)


def test_evolution_failed_trials_do_not_enter_the_population() -> None:
    cands = expand("sandwich", {"n": 3})
    searcher = EvolutionSearcher(cands, num_samples=5, population=2, seed=0, metric=METRIC)
    searcher.set_search_properties(METRIC, "min", {})
    first = [searcher.suggest(f"t{i}") for i in range(3)]
    assert all(isinstance(f, dict) for f in first)  # 3 initial candidates
    searcher.on_trial_complete("t0", result=None, error=True)
    searcher.on_trial_complete("t1", result={METRIC: math.inf})
    assert searcher.suggest("t3") is None  # nothing to breed from yet: wait
    searcher.on_trial_complete("t2", result={METRIC: 1.5})
    child = searcher.suggest("t4")
    assert isinstance(child, dict) and child["trial"].params == {
        "parent": first[2]["trial"].candidate}


# -- optuna --------------------------------------------------------------------------------
@pytest.mark.parametrize("ks", [None, [0, 2, 5]])
def test_optuna_sandwich_suggests_k_in_range(ks: list[int] | None) -> None:
    args: dict[str, Any] = {"n": 6} if ks is None else {"n": 6, "ks": ks}
    cands = expand("sandwich", args)
    allowed = set(range(6)) if ks is None else set(ks)
    searcher = OptunaTrials(cands, num_samples=14, seeds=[0, 1, 2], metric=METRIC, seed=0)
    out = Driver(searcher).run()
    assert len(out) == 14
    for o in out:
        k = o["trial"].params["k"]
        assert k in allowed
        assert o["trial"].order == sandwich_order(6, k)
    replicates = {}
    for o in out:
        replicates.setdefault(o["trial"].order, []).append(o["trial"].seed)
    for seeds in replicates.values():  # replicates take the next seed, never one twice
        assert seeds == sorted(seeds) and len(set(seeds)) == len(seeds)
        assert seeds[: 3] == [0, 1, 2][: len(seeds)]


@pytest.mark.parametrize("algorithm", ["optuna", "evolution"])
def test_adaptive_searchers_never_repeat_a_baseline_trial(algorithm: str) -> None:
    """The baseline order inside the space (sandwich k=0) must not be trained twice per seed."""
    own = {"population": 2} if algorithm == "evolution" else {}  # its own settings
    plan = _plan({"type": "sandwich", "n": 2}, algorithm=algorithm, num_samples=6,
                 seeds=[0], baseline={"seeds": 1}, **own)
    assert plan.trials[0].order == interleaved(2) == plan.candidates[0].order
    out = Driver(make_searcher(plan)).run()
    pairs = [(o["trial"].order, o["trial"].seed) for o in out]
    assert len(set(pairs)) == len(pairs), pairs


def test_nsga2_pickles_with_the_thread_lock_optuna_5_1_gives_it() -> None:
    """Optuna 5.1's GA samplers hold a thread lock, which pickle refuses; the sweep's NSGA-II
    leaves it out and makes a new one on load (Tune pickles searchers, Ray cloudpickles)."""
    import pickle
    import threading

    import ray.cloudpickle

    from sublayer_search.search.searchers.optuna_study import PicklableNSGAII

    sampler = PicklableNSGAII(seed=3)
    sampler._thread_lock = threading.Lock()  # as Optuna 5.1 sets it in __init__
    for dumps in (pickle.dumps, ray.cloudpickle.dumps):
        back = pickle.loads(dumps(sampler))
        assert isinstance(back._thread_lock, type(threading.Lock()))
        assert back._thread_lock is not sampler._thread_lock
        assert back._thread_lock.acquire(blocking=False)
        assert vars(back).keys() == vars(sampler).keys()
    del sampler._thread_lock  # Optuna 5.0: no lock, none made
    assert "_thread_lock" not in vars(pickle.loads(pickle.dumps(sampler)))
