"""Which studies each report holds, in which order: a sweep's and the papers'.

The reports: a sweep's (:func:`experiment_report`;
translation sweeps in :mod:`analysis.report.translation`) and the papers' published
numbers (:func:`paper_report`, :func:`iot_paper_report`). Where the files go and how
they look is :mod:`analysis.report.writer`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.figures import plots as plots
from sublayer_search.analysis.papers import iot_paper
from sublayer_search.analysis.papers import press_paper as paper
from sublayer_search.analysis.report.attention import AttentionStudy, attention_section
from sublayer_search.analysis.report.guidance import crossformer_paper_report, guidance_section
from sublayer_search.analysis.report.hybrid import attention_depth_section
from sublayer_search.analysis.report.pareto import pareto_section
from sublayer_search.analysis.report.proxy import proxy_section
from sublayer_search.analysis.report.sections import (
    distribution_and_halves,
    halves_section,
    sandwich_section,
    seeds_ref,
    seeds_section,
    trials_section,
)
from sublayer_search.analysis.report.translation import translation_report
from sublayer_search.analysis.report.writer import Report, Writer
from sublayer_search.analysis.store.frame import (
    baseline_stats,
    candidates,
    select_metric,
    validate_trials,
)
from sublayer_search.analysis.store.guidance_frame import has_guidance, unguided
from sublayer_search.analysis.store.iot_frame import is_translation
from sublayer_search.analysis.studies.iot_subsets import subset_study
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison, seed_comparison_from_stats
from sublayer_search.spaces.records import Role, Tag

__all__ = ["Report", "attach_to_sweep", "crossformer_paper_report", "experiment_report",
           "iot_paper_report", "paper_report"]


def experiment_report(
    frame: pd.DataFrame,
    out_dir: str | Path,
    *,
    title: str,
    metric: str | None = None,
    straddle: str = "fractional",
    history: pd.DataFrame | None = None,
    routing: pd.DataFrame | None = None,
    attention: AttentionStudy | None = None,
    adjust: str = "holm",
    proxy: tuple[str, pd.DataFrame] | None = None,
) -> Report:
    """Run every study that applies to a sweep's trial frame and write the report.

    Always: trials table and status counts; with candidates: distribution and halves;
    with sandwich coefficients: sandwich curve; with ≥ 2 seeds of an order: seeds; with
    guided trials (Crossformer): the guidance study in place of the seeds section.
    A translation sweep (param ``task`` = translation or a BLEU metric) gets the
    translation sections instead (see :func:`analysis.report.translation.translation_report`);
    ``routing`` is ``runs.load_routing``'s frame for the per-split x per-order BLEU matrix.
    ``adjust`` (holm, bh, none): the multiple-comparison adjustment of the seed tests.
    ``proxy``: (name, trial frame) of a proxy sweep of the same orders (``task: mad``):
    a section on how far its ranking agrees (:mod:`analysis.studies.proxy_trust`).
    AnalysisError when the frame has no metric or no finished baseline.
    """
    frame = validate_trials(frame)
    if frame.empty:
        raise AnalysisError(f"the experiment has no trial runs (tag {Tag.ROLE}={Role.TRIAL})")
    metric = select_metric(frame, metric)
    if is_translation(frame):
        return translation_report(frame, out_dir, title=title, metric=metric,
                                  history=history, routing=routing, adjust=adjust)
    base = baseline_stats(frame, metric)
    w = Writer(out_dir, title)
    trials_section(w, frame, metric=metric, base=base, source=None, history=history)
    cands = candidates(frame, metric)
    if not cands.empty:
        guided = has_guidance(frame)
        seeded = bool(cands.groupby("order").size().max() >= 2)
        ref = seeds_ref(seeded, guided)  # the text points only at sections this report has
        distribution_and_halves(w, frame, label="Sweep", stem="sweep", metric=metric,
                                straddle=straddle, seeds_ref=ref)
        attention_depth_section(w, frame, metric=metric)  # hybrid orders only
        plain = unguided(frame)  # guided trials: the guidance section
        if candidates(plain, metric)["k"].notna().any():
            sandwich_section(w, sandwich_curve(plain, metric=metric), adjust=adjust,
                             seeds_ref=ref)
        if guided:  # the seeds by (candidate, guidance), not by order alone
            guidance_section(w, frame, metric=metric, adjust=adjust)
        elif seeded:
            seeds_section(w, seed_comparison(frame, metric=metric, adjust=adjust),
                          label="Sweep", stem="sweep")
    pareto_section(w, frame, metric=metric)
    if attention is not None:
        attention_section(w, attention)
    if proxy is not None:
        proxy_section(w, frame, proxy[1], metric=metric, name=proxy[0])
    return w.write()


def iot_paper_report(out_dir: str | Path) -> Report:
    """Zhu et al. (2021) IOT results from the published numbers (Table 3, IWSLT14 De→En),
    with Press et al. (2020)'s WMT14 En-De sandwich translation results."""
    w = Writer(out_dir, "Zhu et al. (2021): instance-wise layer reordering, published results")
    t3 = iot_paper.table3()
    info = subset_study(iot_paper.trials())
    sec = w.section(
        iot_paper.TABLE3.replace(f"{iot_paper.SOURCE}, ", ""),
        f"Source: {iot_paper.TABLE3}. One BLEU per number N of decoder orders (the subset the "
        "paper used for each N); no seeds or sd are published, so no significance test. "
        "Table 13 is not reproduced: its numbers are not in the project's sources.")
    sec.numbers += [(f"{r.model} {{{r.codes}}}", f"{r.value:.2f} ({r.gain:+.2f})")
                    for r in t3.itertuples()]
    sec.numbers.append(("best N", f"{info.best_size} ({info.sizes['mean'].max():.2f})"))
    w.figure(sec, "zhu2021_bleu_by_size",
             plots.plot_iot_sizes(info, title=f"{iot_paper.TABLE3}: BLEU vs N"))
    w.table(sec, "zhu2021_table3", t3)
    w.table(sec, "zhu2021_sizes", info.sizes)
    sec.inline.append(("Table 3", t3))
    w.published(w.section("Other published tables"), iot_paper.published_tables(),
                skip=("zhu2021_table3",))
    return w.write()


def builtin_study_report(name: str, out_dir: str | Path, *, straddle: str = "fractional",
                         adjust: str = "holm", study: str = "replication",
                         proxy: tuple[str, pd.DataFrame] | None = None) -> Report:
    """The report of a study shipped as data (``analysis/data/<name>_*``): ``replication``
    (the default) or ``sweep`` (:func:`experiment_report`, as for any sweep; ``proxy``: a
    proxy sweep of its orders, as there)."""
    from sublayer_search.analysis.report.replication import replication_report
    from sublayer_search.analysis.store.study_export import builtin_export

    export = builtin_export(name)
    wall = export.meta.get("wall_s")
    source = f"shipped export {name!r}" + (f", programme wall time {wall / 60:.0f} min"
                                           if isinstance(wall, int | float) else "")
    if study == "sweep":
        return experiment_report(export.trials, out_dir, title=f"Sweep {name!r} (shipped)",
                                 straddle=straddle, history=export.history, adjust=adjust,
                                 proxy=proxy)
    return replication_report(export.trials, export.history, out_dir,
                              title=f"{name}: this product's small-scale replication of "
                                    "Press et al. (2020)", source=source, straddle=straddle,
                              adjust=adjust)


def paper_report(out_dir: str | Path, *, straddle: str = "fractional",
                 adjust: str = "holm") -> Report:
    """Reproduce the Press et al. (2020) studies from the published numbers: Fig. 2 and 3
    (Tables 1 and 2 against the baseline), Fig. 4 (both tables pooled, as the paper
    defines it, and each table alone), Fig. 5 (sandwich), Fig. 6 (seeds), Table 7."""
    w = Writer(out_dir, "Press et al. (2020): sublayer reordering, published results")
    for table, label in ((1, "Table 1 (random permutations)"), (2, "Table 2 (budgeted)")):
        frame = paper.trials(table)
        sec = w.section(f"{label}: data", f"Source: {paper.SOURCE}, Table {table}.")
        w.table(sec, f"press2020_table{table}", frame)
        distribution_and_halves(w, frame, label=label, stem=f"table{table}",
                                metric=paper.METRIC, straddle=straddle, fig=f"Fig. {table + 1}",
                                halves_fig=f"Fig. 4, Table {table} alone")
    halves_section(w, paper.pooled_trials(), label="Tables 1 and 2 pooled (40 models)",
                   stem="fig4", metric=paper.METRIC, straddle=straddle, fig="Fig. 4",
                   text="As the paper defines Fig. 4: all random models of Tables 1 and 2 "
                        "together, split by the average of the five baselines. ")
    points = paper.sandwich_points()
    info = sandwich_curve(points)
    statements = paper.sandwich_statements()
    sec = w.section("Fig. 5: sandwich coefficient",
                    "Only k = 6 and k = 15 have stated dev perplexities; the strip under the "
                    "plot gives the paper's verbal statement for every k (no value).")
    sec.numbers += [(f"sandwich16_{int(r.k)} dev ppl", r.mean) for r in info.points.itertuples()]
    sec.numbers += [("stated: k beating the average baseline",
                     str(statements.loc[statements["beats_average"], "k"].tolist())),
                    ("stated: k beating the best baseline",
                     str(statements.loc[statements["beats_best"], "k"].tolist()))]
    w.figure(sec, "sandwich", plots.plot_sandwich(
        info, statements=statements,
        title="Fig. 5: sandwich models, dev perplexity against k (two stated values)"))
    w.table(sec, "sandwich_points", points)
    w.table(sec, "sandwich_statements", statements)
    seeds_section(w, seed_comparison_from_stats(paper.sandwich_seed_summary(), adjust=adjust),
                  label="sandwich16_6 (5 seeds)", stem="sandwich16_6")
    sec = w.section("Table 7: attention distance between models",
                    "Heads matched with the Hungarian algorithm, earth mover's distance "
                    "between their attention distributions, averaged over tokens and layers.")
    w.published(sec, {"attention_distances": paper.attention_distances()}, skip=(),
                prefix="press2020_")
    w.published(w.section("Other published tables"), paper.published_tables(),
                skip=("sandwich_statements", "attention_distances"), prefix="press2020_")
    return w.write()


def attach_to_sweep(
    out_dir: str | Path,
    *,
    experiment: str,
    tracking_uri: str | None = None,
    artifact_path: str = "analysis",
) -> str:
    """Log the report folder as artifacts of the sweep's parent run; returns its run id."""
    from mlflow.tracking import MlflowClient

    from sublayer_search.analysis.store.runs import find_sweep_run

    run_id = find_sweep_run(experiment, tracking_uri)
    if run_id is None:
        raise AnalysisError(
            f"experiment {experiment!r} has no parent run tagged {Tag.ROLE}={Role.SWEEP} to "
            "attach to"
        )
    MlflowClient(tracking_uri=tracking_uri).log_artifacts(run_id, str(out_dir), artifact_path)
    return run_id
