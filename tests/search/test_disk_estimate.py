"""The dry run's checkpoint disk estimate and ``ray.keep_checkpoints`` (issue 45, item 7)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch
import yaml
from helpers import SUBLAYER, write_experiment

from sublayer_search.models.checkpoint import CHECKPOINT_FILE, save_checkpoint, training_state
from sublayer_search.models.optim import build_optimizer, build_scheduler
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.cli.disk_estimate import checkpoint_bytes, human_bytes


@pytest.mark.parametrize("optimizer", ["adamw", "sgd", "adagrad"])
def test_the_estimate_matches_a_real_checkpoint(tmp_path: Path, optimizer: str) -> None:
    cfg = TrainConfig(optimizer=optimizer, steps=10, lr=1e-3)
    model = torch.nn.Sequential(torch.nn.Linear(300, 400), torch.nn.Linear(400, 300))
    opt = build_optimizer(cfg, model)
    sched = build_scheduler(cfg, opt)
    model(torch.randn(2, 300)).sum().backward()
    opt.step()  # the optimizer's state exists from the first step on
    state = training_state(model, opt, sched, torch.Generator(), step=1, best=1.0, metrics={})
    size = (Path(save_checkpoint(tmp_path, state)) / CHECKPOINT_FILE).stat().st_size
    params = sum(p.numel() for p in model.parameters())
    estimate = checkpoint_bytes(params, optimizer)
    assert abs(size - estimate) / size < 0.05, (size, estimate)


def test_human_bytes() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(2_963_219_712) == "2.96 GB"
    assert human_bytes(39.5e12) == "39.5 TB"


def _dry_run(path: Path, tmp_path: Path) -> str:
    out = subprocess.run([str(SUBLAYER), "sweep", str(path), "--dry-run"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_dry_run_counts_kept_checkpoints_and_mlflow_copies(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, "disk", orders=["sfsf", "ssff"],
                            tracking_uri=f"sqlite:///{tmp_path}/m.db")
    one = [line for line in _dry_run(path, tmp_path).splitlines()
           if line.startswith("checkpoints:")]
    assert len(one) == 1 and "ray.keep_checkpoints: 1 per trial x 2 trial(s)" in one[0], one
    doc = yaml.safe_load(path.read_text())
    doc["ray"]["keep_checkpoints"] = 3
    doc["tracking"]["log_checkpoints"] = True
    path.write_text(yaml.safe_dump(doc))
    three = [line for line in _dry_run(path, tmp_path).splitlines()
             if line.startswith("checkpoints:")]
    assert "ray.keep_checkpoints: 3 per trial x 2 trial(s)" in three[0], three
    assert "tracking.log_checkpoints" in three[1], three
    assert _bytes(three[0]) == pytest.approx(3 * _bytes(one[0]), rel=0.01), (one, three)


def _bytes(line: str) -> float:
    """The total a ``checkpoints:`` line states (``= 686 kB under …``), in bytes."""
    value, unit = line.split(" = ")[1].split()[:2]
    return float(value.lstrip("~")) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]


def test_keep_checkpoints_zero_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = write_experiment(tmp_path, "disk0", orders=["sfsf"],
                            tracking_uri=f"sqlite:///{tmp_path}/m.db")
    doc = yaml.safe_load(path.read_text())
    doc["ray"]["keep_checkpoints"] = 0
    path.write_text(yaml.safe_dump(doc))
    out = subprocess.run([str(SUBLAYER), "sweep", str(path), "--dry-run"], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2 and "ray.keep_checkpoints" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
