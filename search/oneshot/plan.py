"""The two stages of a one-shot sweep as plans (torch-, Ray- and MLflow-free).

- Stage 1: one supernet over every distinct order of the space (:func:`stage_one`), its
  compute in units of one stand-alone trial (optimizer steps against ``train.steps``).
- Stage 2: the ``top_k`` orders of the supernet's ranking, plus up to
  ``supernet.tie_extra`` more that the ranking cannot tell from the k-th
  (:func:`chosen`), plus, with ``search.prior``, up to ``supernet.prior_extra`` that the
  prior ranks best among the rest (:func:`prior_picks`), with the sweep's seeds plus the
  baseline seeds, as an ordinary grid of stand-alone trials (:func:`stage_two`).

:func:`dry_run_footer` is what ``sublayer sweep --dry-run`` prints beyond the trial table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sublayer_search.search.oneshot.checks import supernet_config, supernet_orders, top_k
from sublayer_search.search.plan.sweep_plan import SweepPlan
from sublayer_search.search.plan.trial import Trial
from sublayer_search.search.searchers.prior import OrderPrior
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.spaces.records import direction

__all__ = [
    "ONESHOT_PARAMS",
    "RANK_PARAM",
    "ESTIMATE_PARAM",
    "StageOne",
    "PICK_PARAM",
    "chosen",
    "prior_picks",
    "rank_metric",
    "dry_run_footer",
    "stage_one",
    "stage_two",
]

RANK_PARAM = "oneshot_rank"
ESTIMATE_PARAM = "oneshot_estimate"
SHOWN = 8
"""Orders the dry run lists by name (the rest are counted)."""
ONESHOT_PARAMS = (RANK_PARAM, ESTIMATE_PARAM)
"""Params of a stage-2 trial chosen by the ranking (also tagged ``sublayer.oneshot_*``)."""
PICK_PARAM = "oneshot_pick"
"""Param (value ``prior``) of a stage-2 trial the prior added; the ranking's own picks
have none."""


def rank_metric(metric: str) -> str:
    """What the ranking estimates: ``val_bpc`` for characters; for word corpora the mean
    NLL ``val_loss`` (perplexity's order, averaged over batches in nats)."""
    return "val_bpc" if metric == "val_bpc" else "val_loss"


MONITOR_ORDERS = 8
"""Orders the supernet's learning curve evaluates (``models.supernet.train.MONITOR_ORDERS``,
repeated here without torch; a test holds them equal)."""
FORWARD_SHARE = 1 / 3
"""Cost of a forward pass in training steps (the backward pass costs about two)."""


def _evaluations(steps: int, every: int) -> int:
    """Evaluations of a training run: every ``every`` steps and at the end."""
    return steps // every + (1 if steps % every else 0)


@dataclass(frozen=True, kw_only=True)
class StageOne:
    """The supernet of a one-shot sweep: what it covers and what it costs."""

    orders: tuple[str, ...]
    steps: int
    sharing: str
    eval_batches: int
    """Held-out batches per order when ranking."""
    trial_steps: int
    """``train.steps`` of one stand-alone trial (the supernet's evaluation cadence, batch
    sizes and ``train.eval_batches`` are the trials')."""
    eval_every: int
    """``train.eval_every`` of the stand-alone trials."""
    curve_every: int
    """Steps between the supernet's own evaluations (``supernet.eval_every``)."""
    curve_batches: int | None
    """``train.eval_batches``: batches of each evaluation (``None``: the whole split)."""
    eval_cost: float
    """One evaluation batch in training steps (``FORWARD_SHARE`` x eval / train batch size)."""

    @property
    def monitored(self) -> int:
        return min(MONITOR_ORDERS, len(self.orders))

    @property
    def curve_forwards(self) -> int | None:
        """Held-out batches the supernet's learning curve evaluates."""
        if self.curve_batches is None:
            return None
        return _evaluations(self.steps, self.curve_every) * self.monitored * self.curve_batches

    @property
    def ranking_batches(self) -> int:
        """Forward passes of the ranking: every order on the same held-out batches."""
        return len(self.orders) * self.eval_batches

    @property
    def trial_units(self) -> float:
        """The supernet's compute in stand-alone trials: a step trains one order at the
        trials' batch size (about one step of an average order), evaluation batches count
        as forward passes; with ``curve_batches`` unknown, training steps only."""
        curve = self.curve_forwards
        if curve is None:
            return self.steps / self.trial_steps
        assert self.curve_batches is not None  # as curve is
        trial_forwards = _evaluations(self.trial_steps, self.eval_every) * self.curve_batches
        mine = self.steps + (curve + self.ranking_batches) * self.eval_cost
        return mine / (self.trial_steps + trial_forwards * self.eval_cost)

    def cost_text(self) -> str:
        """``2400 steps (3 trials' steps) + 4620 held-out batches ... = 4.62 trials``."""
        curve = self.curve_forwards
        evals = (
            (
                f"{curve + self.ranking_batches} held-out batches ({curve} for its learning "
                f"curve: {self.monitored} orders x {self.curve_batches} batches x "
                f"{_evaluations(self.steps, self.curve_every)} evaluations; "
                f"{self.ranking_batches} to rank {len(self.orders)} orders x "
                f"{self.eval_batches})"
            )
            if curve is not None
            else (
                f"{self.ranking_batches} held-out batches to rank, and learning-curve "
                "evaluations over the whole validation split (train.eval_batches unset)"
            )
        )
        return (
            f"{self.steps} steps ({self.steps / self.trial_steps:.3g} trials' steps) + "
            f"{evals} = {self.trial_units:.3g} stand-alone trial(s) of {self.trial_steps} "
            f"steps (a forward pass = {FORWARD_SHARE:.2g} of a step)"
        )


def stage_one(plan: SweepPlan) -> StageOne:
    cfg = supernet_config(plan.experiment)
    train = plan.experiment.train
    return StageOne(
        orders=tuple(supernet_orders(plan.candidates)),
        steps=cfg.steps,
        sharing=cfg.sharing,
        eval_batches=cfg.eval_batches,
        trial_steps=train.steps,
        eval_every=train.eval_every,
        curve_every=cfg.eval_every or train.eval_every,
        curve_batches=train.eval_batches,
        eval_cost=FORWARD_SHARE * (train.eval_batch_size or train.batch_size) / train.batch_size,
    )


def dry_run_footer(plan: SweepPlan) -> str:
    """What ``sublayer sweep --dry-run`` prints under the trial table: the trial count, an
    adaptive searcher's budget, a one-shot search's two stages; the metric, or every
    objective of a multi-objective search with its direction."""
    exp = plan.experiment
    algo, n = exp.search.algorithm, len(plan.trials)
    goal = f"metric {plan.metric}"
    if exp.search.objectives:
        named = ", ".join(f"{o} ({direction(o)})" for o in exp.search.objectives)
        goal = f"objectives {named}: a Pareto front ({exp.search.sampler} sampler)"
    tail = f"; {goal}; nothing was run"
    searcher = search_algorithm(algo)
    if searcher.plans_every_trial:
        return f"{n} trial(s){tail}"
    if not searcher.supernet_stage:
        return (
            f"{n} trial(s) + up to {exp.search.num_samples} proposed by {algo} from "
            f"{len(plan.candidates)} candidates{tail}"
        )
    one, k, seeds = stage_one(plan), top_k(exp), len(exp.seed_list)
    cfg = supernet_config(exp)
    extra = min(cfg.tie_extra, len(one.orders) - k)
    ties = (
        f" + up to {extra} more whose estimate is within {cfg.tie_sems:g} sem of the "
        f"k-th's (supernet.tie_extra, tie_sems)"
        if extra > 0
        else ""
    )
    more = f" (+ up to {extra * seeds} tied)" if extra > 0 else ""
    by_prior = min(cfg.prior_extra, len(one.orders) - k) if exp.search.prior else 0
    by_prior_text = ""
    if by_prior > 0:
        ties += (f" + up to {by_prior} more the prior ranks best among the rest "
                 "(search.prior, supernet.prior_extra)")
        by_prior_text = f" (+ up to {by_prior * seeds} by the prior)"
    spaces = ", ".join(dict.fromkeys(c.space for c in plan.candidates))
    shown = " ".join(one.orders[:SHOWN]) + (
        f" (+{len(one.orders) - SHOWN} more)" if len(one.orders) > SHOWN else ""
    )
    return (
        f"stage 1: one supernet over the {len(one.orders)} orders of {spaces} "
        f"(sharing {one.sharing}): {one.cost_text()}\n  orders: {shown}\n"
        f"stage 2: the top {k} orders of the ranking{ties} x {seeds} seed(s) + the {n} "
        f"baseline trial(s) above train stand-alone\n"
        f"{n} trial(s) + {k * seeds}{more} chosen by the supernet{by_prior_text}{tail}"
    )


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
    grid = exp.model_copy(update={"search": exp.search.model_copy(update={"algorithm": "grid"})})
    return replace(plan, experiment=grid, trials=trials)
