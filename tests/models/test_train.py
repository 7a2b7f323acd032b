"""models.lm_workload.fit: learning, reporting, checkpoint/resume, divergence, optimizers."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig, load_corpus
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec, fit, lr_factor, main_metric


@pytest.fixture(scope="module")
def corpus(shared_data):
    return load_corpus(DataConfig(name="tinyshakespeare"))


def spec(**train) -> TrialSpec:
    base = dict(steps=20, batch_size=8, lr=3e-3, eval_every=10, eval_batches=2, seed=0)
    return TrialSpec(model=model_preset("debug", order="sfsf"),
                     data=DataConfig(name="tinyshakespeare"), train=TrainConfig(**{**base, **train}))


def test_fit_reports_every_evaluation_and_learns(corpus):
    reports = []
    result = fit(spec(steps=40, eval_every=20), lambda m, checkpoint=None: reports.append(m),
                 corpus=corpus)
    assert result.status == "finished" and result.steps == 40
    assert [r["step"] for r in reports] == [20, 40]
    assert reports[-1]["status"] == "finished" and reports[0]["status"] == "running"
    assert {"train_loss", "val_loss", "val_bpc", "lr", "tokens_per_s"} <= set(reports[0])
    assert reports[-1]["val_loss"] < reports[0]["val_loss"] < math.log(65)
    assert reports[-1]["val_bpc"] == pytest.approx(reports[-1]["val_loss"] / math.log(2))
    assert result.metrics["best_val_bpc"] == min(r["val_bpc"] for r in reports)


def test_same_seed_same_result_and_other_seed_differs(corpus):
    a = fit(spec(), corpus=corpus).metrics["val_loss"]
    b = fit(spec(), corpus=corpus).metrics["val_loss"]
    c = fit(spec(seed=1), corpus=corpus).metrics["val_loss"]
    assert a == b and a != c


class _Stop(Exception):
    """Raised from ``report`` to interrupt training right after a checkpoint."""


def _stop_at(step):
    def report(metrics, checkpoint=None):
        if metrics["step"] >= step:
            raise _Stop

    return report


def test_resume_from_checkpoint_matches_uninterrupted_run(corpus, tmp_path):
    straight = fit(spec(), corpus=corpus)
    with pytest.raises(_Stop):
        fit(spec(), _stop_at(10), corpus=corpus, checkpoint_dir=str(tmp_path))
    steps = []
    resumed = fit(spec(), lambda m, checkpoint=None: steps.append(m["step"]), corpus=corpus,
                  resume_from=str(tmp_path))
    assert steps == [20]
    assert resumed.metrics["val_loss"] == pytest.approx(straight.metrics["val_loss"], rel=1e-6)


def test_resume_from_final_checkpoint_reports_the_final_metrics(corpus, tmp_path):
    done = fit(spec(), corpus=corpus, checkpoint_dir=str(tmp_path))
    reports = []
    again = fit(spec(), lambda m, checkpoint=None: reports.append(m), corpus=corpus,
                resume_from=str(tmp_path))
    assert again.steps == 20 and len(reports) == 1
    assert reports[0]["val_loss"] == done.metrics["val_loss"]


def test_nan_loss_ends_with_diverged_status(corpus):
    reports = []
    result = fit(spec(optimizer="sgd", lr=1e6, clip_norm=None, steps=50, eval_every=50),
                 lambda m, checkpoint=None: reports.append(m), corpus=corpus)
    assert result.status == "diverged"
    assert result.steps < 50
    assert reports[-1]["status"] == "diverged" and math.isnan(reports[-1]["val_bpc"])


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "adagrad"])
@pytest.mark.parametrize("schedule", ["cosine", "inverse_sqrt", "constant"])
def test_every_optimizer_and_schedule_trains(corpus, optimizer, schedule):
    lr = {"adamw": 3e-3, "sgd": 0.1, "adagrad": 0.03}[optimizer]
    result = fit(spec(optimizer=optimizer, schedule=schedule, lr=lr, warmup_steps=3, grad_accum=2,
                      steps=10, eval_every=10), corpus=corpus)
    assert result.status == "finished"
    assert result.metrics["val_loss"] < math.log(65) + 0.5


def test_lr_schedules():
    cfg = TrainConfig(steps=100, warmup_steps=10, lr=1.0, schedule="cosine", min_lr_ratio=0.1)
    assert lr_factor(cfg, 0) == pytest.approx(0.1)
    assert lr_factor(cfg, 9) == pytest.approx(1.0)
    assert lr_factor(cfg, 10) == pytest.approx(1.0)
    assert lr_factor(cfg, 100) == pytest.approx(0.1)
    inv = replace(cfg, schedule="inverse_sqrt")
    assert lr_factor(inv, 39) == pytest.approx(math.sqrt(10 / 40))
    assert lr_factor(replace(cfg, schedule="constant"), 50) == 1.0


@pytest.mark.parametrize("field,value", [("steps", 0), ("lr", -1.0), ("batch_size", 0),
                                         ("clip_norm", 0.0), ("betas", (0.9, 1.5)),
                                         ("warmup_steps", -1), ("eval_batches", 0)])
def test_bad_train_settings_name_the_field(field, value):
    with pytest.raises(ConfigError, match=rf"train\.{field}: got"):
        TrainConfig(**{field: value})


def test_main_metric():
    assert main_metric("word") == "val_ppl" and main_metric("char") == "val_bpc"
