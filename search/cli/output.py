"""What every ``sublayer`` subcommand prints the same way: bad input and tables."""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sublayer_search.spaces.exit_codes import ExitCode
from sublayer_search.spaces.records import FAILED_STATUSES

__all__ = ["TRIALS_SHOWN", "bad", "column_format", "print_table", "print_trials"]

TRIALS_SHOWN = 40
"""A sweep's closing table lists every trial up to this many; beyond, it summarises."""


def bad(message: str) -> int:
    """Print one bad-input line on stderr; the exit status to return (2)."""
    print(f"sublayer: error: {message}", file=sys.stderr)
    return ExitCode.BAD_INPUT


def column_format(values: Sequence[Any]) -> str:
    """One format for every float of a column: as many decimals as the most precise value
    needs at four significant digits (``3.150`` beside ``3.218``, never ``3.15``; a column
    of whole numbers stays whole); scientific for the whole column when any value needs it."""
    shown = [format(v, ".4g") for v in values if isinstance(v, float) and math.isfinite(v)]
    if not shown:
        return ".4g"
    if any("e" in text for text in shown):
        return ".3e"
    return f".{max(len(text.partition('.')[2]) for text in shown)}f"


def print_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    """A plain-text table; every float column in one format (:func:`column_format`)."""
    formats = {c: column_format([r.get(c) for r in rows]) for c in columns}

    def fmt(v: Any, column: str) -> str:
        if isinstance(v, float):
            return format(v, formats[column]) if math.isfinite(v) else str(v)
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c), c) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def print_trials(rows: list[dict[str, Any]], columns: Sequence[str], *, metric: str,
                 mode: str, limit: int = TRIALS_SHOWN) -> None:
    """A sweep's closing table: every trial up to ``limit`` rows; beyond, the count of each
    status, the best ``limit // 2`` trials by ``metric`` and the first failed ones (the
    whole list is in MLflow, and ``sublayer export`` writes it as CSV)."""
    if len(rows) <= limit:
        print_table(rows, columns)
        return
    counts = Counter(str(r.get("status")) for r in rows)
    ranked = sorted((r for r in rows if _finite(r.get(metric))),
                    key=lambda r: float(r[metric]), reverse=mode == "max")
    failed = [r for r in rows if r.get("status") in FAILED_STATUSES]
    top, first = min(len(ranked), limit // 2), min(len(failed), limit // 4)
    print(f"{len(rows):,} trials: " + ", ".join(f"{n:,} {status}" for status, n in
                                                sorted(counts.items(), key=lambda kv: -kv[1])))
    print(f"best {top} by {metric} ({'lowest' if mode == 'min' else 'highest'} first; every "
          "trial is in MLflow, and `sublayer export` writes them all):")
    print_table(ranked[:top], columns)
    if failed:
        print(f"failed: {len(failed):,} (the first {first}; their runs in MLflow say why):")
        print_table(failed[:first], columns)
