"""``sublayer train``: arguments, the optional YAML file, and progress printing."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from sublayer_search.analysis.paths import unusable_folder
from sublayer_search.models.data.config import DataConfig
from sublayer_search.models.specs import TrialSpec
from sublayer_search.models.train_config import TrainConfig
from sublayer_search.search.core.problems import ExperimentError, Problem, from_validation_error
from sublayer_search.search.core.yaml_input import nearest_file
from sublayer_search.search.plan.experiment import read_yaml

__all__ = ["TrainFile", "add_train_arguments", "build_spec", "progress_printer", "usable_cpus"]


def usable_cpus() -> int:
    """The CPUs this process may use: its affinity set, capped by a cgroup CPU quota."""
    import math
    import os

    try:
        count = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            count = min(count, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, count)


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a whole number of threads, 1 or more")
    return n


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
    d = TrainConfig()

    def dflt(key: str) -> str:  # the --config file's train section wins over the built-in default
        return f"default: the --config file's train.{key}, else {getattr(d, key):g}"

    p.add_argument("--steps", type=int, default=None, help=f"optimizer steps ({dflt('steps')})")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"sequences per step ({dflt('batch_size')})")
    p.add_argument("--lr", type=float, default=None,
                   help=f"peak learning rate of the cosine schedule ({dflt('lr')})")
    p.add_argument("--seed", type=int, default=None, help=f"random seed ({dflt('seed')})")
    p.add_argument("--eval-every", type=int, default=None,
                   help=f"evaluate every this many steps ({dflt('eval_every')})")
    p.add_argument("--checkpoint-dir", default=None, help="write a checkpoint at every evaluation")
    p.add_argument("--resume-from", default=None, help="continue from a checkpoint folder")
    p.add_argument("--threads", type=_threads, default=None,
                   help=f"torch CPU threads (default: one per CPU this command may use, here "
                        f"{usable_cpus()}; fewer on a machine busy with other work)")


def _load(path: str | None) -> TrainFile:
    """The ``--config`` file: UTF-8 YAML (see ``config.read_yaml``), a mapping of sections."""
    if path is None:
        return TrainFile()
    source = f"--config {path}"
    if not Path(path).is_file():
        raise ExperimentError(source, [Problem("", path, "an existing YAML file with model/data/"
                                                          "train sections" + nearest_file(path))])
    try:
        raw = read_yaml(path)
    except ExperimentError as err:
        raise ExperimentError(source, err.problems) from None
    except OSError as exc:
        raise ExperimentError(source, [Problem("", path, f"a readable YAML file ({exc.strerror})")]) from None
    except UnicodeDecodeError as exc:  # read_yaml reports these itself; kept as a backstop
        raise ExperimentError(source, [Problem("", f"a byte that is not UTF-8 at offset {exc.start}",
                                               "a UTF-8 text file")]) from None
    except RecursionError:
        raise ExperimentError(source, [Problem("", "a document nested too deeply",
                                               "a flatter YAML document")]) from None
    if raw is None:
        return TrainFile()
    if not isinstance(raw, dict):
        raise ExperimentError(source, [Problem("", type(raw).__name__, "a YAML mapping with model, "
                                                                      "data and train sections")])
    try:
        return TrainFile.model_validate(raw)
    except pydantic.ValidationError as err:
        raise ExperimentError(source, from_validation_error(err)) from None


def _check_paths(args: argparse.Namespace) -> None:
    """``--resume-from`` holds a checkpoint; ``--checkpoint-dir`` is or can become a folder."""
    from sublayer_search.models.checkpoint import CHECKPOINT_FILE

    problems: list[Problem] = []
    resume = getattr(args, "resume_from", None)
    if resume is not None and not (Path(resume) / CHECKPOINT_FILE).is_file():
        why = ("there is no such folder" if not Path(resume).exists() else
               "it is a file" if not Path(resume).is_dir() else f"it has no {CHECKPOINT_FILE}")
        problems.append(Problem("--resume-from", resume, f"a checkpoint folder containing "
                                                         f"{CHECKPOINT_FILE} ({why})"))
    ckpt = getattr(args, "checkpoint_dir", None)
    if ckpt is not None:
        unusable = unusable_folder(Path(ckpt))
        if unusable:
            problems.append(Problem("--checkpoint-dir", ckpt, f"a folder to write checkpoints "
                                                              f"in ({unusable})"))
    if problems:
        raise ExperimentError("command line", problems)


def build_spec(args: argparse.Namespace) -> TrialSpec:
    """The trial spec from the file and the flags (flags win). Raises ValueError."""
    from dataclasses import replace

    from sublayer_search.models.config import ModelConfig, model_preset

    source = f"--config {args.config}" if args.config else "command line"
    file = _load(args.config)
    _check_paths(args)
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
    from sublayer_search.search.plan.preflight import home_problems

    home = home_problems(data, local_ray=False)  # the corpus cache may be under $HOME
    if home:
        raise ExperimentError(source, home)
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
