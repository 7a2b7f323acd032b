"""The report of a translation sweep: trials, distribution and sandwich curve per side
against the baseline, the IOT studies (BLEU per subset and size beside the paper's
Table 3, routing shares, the per-split x per-order BLEU matrix) and seeds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.figures import plots as plots
from sublayer_search.analysis.papers import iot_paper
from sublayer_search.analysis.report.guidance import guidance_section
from sublayer_search.analysis.report.pareto import pareto_section
from sublayer_search.analysis.report.sections import (
    distribution_and_halves,
    sandwich_section,
    seeds_ref,
    seeds_section,
    trials_section,
)
from sublayer_search.analysis.report.writer import Report, Writer
from sublayer_search.analysis.store.frame import candidates
from sublayer_search.analysis.store.guidance_frame import has_guidance, unguided
from sublayer_search.analysis.store.iot_frame import BASELINE_TRIALS, iot_baseline
from sublayer_search.analysis.studies.iot_routing import routing_matrix, routing_shares
from sublayer_search.analysis.studies.iot_seeds import translation_seeds
from sublayer_search.analysis.studies.iot_subsets import subset_study
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.spaces.records import ROUTE_SHARE_PREFIX

__all__ = ["translation_report"]


def translation_report(
    frame: pd.DataFrame, out_dir: str | Path, *, title: str, metric: str,
    history: pd.DataFrame | None, routing: pd.DataFrame | None, adjust: str = "holm",
) -> Report:
    """Translation sweep: trials; distribution (when baseline trials exist); sandwich
    curve per side; the IOT studies (BLEU per subset and per size, the paper's Table 3
    beside it, routing shares, routing matrix); seeds per candidate; the Pareto front of
    BLEU against each cost that varies, or why none (:mod:`.pareto`). No halves study:
    the ``order`` of a translation trial is its decoder order only."""
    if "bleu" not in metric.lower():
        raise AnalysisError(f"a translation sweep is studied on a BLEU metric, got {metric!r}")
    base, source = iot_baseline(frame, metric)
    w = Writer(out_dir, title)
    trials_section(w, frame, metric=metric, base=base, source=source, history=history)
    cands = candidates(frame, metric)
    if not cands.empty:
        _candidate_sections(w, frame, cands, metric=metric, source=source, routing=routing,
                            adjust=adjust)
    pareto_section(w, frame, metric=metric)
    return w.write()


def _candidate_sections(w: Writer, frame: pd.DataFrame, cands: pd.DataFrame, *, metric: str,
                        source: str, routing: pd.DataFrame | None, adjust: str) -> None:
    """The sections of a sweep with candidates (``cands``), up to the seeds."""
    guided = has_guidance(frame) and source == BASELINE_TRIALS
    seeds = None if guided else translation_seeds(frame, metric=metric, adjust=adjust)
    ref = seeds_ref(seeds is not None and bool((seeds.table["n"] >= 2).any()), guided)
    if source == BASELINE_TRIALS:
        distribution_and_halves(w, frame, label="Sweep", stem="sweep", metric=metric,
                                straddle="fractional", halves=False, seeds_ref=ref)
        plain = unguided(frame)  # guided trials: the guidance section
        plain_cands = candidates(plain, metric)
        if plain_cands["k"].notna().any():
            _sandwich_per_side(w, plain, plain_cands, metric=metric, seeds_ref=ref)
    if "subset" in frame.columns and cands["subset"].notna().any():
        _subsets_section(w, frame, metric=metric)
        if any(str(c).startswith(ROUTE_SHARE_PREFIX) for c in frame.columns):
            _route_shares_section(w, frame)
        if routing is not None and not routing.empty:
            _routing_matrix_section(w, routing)
    if seeds is None:  # guided: seeds by candidate x guidance
        guidance_section(w, frame, metric=metric, adjust=adjust)
    elif (seeds.table["n"] >= 2).any():
        seeds_section(w, seeds, label="Translation", stem="translation")


def _sandwich_per_side(w: Writer, frame: pd.DataFrame, cands: pd.DataFrame, *,
                       metric: str, seeds_ref: str) -> None:
    """One sandwich curve per side (encoder / decoder) the candidates sandwich."""
    sides = frame["side"] if "side" in frame.columns else pd.Series(None, index=frame.index)
    named: Sequence[str | None] = sorted({s for s in sides[cands.index] if isinstance(s, str)})
    for side in named or [None]:
        keep = frame["baseline"] | (sides == side if side else sides.isna())
        info = sandwich_curve(frame[keep], metric=metric)
        label = f" ({side} side)" if side else ""
        sandwich_section(w, info, title=f"Fig. 5: sandwich coefficient{label}",
                         stem=f"sandwich_{side}" if side else "sandwich", vs_best=False,
                         seeds_ref=seeds_ref)


def scored_as(frame: pd.DataFrame, metric: str) -> str:
    """How a sweep's ``metric`` was scored: the tokeniser (runs before
    ``translation.bleu_tokenize`` existed used sacrebleu's 13a) and the split."""
    kinds = sorted({str(t) for t in frame.get("bleu_tokenize", pd.Series(dtype=object))
                    if isinstance(t, str)}) or ["13a"]
    names = {"13a": "sacrebleu 13a", "none": "multi-bleu.perl-style (sacrebleu tokenize none)"}
    split = "test split" if metric.startswith("test_") else "validation split"
    return f"{' / '.join(names.get(k, k) for k in kinds)}, {split}"


def _paper_comparison(sizes: pd.DataFrame, scored: str) -> pd.DataFrame:
    t3 = iot_paper.table3().set_index("size")
    out = sizes[sizes["stack"] == "decoder"][["size", "n_subsets", "n", "mean", "sd",
                                              "difference", "best_subset"]].copy()
    out = out.rename(columns={"mean": "ours_mean", "sd": "ours_sd", "difference": "ours_gain"})
    out["paper_subset"] = out["size"].map(t3["subset"])
    out["paper_bleu"] = out["size"].map(t3["value"])
    out["paper_gain"] = out["size"].map(t3["gain"])
    out["paper_source"] = iot_paper.TABLE3
    out["ours_scored"] = scored
    out["paper_scored"] = iot_paper.SCORED
    return out.reset_index(drop=True)


def _subsets_section(w: Writer, frame: pd.DataFrame, *, metric: str) -> None:
    info = subset_study(frame, metric=metric)
    sec = w.section("IOT: BLEU per subset and per subset size",
                    "Mean ± sd over seeds per subset, and over seeds and subsets per size N, "
                    f"against the baseline ({info.baseline_source}). The paper's Table 3 "
                    "(IWSLT14 De→En, one number per N) is listed beside ours as gains over "
                    "each study's own Transformer.")
    best = info.subset(info.best_subset)
    sec.numbers += [
        ("subsets", len(info.subsets)),
        ("best subset", f"{{{best['codes']}}} = {best['mean']:.4g} ± {best['sd']:.2g} "
                        f"(n={best['n']})"),
        ("best size N", info.best_size),
        ("subsets at least as good as the average baseline",
         f"{int(info.subsets['beats_average'].sum())} of {len(info.subsets)}"),
    ]
    for r in info.sizes.itertuples():
        sec.numbers.append((f"{r.stack} N={r.size} (subsets {r.n_subsets}, trials {r.n})",
                            f"{r.mean:.4g} ± {r.sd:.2g} ({r.difference:+.3g} vs baseline)"))
    w.figure(sec, "iot_bleu_by_size", plots.plot_iot_sizes(info))
    w.figure(sec, "iot_bleu_by_subset", plots.plot_iot_subsets(info))
    w.table(sec, "iot_subsets", info.subsets)
    w.table(sec, "iot_sizes", info.sizes)
    w.table(sec, "iot_trials", info.trials)
    scored = scored_as(frame, metric)
    comparison = _paper_comparison(info.sizes, scored)
    if not comparison.empty:
        sec.numbers.append(("BLEU scored", f"ours: {scored}; the paper: {iot_paper.SCORED}"))
        w.table(sec, "iot_paper_comparison", comparison)
        sec.inline.append((f"ours ({scored}) vs Zhu et al. (2021) Table 3 (IWSLT14 De→En; "
                           f"{iot_paper.SCORED})", comparison))


def _route_shares_section(w: Writer, frame: pd.DataFrame) -> None:
    """Skipped when no finished IOT trial logged a share."""
    try:
        shares = routing_shares(frame)
    except AnalysisError:
        return
    sec = w.section("IOT: routing shares",
                    "Final share of validation sentences the predictor routes to "
                    "each order (argmax), mean over seeds.")
    for r in shares.dominant().itertuples():
        sec.numbers.append((f"subset {{{','.join(r.subset)}}}: most used order",
                            f"{r.code} ({r.block}) {r.mean:.2f}"))
    w.figure(sec, "iot_route_shares", plots.plot_route_shares(shares))
    w.table(sec, "iot_route_shares", shares.shares)
    w.table(sec, "iot_route_shares_by_trial", shares.by_trial)


def _routing_matrix_section(w: Writer, routing: pd.DataFrame) -> None:
    m = routing_matrix(routing)
    sec = w.section("IOT: per-split × per-order BLEU (the paper's Fig. 2)",
                    "Rows: the validation sentences routed to an order; columns: BLEU "
                    "when that split is decoded with each order forced.")
    sec.numbers.append(("splits whose routed order decodes them best",
                        f"{int(m.diagonal['diagonal_best'].sum())} of {len(m.diagonal)}"))
    w.figure(sec, "iot_routing_bleu", plots.plot_routing_matrix(m))
    w.table(sec, "iot_routing_cells", m.cells)
    w.table(sec, "iot_routing_diagonal", m.diagonal)
