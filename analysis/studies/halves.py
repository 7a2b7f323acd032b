"""Bottom/top halves study (Press et al. 2020, Fig. 4) and its statistical follow-ups.

Models are split into those at least as good as the average baseline ("better") and
the others ("not better"); each order is cut in half by parameter count with
``spaces.cost.halves`` and the sublayers of each kind counted per half. A half-width
feedforward ``h`` (Macaron blocks) weighs half an ``f`` and is counted as its own kind
(columns ``bottom_h``/``top_h`` and kind ``h`` in the means, only when an order has one);
so is each hybrid kind (``w``, ``r``, ``e``), weighed by the s-units its trial recorded
(``kind_units``). Per kind, a Mann–Whitney test of its bottom-half count (better vs not
better), Holm-adjusted over the kinds tested: Fig. 4's statement for any alphabet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import at_least_as_good, study_inputs
from sublayer_search.analysis.studies.significance import adjust_pvalues
from sublayer_search.spaces.cost import STRADDLE, halves, parse_kind_units
from sublayer_search.spaces.kinds import all_symbols
from sublayer_search.spaces.order import counts

__all__ = [
    "GROUPS",
    "HalvesInfo",
    "MannWhitney",
    "Spearman",
    "halves_study",
    "per_kind_tests",
    "position_map",
]

GROUPS = ("better", "not better")
_KINDS = "sfc"
_HALF = "h"


@dataclass(frozen=True, kw_only=True)
class MannWhitney:
    """Two-sided Mann–Whitney U of bottom-half ``s`` counts, better vs not better.

    ``statistic`` is U of the better group; ``rank_biserial`` = 2U/(n1·n2) − 1, positive
    when better models tend to have more ``s`` in the bottom half.
    """

    statistic: float
    pvalue: float
    rank_biserial: float
    n_better: int
    n_other: int


@dataclass(frozen=True, kw_only=True)
class Spearman:
    """Spearman correlation of the metric with the bottom-half attention share."""

    rho: float
    pvalue: float
    n: int


@dataclass(frozen=True, kw_only=True)
class HalvesInfo:
    """Result of :func:`halves_study`.

    * ``models``: one row per usable candidate: name, order, value, group, bottom_s,
      bottom_f, bottom_c, top_s, top_f, top_c (plus bottom_h, top_h when an order has a
      half-width feedforward), bottom_attention_share (fraction of the model's ``s``
      sublayers that lie in the bottom half).
    * ``means``: long frame group, half, kind, mean (mean count per half per group).
    * ``position``: P(s) per parameter-fraction bin and group (see :func:`position_map`).
    * ``mann_whitney`` / ``spearman``: None when a group is empty / too few models.
    """

    metric: str
    straddle: str
    reference: float
    models: pd.DataFrame
    means: pd.DataFrame
    position: pd.DataFrame
    mann_whitney: MannWhitney | None
    spearman: Spearman | None
    f_units: float = 2.0
    per_kind: pd.DataFrame | None = None
    """Per kind: Mann–Whitney of its bottom-half count, better vs not, Holm-adjusted over
    the kinds tested (:func:`per_kind_tests`); ``mann_whitney`` is its ``s`` row unadjusted."""

    def __post_init__(self) -> None:
        if self.straddle not in STRADDLE:
            raise AnalysisError(f"straddle must be one of {', '.join(STRADDLE)}")

    def mean(self, group: str, half: str, kind: str) -> float:
        """Mean count of ``kind`` in ``half`` ("bottom"/"top") over ``group``."""
        rows = self.means[
            (self.means["group"] == group)
            & (self.means["half"] == half)
            & (self.means["kind"] == kind)
        ]
        if rows.empty:
            raise AnalysisError(f"no models in group {group!r}")
        return float(rows["mean"].iloc[0])

    def group_sizes(self) -> dict[str, int]:
        return {g: int((self.models["group"] == g).sum()) for g in GROUPS}


def _position_shares(order: str, edges: np.ndarray, f_units: float, c_units: float,
                     kind_units: str | None = None) -> np.ndarray:
    """Share of each bin's parameter mass occupied by ``s`` sublayers (a hybrid kind
    weighed by its recorded s-units)."""
    weight = {"s": 1.0, "f": float(f_units), "c": float(c_units), "h": float(f_units) / 2,
              **parse_kind_units(kind_units)}
    widths = np.array([weight[ch] for ch in order])
    ends = np.cumsum(widths) / widths.sum()
    starts = ends - widths / widths.sum()
    is_s = np.array([ch == "s" for ch in order])
    lo, hi = edges[:-1], edges[1:]
    overlap = np.clip(
        np.minimum(ends[:, None], hi[None, :]) - np.maximum(starts[:, None], lo[None, :]), 0, None
    )
    return (overlap * is_s[:, None]).sum(axis=0) / (hi - lo)


def position_map(
    models: pd.DataFrame, *, bins: int = 8, f_units: float = 2.0, c_units: float = 1.0
) -> pd.DataFrame:
    """P(s at depth) per group: depth is the parameter fraction (0 = input), cut into
    ``bins`` equal bins; per model the share of each bin's parameters that belong to
    ``s`` sublayers, averaged over the models of a group (lengths may differ).

    ``models`` needs columns ``order`` and ``group``. Returns group, bin, lo, hi, p_s, n.
    """
    if bins < 1:
        raise AnalysisError(f"bins must be a positive integer, got {bins!r}")
    edges = np.linspace(0.0, 1.0, bins + 1)
    rows = []
    for group in GROUPS:
        members = models[models["group"] == group]
        orders = members["order"]
        if orders.empty:
            continue
        weighed = members["kind_units"] if "kind_units" in members else [None] * len(orders)
        shares = np.mean([_position_shares(o, edges, f_units, c_units,
                                           w if isinstance(w, str) else None)
                          for o, w in zip(orders, weighed, strict=True)], axis=0)
        for i, share in enumerate(shares):
            rows.append({"group": group, "bin": i, "lo": edges[i], "hi": edges[i + 1],
                         "p_s": float(share), "n": len(orders)})
    return pd.DataFrame(rows, columns=["group", "bin", "lo", "hi", "p_s", "n"])


def _mann_whitney(models: pd.DataFrame, column: str = "bottom_s") -> MannWhitney | None:
    better = models.loc[models["group"] == GROUPS[0], column].to_numpy(dtype=float)
    other = models.loc[models["group"] == GROUPS[1], column].to_numpy(dtype=float)
    if len(better) == 0 or len(other) == 0:
        return None
    result = stats.mannwhitneyu(better, other, alternative="two-sided")
    u = float(result.statistic)
    return MannWhitney(
        statistic=u,
        pvalue=float(result.pvalue),
        rank_biserial=2.0 * u / (len(better) * len(other)) - 1.0,
        n_better=len(better),
        n_other=len(other),
    )


def _spearman(models: pd.DataFrame) -> Spearman | None:
    x = models["value"].to_numpy(dtype=float)
    y = models["bottom_attention_share"].to_numpy(dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    result = stats.spearmanr(x, y)
    return Spearman(rho=float(result.statistic), pvalue=float(result.pvalue), n=len(x))


def halves_study(
    frame: pd.DataFrame,
    *,
    metric: str | None = None,
    column: str = "final",
    straddle: str = "fractional",
    f_units: float = 2.0,
    c_units: float = 1.0,
    bins: int = 8,
) -> HalvesInfo:
    """Split candidates into better / not better than the average baseline and count
    sublayers per half by parameter count (``straddle``: how a sublayer across the
    middle counts — fractional, bottom, top or drop)."""
    if straddle not in STRADDLE:
        raise AnalysisError(f"unknown straddle {straddle!r}; expected one of {', '.join(STRADDLE)}")
    frame, metric, base, rows = study_inputs(frame, metric, column=column)
    no_order = rows.loc[rows["order"].isna(), "name"].tolist()
    if no_order:
        raise AnalysisError(f"trial(s) without an order: {', '.join(map(str, no_order))}")
    values = rows[column].to_numpy(dtype=float)
    better = at_least_as_good(values, base.mean, lower=base.lower_is_better)
    kinds = _kinds_in(rows["order"])
    weighed = rows["kind_units"] if "kind_units" in rows else pd.Series(None, index=rows.index)
    records = []
    for (_, row), value, good, units_text in zip(rows.iterrows(), values, better, weighed,
                                                 strict=True):
        split = _split(row, units_text, straddle=straddle, f_units=f_units, c_units=c_units)
        n_s = counts(row["order"])["s"]
        rec = {"run_id": row["run_id"], "name": row["name"], "order": row["order"],
               "value": float(value), "group": GROUPS[0] if good else GROUPS[1]}
        for kind in kinds:
            rec[f"bottom_{kind}"] = split.bottom.get(kind, 0.0)
            rec[f"top_{kind}"] = split.top.get(kind, 0.0)
        rec["bottom_attention_share"] = split.bottom["s"] / n_s if n_s else float("nan")
        if isinstance(units_text, str):  # hybrid kinds: how they were weighed
            rec["kind_units"] = units_text
        records.append(rec)
    models = pd.DataFrame(records)
    means = []
    for group in GROUPS:
        members = models[models["group"] == group]
        if members.empty:
            continue
        for half in ("bottom", "top"):
            for kind in kinds:
                means.append({"group": group, "half": half, "kind": kind,
                              "mean": float(members[f"{half}_{kind}"].mean()),
                              "n": len(members)})
    return HalvesInfo(
        metric=metric,
        straddle=straddle,
        reference=base.mean,
        models=models,
        means=pd.DataFrame(means, columns=["group", "half", "kind", "mean", "n"]),
        position=position_map(models, bins=bins, f_units=f_units, c_units=c_units),
        mann_whitney=_mann_whitney(models),
        spearman=_spearman(models),
        f_units=f_units,
        per_kind=per_kind_tests(models, kinds),
    )


def _kinds_in(orders: pd.Series) -> str:
    """``sfc``, then ``h`` and the hybrid kinds the orders hold, in registration order."""
    present = set("".join(orders))
    return _KINDS + "".join(k for k in all_symbols() if k not in _KINDS and k in present)


def _split(row: pd.Series, units_text: object, **options: object) -> Any:
    """:func:`~spaces.cost.halves` of the row's order, hybrid kinds by their s-units."""
    order = row["order"]
    if set(order) <= set(_KINDS + _HALF):
        return halves(order, **options)  # type: ignore[arg-type]
    if not isinstance(units_text, str) or not units_text:
        raise AnalysisError(f"trial {row['name']}: its order {order} holds hybrid kinds but "
                            "its run records no kind_units (what they weigh): retrain it with "
                            "this release")
    return halves(order, kind_units=parse_kind_units(units_text), **options)  # type: ignore[arg-type]


def per_kind_tests(models: pd.DataFrame, kinds: str, *, adjust: str = "holm") -> pd.DataFrame:
    """Per kind whose bottom-half count varies: two-sided Mann–Whitney U of that count,
    better vs not better (rank-biserial r > 0: better models hold more of it in the bottom
    half), p-values adjusted over the kinds tested (Holm by default)."""
    rows = []
    for kind in kinds:
        column = f"bottom_{kind}"
        if column not in models or models[column].nunique() < 2:
            continue
        result = _mann_whitney(models, column)
        if result is not None:
            rows.append({"kind": kind, "U": result.statistic, "p": result.pvalue,
                         "rank_biserial": result.rank_biserial, "n_better": result.n_better,
                         "n_other": result.n_other})
    table = pd.DataFrame(rows, columns=["kind", "U", "p", "rank_biserial", "n_better",
                                        "n_other"])
    table["p_adjusted"] = adjust_pvalues(table["p"].to_numpy(), adjust) if len(table) else []
    return table
