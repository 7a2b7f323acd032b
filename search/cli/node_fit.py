"""How a sweep's trials fill a cluster's nodes: the dry run's ``nodes:`` line and its
warning when more than a quarter of a node's GPUs or CPUs would sit idle.

The nodes' shape comes from, in order:

1. the Ray cluster at the address (``--address``, ``ray.address``), when it answers:
   every alive node's CPUs and GPUs, as Ray counts them;
2. the Slurm job the dry run runs in (``$SLURM_JOB_ID``; the Slurm pre-check of
   ``docker/slurm/ray-cluster.sh`` runs the dry run before Ray is up): each node gets
   ``SLURM_CPUS_PER_TASK`` x tasks per node CPUs (else ``SLURM_CPUS_ON_NODE``) and the
   GPUs of ``SLURM_GPUS_ON_NODE``, ``SLURM_GPUS_PER_NODE``, ``SLURM_JOB_GPUS`` or
   ``SLURM_GPUS_PER_TASK`` x tasks, as ``ray-node.sh`` gives them to Ray;
3. else nothing is said (a local sweep: the machine's resources are checked instead).

A node holds as many trials (of one worker) as its scarcer resource allows; a trial of
several workers counts each worker, and may span nodes.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sublayer_search.search.plan.experiment import Experiment

__all__ = ["IDLE_WARNING", "NodeFit", "cluster_nodes", "fit_lines", "fit_report", "node_fit",
           "ray_nodes", "slurm_nodes"]

IDLE_WARNING = 0.25
"""A share of a node's GPUs or CPUs left idle above which the dry run warns."""


@dataclass(frozen=True)
class NodeFit:
    cpus: float
    gpus: float
    workers: int
    """Workers (trials, for one-worker trials) the node holds at once."""
    idle_cpus: float
    idle_gpus: float

    @property
    def idle_cpu_share(self) -> float:
        return self.idle_cpus / self.cpus if self.cpus else 0.0

    @property
    def idle_gpu_share(self) -> float:
        return self.idle_gpus / self.gpus if self.gpus else 0.0


def node_fit(cpus: float, gpus: float, cpu: float, gpu: float) -> NodeFit:
    """Workers of ``cpu``/``gpu`` each that a node of ``cpus``/``gpus`` holds, and what is left."""
    by_cpu = math.floor(cpus / cpu + 1e-9)
    by_gpu = math.floor(gpus / gpu + 1e-9) if gpu else by_cpu
    fits = max(0, min(by_cpu, by_gpu))
    return NodeFit(cpus=cpus, gpus=gpus, workers=fits, idle_cpus=max(0.0, cpus - fits * cpu),
                   idle_gpus=max(0.0, gpus - fits * gpu))


def _count_ids(text: str) -> int | None:
    """``0,2-3`` -> 3 (None when malformed)."""
    total = 0
    for part in filter(None, (p.strip() for p in text.split(","))):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m or (m.group(2) and int(m.group(2)) < int(m.group(1))):
            return None
        total += int(m.group(2)) - int(m.group(1)) + 1 if m.group(2) else 1
    return total


def _typed_count(text: str) -> int | None:
    """``a100:2,v100:1`` -> 3; ``4`` -> 4 (None when malformed)."""
    total = 0
    for part in filter(None, text.split(",")):
        last = part.rsplit(":", 1)[-1]
        if not last.isdigit():
            return None
        total += int(last)
    return total


def _tasks_per_node(env: Mapping[str, str]) -> int:
    text = env.get("SLURM_NTASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "1")
    m = re.match(r"(\d+)", text)
    return int(m.group(1)) if m else 1


def _slurm_gpus(env: Mapping[str, str], tasks: int) -> int:
    if env.get("SLURM_GPUS_ON_NODE", "").isdigit():
        return int(env["SLURM_GPUS_ON_NODE"])
    if env.get("SLURM_GPUS_PER_NODE"):
        return _typed_count(env["SLURM_GPUS_PER_NODE"]) or 0
    if env.get("SLURM_JOB_GPUS"):
        return _count_ids(env["SLURM_JOB_GPUS"]) or 0
    if env.get("SLURM_GPUS_PER_TASK"):
        return (_typed_count(env["SLURM_GPUS_PER_TASK"]) or 0) * tasks
    return 0


def slurm_nodes(env: Mapping[str, str]) -> list[dict[str, float]] | None:
    """The nodes of the Slurm job ``env`` describes (Ray's resource names), or None."""
    if not env.get("SLURM_JOB_ID"):
        return None
    tasks = _tasks_per_node(env)
    per_task = env.get("SLURM_CPUS_PER_TASK", "")
    if per_task.isdigit():
        cpus = int(per_task) * tasks
    elif env.get("SLURM_CPUS_ON_NODE", "").isdigit():
        cpus = int(env["SLURM_CPUS_ON_NODE"])
    else:
        return None
    count = env.get("SLURM_JOB_NUM_NODES") or env.get("SLURM_NNODES") or "1"
    nodes = int(count) if count.isdigit() else 1
    return [{"CPU": float(cpus), "GPU": float(_slurm_gpus(env, tasks))}] * nodes


def ray_nodes(address: str) -> list[dict[str, float]] | None:
    """The alive nodes of the Ray cluster at ``address`` (None when it does not answer)."""
    from sublayer_search.search.plan.preflight import address_problems

    if address not in ("auto",) and address_problems(address):
        return None  # not up yet (the Slurm pre-check runs before Ray starts)
    import ray

    ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
    try:
        return [{"CPU": float(n["Resources"].get("CPU", 0)),
                 "GPU": float(n["Resources"].get("GPU", 0))}
                for n in ray.nodes() if n.get("Alive")]
    finally:
        ray.shutdown()


def _shape(node: Mapping[str, float]) -> str:
    gpus = node.get("GPU", 0)
    return f"{node.get('CPU', 0):g} CPUs" + (f", {gpus:g} GPUs" if gpus else "")


def fit_report(exp: Experiment, nodes: Sequence[Mapping[str, float]],
               source: str) -> tuple[list[str], list[str]]:
    """(the dry run's lines, its warnings) on how the trials fill ``nodes``."""
    res = exp.resources
    shapes = Counter((n.get("CPU", 0.0), n.get("GPU", 0.0)) for n in nodes)
    kinds = ", ".join(f"{k} x ({_shape({'CPU': c, 'GPU': g})})" for (c, g), k in shapes.items())
    unit = "worker(s)" if res.workers > 1 else "trial(s)"
    lines, warnings = [], []
    for (cpus, gpus), _ in shapes.items():
        fit = node_fit(cpus, gpus, res.cpu, res.gpu)
        lines.append(f"nodes: {kinds} ({source}): {fit.workers} {unit} of {res.cpu:g} CPU(s)"
                     f"{f' and {res.gpu:g} GPU(s)' if res.gpu else ''} fit a node of "
                     f"{_shape({'CPU': cpus, 'GPU': gpus})}; idle: "
                     f"{fit.idle_gpu_share:.0%} of its GPUs, {fit.idle_cpu_share:.0%} of its CPUs")
        warnings += _idle_warnings(fit, res)
    slots = sum(node_fit(n.get("CPU", 0), n.get("GPU", 0), res.cpu, res.gpu).workers
                for n in nodes) // res.workers
    cap = exp.max_concurrent
    lines.append(f"nodes: {slots} trial(s) at once on {len(nodes)} node(s)"
                 + (f" (max_concurrent: {cap} runs {min(cap, slots)})" if cap else ""))
    if cap and cap < slots:
        warnings.append(f"max_concurrent: {cap} runs fewer trials than the {slots} the nodes "
                        "hold: raise it, or leave it out")
    return lines, list(dict.fromkeys(warnings))


def _idle_warnings(fit: NodeFit, res: Any) -> list[str]:
    shape = _shape({"CPU": fit.cpus, "GPU": fit.gpus})
    if fit.workers == 0:
        return [f"resources (cpu: {res.cpu:g}, gpu: {res.gpu:g}) fit no node of {shape}"]
    out = []
    if fit.idle_gpu_share > IDLE_WARNING:
        if not res.gpu:
            why = "the trials ask for no GPU (resources.gpu)"
        else:
            balanced = math.floor(fit.cpus / math.floor(fit.gpus / res.gpu + 1e-9) + 1e-9)
            why = (f"the CPUs run out first; resources.cpu: {balanced:g} would fill them"
                   if balanced >= 1 else "each trial needs more CPUs than a GPU's share")
        out.append(f"{fit.idle_gpus:g} of the {fit.gpus:g} GPUs of a node ({shape}) sit idle "
                   f"({fit.idle_gpu_share:.0%}): {why}")
    if fit.idle_cpu_share > IDLE_WARNING:
        more = math.floor(fit.cpus / fit.workers + 1e-9) if fit.workers else res.cpu
        out.append(f"{fit.idle_cpus:g} of the {fit.cpus:g} CPUs of a node ({shape}) sit idle "
                   f"({fit.idle_cpu_share:.0%}): resources.cpu: {more:g} would use them")
    return out


def cluster_nodes(address: str | None,
                  env: Mapping[str, str] | None = None) -> tuple[list[dict[str, float]], str] | None:
    """(the nodes, where their shape came from) for the dry run, or None (a local sweep, or
    a cluster whose shape is unknown)."""
    env = os.environ if env is None else env
    if address:
        found = ray_nodes(address)
        if found:
            return found, f"the Ray cluster at {address}"
    found = slurm_nodes(env)
    if found:
        return found, f"Slurm job {env['SLURM_JOB_ID']}'s variables"
    return None


def fit_lines(exp: Experiment, address: str | None) -> tuple[list[str], list[str]]:
    """The dry run's ``nodes:`` lines and warnings for a cluster run (none for a local one)."""
    address = address or exp.ray.address or os.environ.get("RAY_ADDRESS")
    if not address and not os.environ.get("SLURM_JOB_ID"):
        return [], []
    found = cluster_nodes(address)
    if found is None:
        return [f"nodes: unknown (the Ray cluster at {address} does not answer, and this is "
                "no Slurm job): the sweep checks that a trial fits when it connects"], []
    return fit_report(exp, *found)
