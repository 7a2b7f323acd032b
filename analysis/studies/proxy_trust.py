"""How far a proxy's ranking of orders can be trusted: the proxy sweep (``task: mad``)
against the language-model sweep of the same orders.

Per order: the LM's metric (mean over its finished seeds, ``final``) and the proxy's
score (likewise). Over the orders both scored:

* Kendall's τ-b between the proxy's score and the LM's quality (its metric with the sign
  that makes higher better), with scipy's p-value of τ = 0;
* top-k recall: the share of the LM's k best orders among the proxy's k best (chance:
  about k / n);
* 95 % bootstrap intervals of both (``scipy.stats.bootstrap``, orders resampled in pairs,
  seeded; percentile intervals);
* the compute ratio: the LM's seconds per order over the proxy's (trial wall time, start
  to end, mean over an order's trials). Above 1 the proxy is the cheaper; the two sweeps
  must have run on alike machines for the ratio to mean anything.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import usable
from sublayer_search.spaces.records import direction

__all__ = ["ProxyAccount", "ProxyTrust", "proxy_account", "proxy_trust", "top_recall"]


@dataclass(frozen=True, kw_only=True)
class ProxyTrust:
    """Result of :func:`proxy_trust`; ``orders`` has one row per order both scored."""

    lm_metric: str
    proxy_metric: str
    orders: pd.DataFrame
    """order, language_model (its metric), proxy (score), lm_rank, proxy_rank (1 = best), lm_seconds,
    proxy_seconds."""
    tau: float
    tau_p: float
    tau_ci: tuple[float, float]
    top: int
    recall: float
    recall_ci: tuple[float, float]
    chance_recall: float
    lm_seconds: float
    proxy_seconds: float

    @property
    def compute_ratio(self) -> float:
        """LM seconds per order / proxy seconds per order (NaN without times)."""
        if not (self.proxy_seconds > 0 and math.isfinite(self.lm_seconds)):
            return math.nan
        return self.lm_seconds / self.proxy_seconds

    def summary(self) -> pd.DataFrame:
        """One row per measure: estimate and its 95 % interval."""
        return pd.DataFrame([
            {"measure": "kendall_tau", "estimate": self.tau, "ci_low": self.tau_ci[0],
             "ci_high": self.tau_ci[1], "p": self.tau_p, "n": len(self.orders)},
            {"measure": f"top{self.top}_recall", "estimate": self.recall,
             "ci_low": self.recall_ci[0], "ci_high": self.recall_ci[1],
             "p": math.nan, "n": len(self.orders)},
            {"measure": "compute_ratio", "estimate": self.compute_ratio, "ci_low": math.nan,
             "ci_high": math.nan, "p": math.nan, "n": len(self.orders)},
        ])


def top_recall(lm_quality: np.ndarray, proxy_score: np.ndarray, top: int) -> float:
    """Share of the ``top`` best by ``lm_quality`` among the ``top`` best by ``proxy_score``
    (both: higher is better; ties broken by position, stably)."""
    k = min(top, len(lm_quality))
    best_lm = set(np.argsort(-lm_quality, kind="stable")[:k].tolist())
    best_proxy = set(np.argsort(-proxy_score, kind="stable")[:k].tolist())
    return len(best_lm & best_proxy) / k


def _per_order(frame: pd.DataFrame, metric: str, side: str) -> pd.DataFrame:
    rows = usable(frame, metric)
    if rows.empty:
        raise AnalysisError(f"the {side} sweep has no finished trial of metric {metric!r}")
    return (rows.assign(value=rows["final"].astype(float), seconds=_seconds(rows))
            .groupby("order", sort=True)[["value", "seconds"]].mean())


def proxy_trust(lm: pd.DataFrame, proxy: pd.DataFrame, *, lm_metric: str,
                proxy_metric: str = "mad_acc", top: int = 5, resamples: int = 2000,
                seed: int = 0) -> ProxyTrust:
    """The agreement of ``proxy``'s ranking with ``lm``'s over the orders both scored
    (trial frames of :mod:`analysis.store`); AnalysisError with fewer than ``top + 2``
    such orders."""
    left, right = _per_order(lm, lm_metric, "language-model"), \
        _per_order(proxy, proxy_metric, "proxy")
    both = left.join(right, how="inner", lsuffix="_lm", rsuffix="_proxy")
    if len(both) < top + 2:
        raise AnalysisError(f"the proxy and the language-model sweeps share {len(both)} "
                            f"scored order(s); expected at least {top + 2} for a top-{top} "
                            "recall and a ranking")
    sign = 1.0 if direction(lm_metric) == "max" else -1.0
    psign = 1.0 if direction(proxy_metric) == "max" else -1.0
    quality = sign * both["value_lm"].to_numpy()
    score = psign * both["value_proxy"].to_numpy()
    result = stats.kendalltau(score, quality)
    tau_ci = _interval(lambda x, y: stats.kendalltau(x, y).statistic, score, quality,
                       resamples, seed)
    recall_ci = _interval(lambda x, y: top_recall(y, x, top), score, quality, resamples, seed)
    orders = pd.DataFrame({
        "order": both.index, "language_model": both["value_lm"].to_numpy(),
        "proxy": both["value_proxy"].to_numpy(),
        "lm_rank": stats.rankdata(-quality, method="min").astype(int),
        "proxy_rank": stats.rankdata(-score, method="min").astype(int),
        "lm_seconds": both["seconds_lm"].to_numpy(),
        "proxy_seconds": both["seconds_proxy"].to_numpy()}).sort_values("lm_rank")
    return ProxyTrust(lm_metric=lm_metric, proxy_metric=proxy_metric,
                      orders=orders.reset_index(drop=True), tau=float(result.statistic),
                      tau_p=float(result.pvalue), tau_ci=tau_ci, top=top,
                      recall=top_recall(quality, score, top), recall_ci=recall_ci,
                      chance_recall=min(top, len(both)) / len(both),
                      lm_seconds=float(both["seconds_lm"].mean()),
                      proxy_seconds=float(both["seconds_proxy"].mean()))


def _interval(statistic, x: np.ndarray, y: np.ndarray, resamples: int,
              seed: int) -> tuple[float, float]:
    with warnings.catch_warnings():  # a resample of tied values has no tau: dropped
        warnings.simplefilter("ignore")
        ci = stats.bootstrap((x, y), statistic, paired=True, vectorized=False,
                             n_resamples=resamples, method="percentile",
                             random_state=np.random.default_rng(seed)).confidence_interval
    return float(ci.low), float(ci.high)


@dataclass(frozen=True, kw_only=True)
class ProxyAccount:
    """The compute of a proxy-first search end to end (:func:`proxy_account`), in trial
    wall seconds: the proxy sweep, the language models trained, and what training every
    order the proxy scored as a language model would have taken (estimated)."""

    proxy_orders: int
    proxy_seconds: float
    lm_trials: int
    lm_orders: int
    lm_seconds: float
    all_lm_estimate: float
    """Mean seconds of a language-model trial x (the proxy's orders + the baseline's
    trials): training them all instead."""

    def table(self) -> pd.DataFrame:
        both = self.proxy_seconds + self.lm_seconds
        return pd.DataFrame([
            {"stage": "proxy sweep", "orders": self.proxy_orders, "seconds": self.proxy_seconds},
            {"stage": "language models trained", "orders": self.lm_orders,
             "seconds": self.lm_seconds},
            {"stage": "end to end", "orders": self.proxy_orders, "seconds": both},
            {"stage": "every order as a language model (estimate)",
             "orders": self.proxy_orders, "seconds": self.all_lm_estimate},
        ])


def _seconds(frame: pd.DataFrame) -> pd.Series:
    if not {"start_ms", "end_ms"} <= set(frame.columns):
        return pd.Series(math.nan, index=frame.index)
    return (frame["end_ms"].astype(float) - frame["start_ms"].astype(float)) / 1000


def proxy_account(lm: pd.DataFrame, proxy: pd.DataFrame, *, lm_metric: str,
                  proxy_metric: str = "mad_acc") -> ProxyAccount:
    """The compute of both sweeps (every trial that ran, finished or not)."""
    ran_lm = lm[lm["metric"] == lm_metric]
    ran_proxy = proxy[proxy["metric"] == proxy_metric]
    lm_seconds = _seconds(ran_lm)
    proxy_orders = ran_proxy.loc[~ran_proxy["baseline"].astype(bool), "order"].nunique()
    baseline_trials = int(ran_lm["baseline"].astype(bool).sum())
    return ProxyAccount(
        proxy_orders=int(proxy_orders), proxy_seconds=float(_seconds(ran_proxy).sum()),
        lm_trials=len(ran_lm), lm_orders=int(ran_lm["order"].nunique()),
        lm_seconds=float(lm_seconds.sum()),
        all_lm_estimate=float(lm_seconds.mean()) * (proxy_orders + baseline_trials))
