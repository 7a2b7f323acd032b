"""The surrogate's trust in its prior (:mod:`search.searchers.prior_trust`): a prior the
results agree with keeps its weight, one they contradict loses it (and is read
backwards), and the search stays deterministic for a seed."""

from __future__ import annotations

import numpy as np
import pytest

from sublayer_search.search.recorded.oracle import OrderTable, drive
from sublayer_search.search.searchers.prior import resolve_prior
from sublayer_search.search.searchers.prior_trust import TRUST_VAR, trust
from sublayer_search.search.searchers.surrogate import SurrogateSearcher
from sublayer_search.spaces.registry import expand

PRIOR = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 1.5])
"""The prior's predictions of six observed orders (lower: predicted better)."""


def _standard(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / values.std()


def test_before_any_result_the_prior_is_taken_as_fitted():
    got = trust(np.array([]), np.array([]), weight=0.7)
    assert (got.beta, got.var) == (1.0, TRUST_VAR)


def test_a_prior_the_results_agree_with_keeps_its_weight():
    got = trust(PRIOR, _standard(PRIOR), weight=0.7)
    assert got.beta > 1.0 and got.var < TRUST_VAR  # confirmed: steers at least as before


def test_a_prior_the_results_contradict_loses_its_weight():
    got = trust(PRIOR, -_standard(PRIOR), weight=0.7)
    assert got.beta < 0.0 and got.var < TRUST_VAR  # read backwards, as the evidence says
    unrelated = trust(PRIOR, _standard(np.array([0.5, -1.0, 1.5, -0.5, 1.0, 0.0])),
                      weight=0.7)
    assert abs(unrelated.beta) < 0.5  # no relation: little left of the prior's pull


def test_more_contradicting_results_take_more_trust_away():
    first = trust(PRIOR[:3], -_standard(PRIOR[:3]), weight=0.7)
    later = trust(PRIOR, -_standard(PRIOR), weight=0.7)
    assert later.beta < first.beta < 1.0 and later.var < first.var


def _table(sign: float) -> tuple[OrderTable, object]:
    pool = expand("permutations", {"n_s": 4, "n_f": 4, "count": 30, "seed": 1})
    prior = resolve_prior("press2020")
    scores = prior.predict([c.order for c in pool])
    rows = [(c.order, sign * float(s)) for c, s in zip(pool, scores, strict=True)]
    return OrderTable.from_rows(rows, metric="v"), prior


def _evaluations(table: OrderTable, prior: object, seed: int) -> list[str]:
    searcher = SurrogateSearcher(table.candidates(), num_samples=30, seeds=[0], metric="v",
                                 prior=prior, seed=seed, n_initial=10**6 if prior is None else 3)
    return drive(searcher, table, budget=30, until=table.top(1))


@pytest.mark.parametrize(("sign", "within"), [(1.0, 5), (-1.0, 8)])
def test_the_surrogate_follows_an_agreeing_prior_and_drops_a_contradicted_one(sign, within):
    """A table equal to the prior: its best order within a few draws. A table the prior
    ranks backwards (its best orders last): after the first draws contradict it the search
    reads it backwards and still finds the best order in under half random's evaluations
    (median of 20 searcher seeds; random needs 13 to 20 here)."""
    table, prior = _table(sign)
    assert _evaluations(table, prior, 0) == _evaluations(table, prior, 0)  # seeded
    guided = [len(_evaluations(table, prior, seed)) for seed in range(20)]
    blind = [len(_evaluations(table, None, seed)) for seed in range(20)]
    assert all(orders <= 30 for orders in guided)
    assert np.median(guided) <= within and np.median(guided) <= np.median(blind) / 2
