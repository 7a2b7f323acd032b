"""Translation / IOT studies (Zhu et al. 2021): BLEU per block-order subset and per
subset size, routing shares, the per-split x per-order BLEU matrix, and seeds.

Input is the trial frame of :func:`analysis.runs.load` for a translation sweep: IOT
trials carry ``subset`` (canonical id, e.g. ``"1246"``), ``subset_size``, and the final
``route_share_<code>`` values; the routing matrix comes from
:func:`analysis.runs.load_routing`. BLEU is higher-is-better everywhere.

The reference ("baseline") is the set of finished trials flagged ``baseline`` (family
``baseline``: the standard ``scf`` Transformer over several seeds); when there are none,
the trials of subset ``{1}`` (the plain Transformer) stand in, and ``baseline_source``
says so. Neither → AnalysisError.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from sublayer_search.spaces.iot import DECODER_BLOCKS, ENCODER_BLOCKS, PAPER_SUBSETS

from .errors import AnalysisError
from .frame import BaselineStats, at_least_as_good, select_metric, usable, validate_trials
from .seeds import COLUMNS as SEED_COLUMNS
from .seeds import SeedsInfo, _bootstrap_ci, _claim

__all__ = [
    "RoutingMatrixInfo",
    "RoutingSharesInfo",
    "SubsetsInfo",
    "is_translation",
    "iot_baseline",
    "routing_matrix",
    "routing_shares",
    "subset_study",
    "translation_seeds",
]

_SHARE = re.compile(r"^route_share_(\d+)$")
_SEED_SUFFIX = re.compile(r"@seed\d+$")
BASELINE_TRIALS = "baseline trials"
SUBSET_ONE = "subset {1} trials"


def is_translation(frame: pd.DataFrame) -> bool:
    """True when the trials are a translation sweep (param ``task`` = translation, or a
    BLEU metric)."""
    if "task" in frame.columns and (frame["task"] == "translation").any():
        return True
    return any(isinstance(m, str) and "bleu" in m.lower() for m in frame["metric"])


def _bleu_metric(frame: pd.DataFrame, metric: str | None) -> str:
    metric = select_metric(frame, metric)
    if "bleu" not in metric.lower():
        raise AnalysisError(
            f"the IOT studies need a BLEU metric (e.g. val_bleu); this frame's metric is "
            f"{metric!r}"
        )
    return metric


def _subset_ids(frame: pd.DataFrame) -> pd.Series:
    if "subset" not in frame.columns:
        return pd.Series([None] * len(frame), index=frame.index, dtype=object)
    return frame["subset"].map(_subset_id)


def _subset_id(value: object) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    if text.endswith(".0"):  # a numeric id read back from CSV
        text = text[:-2]
    digits = re.sub(r"[^0-9]", "", text)
    if not digits:
        raise AnalysisError(f"subset {value!r} is not a subset id like '1246'")
    return "".join(sorted(digits))


def _stack_blocks(stack: object) -> dict[int, str]:
    return ENCODER_BLOCKS if stack == "encoder" else DECODER_BLOCKS


def _label(subset: str) -> str:
    return f"iot{subset}"


def iot_baseline(
    frame: pd.DataFrame, metric: str | None = None, *, column: str = "final"
) -> tuple[BaselineStats, str]:
    """The reference for the IOT studies and where it comes from (baseline trials, else
    the trials of subset {1}); AnalysisError when neither is there."""
    frame = validate_trials(frame)
    metric = _bleu_metric(frame, metric)
    rows = usable(frame, metric, column=column)
    values = rows.loc[rows["baseline"], column].to_numpy(dtype=float)
    source = BASELINE_TRIALS
    if len(values) == 0:
        ids = _subset_ids(rows)
        values = rows.loc[ids == "1", column].to_numpy(dtype=float)
        source = SUBSET_ONE
    if len(values) == 0:
        raise AnalysisError(
            f"no finished baseline trial for metric {metric!r} (tag sublayer.baseline=true "
            "or family baseline) and no trial of subset {1}: the IOT studies compare "
            "against the standard Transformer"
        )
    return BaselineStats(metric=metric, values=tuple(float(v) for v in values),
                         lower_is_better=False), source


def _iot_rows(frame: pd.DataFrame, metric: str, column: str) -> pd.DataFrame:
    rows = usable(frame, metric, column=column)
    rows = rows[~rows["baseline"]].copy()
    rows["subset"] = _subset_ids(rows)
    rows = rows[rows["subset"].notna()]
    if rows.empty:
        raise AnalysisError(
            f"no usable IOT trial (param subset) for metric {metric!r}; the IOT studies need "
            "a sweep over the iot_subsets space"
        )
    return rows


def _stack_of(rows: pd.DataFrame) -> pd.Series:
    if "stack" in rows.columns:
        return rows["stack"].where(rows["stack"].notna(), "decoder")
    return pd.Series("decoder", index=rows.index, dtype=object)


@dataclass(frozen=True, kw_only=True)
class SubsetsInfo:
    """Result of :func:`subset_study` (BLEU: higher is better).

    ``subsets``: one row per subset — subset, stack, size, codes, blocks, paper_subset
    (the subset the paper used for that size), n, mean, sd (over seeds), min, max,
    difference (mean − baseline mean), beats_average, beats_best.
    ``sizes``: one row per (stack, size) — n_subsets, n (trials), mean and sd over every
    trial of that size (seeds and subsets), sd_between_subsets (sd of the subset means),
    best_subset, best_mean, difference, beats_average.
    ``trials``: subset, stack, size, name, seed, value.
    """

    metric: str
    baseline: BaselineStats
    baseline_source: str
    subsets: pd.DataFrame
    sizes: pd.DataFrame
    trials: pd.DataFrame

    def __post_init__(self) -> None:
        if self.subsets.empty:
            raise AnalysisError("the subset study needs at least one IOT trial")

    @property
    def best_subset(self) -> str:
        return str(self.subsets.loc[self.subsets["mean"].idxmax(), "subset"])

    @property
    def best_size(self) -> int:
        return int(self.sizes.loc[self.sizes["mean"].idxmax(), "size"])

    def subset(self, subset: str) -> pd.Series:
        key = _subset_id(subset)
        rows = self.subsets[self.subsets["subset"] == key]
        if rows.empty:
            raise AnalysisError(f"no subset {subset!r}; have {', '.join(self.subsets['subset'])}")
        return rows.iloc[0]


def subset_study(
    frame: pd.DataFrame, *, metric: str | None = None, column: str = "final"
) -> SubsetsInfo:
    """BLEU per subset (mean ± sd over seeds) and per subset size (mean ± sd over seeds
    and over the subsets of that size), against the baseline."""
    frame = validate_trials(frame)
    metric = _bleu_metric(frame, metric)
    base, source = iot_baseline(frame, metric, column=column)
    rows = _iot_rows(frame, metric, column)
    stack = _stack_of(rows)
    if "subset_size" in rows.columns:
        size = pd.to_numeric(rows["subset_size"]).astype("Int64")
        size = size.where(size.notna(), rows["subset"].str.len())
    else:
        size = rows["subset"].str.len()
    trials = pd.DataFrame({
        "subset": rows["subset"].to_numpy(), "stack": stack.to_numpy(),
        "size": size.astype(int).to_numpy(), "name": rows["name"].to_numpy(),
        "seed": rows["seed"].to_numpy(), "value": rows[column].to_numpy(dtype=float),
    })
    bad = trials[trials["size"] != trials["subset"].str.len()]
    if not bad.empty:
        r = bad.iloc[0]
        raise AnalysisError(f"trial {r['name']}: subset_size {r['size']} does not match subset "
                            f"{r['subset']!r}")
    g = trials.groupby(["stack", "subset"], sort=True)["value"]
    subsets = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1),
                            "min": g.min(), "max": g.max()}).reset_index()
    subsets.insert(2, "size", subsets["subset"].str.len())
    subsets.insert(3, "codes", subsets["subset"].map(lambda s: ",".join(s)))
    subsets.insert(4, "blocks", [
        " ".join(_stack_blocks(st).get(int(c), "?") for c in sub)
        for st, sub in zip(subsets["stack"], subsets["subset"], strict=True)])
    subsets.insert(5, "paper_subset", [
        PAPER_SUBSETS.get(st, {}).get(len(sub)) == tuple(int(c) for c in sub)
        for st, sub in zip(subsets["stack"], subsets["subset"], strict=True)])
    subsets["difference"] = subsets["mean"] - base.mean
    subsets["beats_average"] = at_least_as_good(subsets["mean"], base.mean, lower=False)
    subsets["beats_best"] = at_least_as_good(subsets["mean"], base.best, lower=False)
    subsets = subsets.sort_values(["stack", "size", "mean"], ascending=[True, True, False],
                                  kind="stable").reset_index(drop=True)
    records = []
    for (st, n_codes), group in trials.groupby(["stack", "size"], sort=True):
        means = subsets[(subsets["stack"] == st) & (subsets["size"] == n_codes)]
        top = means.loc[means["mean"].idxmax()]
        values = group["value"].to_numpy(dtype=float)
        records.append({
            "stack": st, "size": int(n_codes), "n_subsets": len(means), "n": len(values),
            "mean": float(values.mean()),
            "sd": float(np.std(values, ddof=1)) if len(values) > 1 else float("nan"),
            "sd_between_subsets": (float(np.std(means["mean"], ddof=1)) if len(means) > 1
                                   else float("nan")),
            "best_subset": str(top["subset"]), "best_mean": float(top["mean"]),
        })
    sizes = pd.DataFrame(records)
    sizes["difference"] = sizes["mean"] - base.mean
    sizes["beats_average"] = at_least_as_good(sizes["mean"], base.mean, lower=False)
    return SubsetsInfo(metric=metric, baseline=base, baseline_source=source, subsets=subsets,
                       sizes=sizes, trials=trials)


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
    columns = sorted((c for c in frame.columns if _SHARE.match(str(c))),
                     key=lambda c: int(_SHARE.match(c).group(1)))
    rows = frame[(frame["status"] == "finished")].copy()
    rows["subset"] = _subset_ids(rows)
    rows = rows[rows["subset"].notna()]
    if not columns or rows.empty or rows[columns].isna().all(axis=None):
        raise AnalysisError(
            "no routing shares: the IOT studies need finished trials with a subset param and "
            "route_share_<code> metrics"
        )
    stack = _stack_of(rows)
    records, totals = [], []
    for (_, row), st in zip(rows.iterrows(), stack, strict=True):
        logged = {int(_SHARE.match(c).group(1)): float(row[c]) for c in columns
                  if pd.notna(row[c])}
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
                            "block": _stack_blocks(st).get(code, "?"),
                            "share": logged.get(code, 0.0)})
        totals.append({"run_id": row["run_id"], "name": row["name"], "subset": row["subset"],
                       "total": float(sum(logged.values()))})
    by_trial = pd.DataFrame(records)
    g = by_trial.groupby(["subset", "code", "block"], sort=True)["share"]
    shares = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1)}).reset_index()
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
        key = _subset_id(subset)
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
    data["subset"] = _subset_ids(data)
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
    g = data.groupby(["subset", "routed", "forced"], sort=True)["bleu"]
    cells = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1)}).reset_index()
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


def _candidate_label(row: pd.Series) -> str:
    subset = _subset_id(row.get("subset")) if "subset" in row.index else None
    if subset:
        return _label(subset)
    cand = row.get("candidate") if "candidate" in row.index else None
    if isinstance(cand, str) and cand:
        return cand
    return _SEED_SUFFIX.sub("", str(row["name"]))


def translation_seeds(
    frame: pd.DataFrame,
    *,
    metric: str | None = None,
    column: str = "final",
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 4999,
    seed: int = 0,
) -> SeedsInfo:
    """Every translation candidate (IOT subset ``iot<id>``, else its candidate name) over
    seeds against the baseline, with the rules of :mod:`analysis.seeds`: better (= higher
    BLEU) only when Welch's t is significant at ``alpha`` and the bootstrap CI of the
    difference lies above 0. Grouping is by candidate, not by order string: IOT trials of
    different subsets, and encoder-side sandwiches, share their decoder order. When the
    baseline is the subset {1} trials, that subset is not compared with itself."""
    frame = validate_trials(frame)
    metric = _bleu_metric(frame, metric)
    base, source = iot_baseline(frame, metric, column=column)
    rows = usable(frame, metric, column=column)
    rows = rows[~rows["baseline"]]
    if rows.empty:
        raise AnalysisError(f"no usable non-baseline trial for metric {metric!r}")
    labels = rows.apply(_candidate_label, axis=1)
    trials = pd.DataFrame({"name": labels.to_numpy(), "order": rows["order"].to_numpy(),
                           "seed": rows["seed"].to_numpy(),
                           "value": rows[column].to_numpy(dtype=float)})
    if source == SUBSET_ONE:
        trials = trials[trials["name"] != _label("1")]
    b = np.asarray(base.values, dtype=float)
    records = []
    for name, group in trials.groupby("name", sort=False):
        a = group["value"].to_numpy(dtype=float)
        t = p = lo = hi = float("nan")
        if len(a) >= 2 and len(b) >= 2:
            test = stats.ttest_ind(a, b, equal_var=False)
            t, p = float(test.statistic), float(test.pvalue)
            lo, hi = _bootstrap_ci(a, b, confidence, n_resamples, seed)
        sd = float(np.std(a, ddof=1)) if len(a) > 1 else float("nan")
        better, text = _claim(
            name=str(name), n=len(a), mean=float(a.mean()), sd=sd, base_n=base.n,
            base_mean=base.mean, base_sd=base.sd, t=t, p=p, lo=lo, hi=hi, method="bootstrap",
            alpha=alpha, confidence=confidence, lower=False,
        )
        records.append({
            "name": name, "order": str(group["order"].iloc[0]), "n": len(a),
            "mean": float(a.mean()), "sd": sd, "baseline_n": base.n,
            "baseline_mean": base.mean, "baseline_sd": base.sd,
            "difference": float(a.mean()) - base.mean, "welch_t": t, "welch_p": p,
            "ci_low": lo, "ci_high": hi, "ci_method": "bootstrap (percentile)",
            "better": better, "statement": text,
        })
    table = pd.DataFrame(records, columns=SEED_COLUMNS)
    table = table.sort_values("mean", ascending=False, kind="stable").reset_index(drop=True)
    return SeedsInfo(metric=metric, alpha=alpha, confidence=confidence, lower_is_better=False,
                     baseline=base, table=table, trials=trials.reset_index(drop=True))
