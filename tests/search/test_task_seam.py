"""The task seam is real: a task defined and registered here, in the test, plans and trains
through the product (planning, the one trainer, and a real Ray + MLflow sweep) without
any other file knowing about it."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from sublayer_search.models.accounting import flops_per_token, param_count
from sublayer_search.models.config import ModelConfig, model_preset
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.models.training_loop import (
    FitResult,
    Reporter,
    Scores,
    StepContext,
    Workload,
    train,
)
from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.core.variant import Variant, VariantCandidate
from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.plan.steps import plan_sweep
from sublayer_search.search.tasks import Task, register, task_names, unregister, validate_section
from sublayer_search.search.tracking.runs import metrics_of
from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.cost import units


@dataclass(frozen=True, kw_only=True)
class CycleData:
    """A synthetic corpus: the tokens 0, 1, …, period-1 repeated."""

    period: int = 5
    length: int = 4000


@dataclass(frozen=True, kw_only=True)
class CycleSpec:
    model: ModelConfig
    data: CycleData
    train: TrainConfig


class CycleFamily(Workload):
    """Next-token prediction on a cycle; reports an extra metric no other file knows."""

    metric = "val_cycle_loss"

    def __init__(self, spec: CycleSpec) -> None:
        self.spec = spec
        period = spec.data.period
        self.tokens = torch.arange(spec.data.length) % period

    def build(self) -> torch.nn.Module:
        return OrderedLM(self.spec.model)

    def _batch(self, ctx: StepContext) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.spec.model.context
        starts = torch.randint(0, len(self.tokens) - t - 1, (ctx.batch_size,),
                               generator=ctx.generator)
        x = torch.stack([self.tokens[s:s + t] for s in starts.tolist()])
        y = torch.stack([self.tokens[s + 1:s + t + 1] for s in starts.tolist()])
        return x.to(ctx.device), y.to(ctx.device)

    def loss(self, model: Any, ctx: StepContext) -> tuple[torch.Tensor, int]:
        x, y = self._batch(ctx)
        return model(x, y).loss, y.numel()

    @torch.no_grad()
    def evaluate(self, model: torch.nn.Module, ctx: StepContext, *, step: int,
                 final: bool) -> Scores:
        model.eval()
        x, y = self._batch(ctx)
        loss = float(model(x, y).loss)
        model.train()
        return {"val_loss": loss, self.metric: loss, "cycle_extra": 42.0 + step}


class CycleTask(Task[ModelConfig, CycleData, None, CycleSpec]):
    name = "cycle"

    def template(self, raw: dict[str, Any], problems: list[Problem]) -> ModelConfig | None:
        return model_preset("debug", order="sf", vocab_size=8, **raw)

    def data(self, raw: dict[str, Any], problems: list[Problem]) -> CycleData | None:
        return validate_section(CycleData, raw, "data", problems)

    def metric(self, data: CycleData) -> str:
        return CycleFamily.metric

    def baseline(self, pool: Sequence[Candidate], template: ModelConfig | None,
                 problems: list[Problem]) -> VariantCandidate | None:
        return None

    def resolve(self, template: ModelConfig, data: CycleData, base: Candidate | None,
                problems: list[Problem], notes: list[str] | None = None) -> ModelConfig:
        if data.period > (template.vocab_size or 0):
            problems.append(Problem("data.period", data.period, "at most the vocabulary (8)"))
        return template

    def model_for(self, template: ModelConfig, variant: Variant) -> ModelConfig:
        return replace(template, order=variant.order)

    def spec(self, model: ModelConfig, data: CycleData, train: TrainConfig,
             extra: None) -> CycleSpec:
        return CycleSpec(model=model, data=data, train=train)

    def row(self, model: ModelConfig, variant: Variant) -> dict[str, Any]:
        return {"units": units(variant.order), "params": param_count(model),
                "flops_per_token": flops_per_token(model)}

    def fit(self, spec: CycleSpec, report: Reporter, *, checkpoint_dir: str | None = None,
            resume_from: str | None = None) -> FitResult:
        return train(spec.train, CycleFamily(spec), report, checkpoint_dir=checkpoint_dir,
                     resume_from=resume_from)


@pytest.fixture
def cycle_task():
    register(CycleTask)
    yield CycleTask
    unregister(CycleTask.name)


def _experiment(tmp_path: Path, **overrides: Any) -> Path:
    doc: dict[str, Any] = {
        "name": "cycle", "task": "cycle",
        "space": {"type": "sandwich", "n": 2, "k": [0, 1]},
        "seeds": [0], "baseline": {"enabled": False},
        "data": {"period": 5},
        "train": {"steps": 20, "batch_size": 8, "eval_every": 10, "lr": 0.01},
        "resources": {"cpu": 1},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray")},
    }
    doc.update(overrides)
    path = tmp_path / "cycle.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_a_registered_task_is_planned_and_trained(cycle_task, tmp_path):
    assert "cycle" in task_names()
    plan = plan_sweep(load_experiment(_experiment(tmp_path)))
    assert isinstance(plan.task, CycleTask)
    assert plan.metric == "val_cycle_loss" and plan.mode == "min"
    assert [t.order for t in plan.trials] == ["sfsf", "ssff"]
    rows: list[dict[str, Any]] = []
    result = plan.task.fit(plan.trials[1].planned_spec(), lambda m, checkpoint=None: rows.append(m))
    assert result.status == "finished" and result.steps == 20
    assert [r["step"] for r in rows] == [10, 20]
    last = rows[-1]
    assert last["status"] == "finished" and last["cycle_extra"] == 62.0
    assert last["best_val_cycle_loss"] == min(r["val_cycle_loss"] for r in rows)
    assert last["val_cycle_loss"] < rows[0]["val_cycle_loss"] + 1.0  # it trains
    # tracking keeps every numeric metric the trainer reports, including ones it never heard of
    logged = metrics_of({**last, "training_iteration": 2, "node_id": "abc", "pid": 7})
    assert {"cycle_extra", "val_cycle_loss", "best_val_cycle_loss", "val_loss", "train_loss",
            "lr", "tokens_per_s"} == set(logged)


def test_a_registered_task_checks_its_own_sections(cycle_task, tmp_path):
    with pytest.raises(ExperimentError) as err:
        plan_sweep(load_experiment(_experiment(tmp_path, data={"period": 99, "size": 3})))
    text = str(err.value)
    assert "data.size" in text and "unknown key" in text


def test_an_unregistered_task_is_named_with_the_known_ones(tmp_path):
    with pytest.raises(ExperimentError) as err:
        load_experiment(_experiment(tmp_path))
    assert "task: got 'cycle', expected one of 'lm'" in str(err.value)  # 'translation', …


@pytest.mark.slow
def test_a_registered_task_runs_a_real_sweep(cycle_task, tmp_path):
    """Ray workers get the task by value (it lives in this test module, not the package)."""
    import ray
    from mlflow.tracking import MlflowClient
    from ray import cloudpickle  # Ray pickles with its own copy of cloudpickle

    from sublayer_search.search.run.sweep import run_sweep

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        path = _experiment(tmp_path, space={"type": "explicit", "orders": ["ssff"]})
        plan = plan_sweep(load_experiment(path), str(path))
        outcome = run_sweep(plan)
    finally:
        ray.shutdown()
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    (run,) = client.search_runs([outcome.experiment_id],
                                filter_string=f"tags.mlflow.parentRunId = '{outcome.parent_run_id}'")
    assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
    assert run.data.params["task"] == "cycle" and run.data.params["data.period"] == "5"
    assert run.data.metrics["cycle_extra"] == 62.0
    assert "final_val_cycle_loss" in run.data.metrics
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "cycle_extra")]
    assert sorted(steps) == [10, 20]
