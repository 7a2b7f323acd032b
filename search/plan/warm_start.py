"""Warm start (``search.warm_start``): finished trials of earlier sweeps, told to the searcher.

A run qualifies by the content key of reuse: the same config hash (every resolved
model/data/train setting) and an identity among this sweep's candidates (an IOT subset,
a translation side); its order and seed are what it trained. Its value is the final
value of the sweep's metric; other objectives come from its metrics and its params
(``params``, ``flops_per_token``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store.mlflow_store import redact_uri
from sublayer_search.search.core.observation import Observation
from sublayer_search.search.core.problems import ExperimentError, Problem
from sublayer_search.search.core.variant import run_variant
from sublayer_search.search.plan.sweep_plan import SweepPlan, then
from sublayer_search.search.searchers.settings import STATIC_OBJECTIVES
from sublayer_search.spaces.records import Tag, TrialStatus, final

__all__ = ["warm_observations", "with_warm_start"]


def _scope(client: MlflowClient, plan: SweepPlan, uri: str) -> list[str]:
    spec = plan.experiment.search.warm_start
    names = (
        [plan.experiment.experiment_name]
        if spec is True
        else [spec]
        if isinstance(spec, str)
        else list(spec or [])
    )
    ids, missing = [], []
    for name in names:
        found = client.get_experiment_by_name(name)
        if found is not None:
            ids.append(found.experiment_id)
        elif spec is not True:  # true: a first sweep has no earlier runs, that is fine
            missing.append(name)
    if missing:
        raise ExperimentError(
            plan.source,
            [
                Problem("search.warm_start", name, f"the name of an MLflow experiment in {redact_uri(uri)}")
                for name in missing
            ],
        )
    return ids


def _number(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def warm_observations(client: MlflowClient, plan: SweepPlan, uri: str) -> tuple[Observation, ...]:
    """Finished trials of the experiments ``search.warm_start`` names that share this
    sweep's content key (newest first, one per order, seed and identity: an IOT subset
    and a guided model are models of their own)."""
    scope = _scope(client, plan, uri)
    if not scope:
        return ()
    runs = client.search_runs(
        scope,
        max_results=50000,
        order_by=["attributes.start_time DESC"],
        filter_string=f"params.config_hash = '{plan.config_hash}' and "
        f"tags.`{Tag.STATUS}` = '{TrialStatus.FINISHED}' "
        "and attributes.status = 'FINISHED'",
    )
    pool = {plan.task.identity(c.variant) for c in plan.candidates}
    objectives = plan.experiment.search.front()
    out: dict[tuple[str, int, str], Observation] = {}  # (order, seed, identity)
    for run in runs:
        params, metrics = run.data.params, run.data.metrics
        variant = run_variant(params)
        value = _number(metrics.get(final(plan.metric)))
        seed = _number(params.get("seed"))
        if variant is None or value is None or seed is None:
            continue
        ident = plan.task.identity(variant)
        if ident not in pool:
            continue
        extra = {}
        for name in objectives:
            got = _number(
                params.get(name)
                if name in STATIC_OBJECTIVES
                else metrics.get(final(name), metrics.get(name))
            )
            if got is not None:
                extra[name] = got
        key = (variant.order, int(seed), ident)
        out.setdefault(
            key,
            Observation(
                order=key[0],
                seed=key[1],
                identity=ident,
                value=value,
                name=params.get("candidate", "warm"),
                variant=variant,
                extra=extra,
            ),
        )
    return tuple(out.values())


def with_warm_start(plan: SweepPlan, uri: str) -> SweepPlan:
    """``plan`` with its warm-start observations (unchanged without ``search.warm_start``).

    A SQLite store that does not exist yet holds no earlier sweep: it is not created here
    (a name then is bad input, reported before anything is written)."""
    spec = plan.experiment.search.warm_start
    if spec is False:
        return plan
    if (
        uri.startswith("sqlite:///")
        and not Path(uri.removeprefix("sqlite:///")).expanduser().is_file()
    ):
        if spec is True:
            return plan
        names = [spec] if isinstance(spec, str) else list(spec)
        raise ExperimentError(
            plan.source,
            [
                Problem(
                    "search.warm_start",
                    name,
                    f"the name of an MLflow experiment in {redact_uri(uri)} (the store does not exist yet)",
                )
                for name in names
            ],
        )
    warm = warm_observations(MlflowClient(tracking_uri=uri), plan, uri)
    return then(plan, f"warm start ({len(warm)} finished trial(s))", warm=warm)
