"""One-shot sweeps (``search: {algorithm: oneshot}``): validation, the dry run, the stage-2
plan, and a real two-stage sweep on local Ray and SQLite MLflow, interrupted in stage 1 and
resumed (issue 17)."""

from __future__ import annotations

import contextlib
import csv
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sublayer_search.search.cli.main import main
from sublayer_search.search.oneshot.stages import (
    ESTIMATE_PARAM,
    RANK_PARAM,
    chosen,
    prior_picks,
    stage_two,
)
from sublayer_search.search.plan.experiment import load_experiment, parse_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.searchers.prior import resolve_prior

ORDERS = ["sfsf", "ssff", "ffss", "fsfs", "sffs"]
"""The space; ``sfsf`` is also the baseline (interleaved) order."""
ONESHOT = {"algorithm": "oneshot", "supernet": {"steps": 30, "eval_batches": 2}, "top_k": 2}


def _doc(tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "oneshot",
        "space": {"type": "explicit", "orders": ORDERS},
        "seeds": [0],
        "baseline": {"seeds": 1},
        "model": {"preset": "debug", "dropout": 0.0},
        "data": {"name": "tinyshakespeare"},
        "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "eval_batches": 2},
        "resources": {"cpu": 1},
        "search": dict(ONESHOT),
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    doc.update(overrides)
    return doc


def _write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "oneshot.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# -- validation and the dry run ---------------------------------------------------------
BAD = {
    "top_k above the orders": ({"search": {**ONESHOT, "top_k": 9}}, "search.top_k", "at most 5"),
    "top_k zero": ({"search": {**ONESHOT, "top_k": 0}}, "search.top_k", ">= 1"),
    "tie_extra negative": (
        {"search": {**ONESHOT, "supernet": {"tie_extra": -1}}},
        "search.supernet.tie_extra",
        "an integer >= 0",
    ),
    "prior_extra as text": (
        {"search": {**ONESHOT, "supernet": {"prior_extra": "3"}}},
        "search.supernet.prior_extra",
        "an integer >= 0",
    ),
    "steps zero": (
        {"search": {**ONESHOT, "supernet": {"steps": 0}}},
        "search.supernet.steps",
        "a positive integer",
    ),
    "unknown sharing": (
        {"search": {**ONESHOT, "supernet": {"sharing": "depth"}}},
        "search.supernet.sharing",
        "ordinal, slot",
    ),
    "unknown supernet key": (
        {"search": {**ONESHOT, "supernet": {"stepz": 10}}},
        "search.supernet.stepz",
        "one of the supernet settings",
    ),
    "steps as text": (
        {"search": {**ONESHOT, "supernet": {"steps": "100"}}},
        "search.supernet.steps",
        "a positive integer",
    ),
    "num_samples": ({"search": {**ONESHOT, "num_samples": 4}}, "search.num_samples", "top_k sets"),
    "top_k without oneshot": (
        {"search": {"algorithm": "grid", "top_k": 2}},
        "search.top_k",
        "unless search.algorithm is oneshot",
    ),
    "translation": (
        {
            "task": "translation",
            "data": {"name": "multi30k"},
            "space": {"type": "explicit", "orders": ["scf", "csf"]},
        },
        "search.algorithm",
        "task lm",
    ),
}


@pytest.mark.parametrize("case", list(BAD), ids=list(BAD))
def test_bad_oneshot_section_exits_2_naming_the_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides, field, expected = BAD[case]
    path = _write(tmp_path, _doc(tmp_path, **overrides))
    assert main(["sweep", str(path)]) == 2
    err = capsys.readouterr().err
    line = next((ln for ln in err.splitlines() if f"- {field}:" in ln), "")
    assert expected in line, err
    assert "Traceback" not in err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray").exists()


def test_dry_run_shows_the_supernet_and_the_stand_alone_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = {**ONESHOT, "supernet": {"steps": 50, "eval_batches": 3, "sharing": "slot"}}
    path = _write(tmp_path, _doc(tmp_path, search=search, seeds=[0, 1], baseline={"seeds": 3}))
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 5 evaluations of 5 orders x 2 batches for the curve, 5 orders x 3 batches to rank;
    # a trial: 20 steps and 2 evaluations of 2 batches; a forward pass = 1/3 of a step
    units = (50 + (50 + 15) / 3) / (20 + 4 / 3)
    assert (
        "stage 1: one supernet over the 5 orders of explicit (sharing slot): 50 steps "
        "(2.5 trials' steps) + 65 held-out batches (50 for its learning curve: 5 orders x "
        "2 batches x 5 evaluations; 15 to rank 5 orders x 3) = "
        f"{units:.3g} stand-alone trial(s) of 20 steps"
    ) in out
    assert "orders: " + " ".join(ORDERS) in out
    assert (
        "stage 2: the top 2 orders of the ranking + up to 3 more whose estimate is within 2 "
        "sem of the k-th's (supernet.tie_extra, tie_sems) x 2 seed(s) + the 3 baseline trial(s)"
    ) in out
    assert "3 trial(s) + 4 (+ up to 6 tied) chosen by the supernet; metric val_bpc; " \
           "nothing was run" in out
    table = [ln.split()[0] for ln in out.splitlines()[1:] if ln.startswith("interleaved")]
    assert table == ["interleaved2@seed0", "interleaved2@seed1", "interleaved2@seed2"]
    assert not (tmp_path / "mlflow.db").exists()


def test_the_supernet_curve_has_its_own_interval_in_the_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    search = {**ONESHOT, "supernet": {"steps": 50, "eval_batches": 3, "eval_every": 25}}
    assert main(["sweep", str(_write(tmp_path, _doc(tmp_path, search=search))), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # 2 evaluations (not 5) of 5 orders x 2 batches; a trial still evaluates every 10 steps
    units = (50 + (20 + 15) / 3) / (20 + 4 / 3)
    assert "35 held-out batches (20 for its learning curve: 5 orders x 2 batches x 2 " \
           f"evaluations; 15 to rank 5 orders x 3) = {units:.3g} stand-alone trial(s)" in out


def test_dry_run_of_the_shipped_oneshot_config_imports_no_heavy_library(tmp_path: Path) -> None:
    from test_light_imports import _probe

    config = Path(__file__).resolve().parents[2] / "configs" / "mini_press2020_oneshot.yaml"
    code, heavy = _probe(["sweep", str(config), "--dry-run"], tmp_path)
    assert code == 0
    assert heavy == []


def test_the_monitored_orders_agree_with_the_model_side() -> None:
    from sublayer_search.models.supernet.train import MONITOR_ORDERS
    from sublayer_search.search.oneshot.stages import MONITOR_ORDERS as PLANNED

    assert PLANNED == MONITOR_ORDERS


def test_stage_two_takes_the_top_k_and_merges_the_baseline_order(tmp_path: Path) -> None:
    doc = _doc(tmp_path, seeds=[0, 1], baseline={"seeds": 2}, search={**ONESHOT, "top_k": 3})
    plan = plan_sweep(parse_experiment(doc), check_resources=False)
    assert [t.name for t in plan.trials] == ["interleaved2@seed0", "interleaved2@seed1"]
    # as read back from ranking.csv: strings; sfsf (the baseline order) ranks second
    ranking = [
        {"order": o, "mean": str(2.0 + r / 10), "sem": "0.01", "n_batches": "2", "rank": str(r)}
        for r, o in enumerate(["fsfs", "sfsf", "ffss", "ssff", "sffs"], 1)
    ]
    stage2 = stage_two(plan, list(reversed(ranking)))
    assert stage2.algorithm == "grid"  # runs as a grid of fixed trials
    assert stage2.experiment.search.algorithm == "oneshot"  # the file as written
    assert stage2.history[-1] == "stage one"
    got = [(t.order, t.seed, t.baseline, t.params.get(RANK_PARAM)) for t in stage2.trials]
    assert got == [
        ("sfsf", 0, True, 2),
        ("sfsf", 1, True, 2),
        ("fsfs", 0, False, 1),
        ("fsfs", 1, False, 1),
        ("ffss", 0, False, 3),
        ("ffss", 1, False, 3),
    ]
    assert stage2.trials[2].params[ESTIMATE_PARAM] == pytest.approx(2.1)
    assert len({t.name for t in stage2.trials}) == len(stage2.trials)


def test_a_resumed_supernet_sends_its_evaluations_up_to_the_checkpoint_again(
    tmp_path: Path,
) -> None:
    import json

    import torch

    from sublayer_search.models.checkpoint import save_checkpoint
    from sublayer_search.search.oneshot.task import CURVE_FILE, _replay

    save_checkpoint(
        tmp_path, {"step": 120, "metrics": {"step": 120, "val_loss": 1.2, "x": torch.tensor(1.0)}}
    )
    rows = [{"step": s, "val_loss": s / 100} for s in (40, 80, 160)]  # 120's line was lost
    (tmp_path / CURVE_FILE).write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 2'
    )  # cut by the kill
    sent: list[dict[str, Any]] = []

    class Queue:
        def put(self, row: dict[str, Any]) -> None:
            sent.append(row)

    assert _replay(str(tmp_path), str(tmp_path), Queue()) == 120
    expected = [
        {"step": 40, "val_loss": 0.4},
        {"step": 80, "val_loss": 0.8},
        {"step": 120, "val_loss": 1.2},
    ]  # 160 comes again from training
    assert sent == expected
    lines = (tmp_path / CURVE_FILE).read_text().splitlines()
    assert [json.loads(line) for line in lines] == expected
    assert _replay(str(tmp_path), None, Queue()) == 0  # a fresh start: an empty curve
    assert (tmp_path / CURVE_FILE).read_text() == ""


# -- a real two-stage sweep, interrupted in stage 1 and resumed twice -----------------------
SUPERNET_STEPS, EVERY = 400, 40


def _runs(client: Any, role: str) -> list[Any]:
    exp = client.get_experiment_by_name("oneshot")
    if exp is None:
        return []
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`sublayer.role` = '{role}'")


@contextlib.contextmanager
def _ctrl_c_when(ready: Callable[[], bool]) -> Iterator[None]:
    """Send this process a SIGINT (Ctrl-C) once ``ready()``, from a watcher thread."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            if ready():
                os.kill(os.getpid(), signal.SIGINT)
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@pytest.mark.slow
def test_two_stage_sweep_resumes_in_each_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import ray
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.run.sweep import run_sweep

    supernet = {"steps": SUPERNET_STEPS, "eval_batches": 2, "tie_extra": 1, "prior_extra": 1}
    search = {**ONESHOT, "supernet": supernet, "prior": "press2020"}
    train = {"steps": 20, "batch_size": 64, "eval_every": EVERY, "eval_batches": 2}
    path = _write(tmp_path, _doc(tmp_path, search=search, train=train))
    plan = plan_sweep(load_experiment(path), str(path))
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")

    def supernet_evaluated() -> bool:  # stage 1 is running: its Ctrl-C handler is in place
        runs = _runs(client, "supernet") if (tmp_path / "mlflow.db").exists() else []
        return (
            bool(runs)
            and runs[0].info.status == "RUNNING"
            and bool(client.get_metric_history(runs[0].info.run_id, "val_loss"))
        )

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        # 1. Ctrl-C in stage 1, once the supernet has logged an evaluation
        with _ctrl_c_when(supernet_evaluated), pytest.raises(KeyboardInterrupt):
            run_sweep(plan)
        (first,) = _runs(client, "supernet")
        assert first.info.status == "KILLED" and not _runs(client, "trial")
        assert "stage 1 interrupted" in capsys.readouterr().err

        # 2. --resume continues the supernet in the same run from its checkpoint, then stage 2
        outcome = run_sweep(plan, resume=True)
        assert not outcome.interrupted
        (supernet,) = _runs(client, "supernet")
        assert supernet.info.run_id == first.info.run_id
        assert supernet.info.status == "FINISHED"
        assert int(supernet.data.tags["sublayer.resumed_from_step"]) >= EVERY
        steps = [m.step for m in client.get_metric_history(supernet.info.run_id, "val_loss")]
        assert sorted(steps) == list(range(EVERY, SUPERNET_STEPS + 1, EVERY))  # each once
        assert {r["status"] for r in outcome.trials} == {"finished"}

        # 3. --resume once more: the ranking is read back, the supernet never trains again
        capsys.readouterr()
        again = run_sweep(plan, resume=True)
        out = capsys.readouterr().out
    finally:
        ray.shutdown()
    assert "read back from supernet run" in out and "training one supernet" not in out
    assert again.parent_run_id == outcome.parent_run_id
    (after,) = _runs(client, "supernet")
    assert after.info.run_id == supernet.info.run_id
    assert after.info.end_time == supernet.info.end_time  # not trained again
    assert after.data.tags["sublayer.status"] == "finished"
    ranking_file = client.download_artifacts(after.info.run_id, "ranking.csv", str(tmp_path))
    with open(ranking_file, newline="") as fh:
        ranking = list(csv.DictReader(fh))
    assert sorted(r["order"] for r in ranking) == sorted(ORDERS)  # every order ranked
    assert [int(r["rank"]) for r in ranking] == [1, 2, 3, 4, 5]
    assert all(float(r["mean"]) > 0 and int(r["n_batches"]) == 2 for r in ranking)

    trial_runs = _runs(client, "trial")
    trials = {r.data.params["order"]: r for r in trial_runs}
    picked = chosen(ranking, 2, extra=1, sems=2.0)  # the top 2 and at most 1 tied
    assert 2 <= len(picked) <= 3 and picked[:2] == ranking[:2]
    top = [r["order"] for r in picked]
    (by_prior,) = prior_picks(ranking, picked, resolve_prior("press2020"), 1)
    assert by_prior["order"] not in top  # a second opinion, restored by --resume as well
    assert set(trials) == {"sfsf", *top, by_prior["order"]}
    assert len(trial_runs) == len(trials)  # each once
    assert trials[by_prior["order"]].data.params["oneshot_pick"] == "prior"
    assert "by the prior)" in out
    for rank, order in enumerate(top, 1):
        run = trials[order]
        assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
        assert run.data.tags["sublayer.oneshot_rank"] == str(rank)
        assert float(run.data.tags["sublayer.oneshot_estimate"]) == pytest.approx(
            float(ranking[rank - 1]["mean"])
        )
        assert run.data.tags["mlflow.parentRunId"] == outcome.parent_run_id
    assert trials["sfsf"].data.tags["sublayer.baseline"] == "true"
    (parent,) = _runs(client, "sweep")
    assert parent.info.status == "FINISHED" and parent.info.run_id == outcome.parent_run_id


@pytest.mark.slow
def test_a_failed_supernet_task_fails_its_run_and_the_sweep_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.core.injected_failure import FAIL_ENV

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(FAIL_ENV, "supernet")  # the stage-1 task raises before training
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, _doc(tmp_path, ray={"storage_path": str(tmp_path / "ray"),
                                                "num_cpus": 2}))
    assert main(["sweep", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "stage 1: the supernet's task failed" in out
    assert "the supernet's task failed (MLflow run" in err and "failed on purpose" in err
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (supernet,) = _runs(client, "supernet")
    assert supernet.info.status == "FAILED"
    assert supernet.data.tags["sublayer.status"] == "failed"
    assert "failed on purpose" in supernet.data.tags["sublayer.error"]
    assert not _runs(client, "trial")  # stage 2 never started
    (parent,) = _runs(client, "sweep")
    assert parent.info.status == "FAILED"
    assert not list((tmp_path / "ray").rglob("supernet_backlog.jsonl"))  # all written
