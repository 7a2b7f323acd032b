"""``train.precision: bf16`` gives FSDP a mixed-precision policy (models/distributed.py,
``mixed_precision``): bf16 parameters and compute, fp32 gradient reduction, fp32 shards.

Two gloo workers train the debug LM sharded, once in fp32 and once in bf16: the bf16
losses stay within ``REL_TOL`` of the fp32 ones; inside the forward every linear layer
holds bf16 weights and returns bf16; FSDP's all-gathers carry bf16 and its
reduce-scatters fp32 (the inputs of ``torch.distributed.all_gather_single`` /
``reduce_scatter_single``, watched); the shards the optimizer updates stay fp32.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from dp_helpers import on_workers, watched

from sublayer_search.models.config import model_preset
from sublayer_search.models.data import DataConfig
from sublayer_search.models.distributed import mixed_precision
from sublayer_search.models.lm import OrderedLM
from sublayer_search.models.lm_workload import LMWorkload, TrainConfig, TrialSpec
from sublayer_search.models.training_loop import train

STEPS = 3
REL_TOL = 2e-2
"""bf16 against fp32: relative difference of every reported train and validation loss
(bf16 keeps 8 bits of mantissa, ~4e-3 per rounding; measured here: 1.9e-4)."""


def _spec(precision: str) -> TrialSpec:
    return TrialSpec(model=model_preset("debug", order="sfsf", dropout=0.0),
                     data=DataConfig(name="tinyshakespeare"),
                     train=TrainConfig(steps=STEPS, batch_size=8, eval_every=1, eval_batches=2,
                                       lr=3e-3, seed=3, device="cpu", precision=precision,
                                       parallel="fsdp"))


class _Watched(LMWorkload):
    """The LM family; records the weight and output dtypes of every linear forward."""

    def build(self) -> OrderedLM:
        self.model = super().build()
        self.dtypes: set[tuple[torch.dtype, torch.dtype]] = set()
        for module in self.model.modules():
            if isinstance(module, torch.nn.Linear):
                module.register_forward_hook(
                    lambda m, args, out: self.dtypes.add((m.weight.dtype, out.dtype)))
        return self.model


def _fit(precision: str) -> tuple[list[dict[str, Any]], _Watched]:
    rows: list[dict[str, Any]] = []
    spec = _spec(precision)
    family = _Watched(spec)
    train(spec.train, family, lambda m, checkpoint=None: rows.append(dict(m)))
    return rows, family


def _both(rank: int) -> dict[str, Any]:
    fp32, _ = _fit("fp32")
    with watched("all_gather_single", "reduce_scatter_single") as seen:
        bf16, family = _fit("bf16")
    family.model.reshard()  # the root keeps its gathered bf16 parameters after a forward
    return {"fp32": fp32, "bf16": bf16, "linear": family.dtypes, "collectives": seen,
            "shards": {(type(p).__name__, p.dtype) for p in family.model.parameters()}}


def _close(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> None:
    assert [r["step"] for r in a] == [r["step"] for r in b] == list(range(1, STEPS + 1))
    for x, y in zip(a, b, strict=True):
        for key in ("train_loss", "val_loss"):
            assert math.isclose(x[key], y[key], rel_tol=REL_TOL), (key, x, y)


@pytest.mark.slow
def test_fsdp_bf16_computes_in_bf16_and_reduces_in_fp32(tmp_path: Path) -> None:
    for got in on_workers(_both, tmp_path):
        _close(got["fp32"], got["bf16"])
        assert got["bf16"][0]["train_loss"] != got["fp32"][0]["train_loss"]  # it did change
        assert got["linear"] == {(torch.bfloat16, torch.bfloat16)}, got["linear"]
        gathers, reductions = (got["collectives"][n] for n in
                               ("all_gather_single", "reduce_scatter_single"))
        assert gathers and set(gathers) == {torch.bfloat16}, gathers
        assert reductions and set(reductions) == {torch.float32}, reductions
        assert got["shards"] == {("DTensor", torch.float32)}, got["shards"]


def test_the_policy_is_bf16_compute_and_fp32_reduction() -> None:
    policy = mixed_precision(True)
    assert (policy.param_dtype, policy.reduce_dtype) == (torch.bfloat16, torch.float32)
    plain = mixed_precision(False)
    assert (plain.param_dtype, plain.reduce_dtype) == (None, None)
