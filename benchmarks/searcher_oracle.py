"""Evaluations each searcher needs to find the top-5 and the top-1 order of recorded tables
(no training), as ratios to random search, leave-one-study-out for priors.

The oracle is a table of order -> metric (:class:`search.recorded.oracle.OrderTable`).
By default five tables, each judged on its own: Press et al. (2020)'s published
WikiText-103 dev perplexities, Table 1 (20 permutations of 16 s + 16 f) and Table 2
(20 parameter-budgeted draws), each with its five baseline seeds averaged into one
interleaved entry; the shipped study ``mini_press2020``'s 20 permutations and 19
budgeted draws (each with its 8 baseline seeds averaged); and the shipped ``replay40``'s
40 permutations (its 4 baseline seeds averaged). More with ``--table CSV``
(a trials CSV: columns ``order`` and ``final``; one table per ``space`` when it has that
column) or ``--export NAME|DIR`` (an export of ``sublayer export``), both repeatable.

Each searcher runs over the table's orders as its candidate pool with seeds 0..N-1, one
trial at a time, until it suggests the table's best order or its budget (twice the
table) runs out:

- ``random``: the pool in a seeded random order;
- ``tpe``: ``optuna`` as a sweep runs it: TPE over a categorical of candidate names;
- ``surrogate``: order-aware, expected improvement of a GP over order features;
- ``evolution``: regularized evolution; on a table a mutation is the untried table
  order nearest the parent in features;
- ``prior``: the surrogate with a prior (``search.prior``; Thompson draws of the prior's
  scale and the GP residual) fitted on every *other* study: the built-in ``press2020``,
  ``mini_press2020`` and ``replay40``, ``--prior`` names and the other given tables. A
  prior table of the judged table's study is left out by study identity
  (:func:`search.searchers.prior.same_study`: the same name, or any (order, value)
  record in common), never by trust; a ``--held-out`` study is judged, never pooled;
- ``evo-prior``: evolution whose first population is drawn best prior first;
- ``queue-prior``: a grid's queue with ``search.prior`` (the default searcher's): the
  candidates best-predicted first, fixed before any result (the same path every seed).

Reported per table and searcher: median, IQR (25th-75th percentile) of the evaluations
to the top 5 (ties with the 5th included), to the top 1 and to the first *eps-good* order
(mean within ``--eps`` baseline seed sds of the best, default 1; the seed sd from the
table's repeated baseline, see :mod:`search.recorded.yardstick`), runs that never got
there (counted at budget + 1), and each median as a ratio to random's. Each table says
how many eps-good orders it has: where most orders lie within a seed sd of the best, the
top 5 is luck and eps-good is the question a researcher can answer. Targets, eps-good
median as a ratio to random's: the prior at most 1.00x on every table (no harm), at most
0.50x where random needs 8 or more, and at most 1.25x with ``--reverse-prior``, which
negates every fitted prior (it then ranks the orders it believed best last): how a
searcher fares when its prior is wrong and each result contradicts it. The stricter
top-5 target (<= 0.5x) is printed too.

    .venv/bin/python benchmarks/searcher_oracle.py --seeds 100 \
        --held-out heldout_budget32 --held-out heldout_wikichars
    .venv/bin/python benchmarks/searcher_oracle.py --seeds 100 --reverse-prior \
        --held-out heldout_budget32 --held-out heldout_wikichars
    .venv/bin/python benchmarks/searcher_oracle.py --seeds 100 --json
    .venv/bin/python benchmarks/searcher_oracle.py --table reports/x/tables/trials.csv
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from sublayer_search.analysis.store.study_export import BUILTIN_EXPORTS
from sublayer_search.search.recorded.oracle import OrderTable, drive, evaluations_to_top
from sublayer_search.search.recorded.yardstick import eps_good, seed_noise
from sublayer_search.search.searchers.evolution_searcher import EvolutionSearcher
from sublayer_search.search.searchers.optuna_study import OptunaTrials
from sublayer_search.search.searchers.prior import (
    BUILTIN_PRIORS,
    OrderPrior,
    PriorError,
    PriorTable,
    fit_prior,
    load_tables,
    same_study,
)
from sublayer_search.search.searchers.queue import prior_queue
from sublayer_search.search.searchers.surrogate import SurrogateSearcher

Factory = Callable[[OrderTable, int, OrderPrior | None], Searcher]
BIG = 10**6


def _surrogate(table: OrderTable, seed: int, prior: OrderPrior | None = None,
               n_initial: int = 3) -> Searcher:
    return SurrogateSearcher(table.candidates(), num_samples=BIG, seeds=[0], metric=table.metric,
                             mode=table.mode, seed=seed, prior=prior, n_initial=n_initial)


def _random(table: OrderTable, seed: int, prior: OrderPrior | None) -> Searcher:
    """Uniform draws without replacement (a surrogate that never leaves its random start)."""
    return _surrogate(table, seed, n_initial=BIG)


def _tpe(table: OrderTable, seed: int, prior: OrderPrior | None) -> Searcher:
    return OptunaTrials(table.candidates(), num_samples=BIG, seeds=[0], metric=table.metric,
                        mode=table.mode, seed=seed)


def _evolution(table: OrderTable, seed: int, prior: OrderPrior | None = None) -> Searcher:
    return EvolutionSearcher(table.candidates(), num_samples=BIG, seed=seed,
                             metric=table.metric, mode=table.mode, domain=list(table.values),
                             prior=prior)


class _FixedQueue(SurrogateSearcher):
    """A grid's queue with ``search.prior`` (:func:`prior_queue`): best-predicted first,
    fixed at planning; no result moves it (every seed the same path)."""

    def __init__(self, table: OrderTable, prior: OrderPrior | None) -> None:
        super().__init__(table.candidates(), num_samples=BIG, seeds=[0], metric=table.metric,
                         mode=table.mode, prior=prior)
        queue = prior_queue(range(len(self.candidates)), orders=lambda i: [self.candidates[i].order],
                            baseline=lambda i: False, prior=prior)
        self.place = {index: at for at, index in enumerate(queue)}

    def _pick(self, open_: list[int]) -> int:
        return min(open_, key=self.place.__getitem__)


SEARCHERS: dict[str, Factory] = {
    "random": _random,
    "tpe": _tpe,
    "surrogate": lambda table, seed, prior: _surrogate(table, seed),
    "evolution": lambda table, seed, prior: _evolution(table, seed),
    "prior": _surrogate,
    "evo-prior": _evolution,
    "queue-prior": lambda table, seed, prior: _FixedQueue(table, prior),
}


def _stats(counts: list[int], random_median: float | None) -> dict[str, float | None]:
    q1, q3 = np.percentile(counts, [25, 75])
    median = float(statistics.median(counts))
    return {"median": median, "q1": float(q1), "q3": float(q3),
            "ratio": median / random_median if random_median else None}


def judge(judged: PriorTable, pool: Sequence[PriorTable], *, seeds: int,
          searchers: Sequence[str] = tuple(SEARCHERS), reverse: bool = False,
          eps: float = 1.0) -> dict[str, Any]:
    """Every searcher over one table; the prior from ``pool`` minus the judged study
    (``reverse``: negated, a prior the results contradict). Beside the top 5 and the top 1,
    the first *eps-good* order: mean within ``eps`` baseline seed sds of the best (a table
    without a repeated baseline has none)."""
    table = OrderTable.from_rows(judged.records, mode="max" if judged.mode == "max" else "min",
                                 metric="value")
    top5, top1 = table.top(5), table.top(1)
    noise = seed_noise(judged.records)
    good = (eps_good(table.values, eps=eps, sd=noise.sd, mode=table.mode)
            if noise is not None else set())
    budget = 2 * len(table.values)
    sources = [t for t in pool if not same_study(t, judged)]
    prior = fit_prior(sources) if sources else None
    if prior is not None and reverse:
        prior = dataclasses.replace(prior, coef=tuple(-c for c in prior.coef))
    out: dict[str, Any] = {
        "table": judged.table, "orders": len(table.values), "top5": len(top5), "budget": budget,
        "eps": eps, "seed_sd": noise.sd if noise else None,
        "seed_sd_from": noise.describe() if noise else None, "eps_good": len(good),
        "seeds": seeds, "prior": prior.describe() if prior else None,
        "left_out": sorted(t.table for t in pool if same_study(t, judged)), "searchers": {},
    }
    rand: dict[str, float] = {}
    for name in searchers:
        if name.endswith("prior") and prior is None:
            continue
        start = time.perf_counter()
        to5, to1, to_good = [], [], []
        for seed in range(seeds):
            orders = drive(SEARCHERS[name](table, seed, prior), table, budget=budget, until=top1)
            to5.append(evaluations_to_top(orders, top5) or budget + 1)
            to1.append(evaluations_to_top(orders, top1) or budget + 1)
            if good:
                to_good.append(evaluations_to_top(orders, good) or budget + 1)
        if name == "random":
            rand = {"top5": statistics.median(to5), "top1": statistics.median(to1),
                    **({"good": statistics.median(to_good)} if to_good else {})}
        out["searchers"][name] = {
            "top5": _stats(to5, rand.get("top5")), "top1": _stats(to1, rand.get("top1")),
            "good": _stats(to_good, rand.get("good")) if to_good else None,
            "misses": sum(c > budget for c in to1),
            "seconds": round(time.perf_counter() - start, 1),
        }
    got = out["searchers"].get("prior")
    out["target_met"] = bool(got and got["top5"]["ratio"] is not None
                             and got["top5"]["ratio"] <= 0.5)
    return out


def _shipped_meta(name: str) -> str:
    """A built-in export's ``NAME_meta.json`` (``heldout_budget32``), else ``name`` as given."""
    if name in BUILTIN_EXPORTS and not Path(name).exists():
        return str(resources.files("sublayer_search.analysis") / "data" / f"{name}_meta.json")
    return name


def _tables(args: argparse.Namespace) -> tuple[list[PriorTable], list[PriorTable]]:
    """(tables to judge, prior pool): the built-ins' and every given table or export; a
    ``--held-out`` study is judged but never joins the pool."""
    builtin = [t for name in BUILTIN_PRIORS for t in load_tables(name)]
    given = [t for path in [*args.table, *args.export] for t in load_tables(path, mode=args.mode)]
    extra = [t for name in args.prior for t in load_tables(name)]
    held = [t for name in args.held_out for t in load_tables(_shipped_meta(name))]
    judged = given if args.only_given and given else [*builtin, *given]
    return [*judged, *held], [*builtin, *given, *extra]


def _print(res: dict[str, Any]) -> None:
    print(f"\n{res['table']}: {res['orders']} orders, top 5 = {res['top5']} orders, budget "
          f"{res['budget']}, {res['seeds']} seeds")
    print(f"  prior: {res['prior'] or 'none (no other study)'}; left out as the same study: "
          f"{', '.join(res['left_out']) or '-'}")
    if res["seed_sd"] is None:
        print("  eps-good: none (the table repeats no order, so it has no seed sd)")
    else:
        print(f"  eps-good: {res['eps_good']} order(s) within {res['eps']:g} x "
              f"{res['seed_sd_from']} of the best")
    print(f"  {'searcher':<10} {'top5 median':>11} {'IQR':>10} {'x random':>8}   "
          f"{'top1 median':>11} {'IQR':>10} {'x random':>8}   "
          f"{'eps-good med':>12} {'IQR':>10} {'x random':>8} {'misses':>6} {'s':>5}")
    for name, r in res["searchers"].items():
        cells = []
        for key in ("top5", "top1", "good"):
            s = r[key]
            if s is None:
                cells.append(f"{'-':>{11 + (key == 'good')}} {'':>10} {'-':>8}")
                continue
            ratio = "-" if s["ratio"] is None else f"{s['ratio']:.2f}"
            cells.append(f"{s['median']:>{11 + (key == 'good')}.1f} "
                         f"{s['q1']:>4.1f}-{s['q3']:<5.1f} {ratio:>8}")
        print(f"  {name:<10} {'   '.join(cells)} {r['misses']:>6} {r['seconds']:>5.1f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=100, help="searcher seeds (100 for the figure)")
    ap.add_argument("--table", action="append", default=[],
                    help="a trials CSV (columns order, final); repeatable")
    ap.add_argument("--export", action="append", default=[], metavar="NAME|DIR",
                    help="an export (sublayer export): folder or NAME_meta.json; repeatable")
    ap.add_argument("--prior", action="append", default=[],
                    help="another study for the prior pool only (never judged); repeatable")
    ap.add_argument("--held-out", action="append", default=[], metavar="NAME|DIR",
                    help="a study judged but never in any prior's pool (a built-in export "
                         "name, an export folder or NAME_meta.json); repeatable")
    ap.add_argument("--mode", choices=["min", "max"], default="min",
                    help="direction of --table values")
    ap.add_argument("--only-given", action="store_true",
                    help="judge only --table/--export (built-ins stay in the prior pool)")
    ap.add_argument("--searchers", default=",".join(SEARCHERS),
                    help=f"comma-separated subset of {','.join(SEARCHERS)}")
    ap.add_argument("--reverse-prior", action="store_true",
                    help="negate every fitted prior (a prior that points at the worst orders)")
    ap.add_argument("--eps", type=float, default=1.0,
                    help="an order is eps-good when its mean is within EPS baseline seed sds "
                         "of the best (default 1)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    names = [s for s in args.searchers.split(",") if s]
    unknown = sorted(set(names) - set(SEARCHERS))
    if unknown or "random" not in names:
        ap.error(f"--searchers: got {args.searchers!r}, expected names of "
                 f"{', '.join(SEARCHERS)} including random")
    try:
        judged, pool = _tables(args)
    except PriorError as exc:  # the flag, not the experiment file's field
        ap.error(f"--table/--export/--prior/--held-out: got {exc.value!r}, expected {exc.expected}")
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    if not (args.eps >= 0):
        ap.error(f"--eps: got {args.eps!r}, expected a number >= 0")
    results = [judge(t, pool, seeds=args.seeds, searchers=names, reverse=args.reverse_prior,
                     eps=args.eps) for t in judged]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    for res in results:
        _print(res)
    held = {t.table for name in args.held_out for t in load_tables(_shipped_meta(name))}
    print(f"\nprior, eps-good (eps {args.eps:g}) median as a ratio to random's, against the "
          "targets" + (" with a reversed prior (<= 1.25x):" if args.reverse_prior else
                       " (<= 1.00x: no harm; <= 0.50x where random needs 8 or more):"))
    for res in results:
        got = res["searchers"].get("prior")
        rand = res["searchers"]["random"]["good"]
        if not got or not got["good"] or not rand:
            print(f"  {res['table']:<32}   n/a")
            continue
        ratio, need = got["good"]["ratio"], rand["median"]
        limit = 1.25 if args.reverse_prior else (0.5 if need >= 8 else 1.0)
        tag = " (held out)" if res["table"] in held else ""
        print(f"  {res['table']:<32} {ratio:>5.2f}  (random needs {need:g}; target "
              f"<= {limit:.2f}) {'met' if ratio <= limit else 'MISSED'}{tag}")
    print("\nprior top-5 median as a ratio to random's (a stricter target, <= 0.50x):")
    for res in results:
        got = res["searchers"].get("prior")
        ratio = "n/a" if not got else f"{got['top5']['ratio']:.2f}"
        print(f"  {res['table']:<32} {ratio:>5}  {'met' if res['target_met'] else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
