"""The report's section on a proxy's trust (:mod:`analysis.studies.proxy_trust`): how well
the proxy sweep's ranking of the orders agrees with the language models', and what it
costs, with a figure."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.report.writer import Writer
from sublayer_search.analysis.studies.proxy_trust import ProxyTrust, proxy_account, proxy_trust
from sublayer_search.spaces.records import direction

__all__ = ["proxy_section"]


def proxy_section(w: Writer, frame: pd.DataFrame, proxy: pd.DataFrame, *, metric: str,
                  name: str) -> None:
    """The section comparing ``proxy`` (the trials of sweep ``name``) with ``frame``'s:
    the agreement where enough orders were scored by both, and the compute end to end."""
    account = proxy_account(frame, proxy, lm_metric=metric)
    try:
        trust: ProxyTrust | None = proxy_trust(frame, proxy, lm_metric=metric)
        why = ""
    except AnalysisError as exc:  # a proxy stage trains its few picks: no ranking to test
        trust, why = None, str(exc)
    sec = w.section(
        f"How far the proxy ranks like the language models ({name})",
        f"Each order's mad_acc in the proxy sweep against its {metric} here "
        "(means over an order's finished seeds). Kendall's tau-b with scipy's p-value, "
        "top-5 recall (the share of the 5 best language models among the proxy's 5 best), "
        "both with 95 % bootstrap intervals over orders; the compute ratio is the language "
        "models' seconds per order over the proxy's (trial wall time): above 1 the proxy "
        "is the cheaper, when both ran on alike machines. The compute end to end adds the "
        "proxy sweep to the language models trained, against training every order the "
        "proxy scored as a language model (mean trial seconds here x orders).")
    if trust is None:
        sec.numbers.append(("agreement", f"not measured: {why} (a sweep with search.proxy "
                                         "trains the proxy's picks only; measure the "
                                         "agreement on a sweep of every order)"))
    else:
        sec.numbers += [
            ("orders both scored", f"{len(trust.orders)}"),
            ("Kendall tau-b", f"{trust.tau:+.2f} (95 % CI {trust.tau_ci[0]:+.2f} to "
                              f"{trust.tau_ci[1]:+.2f}), p = {trust.tau_p:.3g}"),
            (f"top-{trust.top} recall", f"{trust.recall:.2f} (95 % CI "
                                        f"{trust.recall_ci[0]:.2f} to "
                                        f"{trust.recall_ci[1]:.2f}; chance "
                                        f"{trust.chance_recall:.2f})"),
            ("compute ratio (LM / proxy seconds per order)", _ratio(trust)),
        ]
    both = account.proxy_seconds + account.lm_seconds
    sec.numbers.append(("compute end to end", f"{both:,.0f} s (proxy {account.proxy_seconds:,.0f} s "
                        f"for {account.proxy_orders} orders + language models "
                        f"{account.lm_seconds:,.0f} s for {account.lm_trials} trials) against "
                        f"~{account.all_lm_estimate:,.0f} s to train every order"))
    if trust is not None:
        w.figure(sec, "proxy_trust", _plot(trust))
        w.table(sec, "proxy_trust_orders", trust.orders)
        w.table(sec, "proxy_trust_summary", trust.summary())
    w.table(sec, "proxy_compute", account.table())


def _ratio(trust: ProxyTrust) -> str:
    ratio = trust.compute_ratio
    if math.isnan(ratio):
        return "not recorded (trials without start and end times)"
    return f"{ratio:.3g} ({trust.lm_seconds:.1f} s / {trust.proxy_seconds:.1f} s)"


def _plot(trust: ProxyTrust) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), layout="constrained")
    o = trust.orders
    axes[0].scatter(o["proxy"], o["language_model"], s=18, color="tab:blue")
    axes[0].set_xlabel(f"proxy {trust.proxy_metric}")
    lower = direction(trust.lm_metric) == "min"
    axes[0].set_ylabel(f"{trust.lm_metric} ({'lower' if lower else 'higher'} is better)")
    axes[0].set_title(f"tau {trust.tau:+.2f} [{trust.tau_ci[0]:+.2f}, {trust.tau_ci[1]:+.2f}]",
                      fontsize=9)
    axes[1].scatter(o["proxy_rank"], o["lm_rank"], s=18, color="tab:orange")
    n = len(o)
    axes[1].plot([1, n], [1, n], color="grey", lw=0.8, ls="--")
    axes[1].set_xlabel("proxy rank (1 = best)")
    axes[1].set_ylabel("language-model rank (1 = best)")
    axes[1].set_title(f"top-{trust.top} recall {trust.recall:.2f} (chance "
                      f"{trust.chance_recall:.2f})", fontsize=9)
    fig.suptitle("The proxy's ranking against the language models'", fontsize=10)
    return fig
