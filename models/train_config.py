"""``TrainConfig``: optimisation and evaluation settings of one trial (any workload)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from sublayer_search.models.errors import Checks, is_int, is_number, is_positive_int

__all__ = ["TrainConfig", "flat_settings"]


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation and evaluation settings of one trial."""

    __pydantic_config__ = {"extra": "forbid"}

    steps: int = 200
    """Optimizer steps to train for."""
    batch_size: int = 16
    """Sequences per micro-batch."""
    grad_accum: int = 1
    """Micro-batches accumulated per optimizer step (several workers synchronise their
    gradients once per step, on the last one)."""
    optimizer: Literal["adamw", "sgd", "adagrad"] = "adamw"
    """AdamW (default), SGD with Nesterov momentum, or Adagrad."""
    lr: float = 3e-3
    """Peak learning rate."""
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas."""
    momentum: float = 0.99
    """SGD Nesterov momentum."""
    schedule: Literal["cosine", "inverse_sqrt", "constant"] = "cosine"
    """Learning-rate schedule after linear warmup."""
    warmup_steps: int = 0
    min_lr_ratio: float = 0.0
    """Floor of the cosine schedule as a fraction of ``lr``."""
    clip_norm: float | None = 1.0
    """Global gradient-norm clip; ``None`` disables it."""
    eval_every: int = 50
    """Evaluate (and report, and checkpoint: see ``checkpoint_every``) every this many
    steps, and at the end."""
    checkpoint_every: int | None = None
    """Steps between checkpoints (a multiple of ``eval_every``: a checkpoint is written at
    an evaluation, and always at the last step); ``None``: at every evaluation. Writing
    one gathers the whole state to rank 0 (FSDP) and saves it to disk: fewer checkpoints
    cost less, a restarted trial trains again the steps since the last one. The numbers
    trained do not depend on it."""
    eval_batches: int | None = None
    """Validation batches per evaluation; ``None`` evaluates the whole split."""
    eval_batch_size: int | None = None
    """Batch size for evaluation; defaults to ``batch_size``."""
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    """``auto`` = bf16 autocast on CUDA, fp32 on CPU. In bf16, ``parallel: fsdp`` on several
    workers also gathers the parameters in bf16 and reduces the gradients in fp32."""
    compile: bool = False
    """``torch.compile`` the model (CUDA only; ignored on CPU)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    seed: int = 0
    """Seeds torch, numpy, random and the batch sampler."""
    log_every: int = 10
    """Steps between progress callbacks (``on_step``)."""
    parallel: Literal["ddp", "fsdp"] = "ddp"
    """How the workers of a trial (``resources.workers`` > 1) hold the model: ``ddp``
    replicates it on every worker, ``fsdp`` shards its parameters, gradients and optimizer
    state across them (one FSDP unit per block; language models without guidance only).
    With one worker both train the whole model on its one device: there is nothing to
    shard across. The numbers are the same either way, so it is not in the config hash."""

    def __post_init__(self) -> None:
        """Every invalid value is reported, not only the first."""
        checks = Checks()

        def check(cond: bool, name: str, expected: str) -> None:
            checks(cond, f"train.{name}", getattr(self, name), expected)

        for name in ("steps", "batch_size", "grad_accum", "eval_every", "log_every"):
            check(is_positive_int(getattr(self, name)), name, "a positive integer")
        check(is_number(self.lr, finite=True) and self.lr > 0, "lr", "a positive number")
        check(is_number(self.weight_decay, finite=True) and self.weight_decay >= 0, "weight_decay",
              "a finite number >= 0")
        check(len(self.betas) == 2 and all(is_number(b) and 0 <= b < 1 for b in self.betas),
              "betas", "two numbers in [0, 1)")
        check(is_number(self.momentum) and 0 <= self.momentum < 1, "momentum", "a number in [0, 1)")
        check(is_int(self.warmup_steps) and self.warmup_steps >= 0, "warmup_steps",
              "an integer >= 0")
        check(is_number(self.min_lr_ratio) and 0 <= self.min_lr_ratio <= 1, "min_lr_ratio",
              "a number in [0, 1]")
        check(self.clip_norm is None or (is_number(self.clip_norm, finite=True)
                                         and self.clip_norm > 0),
              "clip_norm", "a finite positive number or null")
        check(self.checkpoint_every is None
              or (is_positive_int(self.checkpoint_every)
                  and (not is_positive_int(self.eval_every)
                       or self.checkpoint_every % self.eval_every == 0)),
              "checkpoint_every", f"a positive multiple of train.eval_every ({self.eval_every}) "
              "or null (at every evaluation)")
        check(self.eval_batches is None or is_positive_int(self.eval_batches), "eval_batches",
              "a positive integer or null (whole split)")
        check(self.eval_batch_size is None or is_positive_int(self.eval_batch_size),
              "eval_batch_size", "a positive integer or null")
        check(is_int(self.seed) and self.seed >= 0, "seed", "an integer >= 0")
        check(self.parallel in ("ddp", "fsdp"), "parallel", "ddp or fsdp")
        checks.raise_any()


def flat_settings(spec: Any) -> dict[str, Any]:
    """``{"model.d_model": 64, "train.lr": 0.003, …}``: every setting of a spec whose fields
    are config dataclasses (``TrialSpec``, ``TranslationSpec``, …), for tracking."""
    out: dict[str, Any] = {}
    for section in dataclasses.fields(spec):
        value = getattr(spec, section.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            items = dataclasses.asdict(value)
            if isinstance(items.get("sublayers"), dict):  # a model's hybrid-kind settings:
                items.pop("sublayers")  # only those set (none: the params read as before)
                changed = getattr(value, "sublayers").changed()  # noqa: B009 - any model config
                items.update({f"sublayers.{k}": v for k, v in changed.items()})
            for key, item in items.items():
                out[f"{section.name}.{key}"] = item
    return out
