"""Whether this machine can give a sweep what its ``resources`` ask (skipped for a cluster).

Planning stays fast: GPUs are counted without importing torch; torch is asked only when a
GPU is there (:func:`torch_cuda`).
"""

from __future__ import annotations

import os
from pathlib import Path

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.search.tasks import task_class

__all__ = ["GPU_PER_WORKER", "check_resources", "local_gpus", "parallel_problems",
           "resource_problems", "torch_cuda", "worker_problems"]


def check_resources(exp: Experiment, problems: list[Problem]) -> None:
    """Local runs: a trial must fit this machine (clusters are checked after connecting)."""
    if exp.ray.address or os.environ.get("RAY_ADDRESS"):
        return
    cpus = exp.ray.num_cpus or os.cpu_count() or 1
    workers = exp.resources.workers
    if exp.resources.cpu * workers > cpus:
        expected = (f"at most {cpus / workers:.3g} CPUs per worker: {workers} workers x "
                    f"{exp.resources.cpu:g} must fit the {cpus} CPUs of this machine / "
                    "ray.num_cpus" if workers > 1 else
                    f"at most {cpus} (CPUs of this machine / ray.num_cpus)")
        problems.append(Problem("resources.cpu", exp.resources.cpu, expected))
    gpus = exp.ray.num_gpus if exp.ray.num_gpus is not None else local_gpus()
    if exp.train.device == "cuda" and not torch_cuda():
        problems.append(Problem("train.device", "cuda", "auto or cpu: this machine has no CUDA "
                                "GPU (or give --address of a cluster whose workers have one)"))
    if exp.resources.gpu * workers > gpus:
        problems.append(Problem("resources.gpu", exp.resources.gpu,
                                f"at most {gpus / workers:g} per worker ({workers} workers, "
                                f"{gpus} GPUs of this machine / ray.num_gpus)" if workers > 1
                                else f"at most {gpus} (GPUs of this machine / ray.num_gpus)"))


def parallel_problems(exp: Experiment) -> list[Problem]:
    """``train.parallel: fsdp`` needs models that can be sharded: language models (one FSDP
    unit per sublayer) without guidance. Refused whatever ``resources.workers`` says (one
    worker trains the whole model, but the file asks for what its models cannot do)."""
    if exp.train.parallel != "fsdp":
        return []
    why = None
    refused = task_class(exp.task).refusals.get("fsdp")
    if refused is not None:
        why = f"ddp for task {exp.task}: {refused}"
    elif search_algorithm(exp.search.algorithm).supernet_stage:
        why = (f"ddp for search.algorithm {exp.search.algorithm}: the supernet's paths share "
               "weights and train on some blocks only")
    elif exp.model is not None and any(setting.mode != "none"
                                       for _, setting in exp.model.guidance.values()):
        why = ("ddp with model.guidance: a guidance pair reads (soft) or shares (hard) the "
               "weights of two sublayers, which FSDP keeps in separate shards")
    return [] if why is None else [Problem("train.parallel", "fsdp", why)]


GPU_PER_WORKER = ("at most 1 per worker: the training loop drives one device per worker; "
                  "ask for more workers instead (resources.workers)")
"""Why ``resources.gpu`` > 1 is refused: the loop trains on one ``cuda`` device, so a second
GPU held by a trial (or a worker) would sit idle while other trials wait for it."""


def worker_problems(exp: Experiment) -> list[Problem]:
    """What ``resources.workers`` > 1 (and ``train.parallel``) needs of the rest of the
    file (anywhere it runs), and at most one GPU per worker (a one-worker trial too)."""
    res, problems = exp.resources, parallel_problems(exp)
    if res.gpu > 1:
        problems.append(Problem("resources.gpu", res.gpu, GPU_PER_WORKER))
    if res.workers == 1:
        return problems
    if exp.train.batch_size % res.workers:
        problems.append(Problem("train.batch_size", exp.train.batch_size,
                                f"a multiple of resources.workers ({res.workers}): the global "
                                "batch is split evenly across the workers"))
    if res.gpu < 1 and res.gpu != int(res.gpu):
        problems.append(Problem("resources.gpu", res.gpu, "a whole number of GPUs per worker "
                                "(fractions share a GPU between one-worker trials only)"))
    return problems


def local_gpus() -> int:
    """NVIDIA GPUs this process may use, without importing torch (planning stays fast):
    ``CUDA_VISIBLE_DEVICES`` when set, else the driver's ``/proc/driver/nvidia/gpus``."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d for d in visible.split(",") if d.strip()]
        return 0 if not ids or ids[0].strip() == "-1" else len(ids)
    gpus = Path("/proc/driver/nvidia/gpus")
    return len(list(gpus.iterdir())) if gpus.is_dir() else 0


def torch_cuda() -> bool:
    """Whether torch can train on a GPU here (imports torch only when a GPU is present)."""
    if local_gpus() == 0:
        return False
    from sublayer_search.models.optim import cuda_available

    return cuda_available()


def resource_problems(exp: Experiment, address: str | None = None) -> list[Problem]:
    """Problems of ``resources`` on this machine (none when a cluster address is given)."""
    problems: list[Problem] = []
    if not address:
        check_resources(exp, problems)
    return problems
