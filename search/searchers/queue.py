"""The order in which a grid or random sweep starts its trials: with ``search.prior``, the
baseline seeds first, then the candidates the prior predicts best first.

Started best-predicted first, fewer later trials can be "leaders" (trials a rule safe
whatever comes next must train whole), so early stopping saves more (docs/search.md).
Pure: the same function orders a live sweep's queue (:mod:`...plan.sweep_plan`) and re-times a
recorded one (``sublayer replay --arrival prior``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sublayer_search.search.searchers.prior import OrderPrior, PriorError, resolve_prior
from sublayer_search.search.searchers.registry import search_algorithm
from sublayer_search.spaces.problems import Problem

if TYPE_CHECKING:
    from sublayer_search.search.core.trial import Trial
    from sublayer_search.search.searchers.search_input import SearchInput
    from sublayer_search.search.searchers.settings import SearchSection

__all__ = ["queued", "prior_for", "prior_queue", "prior_scores", "queue_lines", "search_prior", "trial_orders"]

T = TypeVar("T")
TrialT = TypeVar("TrialT", bound="Trial[Any]")


def prior_scores(orders_of: Sequence[Sequence[str]], prior: OrderPrior, *,
                 f_units: float = 2.0, c_units: float = 1.0) -> list[float]:
    """The prior's score of each item (lower is better): the mean over its orders (an IOT
    subset holds several)."""
    flat = [o for orders in orders_of for o in orders]
    if not flat:
        return [0.0] * len(orders_of)
    predicted = iter(prior.predict(flat, f_units=f_units, c_units=c_units).tolist())
    return [sum(next(predicted) for _ in orders) / len(orders) if orders else 0.0
            for orders in orders_of]


def prior_queue(items: Sequence[T], *, orders: Callable[[T], Sequence[str]],
                baseline: Callable[[T], bool], prior: OrderPrior | None,
                f_units: float = 2.0, c_units: float = 1.0) -> list[T]:
    """``items`` in the order a sweep starts them: baselines first, in their given order,
    then the rest by the prior's score, best first (ties, and every item when the prior
    has no evidence, keep their given order). Without a prior: baselines first."""
    base = [i for i in items if baseline(i)]
    rest = [i for i in items if not baseline(i)]
    if prior is None or prior.weight <= 0 or not rest:
        return base + rest
    scores = prior_scores([list(orders(i)) for i in rest], prior, f_units=f_units,
                          c_units=c_units)
    ranked = sorted(range(len(rest)), key=lambda j: (scores[j], j))
    return base + [rest[j] for j in ranked]


def queue_lines(plan: SearchInput) -> list[str]:
    """The dry run's lines on ``search.prior`` and the queue it orders."""
    prior = plan.prior
    if prior is None:
        return []
    lines = [f"search.prior: {prior.describe()}"]
    if search_algorithm(plan.algorithm).plans_every_trial:
        how = ("baseline seeds first, then the candidates best-predicted first (the table's "
               "order)" if prior.weight > 0 else
               "baseline seeds first, then the space's order (the prior has no evidence)")
        lines.append(f"queue: {how}; --resume keeps it")
    return lines


def trial_orders(trial: Trial[Any]) -> tuple[str, ...]:
    """The orders a trial trains: an IOT subset's, or its one order."""
    subset = trial.variant.subset
    return subset.orders if subset is not None and subset.orders else (trial.order,)


def prior_for(names: str | Sequence[str] | None, *, algorithm: str,
              tracking_uri: str | None = None) -> OrderPrior | None:
    """The prior ``search.prior`` asks for (``None`` without one); :class:`PriorError` for a
    name that is no study, or a prior on a searcher it cannot shape (one that does not
    declare ``takes_prior``: a grid's queue, the surrogate's prior mean, evolution's first population, the
    orders a one-shot search's stage 2 adds to the supernet's top k)."""
    if not names:
        return None
    if not search_algorithm(algorithm).takes_prior:
        raise PriorError(names, f"no prior for search.algorithm {algorithm} (a prior orders "
                         "a grid's queue, shapes the order-aware surrogate and evolution, and "
                         "adds its best orders to a one-shot search's stage 2)")
    return resolve_prior(names, tracking_uri=tracking_uri)


def search_prior(search: SearchSection, tracking_uri: str | None,
                 problems: list[Problem]) -> OrderPrior | None:
    """``search.prior``'s studies, read and fitted once, before anything runs (a name that
    is no study, or a prior the searcher cannot take, is a problem)."""
    try:
        return prior_for(search.prior, algorithm=search.algorithm, tracking_uri=tracking_uri)
    except PriorError as exc:
        problems.extend(exc.problems)
        return None


def queued(trials: Sequence[TrialT], prior: OrderPrior | None,
           unit_costs: tuple[float, float] = (2.0, 1.0)) -> list[TrialT]:
    """A plan's trials in the order its sweep starts them (:func:`prior_queue`; trials
    are :class:`~sublayer_search.search.core.trial.Trial`)."""
    f_units, c_units = unit_costs
    return prior_queue(trials, orders=trial_orders, baseline=lambda t: bool(t.baseline),
                       prior=prior, f_units=f_units, c_units=c_units)
