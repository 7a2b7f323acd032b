"""The surrogate's trust in its prior (:mod:`search.searchers.prior_trust`): a prior the
results agree with keeps its weight, one they contradict loses it (and is read
backwards), and the search stays deterministic for a seed."""

from __future__ import annotations

import numpy as np
import pytest

from sublayer_search.search.searchers.oracle import OrderTable, drive
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


def test_beta_uncertainty_widens_the_prediction_away_from_the_tested_prior():
    got = trust(PRIOR, _standard(PRIOR), weight=0.7)
    sd = got.sd(np.array([0.25, 3.0]), centre=0.25)
    assert sd[0] == 0.0 and sd[1] > 0.0


def _table(sign: float) -> tuple[OrderTable, object]:
    pool = expand("permutations", {"n_s": 4, "n_f": 4, "count": 30, "seed": 1})
    prior = resolve_prior("press2020")
    scores = prior.predict([c.order for c in pool])
    rows = [(c.order, sign * float(s)) for c, s in zip(pool, scores, strict=True)]
    return OrderTable.from_rows(rows, metric="v"), prior


@pytest.mark.parametrize(("sign", "within"), [(1.0, 1), (-1.0, 4)])
def test_the_surrogate_follows_an_agreeing_prior_and_drops_a_contradicted_one(sign, within):
    """A table equal to the prior: its best order first. A table the prior ranks
    backwards (its best orders last): after the prior's first picks contradict it the
    search reads it backwards and finds the best order within a few evaluations (a
    fixed prior mean, as the surrogate had before, needed 12 here)."""
    table, prior = _table(sign)
    runs = [drive(SurrogateSearcher(table.candidates(), num_samples=30, seeds=[0], metric="v",
                                    prior=prior, seed=seed), table, budget=30,
                  until=table.top(1)) for seed in (0, 0, 1)]
    assert runs[0] == runs[1]  # deterministic for a seed
    for orders in runs:
        assert orders[-1] in table.top(1) and len(orders) <= within
