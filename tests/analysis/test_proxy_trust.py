"""The proxy's trust: Kendall tau, top-k recall with bootstrap intervals and the compute
ratio, over the orders a proxy sweep and a language-model sweep both scored."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.studies.proxy_trust import proxy_trust, top_recall

ORDERS = ["sfsf", "ssff", "sffs", "fssf", "rfrf", "srfs", "rsfr", "fsfs", "ffss"]


def _frame(values: dict[str, float], metric: str, seconds: float) -> pd.DataFrame:
    rows = [{"order": o, "final": v, "metric": metric, "status": "finished",
             "baseline": False, "start_ms": 1000, "end_ms": 1000 + int(seconds * 1000)}
            for o, v in values.items()]
    return pd.DataFrame(rows)


def test_a_proxy_that_ranks_as_the_lm_does_gets_tau_one_and_full_recall() -> None:
    bpc = {o: 2.0 + 0.1 * i for i, o in enumerate(ORDERS)}  # the first order is best
    acc = {o: 0.9 - 0.05 * i for i, o in enumerate(ORDERS)}
    trust = proxy_trust(_frame(bpc, "val_bpc", 40.0), _frame(acc, "mad_acc", 10.0),
                        lm_metric="val_bpc", resamples=200)
    assert trust.tau == pytest.approx(1.0) and trust.recall == 1.0
    assert trust.tau_ci[1] == pytest.approx(1.0) and trust.tau_ci[0] > 0.5
    assert trust.compute_ratio == pytest.approx(4.0)
    assert trust.chance_recall == pytest.approx(5 / 9)
    assert list(trust.orders["lm_rank"]) == list(range(1, 10))


def test_a_reversed_proxy_gets_tau_minus_one_and_the_p_value_of_scipy() -> None:
    bpc = {o: 2.0 + 0.1 * i for i, o in enumerate(ORDERS)}
    acc = {o: 0.1 + 0.05 * i for i, o in enumerate(ORDERS)}
    trust = proxy_trust(_frame(bpc, "val_bpc", 1.0), _frame(acc, "mad_acc", 1.0),
                        lm_metric="val_bpc", resamples=200)
    assert trust.tau == pytest.approx(-1.0)
    assert trust.tau_p == pytest.approx(stats.kendalltau(range(9), range(9)).pvalue)
    assert trust.recall == pytest.approx(1 / 5)  # the middle order is in both top fives


def test_seeds_are_averaged_and_only_shared_orders_count() -> None:
    rng = np.random.default_rng(0)
    bpc = {o: float(rng.normal()) for o in ORDERS}
    lm = pd.concat([_frame(bpc, "val_bpc", 1.0),
                    _frame({"sfsf": bpc["sfsf"] + 1.0}, "val_bpc", 1.0)])  # a second seed
    proxy = _frame({o: float(rng.random()) for o in ORDERS[:8]}, "mad_acc", 1.0)
    trust = proxy_trust(lm, proxy, lm_metric="val_bpc", resamples=100)
    assert len(trust.orders) == 8
    row = trust.orders.set_index("order").loc["sfsf"]
    assert row["language_model"] == pytest.approx(bpc["sfsf"] + 0.5)
    with pytest.raises(AnalysisError, match="share 6 scored order"):
        proxy_trust(lm, proxy.iloc[:6], lm_metric="val_bpc")


def test_top_recall_counts_the_shared_best() -> None:
    assert top_recall(np.array([3.0, 2, 1, 0]), np.array([0.0, 1, 2, 3]), 2) == 0.0
    assert top_recall(np.array([3.0, 2, 1, 0]), np.array([3.0, 1, 2, 0]), 2) == 0.5
