"""What every ``sublayer`` subcommand prints the same way: bad input and tables."""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["bad", "print_table"]


def bad(message: str) -> int:
    """Print one bad-input line on stderr; the exit status to return (2)."""
    print(f"sublayer: error: {message}", file=sys.stderr)
    return ExitCode.BAD_INPUT


def print_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if math.isfinite(v) else str(v)
        return "" if v is None else str(v)

    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)))
    for row in cells:
        print("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)))
