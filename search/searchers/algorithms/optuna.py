"""``search.algorithm: optuna``: an Optuna study (TPE, or NSGA-II / TPE over several
``search.objectives``) over the candidates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from sublayer_search.search.core.problems import Problem
from sublayer_search.search.searchers.registry import SearchAlgorithm, register_searcher
from sublayer_search.search.searchers.settings import STATIC_OBJECTIVES, SearchSection
from sublayer_search.spaces.records import direction

if TYPE_CHECKING:
    from sublayer_search.search.core.variant import VariantCandidate
    from sublayer_search.search.searchers.base import Stateful
    from sublayer_search.search.searchers.search_input import SearchedExperiment, SearchInput


class OptunaSettings(SearchSection):
    """``search`` of ``algorithm: optuna``."""

    objectives: list[str] | None = None
    """Several objectives (``[val_ppl, flops_per_token]``; the first is the metric, the
    others reported metrics or ``params`` / ``flops_per_token``): a Pareto front."""
    sampler: Literal["tpe", "nsga2"] = "tpe"
    """Optuna's sampler: TPE (also multi-objective) or NSGA-II (multi-objective)."""
    replicates: int | None = Field(None, ge=1)
    """Most seeds one candidate trains (a candidate suggested again is a replicate, with the
    next seed). Default: no limit with one objective, 1 with several (a point of the front
    is measured once; ask for more to see seed noise on the front)."""

    elsewhere = {
        "objectives": "no {key} for search.algorithm {algorithm} (multi-objective search "
                      "needs {owners})",
        "replicates": "no {key} for search.algorithm {algorithm} (they cap one candidate's "
                      "seeds under {owners})",
    }

    def front(self) -> list[str]:
        return list(self.objectives or [])

    def problems(self) -> list[Problem]:
        """What is wrong with its objectives (several, distinct, a reported metric first)."""
        if self.objectives is None:
            return []
        if len(self.objectives) < 2:
            return [Problem("search.objectives", self.objectives, "two or more objectives "
                            "(for one, set search.metric)")]
        problems = []
        if len(set(self.objectives)) < len(self.objectives):
            problems.append(Problem("search.objectives", self.objectives, "distinct objectives"))
        if self.objectives[0] in STATIC_OBJECTIVES:
            problems.append(Problem("search.objectives[0]", self.objectives[0],
                                    "a metric the trials report (params and flops_per_token "
                                    "may follow it)"))
        if self.metric is not None and self.metric != self.objectives[0]:
            problems.append(Problem("search.metric", self.metric, f"the first objective, "
                                    f"{self.objectives[0]} (or leave search.metric out)"))
        return problems


@register_searcher("optuna")
class Optuna(SearchAlgorithm):
    """:class:`~sublayer_search.search.searchers.optuna_study.OptunaTrials`, the baseline
    seeds first."""

    position = 1
    settings = OptunaSettings

    @classmethod
    def problems(cls, exp: SearchedExperiment,
                 pool: Sequence[VariantCandidate]) -> list[Problem]:
        own = exp.search.problems() if isinstance(exp.search, OptunaSettings) else []
        return cls.pool_problems(pool) + own

    @classmethod
    def goal(cls, plan: SearchInput) -> str:
        """Several objectives: each with its direction, and the sampler."""
        search = plan.experiment.search
        if not isinstance(search, OptunaSettings) or not search.front():
            return super().goal(plan)
        named = ", ".join(f"{o} ({direction(o)})" for o in search.front())
        return f"objectives {named}: a Pareto front ({search.sampler} sampler)"

    @classmethod
    def make(cls, plan: SearchInput) -> Stateful:
        from sublayer_search.search.searchers.optuna_study import OptunaTrials
        from sublayer_search.search.searchers.with_baseline import baseline_first

        exp = plan.experiment
        search = exp.search
        assert isinstance(search, OptunaSettings)  # read as this searcher's settings
        objectives = search.front() or [plan.metric]
        return baseline_first(plan, OptunaTrials(
            plan.candidates, num_samples=search.num_samples or 0, seeds=exp.seed_list,
            metric=plan.metric, mode=plan.mode, seed=search.seed, objectives=objectives,
            statics=statics(plan, objectives), sampler=search.sampler,
            identity=plan.task.identity, replicates=search.replicates))


def statics(plan: SearchInput, objectives: Sequence[str]) -> dict[str, dict[str, float]]:
    """Static objectives of every candidate, keyed by variant (order and identity; a
    hard-guided model has fewer parameters than its order unguided)."""
    from sublayer_search.search.core.trial import Trial
    from sublayer_search.search.core.variant import variant_key

    wanted = [o for o in objectives if o in STATIC_OBJECTIVES]
    if not wanted:
        return {}
    out = {}
    for cand in plan.candidates:
        row = plan.row(Trial.of(cand, 0))
        key = variant_key(cand.order, plan.task.identity(cand.variant))
        out[key] = {k: float(row[k]) for k in wanted if row.get(k) is not None}
    return out
