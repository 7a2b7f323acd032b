"""Validation of ``search: {algorithm: oneshot, ...}`` (torch-free: planning imports it).

A one-shot sweep trains one weight-sharing supernet over every order of the space
(stage 1), ranks the orders with it and trains the ``top_k`` best stand-alone beside the
baseline seeds (stage 2). :func:`oneshot_problems` says what in an experiment file
cannot run that way, naming the field, the value and what is expected.
"""

from __future__ import annotations

from collections.abc import Sequence

from sublayer_search.models.supernet.config import SupernetConfig
from sublayer_search.search.plan.experiment import Experiment
from sublayer_search.search.plan.problems import Problem
from sublayer_search.search.plan.variant import variant_of
from sublayer_search.search.searchers.registry import listed, search_algorithm, searcher_names
from sublayer_search.spaces.candidate import Candidate

__all__ = ["DEFAULT_TOP_K", "oneshot_problems", "supernet_config", "supernet_orders", "top_k"]

DEFAULT_TOP_K = 5
"""Orders that train stand-alone when ``search.top_k`` is not given."""


def supernet_config(exp: Experiment) -> SupernetConfig:
    """The ``search.supernet`` section (defaults where it is left out)."""
    return exp.search.supernet or SupernetConfig()


def top_k(exp: Experiment) -> int:
    return exp.search.top_k or DEFAULT_TOP_K


def supernet_orders(candidates: Sequence[Candidate]) -> list[str]:
    """The distinct orders of the space, in the space's order: what the supernet covers."""
    return list(dict.fromkeys(c.order for c in candidates))


def oneshot_problems(exp: Experiment, pool: Sequence[Candidate]) -> list[Problem]:
    """Every problem of a one-shot search section (none for other algorithms that leave
    ``supernet`` and ``top_k`` out; planning refuses ``warm_start`` by the declaration's
    capabilities, :mod:`~sublayer_search.search.searchers.algorithms.oneshot`)."""
    spec = exp.search
    if not search_algorithm(spec.algorithm).supernet_stage:
        staged = listed(searcher_names(supernet_stage=True))
        return [
            Problem(
                f"search.{name}",
                value,
                "no " + name + f" unless search.algorithm is {staged} (it is {spec.algorithm})",
            )
            for name, value in (("supernet", spec.supernet and spec.supernet.to_dict()),
                                ("top_k", spec.top_k))
            if value is not None
        ]
    problems: list[Problem] = []
    if exp.task != "lm":
        problems.append(
            Problem(
                "search.algorithm",
                "oneshot",
                f"{listed(searcher_names(supernet_stage=False))} for task {exp.task} (a "
                "supernet ranks language-model orders: task lm)",
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
    if exp.task == "lm" and pool and top_k(exp) > len(orders):
        problems.append(
            Problem(
                "search.top_k",
                top_k(exp),
                f"at most {len(orders)} (the "
                "distinct orders of the space, which the supernet ranks)",
            )
        )
    return problems
