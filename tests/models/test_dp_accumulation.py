"""Gradient accumulation synchronises once per optimizer step (models/distributed.py,
``Workers.accumulating``; the loop in models/training_loop.py).

Two gloo workers train with ``train.grad_accum: 4``: DDP all-reduces, and FSDP
reduce-scatters, exactly as often as with ``grad_accum: 1`` (collectives counted by
torch's profiler), and the losses and parameters after the steps are those of one
process that trains on the whole global batch (16 rows, no accumulation) at once.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from dp_helpers import collectives, on_workers

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.lm_workload import LMWorkload, TrainConfig, TrialSpec
from sublayer_search.models.training_loop import train

STEPS = 2
GLOBAL = 16
"""Rows of the global batch of one optimizer step."""
PARAM_TOL = 1e-5
"""Largest |difference| of a parameter against the one-process run: float32 sums in
another order (measured: 2.5e-6); one AdamW step moves a parameter by about lr = 3e-3,
so a missed or doubled synchronisation is ~300 times over it."""


def _spec(**train: Any) -> TrialSpec:
    base = {"steps": STEPS, "batch_size": GLOBAL, "eval_every": STEPS, "eval_batches": 2,
            "eval_batch_size": GLOBAL, "lr": 3e-3, "seed": 5, "device": "cpu",
            "precision": "fp32"}  # the same validation batches, whatever the micro-batch
    return TrialSpec(model=model_preset("debug", order="sfsf", dropout=0.0),
                     data=DataConfig(name="tinyshakespeare"),
                     train=TrainConfig(**{**base, **train}))


class _Kept(LMWorkload):
    """The LM family, keeping the model it built."""

    def build(self) -> OrderedLM:
        self.model = super().build()
        return self.model


def _fit(spec: TrialSpec) -> tuple[list[dict[str, Any]], dict[str, torch.Tensor]]:
    """The reported rows and the full parameters after training."""
    from torch.distributed.tensor import DTensor

    rows: list[dict[str, Any]] = []
    family = _Kept(spec)
    train(spec.train, family, lambda m, checkpoint=None: rows.append(dict(m)))
    params = {name: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
              for name, p in family.model.named_parameters()}
    return rows, params


def _accumulate(rank: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for parallel in ("ddp", "fsdp"):
        for accum in (1, 4):  # 4 micro-batches of 4 rows: the same 16 rows a step
            spec = _spec(parallel=parallel, grad_accum=accum, batch_size=GLOBAL // accum)
            with collectives() as counts:
                rows, params = _fit(spec)
            out[parallel, accum] = {"counts": counts, "rows": rows, "params": params}
    out["units"] = len(_Kept(_spec()).build().layers) + 1  # FSDP: each block, the root
    return out


@pytest.mark.slow
def test_accumulation_synchronises_once_per_step(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    one_rows, one_params = _fit(_spec())  # one process, the whole global batch at once
    ranks = on_workers(_accumulate, tmp_path)
    for got in ranks:
        ddp1, ddp4 = got["ddp", 1]["counts"], got["ddp", 4]["counts"]
        fsdp1, fsdp4 = got["fsdp", 1]["counts"], got["fsdp", 4]["counts"]
        # DDP: one all-reduce per bucket and step, as without accumulation (before the
        # change, 4 per bucket and step); the loop's own (loss, tokens, validation) too
        assert ddp4["allreduce_"] == ddp1["allreduce_"] > 0, (ddp1, ddp4)
        # FSDP: one reduce-scatter per unit and step (before: one per micro-batch)
        assert fsdp4["_reduce_scatter_base_"] == fsdp1["_reduce_scatter_base_"] \
            == STEPS * got["units"], (fsdp1, fsdp4)
        for key in [("ddp", 1), ("ddp", 4), ("fsdp", 1), ("fsdp", 4)]:
            rows, params = got[key]["rows"], got[key]["params"]
            assert [r["step"] for r in rows] == [r["step"] for r in one_rows]
            for one, two in zip(one_rows, rows, strict=True):
                for metric in ("train_loss", "val_loss"):
                    assert math.isclose(one[metric], two[metric], rel_tol=1e-5), (key, one, two)
            worst = max(float((params[n] - p).abs().max()) for n, p in one_params.items())
            assert worst < PARAM_TOL, (key, worst)
