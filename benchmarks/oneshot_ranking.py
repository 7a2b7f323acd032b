"""Judge the one-shot supernet's ranking against the shipped small-scale replication.

Issue 17's target: Kendall tau >= 0.5 between the supernet's estimate and the
stand-alone final metric of the replication's orders, with a supernet costing at most 3
stand-alone trials. Steps:

1. plan the programme (``configs/mini_press2020.yaml``: Tiny Shakespeare, preset tiny,
   d 64, context 128, 800 AdamW steps of 16 x 128, lr 0.003) and take the spec of its
   baseline trial: the supernet trains with exactly its model, data and optimizer
   settings; only the steps change;
2. train one supernet per sharing scheme over the distinct orders of the planned space
   (the random permutations, the budgeted draws, the sandwiches and the baseline);
3. rank every order on the same held-out batches the stand-alone trials were validated on
   (the first ``train.eval_batches`` validation batches);
4. compare with the export of the finished study (``analysis/data/mini_press2020_*``,
   :func:`analysis.store.study_export.open_export`): per order, the mean final metric over its
   finished trials (the sandwiches have 3 seeds, the baseline 8).

Compute is counted in stand-alone trials (one = ``train.steps`` optimizer steps): the
supernet's steps plus its evaluation forward passes (the end-of-training monitor and the
ranking) at 1/3 of a training step per batch (2N vs 6N FLOPs per token). ``--budget``
(default 3) fixes the total, and the steps are what the evaluations leave of it.

Reported per scheme: Kendall tau and Spearman rho (scipy, with p-values), a bootstrap
95% interval of tau (orders resampled), the permutation p-value of tau against random
rankings, top-5 recall (and what random ranking gets: 5/n on average), the compute, and
the wall time. Also a seed-noise reference: the tau that a second stand-alone run of
every order would reach, simulated from the baseline's seed-to-seed spread.

    .venv/bin/python benchmarks/oneshot_ranking.py --jobs 2
    .venv/bin/python benchmarks/oneshot_ranking.py --jobs 2 --json
    .venv/bin/python benchmarks/oneshot_ranking.py --sharing slot --budget 2
    .venv/bin/python benchmarks/oneshot_ranking.py --jobs 2 --split 1 --sharing ordinal

``--split N`` trains a few-shot set instead of one supernet: one per group of orders
that share their first N sublayers, the steps shared by group size
(:mod:`models.supernet.fewshot`; each group's monitor and ranking forwards are counted).
Each scheme's line also says what stage 2 would train with the default tie settings
(top 5 + up to 3 orders within 2 sem of the 5th) and how many of the true top 5 that is.

``--prior`` (default: the built-in studies) also judges the prior of ``search.prior``
fitted without any table of the judged study (by name or shared record): its own
ranking, at no compute, and what stage 2 catches when it adds the prior's best
``supernet.prior_extra`` orders to the supernet's picks.

The measured figures, every run with its command and seed, are in docs/search.md
("One-shot ranking"): one supernet reaches Kendall tau 0.13-0.33 (ordinal sharing) and
about 0 (slot), a few-shot split 0.337, and its top 5 catches none of the stand-alone
top 5.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from oneshot_judge import (
    TARGET_TAU,
    TOP,
    judge,
    judged_prior,
    prior_alone,
    seed_reference,
    stage_two_pick,
    truth_table,
)
from scipy import stats

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("SUBLAYER_DATA_DIR", str(ROOT.parent / "shared" / "data"))
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def plan_programme(config: Path) -> tuple[Any, dict[str, str]]:
    """(the baseline trial's spec, the distinct orders of the planned sweep -> their space)."""
    from sublayer_search.search.plan.experiment import parse_experiment
    from sublayer_search.search.plan.steps import plan_sweep

    exp = parse_experiment(yaml.safe_load(config.read_text()), str(config))
    plan = plan_sweep(exp, str(config), check_resources=False)
    baseline = next(t for t in plan.trials if t.baseline)
    spaces: dict[str, str] = {}
    for t in plan.trials:
        spaces.setdefault(t.order, "baseline" if t.baseline else t.space)
    return baseline.planned_spec(), spaces


def steps_for(
    budget: float, unit: int, groups: list[int], eval_batches: int
) -> tuple[int, float]:
    """(supernet steps, forward batches) so that steps + forwards/3 <= budget * unit:
    per supernet (one per group of ``--split``) one monitor evaluation of at most 8
    orders at the end, and the ranking of every order."""
    from sublayer_search.models.supernet.train import MONITOR_ORDERS

    forwards = sum(min(MONITOR_ORDERS, n) + n for n in groups) * eval_batches
    return int(budget * unit - forwards / 3), forwards


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One scheme's result from its groups' supernets: rankings merged and re-ranked."""
    rows = sorted((r for p in parts for r in p["ranking"]), key=lambda r: (r["mean"], r["order"]))
    first = parts[0]
    return {
        "sharing": first["sharing"],
        "steps": sum(p["steps"] for p in parts),
        "status": "finished" if all(p["status"] == "finished" for p in parts) else "diverged",
        "train_s": sum(p["train_s"] for p in parts),
        "rank_s": sum(p["rank_s"] for p in parts),
        "val_bpc_monitor": first["val_bpc_monitor"],
        "params": sum(p["params"] for p in parts),
        "pool": "|".join(p["pool"] for p in parts),
        "ranking": [{**r, "rank": i + 1} for i, r in enumerate(rows)],
    }


def run_scheme(job: dict[str, Any]) -> dict[str, Any]:
    """Train and rank one supernet (a worker: one thread)."""
    import torch

    from sublayer_search.models.data import load_corpus
    from sublayer_search.models.supernet.train import SupernetConfig, rank_orders, train_supernet

    torch.set_num_threads(job["threads"])
    spec, orders = job["spec"], job["orders"]
    corpus = load_corpus(spec.data)
    cfg = SupernetConfig(
        steps=job["steps"],
        sharing=job["sharing"],
        eval_batches=job["eval_batches"],
        seed=job["seed"],
    )
    spec = replace(spec, train=replace(spec.train, eval_every=job["steps"]))
    clock = time.perf_counter()
    net = train_supernet(spec, orders, cfg, corpus=corpus)
    trained = time.perf_counter() - clock
    scores = rank_orders(
        net.model,
        orders,
        corpus,
        metric="val_bpc",
        eval_batches=cfg.eval_batches,
        batch_size=spec.train.eval_batch_size or spec.train.batch_size,
        context=spec.model.context,
    )
    return {
        "sharing": cfg.sharing,
        "steps": net.steps,
        "status": net.status,
        "train_s": trained,
        "rank_s": time.perf_counter() - clock - trained,
        "val_bpc_monitor": net.metrics.get("val_bpc"),
        "params": sum(p.numel() for p in net.model.parameters()),
        "pool": "".join(k for k, _ in net.model.keys),
        "ranking": [
            {"order": s.order, "mean": s.mean, "sem": s.sem, "rank": s.rank} for s in scores
        ],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "mini_press2020.yaml")
    ap.add_argument(
        "--export",
        default=str(ROOT / "analysis" / "data" / "mini_press2020_meta.json"),
        help="the study export (a _meta.json, a folder or a built-in name)",
    )
    ap.add_argument("--sharing", nargs="+", default=["ordinal", "slot"])
    ap.add_argument("--budget", type=float, default=3.0, help="in stand-alone trials")
    ap.add_argument("--steps", type=int, default=None, help="override the budget's steps")
    ap.add_argument(
        "--eval-batches",
        type=int,
        default=None,
        help="ranking batches per order (default: the programme's train.eval_batches)",
    )
    ap.add_argument(
        "--split",
        type=int,
        default=0,
        help="few-shot: one supernet per group of orders sharing their first SPLIT "
        "sublayers, the steps shared by group size (0: one supernet)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resamples", type=int, default=5000)
    ap.add_argument("--jobs", type=int, default=1, help="schemes trained at once")
    ap.add_argument("--threads", type=int, default=1, help="torch threads per scheme")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--prior", nargs="*", default=None,
                    help="search.prior studies; the judged study's tables are left out "
                    "(default: the built-in ones; none: no prior)")
    ap.add_argument(
        "--save",
        type=Path,
        default=None,
        help="write the trained schemes' rankings (JSON) here, before judging",
    )
    ap.add_argument(
        "--load",
        type=Path,
        default=None,
        help="judge the rankings of an earlier --save instead of training",
    )
    args = ap.parse_args(argv)

    from sublayer_search.models.supernet.fewshot import share_steps, split_by_prefix

    spec, space_of = plan_programme(args.config)
    orders = list(space_of)
    unit = spec.train.steps
    eval_batches = args.eval_batches or spec.train.eval_batches or 20
    groups = split_by_prefix(orders, args.split)
    steps, forwards = steps_for(args.budget, unit, [len(g) for g in groups.values()], eval_batches)
    steps = args.steps or steps
    compute = (steps + forwards / 3) / unit
    shares = share_steps(steps, [len(g) for g in groups.values()])
    jobs = [
        {
            "spec": spec,
            "orders": list(group),
            "sharing": s,
            "steps": share,
            "seed": args.seed,
            "eval_batches": eval_batches,
            "threads": args.threads,
        }
        for s in args.sharing
        for group, share in zip(groups.values(), shares, strict=True)
    ]
    if args.load is not None:
        saved = json.loads(args.load.read_text())
        results, wall = saved["results"], saved["wall_s"]
        if saved["steps"] != steps or saved["orders"] != orders:
            raise SystemExit(f"{args.load}: trained with other steps or orders than asked")
    else:
        clock = time.perf_counter()
        if args.jobs > 1:
            with ProcessPoolExecutor(args.jobs, mp_context=get_context("spawn")) as pool:
                parts = list(pool.map(run_scheme, jobs))
        else:
            parts = [run_scheme(job) for job in jobs]
        results = [merge([p for p in parts if p["sharing"] == s]) for s in args.sharing]
        wall = time.perf_counter() - clock
        if args.save is not None:
            args.save.write_text(
                json.dumps({"steps": steps, "orders": orders, "wall_s": wall, "results": results})
            )
    truth_by_order, seeds_by_order, facts = truth_table(args.export)

    judged = [o for o in orders if o in truth_by_order]
    truth = np.array([truth_by_order[o] for o in judged])
    seeds = np.array([seeds_by_order[o] for o in judged], dtype=float)
    rng = np.random.default_rng(args.seed)
    out: dict[str, Any] = {
        "study": facts,
        "orders_planned": len(orders),
        "orders_judged": len(judged),
        "unit_steps": unit,
        "supernet_steps": steps,
        "split": {prefix or "-": len(g) for prefix, g in groups.items()},
        "eval_forward_batches": forwards,
        "compute_trials": compute,
        "budget_trials": args.budget,
        "wall_s": wall,
        "seed_noise_tau": seed_reference(truth, seeds, facts["baseline_sd"], rng),
        "schemes": [],
    }
    from sublayer_search.search.searchers.prior import BUILTIN_PRIORS

    names = list(BUILTIN_PRIORS) if args.prior is None else args.prior
    prior = judged_prior(args.export, names) if names else None
    if prior is not None:
        out["prior"] = prior_alone(prior, judged, truth, rng, args.resamples)
    for res in results:
        est = {r["order"]: r["mean"] for r in res["ranking"]}
        estimate = np.array([est[o] for o in judged])
        verdict = judge(estimate, truth, rng, args.resamples)
        by_space = {}
        for space in sorted(set(space_of[o] for o in judged)):
            idx = [i for i, o in enumerate(judged) if space_of[o] == space]
            if len(idx) >= 5:
                tau, p = stats.kendalltau(estimate[idx], truth[idx])
                by_space[space] = {"n": len(idx), "kendall_tau": float(tau), "kendall_p": float(p)}
        verdict["by_space"] = by_space
        verdict["stage2"] = stage_two_pick(res["ranking"], judged, truth, prior)
        out["schemes"].append(
            {
                **{k: v for k, v in res.items() if k != "ranking"},
                **verdict,
                "ranking": [
                    {**r, "stand_alone": truth_by_order.get(r["order"])} for r in res["ranking"]
                ],
            }
        )
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(table(out))
    return 0


def table(out: dict[str, Any]) -> str:
    study = out["study"]
    lines = [
        f"study: {study['finished']}/{study['trials']} finished trials, metric {study['metric']}, "
        f"baseline seed sd {study['baseline_sd']:.4f} over {study['baseline_seeds']} seeds",
        f"orders: {out['orders_planned']} planned, {out['orders_judged']} judged; supernet "
        f"{out['supernet_steps']} steps + {out['eval_forward_batches']} eval forward batches "
        f"= {out['compute_trials']:.2f} stand-alone trials of {out['unit_steps']} steps "
        f"(budget {out['budget_trials']:g}); supernets (first sublayers: orders) "
        + ", ".join(f"{k}: {v}" for k, v in out["split"].items()),
        f"seed-noise reference: tau of two stand-alone re-runs ~ {out['seed_noise_tau']:.3f}"
        if out["seed_noise_tau"] is not None
        else "seed-noise reference: n/a",
        "",
        f"{'scheme':8} {'tau':>6} {'p':>8} {'95% CI':>15} {'perm p':>7} {'rho':>6} {'p':>8} "
        f"{'top5':>5} {'rand':>5} {'train s':>7} {'target':>7}",
    ]
    for s in out["schemes"]:
        lo, hi = s["tau_ci95"]
        lines.append(
            f"{s['sharing']:8} {s['kendall_tau']:6.3f} {s['kendall_p']:8.1e} "
            f"[{lo:6.3f},{hi:6.3f}] {s['tau_permutation_p']:7.4f} {s['spearman_rho']:6.3f} "
            f"{s['spearman_p']:8.1e} {s['top5_recall']:5.2f} {s['random_top5_recall']:5.2f} "
            f"{s['train_s']:7.0f} {'met' if s['target_met'] else 'MISSED':>7}"
        )
    lines.append(
        f"target: Kendall tau >= {TARGET_TAU}; wall {out['wall_s']:.0f} s; trial wall "
        f"median {study.get('trial_wall_s_median') or float('nan'):.0f} s"
    )
    for s in out["schemes"]:
        parts = [
            f"{k} {v['kendall_tau']:.3f} (n {v['n']}, p {v['kendall_p']:.2g})"
            for k, v in s["by_space"].items()
        ]
        lines.append(f"{s['sharing']} tau within a space: " + "; ".join(parts))
        pick = s["stage2"]
        lines.append(
            f"{s['sharing']} stage 2 (top {TOP} + up to {pick['tie_extra']} tied within "
            f"{pick['tie_sems']:g} sem): trains {pick['picked']} orders, "
            f"{pick['top5_caught']} of the stand-alone top {TOP}"
        )
    if "prior" in out:
        p = out["prior"]
        lines.append(
            f"prior alone (no compute; {', '.join(p['sources'])}, weight {p['weight']:.2f}): "
            f"tau {p['kendall_tau']:.3f} [{p['tau_ci95'][0]:.3f},{p['tau_ci95'][1]:.3f}], "
            f"top5 {p['top5_recall']:.2f}; stage 2 adds up to "
            f"{out['schemes'][0]['stage2']['prior_extra'] if out['schemes'] else 0} of its best: "
            + "; ".join(f"{s['sharing']} trains {s['stage2']['picked_with_prior']}, "
                        f"{s['stage2']['top5_caught_with_prior']} of the top {TOP}"
                        for s in out["schemes"]))
    for s in out["schemes"]:
        lines.append(
            f"\n{s['sharing']}: pool {len(s['pool'])} sublayers "
            f"({s['params']:,} parameters); rank, supernet bpc, stand-alone bpc, order"
        )
        for r in s["ranking"][:10]:
            alone = r["stand_alone"]
            lines.append(
                f"  {r['rank']:3d} {r['mean']:.4f} "
                f"{alone if alone is None else format(alone, '.4f')} {r['order']}"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
