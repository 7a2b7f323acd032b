"""A recorded table of order -> metric as an oracle for searchers (no Ray, no training).

Any searcher of :mod:`search.searchers.registry` is driven over it by ask/tell
(:func:`drive`): each suggestion is answered with the table's value of its order (an
order the table lacks is answered as a failed trial, still one evaluation). Tables come
from rows (:meth:`OrderTable.from_rows`: the paper's published results) or from a CSV
of a finished sweep (:meth:`OrderTable.from_csv`: ``sublayer analyze``'s
``tables/trials.csv``, columns ``order`` and ``final``; or an export's
``<name>_trials.csv``) or from an export (:meth:`OrderTable.from_export`: ``sublayer
export``'s files, a built-in study such as ``mini_press2020``). Repeated orders (seeds) are
averaged.
"""

from __future__ import annotations

import csv
import math
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ray.tune.search import Searcher

from sublayer_search.spaces.candidate import Candidate
from sublayer_search.spaces.order import any_order
from sublayer_search.spaces.records import Direction, TrialStatus

__all__ = ["OrderTable", "drive", "evaluations_to_top"]


@dataclass(frozen=True, kw_only=True)
class OrderTable:
    """Mean metric per canonical order, and which direction is better."""

    values: dict[str, float] = field(default_factory=dict)
    """Canonical order -> mean of its recorded values."""
    mode: Direction = "min"
    metric: str = "metric"
    """The name the driver reports values under."""

    def __post_init__(self) -> None:
        if self.mode not in ("min", "max"):
            raise ValueError(f"mode: got {self.mode!r}, expected min or max")
        if not self.values:
            raise ValueError("values: got an empty table, expected at least one order")

    @classmethod
    def from_rows(
        cls, rows: Iterable[tuple[str, float]], *, mode: Direction = "min", metric: str = "metric"
    ) -> OrderTable:
        """Rows of (order, value); non-finite values are left out, repeats averaged."""
        found: dict[str, list[float]] = defaultdict(list)
        for order, value in rows:
            if math.isfinite(float(value)):
                found[any_order(order)].append(float(value))
        return cls(values={o: sum(v) / len(v) for o, v in found.items()}, mode=mode, metric=metric)

    @classmethod
    def from_csv(
        cls,
        path: str | os.PathLike[str],
        *,
        order_column: str = "order",
        value_column: str = "final",
        mode: Direction = "min",
    ) -> OrderTable:
        """A CSV with an order and a value column; with a ``status`` column only finished
        trials count (``sublayer analyze``'s ``tables/trials.csv`` as written)."""
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(line for line in fh if not line.startswith("#"))
            missing = {order_column, value_column} - set(reader.fieldnames or [])
            if missing:
                raise ValueError(
                    f"{path}: no column {', '.join(sorted(missing))} (columns: "
                    f"{', '.join(reader.fieldnames or [])})"
                )
            rows = [
                (r[order_column], float(r[value_column]))
                for r in reader
                if r[value_column] not in ("", None)
                and r.get("status", TrialStatus.FINISHED) == TrialStatus.FINISHED
            ]
        return cls.from_rows(rows, mode=mode, metric=value_column)

    @classmethod
    def from_export(cls, source: str | os.PathLike[str], *, name: str | None = None,
                    value_column: str = "final") -> OrderTable:
        """The finished trials of an export (``sublayer export``): ``source`` is its folder
        (with ``name`` when it holds several), its ``<name>_meta.json`` or a built-in name;
        the metric and its direction come from the export's meta."""
        from sublayer_search.analysis.store.study_export import open_export

        export = open_export(source, name=name)
        trials = export.trials[export.trials["status"] == TrialStatus.FINISHED]
        if value_column not in trials.columns:
            raise ValueError(f"value_column: got {value_column!r}, expected a trial column "
                             f"({', '.join(trials.columns)})")
        mode = export.meta.get("mode", "min")
        return cls.from_rows(
            ((str(o), float(v)) for o, v in zip(trials["order"], trials[value_column],
                                                strict=True) if o is not None),
            mode="max" if mode == "max" else "min", metric=export.metric)

    def ranked(self) -> list[str]:
        """Orders best first (ties by order string, for a stable ranking)."""
        sign = 1.0 if self.mode == "min" else -1.0
        return sorted(self.values, key=lambda o: (sign * self.values[o], o))

    def top(self, k: int) -> set[str]:
        """The ``k`` best orders, and any order tied with the k-th."""
        ranked = self.ranked()
        cut = self.values[ranked[min(k, len(ranked)) - 1]]
        sign = 1.0 if self.mode == "min" else -1.0
        return {o for o in ranked if sign * self.values[o] <= sign * cut}

    def candidates(self) -> list[Candidate]:
        """Every order of the table as a candidate of a space ``table`` (``t000`` …)."""
        return [
            Candidate(order=o, space="table", name=f"t{i:03d}")
            for i, o in enumerate(sorted(self.values))
        ]


def drive(
    searcher: Searcher, table: OrderTable, *, budget: int, until: set[str] | None = None
) -> list[str]:
    """Ask/tell ``searcher`` over ``table``, one trial at a time, for at most ``budget``
    suggestions (or until it suggests an order of ``until``); the suggested orders in turn."""
    searcher.set_search_properties(table.metric, table.mode, {})
    orders: list[str] = []
    while len(orders) < budget:
        trial_id = f"oracle{len(orders):05d}"
        got: Any = searcher.suggest(trial_id)
        if not isinstance(got, dict):  # FINISHED, or waiting with nothing in flight
            break
        order = got["trial"].order
        orders.append(order)
        if until is not None and order in until:
            break
        value = table.values.get(order)
        if value is None:
            searcher.on_trial_complete(trial_id, result=None, error=True)
        else:
            searcher.on_trial_complete(trial_id, result={table.metric: value})
    return orders


def evaluations_to_top(orders: list[str], top: set[str]) -> int | None:
    """Evaluations until the first order of ``top`` was suggested (1-based), None if never."""
    return next((i + 1 for i, o in enumerate(orders) if o in top), None)
