"""IOT routing studies (Zhu et al. 2021): which decoder order the predictor routes the
validation sentences to (the final ``route_share_<code>`` metrics of :func:`analysis.store.runs.load`),
and how well each routed split is decoded by every order (the paper's Fig. 2, from
:func:`analysis.store.runs.load_routing`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import validate_trials
from sublayer_search.analysis.store.iot_frame import stack_blocks, stack_of, subset_id, subset_ids
from sublayer_search.spaces.records import TrialStatus, route_share_code

if TYPE_CHECKING:  # pragma: no cover
    from pandas.api.typing import SeriesGroupBy

__all__ = ["RoutingMatrixInfo", "RoutingSharesInfo", "routing_matrix", "routing_shares"]


def _n_mean_sd(g: SeriesGroupBy) -> pd.DataFrame:
    """n, mean and sample sd per group, the group keys as columns."""
    return pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1)}).reset_index()


@dataclass(frozen=True, kw_only=True)
class RoutingSharesInfo:
    """Result of :func:`routing_shares`.

    ``shares``: one row per (subset, code) — subset, code, block, n (trials), mean, sd
    (over seeds) of the final share of validation sentences routed to that order.
    ``by_trial``: run_id, name, subset, seed, code, share; ``totals``: run_id, name,
    subset, total (the shares of a trial sum to 1 up to rounding).
    """

    shares: pd.DataFrame
    by_trial: pd.DataFrame
    totals: pd.DataFrame

    def __post_init__(self) -> None:
        if self.shares.empty:
            raise AnalysisError("the routing-share study needs at least one IOT trial")

    def matrix(self) -> pd.DataFrame:
        """Subsets x codes table of mean shares (NaN where a code is not in the subset)."""
        return self.shares.pivot(index="subset", columns="code", values="mean")

    def dominant(self) -> pd.DataFrame:
        """Per subset the order with the largest mean share."""
        idx = self.shares.groupby("subset")["mean"].idxmax()
        return self.shares.loc[idx, ["subset", "code", "block", "mean"]].reset_index(drop=True)


def routing_shares(frame: pd.DataFrame) -> RoutingSharesInfo:
    """Final ``route_share_<code>`` per finished IOT trial, mean ± sd over seeds per subset.

    A share logged for a code outside the trial's subset is an error (AnalysisError);
    codes of the subset with no logged share count as 0."""
    frame = validate_trials(frame)
    share_codes = {str(c): code for c in frame.columns
                   if (code := route_share_code(str(c))) is not None}
    columns = sorted(share_codes, key=share_codes.__getitem__)
    rows = frame[(frame["status"] == TrialStatus.FINISHED)].copy()
    rows["subset"] = subset_ids(rows)
    rows = rows[rows["subset"].notna()]
    if not columns or rows.empty or rows[columns].isna().all(axis=None):
        raise AnalysisError(
            "no routing shares: the IOT studies need finished trials with a subset param and "
            "route_share_<code> metrics"
        )
    stack = stack_of(rows)
    records, totals = [], []
    for (_, row), st in zip(rows.iterrows(), stack, strict=True):
        logged = {share_codes[c]: float(row[c]) for c in columns if pd.notna(row[c])}
        if not logged:
            continue
        codes = [int(c) for c in row["subset"]]
        extra = sorted(set(logged) - set(codes))
        if extra:
            raise AnalysisError(f"trial {row['name']}: route_share for code(s) {extra} outside "
                                f"its subset {row['subset']!r}")
        for code in codes:
            records.append({"run_id": row["run_id"], "name": row["name"],
                            "subset": row["subset"], "seed": row["seed"], "code": code,
                            "block": stack_blocks(st).get(code, "?"),
                            "share": logged.get(code, 0.0)})
        totals.append({"run_id": row["run_id"], "name": row["name"], "subset": row["subset"],
                       "total": float(sum(logged.values()))})
    by_trial = pd.DataFrame(records)
    shares = _n_mean_sd(by_trial.groupby(["subset", "code", "block"], sort=True)["share"])
    return RoutingSharesInfo(shares=shares, by_trial=by_trial, totals=pd.DataFrame(totals))


@dataclass(frozen=True, kw_only=True)
class RoutingMatrixInfo:
    """Result of :func:`routing_matrix` (the paper's Fig. 2).

    ``cells``: subset, routed, forced, n (runs), mean, sd of the BLEU of the sentences
    routed to ``routed`` when decoded with ``forced``.
    ``diagonal``: per (subset, routed) — routed_bleu (forced = routed), best_forced,
    best_bleu, best_other (best BLEU of another order), margin (routed_bleu − best_other),
    diagonal_best (the routed order decodes its own split best).
    """

    cells: pd.DataFrame
    diagonal: pd.DataFrame

    def __post_init__(self) -> None:
        if self.cells.empty:
            raise AnalysisError("the routing matrix needs at least one routing_bleu.json")

    @property
    def subsets(self) -> list[str]:
        return sorted(self.cells["subset"].unique())

    def matrix(self, subset: str) -> pd.DataFrame:
        """Routed x forced table of mean BLEU for one subset."""
        key = subset_id(subset)
        rows = self.cells[self.cells["subset"] == key]
        if rows.empty:
            raise AnalysisError(f"no routing matrix for subset {subset!r}; have "
                                f"{', '.join(self.subsets)}")
        return rows.pivot(index="routed", columns="forced", values="mean")

    @property
    def diagonal_share(self) -> float:
        """Fraction of (subset, split) rows where the routed order is the best decoder."""
        return float(self.diagonal["diagonal_best"].mean())


def routing_matrix(routing: pd.DataFrame) -> RoutingMatrixInfo:
    """Mean ± sd over runs of the per-split x per-order BLEU (``runs.load_routing``)."""
    needed = {"run_id", "subset", "routed", "forced", "bleu"}
    missing = needed - set(routing.columns)
    if missing:
        raise AnalysisError(f"routing frame is missing column(s) {', '.join(sorted(missing))}")
    data = routing.copy()
    data["subset"] = subset_ids(data)
    unknown = data["subset"].isna()
    if unknown.any():  # no subset param: the codes the matrix covers
        cover = data.groupby("run_id")["forced"].agg(
            lambda s: "".join(str(c) for c in sorted(set(s))))
        data.loc[unknown, "subset"] = data.loc[unknown, "run_id"].map(cover)
    data = data[np.isfinite(data["bleu"].to_numpy(dtype=float))]
    if data.empty:
        raise AnalysisError("no routing BLEU values (artifact routing_bleu.json) to study")
    for column in ("routed", "forced"):
        outside = data[[str(c) not in s for c, s in zip(data[column], data["subset"],
                                                         strict=True)]]
        if not outside.empty:
            r = outside.iloc[0]
            raise AnalysisError(f"run {r['run_id']}: {column} code {r[column]} is not in its "
                                f"subset {r['subset']!r}")
    cells = _n_mean_sd(data.groupby(["subset", "routed", "forced"], sort=True)["bleu"])
    records = []
    for (subset, routed), row in cells.groupby(["subset", "routed"], sort=True):
        by = row.set_index("forced")["mean"]
        own = float(by.get(routed, float("nan")))
        others = by.drop(index=routed, errors="ignore")
        best_other = float(others.max()) if len(others) else float("nan")
        records.append({
            "subset": subset, "routed": int(routed), "routed_bleu": own,
            "best_forced": int(by.idxmax()), "best_bleu": float(by.max()),
            "best_other": best_other, "margin": own - best_other,
            "diagonal_best": bool(math.isfinite(own) and own >= by.max()),
        })
    return RoutingMatrixInfo(cells=cells, diagonal=pd.DataFrame(records))
