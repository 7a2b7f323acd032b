"""``search.algorithm: oneshot``: a weight-sharing supernet ranks every order of the space
(stage 1, :mod:`sublayer_search.search.oneshot`), the ``top_k`` train stand-alone.

Stage 1 as a plan is here (:func:`stage_one`: the supernet's orders and its compute in
units of one stand-alone trial, optimizer steps against ``train.steps``), with the
searcher's settings, checks and dry-run footer.

Its checks live here too (:func:`oneshot_problems`: what in an experiment file cannot run
that way, naming the field, the value and what is expected); they are torch-free, since
planning imports them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, PlainValidator

from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.search.core.problems import Problem, problems_from
from sublayer_search.search.core.scalars import OWN_CHECKS, Count
from sublayer_search.search.core.section import Refused, refused_or
from sublayer_search.search.core.variant import variant_of
from sublayer_search.search.searchers.algorithms.grid import Grid
from sublayer_search.search.searchers.registry import (
    SearchAlgorithm,
    listed,
    register_searcher,
    search_algorithm,
    searcher_names,
)
from sublayer_search.search.searchers.search_input import SearchedExperiment
from sublayer_search.search.searchers.settings import SearchSection
from sublayer_search.search.tasks import task_class
from sublayer_search.search.tasks.sections import mapping
from sublayer_search.spaces.candidate import Candidate

if TYPE_CHECKING:
    from sublayer_search.search.core.variant import VariantCandidate
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchInput


__all__ = ["DEFAULT_TOP_K", "FORWARD_SHARE", "MONITOR_ORDERS", "OneShot", "OneShotSettings",
           "StageOne", "oneshot_problems", "read_supernet", "stage_one", "supernet_config",
           "supernet_orders", "top_k"]

DEFAULT_TOP_K = 5
"""Orders that train stand-alone when ``search.top_k`` is not given."""


SHOWN = 8
"""Orders the dry run lists by name (the rest are counted)."""

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


def stage_one(plan: SearchInput, cfg: SupernetConfig) -> StageOne:
    """The supernet ``cfg`` over the orders of ``plan``, at its trials' cadence."""
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


def supernet_orders(candidates: Sequence[Candidate]) -> list[str]:
    """The distinct orders of the space, in the space's order: what the supernet covers."""
    return list(dict.fromkeys(c.order for c in candidates))


def read_supernet(raw: object) -> SupernetConfig | Refused | None:
    """``search.supernet``: every unknown key, then every bad value, at once."""
    if raw is None or isinstance(raw, SupernetConfig):
        return raw
    section = mapping(raw)
    known = {f.name for f in dataclasses.fields(SupernetConfig)}
    problems = [Problem(f"search.supernet.{key}", section[key], "one of the supernet settings: "
                        + ", ".join(sorted(known))) for key in section if key not in known]
    config = None
    try:
        config = SupernetConfig.from_dict({k: v for k, v in section.items() if k in known})
    except ValueError as exc:
        problems += problems_from(exc, "search.supernet", value=section)
    return refused_or(config, problems)


class OneShotSettings(SearchSection):
    """``search`` of ``algorithm: oneshot``."""

    supernet: Annotated[SupernetConfig | None, PlainValidator(read_supernet), OWN_CHECKS] = None
    """The supernet's settings (``steps``, ``sharing``, ``eval_batches``, ``seed``, …)."""
    top_k: Count | None = Field(None, ge=1)
    """How many of the best-ranked orders train stand-alone (default 5)."""

    elsewhere = dict.fromkeys(("supernet", "top_k"),
                              "no {key} unless search.algorithm is {owners} (it is {algorithm})")


def _settings(exp: SearchedExperiment) -> OneShotSettings:
    search = exp.search
    return search if isinstance(search, OneShotSettings) else OneShotSettings()


def supernet_config(exp: SearchedExperiment) -> SupernetConfig:
    """The ``search.supernet`` section (defaults where it is left out)."""
    return _settings(exp).supernet or SupernetConfig()


def top_k(exp: SearchedExperiment) -> int:
    return _settings(exp).top_k or DEFAULT_TOP_K


def oneshot_problems(exp: SearchedExperiment, pool: Sequence[Candidate]) -> list[Problem]:
    """Every problem of a one-shot search (planning refuses ``warm_start`` by the
    declaration's capabilities; ``supernet`` and ``top_k`` belong to its settings)."""
    spec = exp.search
    if not search_algorithm(spec.algorithm).supernet_stage:
        return []
    problems: list[Problem] = []
    refused = task_class(exp.task).refusals.get("supernet")
    if refused is not None:
        problems.append(
            Problem(
                "search.algorithm",
                "oneshot",
                f"{listed(searcher_names(supernet_stage=False))} for task {exp.task} "
                f"({refused})",
            )
        )
    if spec.num_samples is not None:
        problems.append(
            Problem(
                "search.num_samples",
                spec.num_samples,
                "no num_samples with "
                "search.algorithm oneshot (search.top_k sets how many of the "
                "ranked orders train)",
            )
        )
    guided = sorted({variant_of(c).label for c in pool if variant_of(c).guided})
    if guided:
        problems.append(
            Problem(
                "model.guidance",
                guided,
                "no guidance with search.algorithm "
                "oneshot (a supernet shares weights by its scheme)",
            )
        )
    orders = supernet_orders(pool)
    if refused is None and pool and top_k(exp) > len(orders):
        problems.append(
            Problem(
                "search.top_k",
                top_k(exp),
                f"at most {len(orders)} (the "
                "distinct orders of the space, which the supernet ranks)",
            )
        )
    return problems


@register_searcher("oneshot")
class OneShot(SearchAlgorithm):
    """Stage 1 ranks; stage 2 is a grid of the top k (and the prior's picks)."""

    position = 4
    needs_budget = False
    takes_prior = True
    takes_warm_start = False
    guided_candidates = False
    iot_subsets = False
    supernet_stage = True
    stage_two = Grid.name
    """What runs the ranked orders: a grid of them."""
    settings = OneShotSettings

    @classmethod
    def problems(cls, exp: SearchedExperiment,
                 pool: Sequence[VariantCandidate]) -> list[Problem]:
        """Its own checks (:func:`oneshot_problems`): they refuse guidance, and any task
        refusing a supernet (so IOT subsets)."""
        return oneshot_problems(exp, pool)

    @classmethod
    def footer(cls, plan: SearchInput) -> str:
        """Its two stages: the supernet's orders and cost, then what trains stand-alone."""
        exp, n = plan.experiment, len(plan.trials)
        tail = f"; {cls.goal(plan)}; nothing was run"
        one, k, seeds = stage_one(plan, supernet_config(exp)), top_k(exp), len(exp.seed_list)
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

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        """Stage 2's searcher: the sweep runs stage 1 first, which makes the plan a grid of
        the ranked orders (:func:`~sublayer_search.search.oneshot.stages.stage_two`)."""
        return Grid.make(plan)
