"""``train.checkpoint_every``: checkpoints (and the full-state gather to rank 0 that FSDP
does for each, models/distributed.py ``Workers.full_state``) only every so many steps
and at the end, not at every evaluation (models/training_loop.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sublayer_search.models.checkpoint import load_checkpoint
from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig, load_corpus
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec, fit


@pytest.fixture(scope="module")
def corpus(shared_data: Path) -> Any:
    return load_corpus(DataConfig(name="tinyshakespeare"))


def _spec(**train: Any) -> TrialSpec:
    base = {"steps": 5, "batch_size": 4, "eval_every": 1, "eval_batches": 1, "seed": 2,
            "schedule": "constant", "device": "cpu"}
    return TrialSpec(model=model_preset("debug", order="sf"),
                     data=DataConfig(name="tinyshakespeare"),
                     train=TrainConfig(**{**base, **train}))


def test_checkpoints_every_k_steps_and_at_the_end(corpus: Any, tmp_path: Path) -> None:
    reports: list[tuple[int, str | None]] = []
    saved_steps: list[int] = []

    def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
        reports.append((metrics["step"], checkpoint))
        if checkpoint is not None:
            saved_steps.append(load_checkpoint(checkpoint)["step"])

    fit(_spec(checkpoint_every=2), report, corpus=corpus, checkpoint_dir=str(tmp_path))
    ckpt = str(tmp_path)
    # every evaluation reports; a checkpoint at steps 2 and 4, and at the last step
    assert reports == [(1, None), (2, ckpt), (3, None), (4, ckpt), (5, ckpt)]
    assert saved_steps == [2, 4, 5]


def test_by_default_every_evaluation_checkpoints(corpus: Any, tmp_path: Path) -> None:
    reports: list[str | None] = []
    fit(_spec(steps=3), lambda m, checkpoint=None: reports.append(checkpoint), corpus=corpus,
        checkpoint_dir=str(tmp_path))
    assert reports == [str(tmp_path)] * 3


def test_a_resumed_run_continues_from_the_last_checkpoint(corpus: Any, tmp_path: Path) -> None:
    straight: list[dict[str, Any]] = []
    fit(_spec(), lambda m, checkpoint=None: straight.append(m), corpus=corpus)

    class Stop(Exception):
        pass

    def stop_at_3(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
        if metrics["step"] == 3:  # killed after step 3: its last checkpoint is step 2's
            raise Stop

    with pytest.raises(Stop):
        fit(_spec(checkpoint_every=2), stop_at_3, corpus=corpus, checkpoint_dir=str(tmp_path))
    resumed: list[dict[str, Any]] = []
    fit(_spec(checkpoint_every=2), lambda m, checkpoint=None: resumed.append(m), corpus=corpus,
        resume_from=str(tmp_path))
    assert [m["step"] for m in resumed] == [3, 4, 5]  # step 3 trained again
    assert [m["val_loss"] for m in resumed] == pytest.approx(
        [m["val_loss"] for m in straight[2:]], rel=1e-6)


@pytest.mark.parametrize("value", [0, 3, 2.5])
def test_checkpoint_every_is_a_multiple_of_eval_every(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"train\.checkpoint_every: got .*, expected a positive "
                                          r"multiple of train\.eval_every \(2\) or null"):
        TrainConfig(eval_every=2, checkpoint_every=value)
    assert TrainConfig(eval_every=2, checkpoint_every=6).checkpoint_every == 6
