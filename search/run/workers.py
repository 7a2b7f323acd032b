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

Resources: the Tune trial itself holds almost nothing (:data:`TRIAL_RESOURCES`); the workers
ask Ray for ``resources.cpu``/``resources.gpu`` each, in one placement group.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import ray
from ray import train, tune

from sublayer_search.search.plan.storage import Storage
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.plan.trial import Trial

__all__ = ["TRIAL_RESOURCES", "train_on_workers"]

TRIAL_RESOURCES: dict[str, float] = {"cpu": 0, "gpu": 0, "memory": 1}
"""What the Tune trial of a multi-worker trial holds: no CPU (its workers hold them: a share
would keep N workers of one CPU each off an N-CPU node); Ray needs some resource in the
bundle, and one byte of memory is one every node has."""


def _worker_loop(config: dict[str, Any]) -> None:
    """Runs on every worker: the one training loop as one of N (Ray Train set up the group)."""
    plan: SweepPlan = config["plan"]
    trial: Trial = config["trial"]
    from sublayer_search.models.training_loop import use_threads

    context = train.get_context()
    use_threads(max(1, int(config["cpus_per_worker"])))
    lead = context.get_world_rank() == 0
    with tempfile.TemporaryDirectory(prefix="sublayer-worker-") as work:
        resume = None
        restored = train.get_checkpoint() or config.get("restored")
        if restored is not None:
            resume = restored.to_directory(os.path.join(work, "resume"))

        def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
            ckpt = train.Checkpoint.from_directory(checkpoint) if checkpoint and lead else None
            train.report({**metrics, **config["where"]}, checkpoint=ckpt)

        plan.task.fit(trial.planned_spec(), report, checkpoint_dir=os.path.join(work, "ckpt"),
                      resume_from=resume)


def train_on_workers(trial: Trial, plan: SweepPlan, where: dict[str, Any],
                     restored: tune.Checkpoint | None) -> None:
    """Train ``trial`` on ``resources.workers`` workers and report to this Tune trial."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer  # torch: imported in the trial, never the driver
    from ray.tune.integration.ray_train import TuneReportCallback

    exp = plan.experiment
    res = exp.resources
    per_worker = {"CPU": res.cpu, **({"GPU": res.gpu} if res.gpu else {})}
    storage = Storage.of(exp.ray.storage_path)  # a folder or s3://BUCKET/PREFIX
    trainer = TorchTrainer(
        _worker_loop,
        train_loop_config={"plan": plan, "trial": trial, "where": where, "restored": restored,
                           "cpus_per_worker": res.cpu},
        scaling_config=ScalingConfig(num_workers=res.workers, use_gpu=res.gpu > 0,
                                     resources_per_worker=per_worker),
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
