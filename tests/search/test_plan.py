"""Sweep plans: trial tables, seeds, the baseline merge, and ``sublayer sweep --dry-run``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import ray
import yaml

from sublayer_search.search.cli.main import main
from sublayer_search.search.core.problems import ExperimentError
from sublayer_search.search.plan.experiment import load_experiment, parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.plan.sweep_plan import SweepPlan, trial_table
from sublayer_search.spaces.cost import units
from sublayer_search.spaces.order import interleaved, sandwich_order

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "configs" / "quickstart.yaml"
PRESS_PRESETS = sorted((REPO / "configs").glob("press2020_*.yaml"))


def _plan(**overrides: Any) -> SweepPlan:
    raw: dict[str, Any] = {"name": "plan", "space": {"type": "sandwich", "n": 4, "k": [1, 2]},
                           "model": {"preset": "debug"}, "data": {"name": "tinyshakespeare"}}
    raw.update(overrides)
    return plan_sweep(parse_experiment(raw))


def test_quickstart_plan() -> None:
    plan = plan_sweep(load_experiment(QUICKSTART), str(QUICKSTART))
    names = [t.name for t in plan.trials]
    assert len(plan.trials) == 10 and len(set(names)) == 10
    assert names[:3] == ["interleaved4@seed0", "interleaved4@seed1", "interleaved4@seed2"]
    assert [t.name for t in plan.trials if t.space == "permutations"] == [
        f"perm0{i}@seed0" for i in range(4)]
    assert names[-3:] == ["sandwich4_1@seed0", "sandwich4_2@seed0", "sandwich4_3@seed0"]
    assert [t.family for t in plan.trials].count("baseline") == 3
    assert all(t.order == "sfsfsfsf" and t.baseline for t in plan.trials[:3])
    assert {units(t.order) for t in plan.trials} == {12.0}
    assert plan.metric == "val_bpc" and plan.model.vocab_size == 65
    assert plan.baseline is not None and plan.baseline.order == interleaved(4)
    assert len(plan.candidates) == 4 + 3  # the pool excludes the baseline
    rows = trial_table(plan)
    assert len({r["params"] for r in rows}) == 1  # same counts, same parameters
    assert all(r["params"] > 0 and r["flops_per_token"] > r["params"] for r in rows)
    assert rows[-1]["k"] == 3 and rows[-1]["order"] == sandwich_order(4, 3)


def test_trials_carry_their_planned_specs() -> None:
    plan = _plan(seeds=[4], baseline={"seeds": 1})
    for trial in plan.trials:
        spec = trial.planned_spec()  # built at planning: the trainable trains it as it is
        assert spec.model == plan.specs[trial.candidate].model
        assert spec.model.order == trial.order and spec.train.seed == trial.seed
        assert spec.model.vocab_size == plan.model.vocab_size
    hashes = {plan.config_hash, _plan(seeds=[7], baseline={"seeds": 2}).config_hash}
    assert len(hashes) == 1  # orders and seeds are not part of the config hash
    assert _plan(train={"lr": 0.01}).config_hash != plan.config_hash


def test_the_plan_bound_to_the_trainable_leaves_the_tables_out() -> None:
    """Ray deserialises the bound plan at every trial start: it must not grow with the
    sweep (each trial carries its own spec)."""
    import pickle

    small, big = _plan(), _plan(space={"type": "permutations", "n_s": 4, "n_f": 4,
                                       "count": 60, "seed": 0})
    slim = big.for_trials()
    assert slim.trials == [] and slim.candidates == [] and slim.specs == {}
    assert slim.experiment is big.experiment and slim.task is big.task
    assert slim.config_hash == big.config_hash and slim.metric == big.metric
    assert len(big.trials) > 5 * len(small.trials)
    sizes = [len(pickle.dumps(p)) for p in (small.for_trials(), slim, big)]
    assert sizes[1] < 1.5 * sizes[0] < sizes[2]  # the orders listed in the space only


def test_sandwich_with_k0_merges_into_the_baseline() -> None:
    plan = _plan(space={"type": "sandwich", "n": 4, "k": [0, 1, 2]}, seeds=[0, 1],
                 baseline={"seeds": 3})
    base = [t for t in plan.trials if t.baseline]
    assert [t.seed for t in base] == [0, 1, 2]
    assert all(t.order == sandwich_order(4, 0) == interleaved(4) for t in base)
    # seeds 0 and 1 are both the baseline and sandwich k=0: one trial each, k kept
    assert [t.params.get("k") for t in base] == [0, 0, None]
    others = [t for t in plan.trials if not t.baseline]
    assert sorted((t.params["k"], t.seed) for t in others) == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert len(plan.trials) == 7
    pairs = [(t.order, t.seed) for t in plan.trials]
    assert len(set(pairs)) == len(pairs)


@pytest.mark.parametrize(("seeds", "expected"), [(2, [0, 1]), (1, [0]), ([3, 7], [3, 7])])
def test_seeds_count_or_list(seeds: Any, expected: list[int]) -> None:
    plan = _plan(seeds=seeds, baseline={"seeds": [5]})
    for k in (1, 2):
        assert [t.seed for t in plan.trials if t.params.get("k") == k] == expected
    assert [t.seed for t in plan.trials if t.baseline] == [5]


def test_a_space_sets_its_own_seeds() -> None:
    plan = _plan(space=[{"type": "permutations", "n_s": 2, "n_f": 2, "count": 2, "seed": 0},
                        {"type": "sandwich", "n": 2, "k": [1], "seeds": 3}],
                 seeds=[0], baseline={"seeds": 2})
    by_space = {s: [(t.name, t.seed) for t in plan.trials if t.space == s and not t.baseline]
                for s in ("permutations", "sandwich")}
    assert [seed for _, seed in by_space["permutations"]] == [0] * len(
        by_space["permutations"])
    assert by_space["sandwich"] == [(f"sandwich2_1@seed{i}", i) for i in range(3)]
    guided = _plan(space={"type": "sandwich", "n": 4, "k": [2], "seeds": [4, 5]},
                   model={"preset": "debug", "guidance": [{"mode": "none"},
                                                           {"mode": "hard", "blocks": ["ffn"]}]})
    assert sorted(t.name for t in guided.trials if not t.baseline) == [
        "sandwich4_2+hg-ffn@seed4", "sandwich4_2+hg-ffn@seed5",
        "sandwich4_2@seed4", "sandwich4_2@seed5"]


@pytest.mark.parametrize(("seeds", "expected"), [
    (0, "a number >= 1"), ([1, 1], "distinct"), ("x", "a list")])
def test_bad_space_seeds_name_the_field(seeds: Any, expected: str) -> None:
    with pytest.raises(ExperimentError) as err:
        _plan(space={"type": "sandwich", "n": 4, "k": [1], "seeds": seeds})
    assert "space.seeds" in str(err.value) and expected in str(err.value)


def test_space_seeds_need_grid_search() -> None:
    with pytest.raises(ExperimentError) as err:
        _plan(space={"type": "sandwich", "n": 4, "k": [1, 2], "seeds": 2},
              search={"algorithm": "optuna", "num_samples": 2})
    assert "space.seeds" in str(err.value) and "grid only" in str(err.value)


def test_baseline_disabled() -> None:
    plan = _plan(space={"type": "sandwich", "n": 4, "k": [0, 3]}, seeds=2,
                 baseline={"enabled": False})
    assert plan.baseline is None
    assert not any(t.baseline for t in plan.trials)
    assert [t.name for t in plan.trials] == ["sandwich4_0@seed0", "sandwich4_0@seed1",
                                             "sandwich4_3@seed0", "sandwich4_3@seed1"]
    assert plan.model.order == "sf"  # no baseline: the template keeps its placeholder


def test_explicit_baseline_order() -> None:
    plan = _plan(baseline={"order": "s^4 f^4", "seeds": 2})
    base = [t for t in plan.trials if t.baseline]
    assert [(t.name, t.order) for t in base] == [("baseline_8@seed0", "ssssffff"),
                                                  ("baseline_8@seed1", "ssssffff")]
    assert plan.model.order == "ssssffff"


def test_mixed_budgets_need_an_explicit_baseline() -> None:
    spaces = [{"type": "sandwich", "n": 4, "k": [1]}, {"type": "sandwich", "n": 3, "k": [1]}]
    with pytest.raises(ExperimentError) as info:
        _plan(space=spaces)
    (problem,) = info.value.problems
    assert problem.path == "baseline.order" and "mixes budgets [9.0, 12.0]" in str(problem)
    plan = _plan(space=spaces, baseline={"order": "(sf)^3", "seeds": 1})
    assert [t.name for t in plan.trials] == ["baseline_6@seed0", "sandwich4_1@seed0",
                                             "sandwich3_1@seed0"]


def test_budget_not_a_whole_number_of_layers() -> None:
    with pytest.raises(ExperimentError, match=r"baseline.order: .*budget of 2 units"):
        _plan(space={"type": "permutations", "n_s": 2, "n_f": 0, "count": 1})
    assert len(_plan(space={"type": "permutations", "n_s": 2, "n_f": 0, "count": 1},
                     baseline={"enabled": False}).trials) == 1


def test_adaptive_search_plans_only_the_baseline() -> None:
    plan = _plan(space={"type": "sandwich", "n": 4}, seeds=[0],
                 search={"algorithm": "optuna", "num_samples": 5})
    assert all(t.baseline for t in plan.trials) and len(plan.trials) == 3
    assert [c.name for c in plan.candidates] == [f"sandwich4_{k}" for k in range(4)]


def _snapshot(tmp_path: Path) -> set[str]:
    return {p.name for p in tmp_path.iterdir()}


def _plan_parts(out: str) -> tuple[list[str], str, str, list[str]]:
    """A dry run's table (header and rows), footer, scheduler line and checkpoint lines."""
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("scheduler: "))
    assert all(line.startswith("checkpoints: ") for line in lines[at + 1:]), lines[at + 1:]
    return lines[:at - 1], lines[at - 1], lines[at], lines[at + 1:]


def test_dry_run_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # quickstart.yaml uses ./mlflow.db and ./ray_results
    assert main(["sweep", str(QUICKSTART), "--dry-run"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header == ["name", "family", "seed", "n_s", "n_f", "units", "params",
                      "flops_per_token", "order"]
    lines, footer, scheduler, checkpoints = _plan_parts(out)
    assert len(lines) == 1 + 10 and len(checkpoints) == 1
    assert lines[1].split()[:3] == ["interleaved4@seed0", "baseline", "0"]
    assert lines[-1].split()[0] == "sandwich4_3@seed0" and lines[-1].endswith("ssssffff")
    assert "10 trial(s)" in footer and "val_bpc" in footer
    assert scheduler.startswith("scheduler: fifo (no early stopping: every trial trains all its "
                                "steps") and "{type: curve}" in scheduler
    recommended = ("the recommended setup is `search: {prior: [press2020, mini_press2020, "
                   "replay40]}` with `scheduler: {type: curve}`")
    assert recommended in scheduler and "Recommended setup" in scheduler
    assert "ray.keep_checkpoints: 1 per trial x 10 trial(s)" in checkpoints[0]
    assert _snapshot(tmp_path) == set()  # no mlflow.db, no ray_results
    assert not ray.is_initialized()


def test_dry_run_of_an_adaptive_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(QUICKSTART.read_text())
    raw["search"] = {"algorithm": "evolution", "num_samples": 6}
    raw["space"] = raw["space"][0]
    path = tmp_path / "evo.yaml"
    path.write_text(yaml.safe_dump(raw))
    raw["scheduler"] = {"type": "asha", "grace_period": 2}
    path.write_text(yaml.safe_dump(raw))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    _, footer, scheduler, _ = _plan_parts(capsys.readouterr().out)
    assert footer.startswith("3 trial(s) + up to 6 proposed by evolution from 4 candidates")
    every = raw["train"]["eval_every"]
    assert scheduler == (f"scheduler: asha, grace 2 evaluation(s) ({2 * every} steps), reduction "
                         "factor 2, on val_loss (min); baseline seeds are never stopped")
    assert _snapshot(tmp_path) == {"evo.yaml"}


def test_the_recommended_search_setup_runs_as_written(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The fifo line's recommended setup, pasted into the quickstart, plans: the queue
    starts best-predicted first and the scheduler line names the curve rule."""
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(QUICKSTART), "--dry-run"]) == 0
    _, _, scheduler, _ = _plan_parts(capsys.readouterr().out)
    snippets = scheduler.split("`")[1::2]
    assert [s.split(":")[0] for s in snippets] == ["search", "scheduler"]
    raw = yaml.safe_load(QUICKSTART.read_text())
    for snippet in snippets:
        raw.update(yaml.safe_load(snippet))
    path = tmp_path / "recommended.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    scheduler = next(line for line in out.splitlines() if line.startswith("scheduler: "))
    assert scheduler.startswith("scheduler: curve, ") and "search.prior: prior from" in out


@pytest.mark.parametrize("preset", PRESS_PRESETS, ids=[p.stem for p in PRESS_PRESETS])
def test_paper_presets_plan(preset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["sweep", str(preset), "--dry-run"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    _, footer, scheduler, checkpoints = _plan_parts(captured.out)
    assert "trial(s)" in footer and scheduler.startswith("scheduler: ")
    assert checkpoints and all("GB" in line for line in checkpoints)
    assert _snapshot(tmp_path) == set()


def test_checkpoint_cadence_is_not_in_the_config_hash() -> None:
    """How often a trial saves changes none of its numbers: reuse and warm start find runs
    recorded with any cadence (and before the setting existed)."""
    doc = yaml.safe_load((REPO / "configs" / "quickstart.yaml").read_text())

    def config_hash(**train: object) -> str:
        raw = {**doc, "train": {**doc["train"], **train}}
        return plan_sweep(parse_experiment(raw), check_resources=False).config_hash

    assert config_hash() == config_hash(checkpoint_every=300) == config_hash(checkpoint_every=None)
    assert config_hash(checkpoint_every=300, lr=0.01) != config_hash(checkpoint_every=300)
