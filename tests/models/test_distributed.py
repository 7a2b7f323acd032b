"""Data-parallel training (models/distributed.py): two gloo workers train as one.

Two processes form a real gloo process group on 127.0.0.1 and run the one training loop
(``lm_workload.fit``) with the same seed and global batch as a single process; the losses
they report agree with the single process's to float tolerance for the first steps.
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

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.distributed import SINGLE, Workers, unwrap
from sublayer_search.models.lm_workload import TrainConfig, TrialSpec, fit

STEPS = 4


def _spec(**train: Any) -> TrialSpec:
    base = {"steps": STEPS, "batch_size": 8, "eval_every": 1, "eval_batches": 2, "lr": 3e-3,
            "warmup_steps": 0, "seed": 11, "device": "cpu", "precision": "fp32"}
    return TrialSpec(model=model_preset("debug", order="sfsf", dropout=0.0),
                     data=DataConfig(name="tinyshakespeare"),
                     train=TrainConfig(**{**base, **train}))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _worker(rank: int, world: int, port: int, out: str, ckpt: str) -> None:
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        rows: list[dict[str, Any]] = []
        saved: list[str | None] = []

        def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
            rows.append(dict(metrics))
            saved.append(checkpoint)

        fit(_spec(), report, checkpoint_dir=os.path.join(ckpt, f"rank{rank}"))
        torch.save({"rows": rows, "saved": saved}, os.path.join(out, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _single() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    torch.set_num_threads(1)
    fit(_spec(), lambda m, checkpoint=None: rows.append(dict(m)))
    return rows


@pytest.mark.slow
def test_two_gloo_workers_train_like_one(tmp_path: Path) -> None:
    single = _single()
    mp.spawn(_worker, args=(2, _free_port(), str(tmp_path), str(tmp_path / "ckpt")), nprocs=2,
             join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    assert [len(r["rows"]) for r in ranks] == [STEPS, STEPS]  # every worker reports
    for rank in ranks:
        for one, two in zip(single, rank["rows"], strict=True):
            assert one["step"] == two["step"]
            # mean of the two halves' losses == the global batch's loss; DDP's averaged
            # gradient == the global batch's gradient: same parameters up to float error
            assert math.isclose(one["train_loss"], two["train_loss"], rel_tol=1e-4), (one, two)
            assert math.isclose(one["val_loss"], two["val_loss"], rel_tol=1e-4), (one, two)
    # the workers saw the same numbers (the loss is averaged over them)
    assert [r["train_loss"] for r in ranks[0]["rows"]] == [r["train_loss"] for r in ranks[1]["rows"]]
    # only rank 0 writes checkpoints
    assert all(c is not None for c in ranks[0]["saved"])
    assert not (tmp_path / "ckpt" / "rank1").exists()


def test_a_global_batch_must_split_evenly() -> None:
    with pytest.raises(ValueError, match=r"train.batch_size: got 6, expected a multiple of "
                                         r"resources.workers \(4\)"):
        Workers(rank=0, world=4).check_batch(6)


def test_shares_tile_the_global_batch() -> None:
    rows = torch.arange(12).view(6, 2)
    shares = [Workers(rank=r, world=3).local(rows) for r in range(3)]
    assert torch.equal(torch.cat(shares), rows)
    assert SINGLE.local(rows) is rows


def test_one_worker_without_a_process_group() -> None:
    assert Workers.from_process_group() == SINGLE
    with pytest.raises(ValueError, match="rank 2 of 2 workers"):
        Workers(rank=2, world=2)
    model = torch.nn.Linear(2, 2)
    assert unwrap(model) is model and SINGLE.wrap(model, torch.device("cpu")) is model


def test_the_loop_default_is_one_worker() -> None:
    rows: list[dict[str, Any]] = []
    fit(replace(_spec(), train=replace(_spec().train, steps=1)), lambda m, c=None: rows.append(m))
    assert len(rows) == 1 and math.isfinite(rows[0]["train_loss"])
