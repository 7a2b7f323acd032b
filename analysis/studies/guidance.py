"""Guidance study (Crossformer): the metric by guidance mode × block against the baseline.

Input: a trial frame whose runs carry guidance (:mod:`analysis.store.guidance_frame`; runs
without it are unguided). Every candidate trial belongs to a group = (candidate, guidance
label): the candidate is the run's ``candidate`` param (or its name without ``@seedN``),
with the guidance suffix removed, so ``sandwich16_6+hg-kq@seed0`` is candidate
``sandwich16_6``, label ``hg-kq``. Each group is compared with the baseline seeds (the
unguided baseline trials; a baseline row that carries guidance is studied as a candidate)
by the rules of :mod:`analysis.studies.seeds`: Welch's t, p adjusted over the groups
(Holm / Benjamini–Hochberg / none), a Welch t interval of the difference, verdict
better / worse / no evidence, seeds for 80 % power (post hoc); the paired t-test over
shared seeds beside it, never deciding (a shared seed shares the batch order, not the
initial weights: :func:`analysis.studies.significance.decides`). Unguided candidates (mode none) stay
in the family, as the reference of their order.

Call it on a sweep with :func:`study_experiment` (``study_experiment("my-sweep", uri)``)
or on a loaded frame with ``guidance_study(runs.load("my-sweep", uri))``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.papers.crossformer_paper import BLOCK_LABELS
from sublayer_search.analysis.papers.crossformer_paper import table1 as paper_table1
from sublayer_search.analysis.papers.crossformer_paper import table6 as paper_table6
from sublayer_search.analysis.store.frame import (
    BaselineStats,
    baseline_stats,
    select_metric,
    usable,
    validate_trials,
)
from sublayer_search.analysis.store.guidance_frame import GUIDANCE_METRIC, NONE, normalized
from sublayer_search.analysis.studies.seeds import by_seed, seed_table, strip_seed

__all__ = ["GROUP_COLUMNS", "GuidanceInfo", "blocks_key", "guidance_study", "study_experiment"]

GROUP_COLUMNS = [
    "candidate",
    "guidance",
    "guidance_mode",
    "guidance_blocks",
    "guidance_pairing",
    "guidance_alpha",
    "params",
    "params_change",
]
"""Columns the study adds to the seed table (``seeds.COLUMNS``), one row per group."""


@dataclass(frozen=True, kw_only=True)
class GuidanceInfo:
    """Result of :func:`guidance_study`. ``table``: one row per (candidate, guidance)
    group, ``seeds.COLUMNS`` + ``GROUP_COLUMNS`` (+ ``guidance_loss`` mean when logged;
    ``difference`` = group mean − baseline mean). ``trials``: the values studied, one row
    per trial. ``matrix``: the difference from the baseline by candidate and blocks (rows)
    and mode (columns)."""

    metric: str
    lower_is_better: bool
    adjust: str
    alpha: float
    confidence: float
    baseline: BaselineStats
    table: pd.DataFrame
    trials: pd.DataFrame

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1 or not 0 < self.confidence < 1:
            raise AnalysisError("alpha and confidence must lie strictly between 0 and 1")

    @property
    def matrix(self) -> pd.DataFrame:
        """Rows: candidate and guided blocks (a pairing or alpha other than the paper's
        adds its label suffix, e.g. ``key_query .qk``); columns: none, soft, hard."""
        t = self.table
        cands = list(dict.fromkeys(t["candidate"]))
        blocks = [
            (b or "(unguided)") + (f" .{g.split('.', 1)[1]}" if "." in g else "")
            for b, g in zip(t["guidance_blocks"], t["guidance"], strict=True)
        ]
        keys = [
            (cands.index(c), blocks_key(b), name)
            for c, b, name in zip(t["candidate"], t["guidance_blocks"], blocks, strict=True)
        ]
        t = t.assign(blocks=blocks).iloc[sorted(range(len(t)), key=keys.__getitem__)]
        m = t.pivot_table(
            index=["candidate", "blocks"],
            columns="guidance_mode",
            values="difference",
            aggfunc="first",
            sort=False,
        )
        modes = [c for c in ("none", "soft", "hard") if c in m.columns]
        return m[modes].reset_index().rename_axis(columns=None)

    def row(self, name: str) -> pd.Series:
        rows = self.table[self.table["name"] == name]
        if rows.empty:
            raise AnalysisError(f"no guidance group {name!r}; have {', '.join(self.table['name'])}")
        return rows.iloc[0]

    def paper_comparison(self) -> pd.DataFrame:
        """Our groups beside the paper's IWSLT'14 De-En BLEU for the same guidance label
        (Table 1, and Table 6 for the ablated pairings); the paper has no seeds, so no
        test on its side. Groups the paper has no number for are left out."""
        t6 = paper_table6()
        paper = pd.concat([paper_table1(), t6[~t6["label"].isin(paper_table1()["label"])]])
        paper = paper[paper["mode"] != NONE][
            ["label", "bleu", "bleu_gain", "params_saved_m", "source"]
        ]
        paper = paper.rename(
            columns={
                "label": "guidance",
                "bleu": "paper_bleu",
                "bleu_gain": "paper_bleu_gain",
                "params_saved_m": "paper_params_saved_m",
                "source": "paper_source",
            }
        )
        ours = self.table[
            ["name", "candidate", "guidance", "n", "mean", "difference", "verdict", "params_change"]
        ]
        return ours.merge(paper, on="guidance", how="inner")


def blocks_key(blocks: str) -> tuple[int, ...]:
    """Sort key of a ``key_query+ffn`` block set: unguided first, then single blocks in
    the order key_query, value, ffn, then larger sets."""
    names = [b for b in blocks.split("+") if b]
    order = list(BLOCK_LABELS)
    return len(names), *(order.index(b) if b in order else len(order) for b in names)


def _candidate(row: pd.Series) -> str:
    cand = row.get("candidate")
    name = cand if isinstance(cand, str) and cand else strip_seed(str(row["name"]))
    label = str(row["guidance"])
    if label != NONE and name.endswith(f"+{label}"):
        name = name[: -len(label) - 1]
    return name


def _group_name(candidate: str, label: str) -> str:
    return candidate if label == NONE else f"{candidate}+{label}"


def guidance_study(
    frame: pd.DataFrame,
    *,
    metric: str | None = None,
    column: str = "final",
    alpha: float = 0.05,
    confidence: float = 0.95,
    n_resamples: int = 4999,
    seed: int = 0,
    adjust: str = "holm",
) -> GuidanceInfo:
    """Every (candidate, guidance) group of the finished trials against the unguided
    baseline seeds; AnalysisError when there is no such baseline or no candidate."""
    frame = normalized(validate_trials(frame))
    metric = select_metric(frame, metric)
    guided_base = frame["baseline"] & (frame["guidance_mode"] != NONE)
    frame.loc[guided_base, "baseline"] = False
    base = baseline_stats(frame, metric, column=column)
    rows = usable(frame, metric, column=column)
    ref = rows[rows["baseline"]]
    rows = rows[~rows["baseline"]]
    if rows.empty:
        raise AnalysisError(f"no usable non-baseline trial for metric {metric!r}")
    trials = _group_trials(rows, column)
    table = seed_table(
        trials,
        base,
        by="name",
        alpha=alpha,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
        adjust=adjust,
        baseline_seeds=by_seed(ref["seed"], ref[column]),
    )
    return GuidanceInfo(
        metric=metric,
        lower_is_better=base.lower_is_better,
        adjust=adjust,
        alpha=alpha,
        confidence=confidence,
        baseline=base,
        table=_with_groups(table, trials, _baseline_params(frame, metric)),
        trials=trials.reset_index(drop=True),
    )


def _group_trials(rows: pd.DataFrame, column: str) -> pd.DataFrame:
    """One row per candidate trial, named by its (candidate, guidance) group."""
    cands = rows.apply(_candidate, axis=1)
    names = [_group_name(c, g) for c, g in zip(cands, rows["guidance"], strict=True)]
    trials = pd.DataFrame(
        {
            "name": names,
            "candidate": cands.to_numpy(),
            "order": rows["order"].to_numpy(),
            "seed": rows["seed"].to_numpy(),
            "value": rows[column].to_numpy(dtype=float),
            **{
                c: rows[c].to_numpy()
                for c in GROUP_COLUMNS
                if c not in ("candidate", "params_change")
            },
            "run_id": rows["run_id"].to_numpy(),
        }
    )
    if GUIDANCE_METRIC in rows.columns:
        trials[GUIDANCE_METRIC] = rows[GUIDANCE_METRIC].to_numpy(dtype=float)
    return trials


def _baseline_params(frame: pd.DataFrame, metric: str) -> float:
    rows = usable(frame, metric)
    values = rows.loc[rows["baseline"], "params"].dropna()
    return float(values.iloc[0]) if len(values) else float("nan")


def _with_groups(table: pd.DataFrame, trials: pd.DataFrame, base_params: float) -> pd.DataFrame:
    first = trials.groupby("name", sort=False).first()
    out = table.copy()
    for column in GROUP_COLUMNS[:-1]:
        out[column] = out["name"].map(first[column]).to_numpy()
    params = pd.to_numeric(out["params"]).astype("Int64")
    out["params"] = params
    out["params_change"] = params.astype(float) - base_params
    if GUIDANCE_METRIC in trials.columns:
        means = trials.groupby("name", sort=False)[GUIDANCE_METRIC].mean()
        out[GUIDANCE_METRIC] = out["name"].map(means).astype(float)
    out["guidance_alpha"] = out["guidance_alpha"].astype(float)
    out.loc[out["guidance_mode"] != "soft", "guidance_alpha"] = np.nan  # soft's weight only
    return out


def study_experiment(
    experiment: str, tracking_uri: str | None = None, **options: Any
) -> GuidanceInfo:
    """:func:`guidance_study` of the trials of one MLflow experiment (sweep); ``options``
    as :func:`guidance_study`'s keywords (metric, column, alpha, adjust...)."""
    from sublayer_search.analysis.store.runs import load

    return guidance_study(load(experiment, tracking_uri), **options)
