"""The Ray Tune trainable: one trial = ``models.lm_workload.fit`` on one (order, seed).

It reports every evaluation with ``ray.tune.report`` and hands each checkpoint to
Tune, so a restarted trial resumes from its last evaluation. A restored trial first
reports again the evaluation its checkpoint holds, so a driver that died before
recording it still gets it (``MlflowTracking`` skips steps it has).
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import ray
from ray import tune

from sublayer_search.models.checkpoint import load_checkpoint
from sublayer_search.models.optim import device_facts, device_for, require_gpu
from sublayer_search.search.core.injected_failure import fail_if_listed
from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.spaces.records import STATUS_KEY, TrialStatus

__all__ = ["train_trial"]


def _node_ip(node_id: str) -> str:
    """The address the node registered with (``ray start --node-ip-address``)."""
    for node in ray.nodes():
        if node.get("NodeID") == node_id:
            return str(node.get("NodeManagerAddress", ""))
    return ray.util.get_node_ip_address()


def train_trial(config: dict[str, Any], plan: SweepPlan) -> None:
    trial: Trial[Any] = config["trial"]  # the planned object itself: nothing to rebuild
    fail_if_listed(trial.name, f"trial {trial.name}")
    spec = trial.planned_spec()
    from sublayer_search.models.training_loop import use_threads

    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU", 1.0)
    use_threads(max(1, int(cpus)))  # one thread per CPU the trial holds, as `sublayer train`
    with tempfile.TemporaryDirectory(prefix="sublayer-trial-") as work:
        resume, resumed_from, held = None, 0, {}
        restored = tune.get_checkpoint()
        if restored is not None:
            resume = restored.to_directory(os.path.join(work, "resume"))
            state = load_checkpoint(resume)
            resumed_from, held = int(state["step"]), dict(state.get("metrics") or {})

        node_id = ray.get_runtime_context().get_node_id()
        where: dict[str, Any] = {"node_id": node_id, "node_ip": _node_ip(node_id),
                                 "gpu_ids": ",".join(str(g) for g in ray.get_gpu_ids()),
                                 "resumed_from_step": resumed_from}
        workers = plan.experiment.resources.workers
        if workers == 1:  # a multi-worker trial's workers hold the devices (run/workers.py)
            require_gpu(plan.experiment.resources.gpu, spec.train,
                        f" on node {where['node_ip']} (Ray lent GPU(s) {where['gpu_ids']})")
            where.update(device_facts(device_for(spec.train)))

        def report(metrics: dict[str, Any], checkpoint: str | None = None) -> None:
            ckpt = tune.Checkpoint.from_directory(checkpoint) if checkpoint else None
            tune.report({**metrics, **where}, checkpoint=ckpt)

        if held and resumed_from < spec.train.steps and workers == 1:
            # the evaluation this checkpoint was saved at: the driver may have died before
            # recording it (the tracker skips steps it already has); several workers report
            # it once they are up, which tells the driver the trial trains again
            report({**held, STATUS_KEY: TrialStatus.RUNNING.value})
        if workers > 1:  # Ray Train workers run the loop
            from sublayer_search.search.run.workers import train_on_workers

            train_on_workers(trial, plan, where, restored)
            return
        plan.task.fit(spec, report, checkpoint_dir=os.path.join(work, "ckpt"), resume_from=resume)
