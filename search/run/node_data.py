"""Before any trial starts on a cluster: can every node read the sweep's corpus?

The driver found (or downloaded) the corpus while planning, but a trial reads it on its
own node, from that node's ``SUBLAYER_DATA_DIR`` or cache. A node without it would fail
every trial sent to it (and one without internet could not download it either). So the
sweep runs one tiny task on every alive node (no CPU held, pinned to the node) that looks
for the corpus there without downloading; a node that lacks it stops the sweep, with
exit status 2, before MLflow is touched, naming the node and what to set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from sublayer_search.search.core.problems import ExperimentError, Problem

if TYPE_CHECKING:
    from sublayer_search.search.plan.sweep_plan import SweepPlan
    from sublayer_search.search.tasks import Task

__all__ = ["PROBE_TIMEOUT_S", "check_node_data", "missing_on_nodes"]

PROBE_TIMEOUT_S = 180.0
"""How long the nodes get to answer (a node's first worker process starts slowly)."""


@ray.remote(num_cpus=0)
def _look(task: Any, data: Any) -> str | None:
    """On a node: why the corpus is not on disk here (None when it is)."""
    from sublayer_search.models.data.errors import DataError

    try:
        task.corpus_on_disk(data)
    except DataError as exc:
        return str(exc)
    return None


def missing_on_nodes(task: Task[Any, Any, Any, Any], data: object,
                     nodes: list[dict[str, Any]]) -> list[tuple[dict[str, Any], str]]:
    """(node, why) for every node of ``nodes`` (Ray's) that cannot read the corpus of ``data``."""
    refs = [_look.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        node_id=n["NodeID"], soft=False)).remote(task, data) for n in nodes]
    answers = ray.get(refs, timeout=PROBE_TIMEOUT_S)
    return [(node, why) for node, why in zip(nodes, answers, strict=True) if why is not None]


def check_node_data(plan: SweepPlan[Any, Any, Any, Any]) -> None:
    """Raise :class:`ExperimentError` (exit 2) naming every node that lacks the corpus."""
    data = plan.experiment.data
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    missing = missing_on_nodes(plan.task, data, nodes)
    if not missing:
        return
    name = getattr(data, "name", plan.experiment.task)
    where = "; ".join(f"node {n.get('NodeManagerAddress', '?')} (id {n['NodeID'][:12]}): "
                      f"{why.split('. ')[0]}" for n, why in missing)
    raise ExperimentError(plan.source, [Problem(
        "data.name", name,
        f"a corpus on disk on every node of the cluster ({len(missing)} of {len(nodes)} "
        f"node(s) lack it, where each trial would download it again or fail: {where}); "
        f"set SUBLAYER_DATA_DIR in the environment of those nodes' `ray start` to a folder "
        f"they share holding {name}/, filled on a login node with `sublayer fetch "
        f"{plan.source}` under the same SUBLAYER_DATA_DIR")])
