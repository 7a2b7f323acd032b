"""One trial on N data-parallel workers: Ray Train inside the Tune trial (``resources.workers``).

The Tune trial runs a ``TorchTrainer`` (Ray Train V2) whose N workers each run the one
training loop; Ray Train sets up the process group (gloo on CPUs, NCCL on GPUs) and the
loop becomes one of N workers (:mod:`models.distributed`). Every worker reports every
evaluation through ``ray.train.report`` (rank 0 with the checkpoint); the trial passes
them on to Tune (``TuneReportCallback``), so the sweep's scheduler, tracking, resume and
reuse see one trial with one curve, as for one worker.
With ``train.parallel: fsdp`` the workers shard the model instead of copying it; the loop
reads that from the trial's spec (:meth:`models.distributed.Workers.shard`), nothing here
changes.

A worker that dies (a lost node, an OOM kill) restarts the worker group from the last
checkpoint (``failure.retries`` times): the steps since then are trained again and
their evaluations, already logged, are skipped by the tracker. A restored Tune trial
(``--resume``) starts its trainer from the checkpoint Tune restored.

Resources, whole trials: the Tune trial itself holds almost nothing (:data:`TRIAL_RESOURCES`);
its workers ask Ray for ``resources.cpu``/``resources.gpu`` each, in the placement group Ray
Train makes for them (strategy PACK: as few nodes as possible, spread when no node holds
them all). Ray Train V2 always makes that group itself: it cannot take the Tune trial's
(a ``PlacementGroupFactory`` with the workers' bundles would reserve them twice). So Tune
cannot see what a trial's workers hold, and would start trials whose workers then wait
"running". Instead the sweep starts only as many trials as the cluster holds at once
(:class:`WholeTrials`, Ray's own advice for Train inside Tune): every alive node holds
``min(CPUs / resources.cpu, GPUs / resources.gpu)`` workers, and the cluster
``sum(those) // resources.workers`` trials (``max_concurrent``, when lower, wins). A cluster
of 4 GPUs with trials of 2 workers x 1 GPU runs 2 trials; the others stay pending. The
count is taken when the sweep starts (and again on ``--resume``): it assumes the sweep has
the cluster to itself, and does not grow with an autoscaler. A sweep resumed on a smaller
cluster restarts the trials it had running all the same (Tune restores them as pending);
new ones wait until fewer than the new count are live.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import ray
from ray import train, tune
from ray.tune.search import ConcurrencyLimiter, Searcher

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.plan.sweep_plan import SweepPlan

__all__ = ["TRIAL_RESOURCES", "WholeTrials", "per_worker", "train_on_workers", "whole_trials"]

TRIAL_RESOURCES: dict[str, float] = {"cpu": 0, "gpu": 0, "memory": 1}
"""What the Tune trial of a multi-worker trial holds: no CPU (its workers hold them: a share
would keep N workers of one CPU each off an N-CPU node); Ray needs some resource in the
bundle, and one byte of memory is one every node has."""


def per_worker(cpu: float, gpu: float) -> dict[str, float]:
    """What one worker asks Ray for (Ray's resource names)."""
    return {"CPU": cpu, **({"GPU": gpu} if gpu else {})}


def whole_trials(nodes: Iterable[Mapping[str, float]], cpu: float, gpu: float,
                 workers: int) -> int:
    """Trials of ``workers`` workers (``cpu``/``gpu`` each) that ``nodes`` (each node's total
    resources, Ray's names) hold at once: every node holds as many workers as its scarcest
    resource allows, and a trial's workers may span nodes."""
    ask = per_worker(cpu, gpu)
    slots = sum(min(math.floor(node.get(name, 0) / need + 1e-9) for name, need in ask.items())
                for node in nodes)
    return slots // workers


def _cluster_trials(cpu: float, gpu: float, workers: int, limit: int | None) -> int:
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    fits = whole_trials(nodes, cpu, gpu, workers)
    return max(1, min(fits, limit) if limit else fits)  # 0: check_cluster refused it already


class WholeTrials(ConcurrencyLimiter):
    """Tune's searcher, giving out only as many live trials as the cluster's alive nodes
    hold whole (every worker of each at once), or ``limit`` (``max_concurrent``) if lower.

    The count is taken from Ray's nodes when the sweep starts, and again when a resumed
    sweep restores this searcher's state (the cluster may have changed in between: a
    requeued Slurm job, a resized KubeRay cluster)."""

    def __init__(self, searcher: Searcher, *, cpu: float, gpu: float, workers: int,
                 limit: int | None = None) -> None:
        self.ask = (cpu, gpu, workers, limit)
        super().__init__(searcher, max_concurrent=_cluster_trials(*self.ask))

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.max_concurrent = _cluster_trials(*self.ask)  # this cluster, not the saved one
        self._set_searcher_max_concurrency()


def _worker_loop(config: dict[str, Any]) -> None:
    """Runs on every worker: the one training loop as one of N (Ray Train set up the group)."""
    plan: SweepPlan = config["plan"]
    trial: Trial = config["trial"]
    from sublayer_search.models.optim import device_facts, device_for, require_gpu
    from sublayer_search.models.training_loop import use_threads

    context = train.get_context()
    use_threads(max(1, int(config["cpus_per_worker"])))
    lead = context.get_world_rank() == 0
    spec = trial.planned_spec()
    require_gpu(plan.experiment.resources.gpu, spec.train,
                f" on worker {context.get_world_rank()} of {context.get_world_size()} "
                f"(node {ray.util.get_node_ip_address()})")
    where = {**config["where"], **device_facts(device_for(spec.train), context.get_world_size())}
    with tempfile.TemporaryDirectory(prefix="sublayer-worker-") as work:
        resume = None
        restored = train.get_checkpoint() or config.get("restored")
        if restored is not None:
            resume = restored.to_directory(os.path.join(work, "resume"))

        def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
            ckpt = train.Checkpoint.from_directory(checkpoint) if checkpoint and lead else None
            train.report({**metrics, **where}, checkpoint=ckpt)

        if resume is not None and train.get_checkpoint() is None:
            _report_restored(resume, spec.train.steps, report)

        plan.task.fit(spec, report, checkpoint_dir=os.path.join(work, "ckpt"),
                      resume_from=resume)


def _report_restored(folder: str, steps: int, report: Any) -> None:
    """A restored Tune trial's workers are up: report again the evaluation its checkpoint
    holds (the driver may have died before recording it; the tracker skips steps it
    has). This first report also tells the driver the trial trains again, no longer
    waiting for its workers' resources (:mod:`~sublayer_search.search.tracking.waiting`)."""
    from sublayer_search.models.checkpoint import load_checkpoint
    from sublayer_search.spaces.records import STATUS_KEY, TrialStatus

    state = load_checkpoint(folder)
    held = dict(state.get("metrics") or {})
    if held and int(state["step"]) < steps:
        report({**held, STATUS_KEY: TrialStatus.RUNNING.value})


def train_on_workers(trial: Trial, plan: SweepPlan, where: dict[str, Any],
                     restored: tune.Checkpoint | None) -> None:
    """Train ``trial`` on ``resources.workers`` workers and report to this Tune trial."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer  # torch: in the trial, never the driver
    from ray.tune.integration.ray_train import TuneReportCallback

    exp = plan.experiment
    res = exp.resources
    storage = Storage.of(exp.ray.storage_path)  # a folder or s3://BUCKET/PREFIX
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"plan": plan, "trial": trial, "where": where, "restored": restored,
                           "cpus_per_worker": res.cpu},
        torch_config=TorchConfig(backend=_backend(res.gpu)),
        scaling_config=ScalingConfig(num_workers=res.workers, use_gpu=res.gpu > 0,
                                     resources_per_worker=per_worker(res.cpu, res.gpu),
                                     placement_strategy="PACK"),
        run_config=RunConfig(
            name=f"{trial.name}-{ray.get_runtime_context().get_task_id() or 'trial'}"
                 .replace("@", "_").replace("/", "_"),
            storage_path=storage.path("workers"),
            storage_filesystem=storage.ray_options().get("storage_filesystem"),
            callbacks=[TuneReportCallback()],  # type: ignore[list-item]  # V2 accepts it
            failure_config=FailureConfig(max_failures=exp.failure.retries),
            checkpoint_config=CheckpointConfig(num_to_keep=2),
        ),
    )
    trainer.fit()


def _backend(gpu: float) -> str | None:
    """The process group's backend: Ray Train's choice (NCCL for workers with GPUs, gloo
    without), but gloo where this torch has no NCCL built in (a CPU build, where the loop
    trains on the CPU whatever Ray lent: a cluster of fake GPUs, ``ray start --num-gpus``)."""
    from sublayer_search.models.optim import nccl_available

    return None if not gpu or nccl_available() else "gloo"
