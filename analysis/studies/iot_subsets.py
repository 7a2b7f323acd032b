"""IOT subset study (Zhu et al. 2021, Table 3): BLEU per block-order subset (mean ± sd
over seeds) and per subset size N (over seeds and the subsets of that size), against
the baseline (:func:`analysis.store.iot_frame.iot_baseline`). BLEU is higher-is-better."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    at_least_as_good,
    sample_sd,
    validate_trials,
)
from sublayer_search.analysis.store.iot_frame import (
    bleu_metric,
    iot_baseline,
    iot_rows,
    stack_blocks,
    stack_of,
    subset_id,
)
from sublayer_search.spaces.generators.iot_subsets import PAPER_SUBSETS

__all__ = ["SubsetsInfo", "subset_study"]


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
        key = subset_id(subset)
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
    metric = bleu_metric(frame, metric)
    base, source = iot_baseline(frame, metric, column=column)
    trials = _trials(iot_rows(frame, metric, column), column)
    subsets = _subsets(trials, base)
    sizes = _sizes(trials, subsets)
    sizes["difference"] = sizes["mean"] - base.mean
    sizes["beats_average"] = at_least_as_good(sizes["mean"], base.mean, lower=False)
    return SubsetsInfo(metric=metric, baseline=base, baseline_source=source, subsets=subsets,
                       sizes=sizes, trials=trials)


def _trials(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """subset, stack, size, name, seed, value per IOT trial; the size must match the subset."""
    stack = stack_of(rows)
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
    return trials


def _subsets(trials: pd.DataFrame, base: BaselineStats) -> pd.DataFrame:
    g = trials.groupby(["stack", "subset"], sort=True)["value"]
    subsets = pd.DataFrame({"n": g.size(), "mean": g.mean(), "sd": g.std(ddof=1),
                            "min": g.min(), "max": g.max()}).reset_index()
    subsets.insert(2, "size", subsets["subset"].str.len())
    subsets.insert(3, "codes", subsets["subset"].map(lambda s: ",".join(s)))
    subsets.insert(4, "blocks", [
        " ".join(stack_blocks(st).get(int(c), "?") for c in sub)
        for st, sub in zip(subsets["stack"], subsets["subset"], strict=True)])
    subsets.insert(5, "paper_subset", [
        PAPER_SUBSETS.get(st, {}).get(len(sub)) == tuple(int(c) for c in sub)
        for st, sub in zip(subsets["stack"], subsets["subset"], strict=True)])
    subsets["difference"] = subsets["mean"] - base.mean
    subsets["beats_average"] = at_least_as_good(subsets["mean"], base.mean, lower=False)
    subsets["beats_best"] = at_least_as_good(subsets["mean"], base.best, lower=False)
    return subsets.sort_values(["stack", "size", "mean"], ascending=[True, True, False],
                               kind="stable").reset_index(drop=True)


def _sizes(trials: pd.DataFrame, subsets: pd.DataFrame) -> pd.DataFrame:
    records = []
    for (st, n_codes), group in trials.groupby(["stack", "size"], sort=True):
        means = subsets[(subsets["stack"] == st) & (subsets["size"] == n_codes)]
        top = means.loc[means["mean"].idxmax()]
        values = group["value"].to_numpy(dtype=float)
        records.append({
            "stack": st, "size": int(n_codes), "n_subsets": len(means), "n": len(values),
            "mean": float(values.mean()), "sd": sample_sd(values),
            "sd_between_subsets": sample_sd(means["mean"]),
            "best_subset": str(top["subset"]), "best_mean": float(top["mean"]),
        })
    return pd.DataFrame(records)
