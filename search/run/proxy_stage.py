"""The proxy stage (``search.proxy``): proxy first, language-model training for the best.

When the sweep starts (before Ray, like the warm start) the finished trials of the proxy
sweep are read from the tracking store; every order of this sweep's space must have a
proxy score (the mean over its finished trials of ``search.proxy.metric``), and only the
``top_k`` best train, with the baseline. A missing experiment or an unscored order is bad
input, reported before anything is written. ``sublayer analyze --proxy`` then reports
the agreement and the compute of both stages end to end.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.plan.sweep_plan import SweepPlan, then
from sublayer_search.spaces.records import Role, Tag, TrialStatus, direction, final

if TYPE_CHECKING:  # mlflow only when the sweep starts: a dry run imports none
    from mlflow.tracking import MlflowClient

__all__ = ["proxy_lines", "proxy_scores", "ranked", "with_proxy_stage"]

FIELD = "search.proxy.experiment"


def proxy_scores(client: MlflowClient, experiment_id: str, metric: str) -> dict[str, float]:
    """Order -> mean final ``metric`` over the experiment's finished trials."""
    runs = client.search_runs(
        [experiment_id], max_results=50000,
        filter_string=f"tags.`{Tag.ROLE}` = '{Role.TRIAL}' and "
                      f"tags.`{Tag.STATUS}` = '{TrialStatus.FINISHED}'")
    values: dict[str, list[float]] = defaultdict(list)
    for run in runs:
        order, value = run.data.params.get("order"), run.data.metrics.get(final(metric))
        if order and value is not None:
            values[order].append(float(value))
    return {order: sum(v) / len(v) for order, v in values.items()}


def ranked(scores: dict[str, float], orders: list[str], metric: str) -> list[str]:
    """``orders`` best first by ``scores`` (ties: the order string)."""
    sign = -1.0 if direction(metric) == "max" else 1.0
    return sorted(orders, key=lambda o: (sign * scores[o], o))


def with_proxy_stage(plan: SweepPlan, uri: str) -> SweepPlan:
    """``plan`` keeping the baseline and the trials of the ``top_k`` orders the proxy
    scores best (unchanged without ``search.proxy``)."""
    stage = plan.experiment.search.proxy
    if stage is None:
        return plan
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.store.mlflow_store import redact_uri

    where = redact_uri(uri)
    if uri.startswith("sqlite:///") and \
            not Path(uri.removeprefix("sqlite:///")).expanduser().is_file():
        raise ExperimentError(plan.source, [Problem(
            FIELD, stage.experiment, f"a finished proxy sweep in {where} (the store does "
            "not exist yet: run the proxy sweep first)")])
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(stage.experiment)
    if found is None:
        raise ExperimentError(plan.source, [Problem(
            FIELD, stage.experiment, f"the name of a proxy sweep's MLflow experiment in {where}")])
    scores = proxy_scores(client, found.experiment_id, stage.metric)
    orders = list(dict.fromkeys(t.order for t in plan.trials if not t.baseline))
    missing = [o for o in orders if o not in scores]
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                          else "")
        raise ExperimentError(plan.source, [Problem(
            FIELD, stage.experiment, f"a proxy sweep that scored every order of this space "
            f"({stage.metric} of a finished trial); it has none for {shown}")])
    kept = set(ranked(scores, orders, stage.metric)[:stage.top_k])
    trials = [t for t in plan.trials if t.baseline or t.order in kept]
    return then(plan, f"proxy stage: the {len(kept)} of {len(orders)} orders "
                      f"{stage.experiment} scores best", trials=trials)


def proxy_lines(plan: SweepPlan) -> list[str]:
    """What the dry run says of the stage (it reads no store: the pick waits for the run)."""
    stage = plan.experiment.search.proxy
    if stage is None:
        return []
    orders = len({t.order for t in plan.trials if not t.baseline})
    return [f"search.proxy: when the sweep starts, only the {min(stage.top_k, orders)} of "
            f"these {orders} orders that {stage.experiment} scores best ({stage.metric}) "
            "train, with the baseline"]
