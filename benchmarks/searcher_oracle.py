"""Evaluations each searcher needs to find a top-k order of a recorded table (no training).

The oracle is a table of order -> metric (:class:`search.searchers.oracle.OrderTable`). By
default: Press et al. (2020)'s published WikiText-103 dev perplexities, Tables 1 and 2
(40 random orders; the five baseline seeds averaged into one interleaved entry) and
the two sandwich models with stated values (sandwich16_6: 17.84, sandwich16_15: 18.82):
43 orders. Or ``--table CSV`` of a finished sweep (``sublayer analyze``'s
``tables/trials.csv``, or an export's ``<name>_trials.csv``: columns ``order`` and
``final``, finished trials only), or ``--export`` an export of ``sublayer export`` (its
folder, its ``<name>_meta.json``, or a built-in study such as ``mini_press2020``; the
metric and its direction come from the export).

Each searcher runs over the table's orders as its candidate pool with seeds
0..N-1, one trial at a time, until it suggests an order of the table's top k (ties with
the k-th included) or its budget (twice the table) runs out:

- ``random``: the pool in a seeded random order (the grid searcher over a shuffle);
- ``tpe``: ``optuna`` as a sweep runs it: TPE over a categorical of candidate names
  (a candidate suggested again is a replicate: another seed, another evaluation);
- ``surrogate``: order-aware, expected improvement of a GP over order features;
- ``evolution``: regularized evolution; on a table a mutation is the untried table
  order nearest the parent in features (true neighbours are absent from a sparse table).

Reported per searcher: median, IQR (25th-75th percentile) and mean of the evaluations
to the top k, and runs that never got there (counted at budget + 1). Target (issue 14):
the order-aware searcher's median <= half of random's.

    .venv/bin/python benchmarks/searcher_oracle.py --seeds 100
    .venv/bin/python benchmarks/searcher_oracle.py --table reports/x/tables/trials.csv --json
    .venv/bin/python benchmarks/searcher_oracle.py --export mini_press2020
    .venv/bin/python benchmarks/searcher_oracle.py --table analysis/data/mini_press2020_trials.csv
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from sublayer_search.analysis.papers import press_paper as paper
from sublayer_search.search.plan.sweep_plan import Trial
from sublayer_search.search.searchers.oracle import OrderTable, drive, evaluations_to_top
from sublayer_search.search.searchers.surrogate import SurrogateSearcher
from sublayer_search.search.searchers.tune import EvolutionSearcher, GridSearcher, OptunaTrials

Factory = Callable[[OrderTable, int], Searcher]


def paper_table() -> OrderTable:
    """Tables 1 and 2 pooled (baselines once, averaged) and the stated sandwich values."""
    frame = paper.pooled_trials()
    sandwich = paper.sandwich_points()
    rows = [(r.order, float(r.final)) for r in frame.itertuples()]
    rows += [(r.order, float(r.final)) for r in sandwich[~sandwich["baseline"]].itertuples()]
    return OrderTable.from_rows(rows, mode="min", metric="val_ppl")


def _random(table: OrderTable, seed: int) -> Searcher:
    cands = table.candidates()
    random.Random(seed).shuffle(cands)
    return GridSearcher([Trial.of(c, 0) for c in cands], metric=table.metric, mode=table.mode)


def _model_based(cls: type[OptunaTrials] | type[SurrogateSearcher]) -> Callable[[OrderTable, int], Searcher]:
    """TPE or the surrogate over the table's candidates, one seed each, no sample limit."""

    def make(table: OrderTable, seed: int) -> Searcher:
        return cls(table.candidates(), num_samples=10**6, seeds=[0], metric=table.metric,
                   mode=table.mode, seed=seed)

    return make


_tpe = _model_based(OptunaTrials)
_surrogate = _model_based(SurrogateSearcher)


def _evolution(table: OrderTable, seed: int) -> Searcher:
    return EvolutionSearcher(
        table.candidates(),
        num_samples=10**6,
        seed=seed,
        metric=table.metric,
        mode=table.mode,
        domain=list(table.values),
    )


SEARCHERS: dict[str, Factory] = {
    "random": _random,
    "tpe": _tpe,
    "surrogate": _surrogate,
    "evolution": _evolution,
}


def measure(table: OrderTable, *, seeds: int, k: int) -> dict[str, Any]:
    top = table.top(k)
    budget = 2 * len(table.values)
    out: dict[str, Any] = {
        "orders": len(table.values),
        "k": k,
        "top": len(top),
        "budget": budget,
        "seeds": seeds,
        "searchers": {},
    }
    for name, make in SEARCHERS.items():
        start = time.perf_counter()
        counts, misses = [], 0
        for seed in range(seeds):
            found = evaluations_to_top(
                drive(make(table, seed), table, budget=budget, until=top), top
            )
            if found is None:
                misses += 1
            counts.append(found if found is not None else budget + 1)
        q1, q3 = np.percentile(counts, [25, 75])
        out["searchers"][name] = {
            "median": float(statistics.median(counts)),
            "q1": float(q1),
            "q3": float(q3),
            "mean": statistics.fmean(counts),
            "misses": misses,
            "seconds": round(time.perf_counter() - start, 1),
        }
    rand = out["searchers"]["random"]["median"]
    out["surrogate_over_random"] = out["searchers"]["surrogate"]["median"] / rand
    out["target_met"] = out["surrogate_over_random"] <= 0.5
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=50, help="searcher seeds (>= 50 for the target)")
    ap.add_argument("--k", type=int, default=5, help="the top k of the table to reach")
    ap.add_argument("--table", help="CSV of a finished sweep (columns order, final)")
    ap.add_argument("--export", metavar="NAME|DIR",
                    help="an export (sublayer export): built-in name, folder or NAME_meta.json")
    ap.add_argument("--name", default=None, help="with --export DIR: the export's name")
    ap.add_argument("--order-column", default="order")
    ap.add_argument("--value-column", default="final")
    ap.add_argument("--mode", choices=["min", "max"], default="min")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if args.table and args.export:
        ap.error("--table and --export: expected one of them")
    try:
        table = (
            OrderTable.from_export(args.export, name=args.name, value_column=args.value_column)
            if args.export
            else OrderTable.from_csv(
                args.table,
                order_column=args.order_column,
                value_column=args.value_column,
                mode=args.mode,
            )
            if args.table
            else paper_table()
        )
    except (OSError, ValueError) as exc:  # AnalysisError is a ValueError: one line, exit 2
        ap.error(str(exc))
    res = measure(table, seeds=args.seeds, k=args.k)
    if args.json:
        print(json.dumps(res, indent=2))
        return 0
    source = args.table or args.export or "Press et al. (2020): Tables 1-2 + stated sandwich values"
    print(
        f"table: {source}: {res['orders']} orders; top {args.k} = {res['top']} orders "
        f"(best {', '.join(f'{table.values[o]:.2f}' for o in table.ranked()[: args.k])})"
    )
    print(f"evaluations to reach the top {args.k}, {res['seeds']} seeds, budget {res['budget']}:")
    print(f"{'searcher':<10} {'median':>7} {'IQR':>13} {'mean':>6} {'misses':>6} {'time s':>7}")
    for name, r in res["searchers"].items():
        iqr = "{:.1f}-{:.1f}".format(r["q1"], r["q3"])
        print(
            f"{name:<10} {r['median']:>7.1f} {iqr:>13} {r['mean']:>6.1f} {r['misses']:>6} "
            f"{r['seconds']:>7.1f}"
        )
    verdict = "met" if res["target_met"] else "MISSED"
    print(
        f"surrogate median / random median = {res['surrogate_over_random']:.2f} "
        f"(target <= 0.50: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
