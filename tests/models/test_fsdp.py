"""Sharded data parallelism (``train.parallel: fsdp``, models/distributed.py).

Two processes form a real gloo process group on 127.0.0.1 and run the one training loop
(``lm_workload.fit``) with the model sharded by FSDP2: the losses agree with one process's
(same seed, same global batch) to float tolerance; the full checkpoint rank 0 writes has
the format of a one-worker checkpoint, and training resumed from it continues as the
uninterrupted run does, whether the resuming run has one worker or two (and two workers
resume from a one-worker checkpoint too).
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sublayer_search.models.checkpoint import load_checkpoint
from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.distributed import Workers
from sublayer_search.models.errors import ConfigError
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.lm_workload import LMWorkload, TrainConfig, TrialSpec, fit
from sublayer_search.models.training_loop import train

STEPS = 4
HALF = 2


def _spec(steps: int = STEPS, **train: Any) -> TrialSpec:
    # constant schedule: a run of HALF steps resumed to STEPS is the run of STEPS
    base = {"steps": steps, "batch_size": 8, "eval_every": 1, "eval_batches": 2, "lr": 3e-3,
            "schedule": "constant", "seed": 11, "device": "cpu", "precision": "fp32",
            "parallel": "fsdp"}
    return TrialSpec(model=model_preset("debug", order="sfsf", dropout=0.0),
                     data=DataConfig(name="tinyshakespeare"),
                     train=TrainConfig(**{**base, **train}))


def _rows(spec: TrialSpec, **kwargs: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    fit(spec, lambda m, checkpoint=None: rows.append(dict(m)), **kwargs)
    return rows


class _Kept(LMWorkload):
    """The LM family, keeping the model it built (to look at its parameters after)."""

    def build(self) -> OrderedLM:
        self.model = super().build()
        return self.model


def _local_share(model: torch.nn.Module) -> float:
    """This worker's share of the parameter elements (DTensor shards: ~1/world)."""
    from torch.distributed.tensor import DTensor

    params = list(model.parameters())
    assert all(isinstance(p, DTensor) for p in params)
    return sum(p.to_local().numel() for p in params) / sum(p.numel() for p in params)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, out: str, one_worker_ckpt: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        ckpt = os.path.join(out, f"ckpt{rank}")
        first: list[dict[str, Any]] = []
        family = _Kept(_spec(HALF))
        train(_spec(HALF).train, family, lambda m, checkpoint=None: first.append(dict(m)),
              checkpoint_dir=ckpt)
        share = _local_share(family.model)
        shared = os.path.join(out, "ckpt0")  # rank 0's: the only one written
        resumed = _rows(_spec(), resume_from=shared)
        from_one = _rows(_spec(), resume_from=one_worker_ckpt)
        torch.save({"first": first, "resumed": resumed, "from_one": from_one, "share": share},
                   os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _agree(ref: list[dict[str, Any]], got: list[dict[str, Any]]) -> None:
    assert [r["step"] for r in ref] == [r["step"] for r in got], (ref, got)
    for one, two in zip(ref, got, strict=True):
        for key in ("train_loss", "val_loss"):
            assert math.isclose(one[key], two[key], rel_tol=1e-4), (key, one, two)


@pytest.mark.slow
def test_two_sharded_workers_train_and_resume_like_one(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    single = _rows(_spec())  # one worker: fsdp trains the whole model
    one_ckpt = str(tmp_path / "one")
    _rows(_spec(HALF), checkpoint_dir=one_ckpt)
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path), one_ckpt), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    for rank in ranks:
        assert 0.4 < rank["share"] < 0.6, rank["share"]  # each holds half the parameters
        _agree(single[:HALF], rank["first"])  # sharded == one worker, step by step
        _agree(single[HALF:], rank["resumed"])  # FSDP checkpoint -> FSDP run continues
        _agree(single[HALF:], rank["from_one"])  # one-worker checkpoint -> FSDP run
    assert not (tmp_path / "ckpt1").exists()  # only rank 0 writes
    sharded, whole = load_checkpoint(tmp_path / "ckpt0"), load_checkpoint(one_ckpt)
    # the same format as one worker's: full tensors, the optimizer keyed by index
    assert sharded["model"].keys() == whole["model"].keys()
    for name, tensor in whole["model"].items():
        assert sharded["model"][name].shape == tensor.shape, name
    assert sharded["optimizer"]["state"].keys() == whole["optimizer"]["state"].keys()
    assert [g["params"] for g in sharded["optimizer"]["param_groups"]] == \
        [g["params"] for g in whole["optimizer"]["param_groups"]]
    assert sharded["step"] == HALF
    # one worker resumes from the sharded run's checkpoint
    _agree(single[HALF:], _rows(_spec(), resume_from=str(tmp_path / "ckpt0")))


def test_fsdp_on_one_worker_trains_the_whole_model() -> None:
    ddp = _rows(replace(_spec(1), train=replace(_spec(1).train, parallel="ddp")))
    fsdp = _rows(_spec(1))
    timeless = [{k: v for k, v in r.items() if k != "tokens_per_s"} for r in (*ddp, *fsdp)]
    assert timeless[:1] == timeless[1:] and "val_loss" in timeless[0]


def test_a_family_that_cannot_be_sharded_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"train.parallel: got 'fsdp', expected ddp: this "
                                          r"model family cannot be sharded"):
        Workers(rank=0, world=2, strategy="fsdp").shard(torch.nn.Linear(2, 2), None)


def test_parallel_takes_ddp_or_fsdp() -> None:
    with pytest.raises(ValueError, match=r"train.parallel: got 'zero3', expected ddp or fsdp"):
        TrainConfig(parallel="zero3")  # type: ignore[arg-type]
    assert not Workers(rank=0, world=1, strategy="fsdp").sharded
    assert Workers(rank=1, world=2, strategy="fsdp").sharded
    assert not Workers(rank=1, world=2).sharded
