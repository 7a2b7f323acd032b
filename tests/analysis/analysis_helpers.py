"""Hand-made trial frames for the analysis tests (imported as a plain module)."""

from __future__ import annotations

import itertools

import pandas as pd

from sublayer_search.analysis.store.frame import trials_frame
from sublayer_search.spaces.cost import units
from sublayer_search.spaces.order import counts

_IDS = itertools.count()
SWEEP = "sweep-sandwich"
NO_BASELINE = "sweep-no-baseline"


def trial(
    order: str,
    value: float,
    *,
    baseline: bool = False,
    seed: int | None = None,
    k: int | None = None,
    status: str = "finished",
    metric: str = "val_ppl",
    name: str | None = None,
) -> dict[str, object]:
    n = counts(order)
    return {
        "run_id": f"r{next(_IDS):04d}",
        "name": name or (f"interleaved@seed{seed}" if baseline else order),
        "order": order,
        "family": "baseline" if baseline else "hand",
        "space": "hand",
        "seed": seed,
        "k": k,
        "n_s": n["s"],
        "n_f": n["f"],
        "units": units(order),
        "params": None,
        "metric": metric,
        "final": value,
        "best": value,
        "status": status,
        "baseline": baseline,
    }


def frame(*rows: dict[str, object]) -> pd.DataFrame:
    return trials_frame(rows)


TRANSLATION_SWEEP = "sweep-iot"
TRANSLATION_NO_BASELINE = "sweep-iot-no-baseline"


def sandwich_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """A study's sandwich trials and its baseline seeds."""
    return frame[(frame["family"] == "sandwich") | frame["baseline"]]


def seed_values(frame: pd.DataFrame, k: int | None) -> pd.Series:
    """Final values by seed: sandwich ``k``'s, or the baseline's (``None``)."""
    rows = frame[frame["baseline"]] if k is None else frame[frame["k"] == k]
    return rows.set_index("seed")["final"].astype(float)
