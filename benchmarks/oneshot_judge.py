"""Judging helpers of ``oneshot_ranking.py``: the stand-alone truth, rank agreement,
the seed-noise reference and what stage 2 would pick."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats

TARGET_TAU = 0.5
TOP = 5


def truth_table(source: str) -> tuple[dict[str, float], dict[str, int], dict[str, Any]]:
    """Per order: mean final metric over finished trials, and its number of seeds;
    plus the study's facts (metric, baseline seeds' spread, trial wall times)."""
    from sublayer_search.analysis.store.study_export import open_export

    export = open_export(source)
    t = export.trials
    done = t[t["status"] == "finished"].dropna(subset=["final"])
    grouped = done.groupby("order")["final"]
    base = done[done["baseline"].astype(bool)]["final"]
    facts: dict[str, Any] = {
        "metric": export.metric,
        "trials": len(t),
        "finished": len(done),
        "baseline_seeds": len(base),
        "baseline_sd": float(base.std(ddof=1)) if len(base) > 1 else None,
    }
    if {"start_ms", "end_ms"} <= set(done.columns):
        wall = (done["end_ms"] - done["start_ms"]).dropna() / 1000
        facts["trial_wall_s_median"] = float(wall.median()) if len(wall) else None
    return grouped.mean().to_dict(), grouped.size().to_dict(), facts


def seed_reference(
    truth: np.ndarray,
    seeds: np.ndarray,
    sd: float | None,
    rng: np.random.Generator,
    sims: int = 2000,
) -> float | None:
    """Median tau between two simulated stand-alone re-runs of every order: true values
    with the observed spread less seed noise, plus noise of sd/sqrt(seeds) each."""
    if sd is None or not math.isfinite(sd):
        return None
    noise = sd / np.sqrt(seeds)
    spread = max(float(np.var(truth, ddof=1)) - float(np.mean(noise**2)), 0.0)
    centre = truth.mean()
    scale = math.sqrt(spread / max(float(np.var(truth, ddof=1)), 1e-300))
    mu = centre + scale * (truth - centre)
    taus = [
        stats.kendalltau(mu + rng.normal(0, noise), mu + rng.normal(0, noise))[0]
        for _ in range(sims)
    ]
    return float(np.median(taus))


def judge(
    estimate: np.ndarray, truth: np.ndarray, rng: np.random.Generator, resamples: int
) -> dict[str, Any]:
    """Rank agreement of ``estimate`` with ``truth`` (both: lower is better)."""
    n = len(truth)
    tau, tau_p = stats.kendalltau(estimate, truth)
    rho, rho_p = stats.spearmanr(estimate, truth)
    boot = []
    for _ in range(resamples):
        pick = rng.integers(0, n, n)
        if np.ptp(truth[pick]) > 0 and np.ptp(estimate[pick]) > 0:
            boot.append(stats.kendalltau(estimate[pick], truth[pick])[0])
    null = np.array(
        [stats.kendalltau(rng.permutation(estimate), truth)[0] for _ in range(resamples)]
    )
    top_true = set(np.argsort(truth, kind="stable")[:TOP])
    top_est = set(np.argsort(estimate, kind="stable")[:TOP])
    return {
        "n_orders": n,
        "kendall_tau": float(tau),
        "kendall_p": float(tau_p),
        "spearman_rho": float(rho),
        "spearman_p": float(rho_p),
        "tau_ci95": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
        "tau_permutation_p": float((1 + np.sum(null >= tau)) / (1 + len(null))),
        "random_tau_95": float(np.percentile(null, 95)),
        "top5_recall": len(top_true & top_est) / TOP,
        "random_top5_recall": TOP / n,
        "target_met": bool(tau >= TARGET_TAU),
    }


def judged_prior(source: str, names: list[str]) -> Any:
    """The prior ``names`` give, fitted without any table of the judged study ``source``
    (:func:`search.searchers.prior.same_study`: by name or any shared record)."""
    from sublayer_search.search.searchers.prior import load_tables, resolve_prior

    return resolve_prior(names, exclude=load_tables(source))


def prior_alone(prior: Any, judged: list[str], truth: np.ndarray, rng: np.random.Generator,
                resamples: int) -> dict[str, Any]:
    """The prior's own ranking of the judged orders (no compute), judged as a scheme is."""
    return {"sources": list(prior.sources), "weight": prior.weight,
            **judge(prior.predict(judged), truth, rng, resamples)}


def stage_two_pick(
    ranking: list[dict[str, Any]], judged: list[str], truth: np.ndarray, prior: Any = None
) -> dict[str, Any]:
    """What stage 2 would train with the default settings: the top 5 by rank, the orders
    tied with the 5th (:func:`search.oneshot.stages.chosen`) and, with a ``prior``, the
    ``supernet.prior_extra`` orders it ranks best among the rest
    (:func:`search.oneshot.stages.prior_picks`); how many of the stand-alone top 5 each
    catches."""
    from sublayer_search.models.supernet.config import SupernetConfig
    from sublayer_search.search.oneshot.stages import chosen, prior_picks

    cfg = SupernetConfig()
    rows = [r for r in sorted(ranking, key=lambda r: r["rank"]) if r["order"] in judged]
    picked = chosen(rows, TOP, extra=cfg.tie_extra, sems=cfg.tie_sems)
    more = prior_picks(rows, picked, prior, cfg.prior_extra)
    top_true = {judged[i] for i in np.argsort(truth, kind="stable")[:TOP]}
    return {
        "tie_extra": cfg.tie_extra,
        "tie_sems": cfg.tie_sems,
        "picked": len(picked),
        "top5_caught": len(top_true & {r["order"] for r in picked}),
        "prior_extra": cfg.prior_extra if prior is not None else 0,
        "picked_with_prior": len(picked) + len(more),
        "top5_caught_with_prior": len(top_true & {r["order"] for r in [*picked, *more]}),
    }
