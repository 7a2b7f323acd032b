"""``sublayer train``: arguments, the optional YAML file, and progress printing."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import pydantic
import yaml
from pydantic import BaseModel, ConfigDict, Field

from sublayer_search.models.data import DataConfig
from sublayer_search.models.train import TrainConfig, TrialSpec

from .problems import ExperimentError, Problem, from_validation_error

__all__ = ["TrainFile", "add_train_arguments", "build_spec", "progress_printer"]


class TrainFile(BaseModel):
    """``--config`` file of ``sublayer train``: model / data / train sections."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model: dict[str, Any] = Field(default_factory=dict)
    data: dict[str, Any] = Field(default_factory=dict)
    train: TrainConfig = TrainConfig()


def add_train_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--order", required=True,
                   help="sublayer order, e.g. sfsfsf, 's^2 (sf)^2 f^2', sandwich(16,6)")
    p.add_argument("--data", default=None, help="corpus name (tinyshakespeare, wikitext-103, …)")
    p.add_argument("--config", default=None, help="YAML with model/data/train sections")
    p.add_argument("--preset", default=None, help="model preset: debug, tiny, press2020")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--eval-every", type=int, default=None)
    p.add_argument("--checkpoint-dir", default=None, help="write a checkpoint at every evaluation")
    p.add_argument("--resume-from", default=None, help="continue from a checkpoint folder")


def _load(path: str | None) -> TrainFile:
    if path is None:
        return TrainFile()
    try:
        with open(path) as fh:
            raw = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise ExperimentError(path, [Problem("", path, f"a readable YAML file ({exc.strerror})")]) from None
    except yaml.YAMLError:
        raise ExperimentError(path, [Problem("", path, "well-formed YAML")]) from None
    try:
        return TrainFile.model_validate(raw)
    except pydantic.ValidationError as err:
        raise ExperimentError(path, from_validation_error(err)) from None


def build_spec(args: argparse.Namespace) -> TrialSpec:
    """The trial spec from the file and the flags (flags win). Raises ValueError."""
    from dataclasses import replace

    from sublayer_search.models.config import ModelConfig, model_preset

    source = args.config or "command line"
    file = _load(args.config)
    model_raw = dict(file.model)
    preset = args.preset or model_raw.pop("preset", None) or "tiny"
    model_raw.pop("preset", None)
    model = model_preset(preset, **{**model_raw, "order": args.order}) if preset else \
        ModelConfig.from_dict({**model_raw, "order": args.order})
    data_raw = dict(file.data)
    if args.data is not None:
        data_raw["name"] = args.data
    if "name" not in data_raw:
        raise ExperimentError(source, [Problem("data.name", None, "a corpus name (--data NAME)")])
    try:
        data = DataConfig(**data_raw)
    except TypeError as exc:
        raise ExperimentError(source, [Problem("data", data_raw, f"known data settings ({exc})")]) from None
    overrides = {k: v for k, v in {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                                   "seed": args.seed, "eval_every": args.eval_every}.items()
                 if v is not None}
    train = replace(file.train, **overrides)
    return TrialSpec(model=model, data=data, train=train)


def progress_printer(spec: TrialSpec) -> tuple[Callable[[dict[str, float]], None],
                                               Callable[..., None]]:
    """(on_step, report): periodic lines with loss, metric and tokens/s."""
    start = time.perf_counter()
    total = spec.train.steps

    def on_step(m: dict[str, float]) -> None:
        print(f"step {int(m['step']):>6}/{total}  train_loss {m['train_loss']:.4f}  "
              f"lr {m['lr']:.2e}  {time.perf_counter() - start:6.1f}s", file=sys.stderr)

    def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
        parts = [f"eval step {int(metrics['step'])}"]
        for key in ("val_loss", "val_ppl", "val_bpc", "tokens_per_s"):
            if key in metrics:
                parts.append(f"{key} {metrics[key]:.4g}")
        print("  ".join(parts), flush=True)

    return on_step, report
