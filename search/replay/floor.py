"""The least compute any stopping rule could have used on a recorded sweep while keeping
its top k: a floor to read a replay's compute against.

A clairvoyant rule, one that knows every final value in advance, still has to

- train every baseline seed to the end (the report compares every order with whole
  seeds);
- train the top k candidates to the end (that is what keeping them means);
- train every other candidate up to the first evaluation at which a rule may decide.
  A recorded sweep can only be stopped at its recorded evaluations, and a rule that
  reads slopes (``scheduler: {type: curve}``) decides from the second one on.

``online`` makes the rule know only the final values of the trials that had started
when it decides on a candidate (at the candidate's first decision, in the curves'
recorded times), as a live sweep must: a candidate can then be stopped early only when
at least k candidates that had started by then end better. Every other candidate might
still be one of the top k, so a rule safe whatever comes next trains it whole. In a
sweep that runs its trials a few at a time such leaders are many (about
k * (1 + ln(n / k)) of n candidates in a random order).

``continued_share`` adds one more constraint: that share of the candidates trains past
its first decision to the next evaluation, as a rule must that keeps slow starters (on
another corpus all three eventual winners sat in the bottom half at the first rung, so a
rule that kept them continued at least half of the candidates). The clairvoyant rule
continues the top k and the cheapest others.

Pure functions over a :class:`ReplayReport` and the recorded curves: no Ray, no MLflow.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from sublayer_search.search.replay.report import ReplayReport

__all__ = ["ComputeFloor", "compute_floor"]


class _Point(Protocol):
    step: int
    time: float


class _Curve(Protocol):
    name: str
    points: Sequence[_Point]

    @property
    def started(self) -> float: ...


@dataclass(frozen=True, kw_only=True)
class ComputeFloor:
    """Trial-steps a clairvoyant rule needs, as fractions of the full sweep."""

    first_decision: int
    """The evaluation (1 = the first) at which the rule may first stop a candidate."""
    continued_share: float
    """Share of the candidates that trains past its first decision."""
    online: bool
    """The rule knew only the final values of the trials started by each candidate's first
    decision."""
    fraction: float
    """With the baseline seeds' trial-steps (they always train whole)."""
    candidate_fraction: float
    """The candidates alone."""


def _step_at(curve: _Curve | None, evaluation: int, full: int) -> int:
    """Steps trained at the curve's ``evaluation``-th evaluation (1-based), at most ``full``."""
    if curve is None or not curve.points:
        return full
    return min(curve.points[min(evaluation, len(curve.points)) - 1].step, full)


def _leaders(report: ReplayReport, curves: Sequence[_Curve], first_decision: int) -> set[str]:
    """Candidates that fewer than k of the candidates started by their first decision end
    better than. One pass in time order, keeping the k + 1 best ranks started so far (the
    candidate itself may be among them): n log k, not n^2, for sweeps of thousands."""
    by_name = {c.name: c for c in curves}
    rank = {t.name: i for i, t in enumerate(report.ranked())}
    worst = len(rank)  # a candidate without a final ends behind every ranked one
    cands = [n for n in (t.name for t in report.trials if not t.baseline) if n in by_name]
    by_start = sorted(cands, key=lambda n: by_name[n].started)
    decide = {n: by_name[n].points[min(first_decision, len(by_name[n].points)) - 1].time
              for n in cands}
    best: list[int] = []  # the k + 1 smallest ranks of the candidates started so far
    started, leaders = 0, set()
    for n in sorted(cands, key=decide.__getitem__):
        while started < len(by_start) and by_name[by_start[started]].started <= decide[n]:
            bisect.insort(best, rank.get(by_start[started], worst))
            del best[report.k + 1:]
            started += 1
        mine = rank.get(n, worst)
        if sum(1 for r in best if r < mine) < report.k:  # ranks are distinct but for worst
            leaders.add(n)
    return leaders


def compute_floor(report: ReplayReport, curves: Sequence[_Curve], *, first_decision: int = 1,
                  continued_share: float = 0.0, online: bool = False) -> ComputeFloor:
    """The compute of a rule that keeps ``report.top_k`` and stops every other candidate
    as early as ``first_decision``, ``continued_share`` and ``online`` allow (module
    docstring)."""
    if first_decision < 1:
        raise ValueError(f"first_decision: got {first_decision}, expected a whole number >= 1")
    if not 0.0 <= continued_share <= 1.0:
        raise ValueError(f"continued_share: got {continued_share}, expected 0 to 1")
    by_name = {c.name: c for c in curves}
    top = set(report.top_k) | (_leaders(report, curves, first_decision) if online else set())
    base_used = sum(t.full_steps for t in report.trials if t.baseline)
    cands = [t for t in report.trials if not t.baseline]
    used = {t.name: t.full_steps if t.name in top else
            _step_at(by_name.get(t.name), first_decision, t.full_steps) for t in cands}
    extra = math.ceil(continued_share * len(cands)) - sum(1 for t in cands if t.name in top)
    if extra > 0:  # the cheapest next evaluations among the others
        more = sorted((_step_at(by_name.get(t.name), first_decision + 1, t.full_steps)
                       - used[t.name], t.name) for t in cands if t.name not in top)
        for cost, name in more[:extra]:
            used[name] += cost
    full_cands = sum(t.full_steps for t in cands)
    full = full_cands + sum(t.full_steps for t in report.trials if t.baseline)
    cand_used = sum(used.values())
    return ComputeFloor(
        first_decision=first_decision, continued_share=continued_share, online=online,
        fraction=(base_used + cand_used) / full if full else math.nan,
        candidate_fraction=cand_used / full_cands if full_cands else math.nan)
