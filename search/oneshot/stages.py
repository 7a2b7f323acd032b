"""The two stages of a one-shot sweep as plans (torch-, Ray- and MLflow-free).

- Stage 1: one supernet over every distinct order of the space (:func:`stage_one`), its
  compute in units of one stand-alone trial (optimizer steps against ``train.steps``).
- Stage 2: the ``top_k`` orders of the supernet's ranking, plus up to
  ``supernet.tie_extra`` more that the ranking cannot tell from the k-th
  (:func:`chosen`), plus, with ``search.prior``, up to ``supernet.prior_extra`` that the
  prior ranks best among the rest (:func:`prior_picks`), with the sweep's seeds plus the
  baseline seeds, as an ordinary grid of stand-alone trials (:func:`stage_two`).

Stage 1's plan and cost (:class:`StageOne`) are the searcher's own
(:mod:`~sublayer_search.search.searchers.algorithms.oneshot`: its dry-run footer reads them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.plan.sweep_plan import SweepPlan, then
from sublayer_search.search.searchers.algorithms.oneshot import (
    FORWARD_SHARE,
    MONITOR_ORDERS,
    StageOne,
    stage_one,
    supernet_config,
    top_k,
)
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.registry import search_algorithm

__all__ = [
    "ONESHOT_PARAMS",
    "RANK_PARAM",
    "ESTIMATE_PARAM",
    "StageOne",
    "PICK_PARAM",
    "chosen",
    "prior_picks",
    "rank_metric",
    "FORWARD_SHARE",
    "MONITOR_ORDERS",
    "stage_one",
    "stage_two",
]

RANK_PARAM = "oneshot_rank"
ESTIMATE_PARAM = "oneshot_estimate"
ONESHOT_PARAMS = (RANK_PARAM, ESTIMATE_PARAM)
"""Params of a stage-2 trial chosen by the ranking (also tagged ``sublayer.oneshot_*``)."""
PICK_PARAM = "oneshot_pick"
"""Param (value ``prior``) of a stage-2 trial the prior added; the ranking's own picks
have none."""


def rank_metric(metric: str) -> str:
    """What the ranking estimates: ``val_bpc`` for characters; for word corpora the mean
    NLL ``val_loss`` (perplexity's order, averaged over batches in nats)."""
    return "val_bpc" if metric == "val_bpc" else "val_loss"


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def chosen(
    ranked: Sequence[Mapping[str, Any]], k: int, *, extra: int, sems: float
) -> list[Mapping[str, Any]]:
    """The first ``k`` rows of ``ranked`` (best first), then at most ``extra`` of the rows
    after them whose ``mean`` exceeds the k-th's by at most ``sems`` standard errors of
    the difference, sqrt(sem^2 + sem_k^2): orders the ranking cannot tell from the k-th.
    A row without a finite mean or sem never ties."""
    top = list(ranked[:k])
    if not top or extra <= 0:
        return top
    last_mean, last_sem = _number(top[-1].get("mean")), _number(top[-1].get("sem"))
    ties = []
    for row in ranked[k:]:
        mean, sem = _number(row.get("mean")), _number(row.get("sem"))
        gap = mean - last_mean
        if not math.isfinite(gap) or not math.isfinite(sem) or not math.isfinite(last_sem):
            continue
        if gap <= sems * math.hypot(sem, last_sem):
            ties.append(row)
    return top + ties[:extra]


def prior_picks(
    ranked: Sequence[Mapping[str, Any]], picked: Sequence[Mapping[str, Any]],
    prior: OrderPrior | None, extra: int, *, f_units: float = 2.0, c_units: float = 1.0,
) -> list[Mapping[str, Any]]:
    """At most ``extra`` rows of ``ranked`` not in ``picked``, best prior score first (ties:
    the supernet's rank); none without a prior or with a prior of no evidence."""
    if prior is None or prior.weight <= 0 or extra <= 0:
        return []
    taken = {str(r["order"]) for r in picked}
    rest = [r for r in ranked if str(r["order"]) not in taken]
    if not rest:
        return []
    score = prior.predict([str(r["order"]) for r in rest], f_units=f_units, c_units=c_units)
    best = sorted(range(len(rest)), key=lambda i: (float(score[i]), int(rest[i]["rank"])))
    return [rest[i] for i in best[:extra]]


def stage_two(plan: SweepPlan, ranking: Sequence[Mapping[str, Any]],
              prior: OrderPrior | None = None) -> SweepPlan:
    """The sweep's stand-alone trials: the baseline trials, then the orders of ``ranking``
    (rows ``order, mean, sem, n_batches, rank``) that :func:`chosen` picks (the ``top_k``
    and up to ``supernet.tie_extra`` tied with the k-th) and, with a ``prior``, those
    :func:`prior_picks` adds (param ``oneshot_pick: prior``), with the sweep's seeds, each
    with params ``oneshot_rank`` and ``oneshot_estimate``. A chosen order that is the
    baseline's joins the baseline trial of the same seed. The plan runs as a grid."""
    exp = plan.experiment
    cfg = supernet_config(exp)
    by_order = {c.order: c for c in reversed(plan.candidates)}  # the first candidate wins
    ranked = sorted(
        (r for r in ranking if r.get("order") in by_order), key=lambda r: int(r["rank"])
    )
    rows = chosen(ranked, top_k(exp), extra=cfg.tie_extra, sems=cfg.tie_sems)
    f_units, c_units = plan.task.unit_costs(plan.model)
    by_prior = prior_picks(ranked, rows, prior, cfg.prior_extra, f_units=f_units,
                           c_units=c_units)
    trials = list(plan.trials)
    index = {(t.order, t.seed): i for i, t in enumerate(trials)}
    for row, from_prior in [*((r, False) for r in rows), *((r, True) for r in by_prior)]:
        cand = by_order[str(row["order"])]
        picked = {RANK_PARAM: int(row["rank"]), ESTIMATE_PARAM: _number(row["mean"]),
                  **({PICK_PARAM: "prior"} if from_prior else {})}
        for seed in exp.seed_list:
            at = index.get((cand.order, seed))
            if at is not None:  # the baseline order ranked high: one trial, both roles
                trials[at] = replace(trials[at], params={**trials[at].params, **picked})
                continue
            trial = Trial.of(cand, seed, plan.specs[cand.name])
            index[(cand.order, seed)] = len(trials)
            trials.append(replace(trial, params={**trial.params, **picked}))
    return then(plan, "stage one", trials=trials,
                runs_as=search_algorithm(exp.search.algorithm).stage_two)
