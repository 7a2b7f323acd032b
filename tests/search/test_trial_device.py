"""A trial that holds a GPU trains on it or fails, and every trial records its device
(issue 45, item 4). Ray is told of a GPU this machine lacks (``ray.num_gpus: 1``), as on a
cluster whose nodes' torch cannot see CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from mlflow.tracking import MlflowClient

from sublayer_search.models.optim import NoGpuError, device_facts, require_gpu
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.cli.main import main
from sublayer_search.spaces.records import Tag

NO_CUDA = not torch.cuda.is_available()


def _experiment(tmp_path: Path, device: str) -> Path:
    doc = {
        "name": f"device_{device}", "space": {"type": "explicit", "orders": ["sfsf", "ssff"]},
        "seeds": [0], "baseline": {"enabled": False},
        "model": {"preset": "debug", "dropout": 0.0}, "data": {"name": "tinyshakespeare"},
        "train": {"steps": 10, "batch_size": 8, "eval_every": 10, "eval_batches": 2,
                  "device": device},
        "resources": {"cpu": 1, "gpu": 0.5}, "max_concurrent": 2,
        "failure": {"retries": 0},
        "tracking": {"uri": f"sqlite:///{tmp_path}/mlflow.db"},
        "ray": {"storage_path": str(tmp_path / "ray"), "num_cpus": 2, "num_gpus": 1},
    }
    path = tmp_path / f"device_{device}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _trial_runs(tmp_path: Path, name: str) -> list:
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name(name)
    assert exp is not None
    return [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get(Tag.ROLE) == "trial"]


@pytest.mark.skipif(not NO_CUDA, reason="needs a machine where torch sees no CUDA")
def test_require_gpu_refuses_cpu_training_of_a_gpu_trial() -> None:
    with pytest.raises(NoGpuError, match=r"resources.gpu is 0.5 but torch sees no CUDA device "
                       r"on node X .*train.device: cpu"):
        require_gpu(0.5, TrainConfig(device="auto"), " on node X")
    with pytest.raises(NoGpuError):
        require_gpu(1, TrainConfig(device="cuda"))
    require_gpu(1, TrainConfig(device="cpu"))  # asked for: holds the GPU, trains on the CPU
    require_gpu(0, TrainConfig(device="auto"))  # no GPU asked: the CPU is right


def test_device_facts_name_the_kind_the_model_and_the_count() -> None:
    facts = device_facts(torch.device("cpu"), 2)
    assert facts["device"] == "cpu" and facts["device_count"] == 2
    assert isinstance(facts["device_name"], str) and facts["device_name"]


@pytest.mark.slow
@pytest.mark.skipif(not NO_CUDA, reason="needs a machine where torch sees no CUDA")
def test_a_gpu_trial_without_cuda_fails_instead_of_training_on_the_cpu(
        tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(_experiment(tmp_path, "auto"))]) == 1
    _, err = capsys.readouterr()
    assert "2 failed of 2 trial(s)" in err, err
    runs = _trial_runs(tmp_path, "device_auto")
    assert len(runs) == 2
    for run in runs:
        assert run.info.status == "FAILED"
        assert "NoGpuError" in run.data.tags[Tag.ERROR], run.data.tags[Tag.ERROR]
        assert "torch sees no CUDA device on node" in run.data.tags[Tag.ERROR]
        assert not any(k.startswith("val_") for k in run.data.metrics)  # nothing trained


@pytest.mark.slow
def test_every_trial_records_the_device_it_trained_on(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert main(["sweep", str(_experiment(tmp_path, "cpu"))]) == 0
    runs = _trial_runs(tmp_path, "device_cpu")
    assert len(runs) == 2
    for run in runs:
        tags = run.data.tags
        assert run.info.status == "FINISHED"
        assert tags[Tag.DEVICE] == "cpu" and tags[Tag.DEVICE_COUNT] == "1", tags
        assert tags[Tag.DEVICE_NAME] == device_facts(torch.device("cpu"))["device_name"]
        assert "device_count" not in run.data.metrics  # a tag, not a metric
