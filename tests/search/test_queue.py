"""The prior-ordered queue: baselines first, then candidates best-predicted first."""

from __future__ import annotations

from sublayer_search.search.searchers.prior import OrderPrior, prior_features
from sublayer_search.search.searchers.queue import prior_queue, prior_scores

ITEMS = [("cand-a", ["ffffffssssss"], False), ("base-0", ["sfsfsfsfsfsf"], True),
         ("cand-b", ["ssssssffffff"], False), ("base-1", ["sfsfsfsfsfsf"], True),
         ("cand-c", ["sfsfsfsfsfsf"], False)]


def _prior(weight: float) -> OrderPrior:
    """A prior that scores an order by where its ``s`` sit: lower (earlier s) is better."""
    width = len(prior_features("sf"))
    coef = [0.0] * width
    coef[0] = 1.0
    return OrderPrior(sources=("t",), mean=(0.0,) * width, sd=(1.0,) * width,
                      coef=tuple(coef), weight=weight)


def _queue(prior: OrderPrior | None) -> list[str]:
    return [i[0] for i in prior_queue(ITEMS, orders=lambda i: i[1], baseline=lambda i: i[2],
                                      prior=prior)]


def test_baselines_come_first_then_candidates_by_the_prior_score():
    prior = _prior(1.0)
    scores = dict(zip([i[0] for i in ITEMS], prior_scores([i[1] for i in ITEMS], prior),
                      strict=True))
    queue = _queue(prior)
    assert queue[:2] == ["base-0", "base-1"]
    cands = queue[2:]
    assert sorted(cands) == ["cand-a", "cand-b", "cand-c"]
    assert [scores[c] for c in cands] == sorted(scores[c] for c in cands)
    assert len({scores[c] for c in cands}) == 3  # the test can tell the orders apart


def test_no_prior_or_no_evidence_keeps_the_given_order_after_the_baselines():
    given = ["base-0", "base-1", "cand-a", "cand-b", "cand-c"]
    assert _queue(None) == given
    assert _queue(_prior(0.0)) == given


def test_an_item_with_several_orders_scores_their_mean():
    prior = _prior(1.0)
    one, two = prior_scores([["ssssssffffff"], ["ffffffssssss"]], prior)
    (both,) = prior_scores([["ssssssffffff", "ffffffssssss"]], prior)
    assert both == (one + two) / 2
