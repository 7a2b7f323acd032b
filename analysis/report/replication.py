"""The report of a complete replication of Press et al. (2020) run with this product.

``sublayer analyze --paper mini_press2020`` runs it on the shipped export
(``analysis/data/mini_press2020_*``); any sweep with the same families (random
permutations, budgeted draws, sandwiches with seeds, baseline seeds) can use it. It
answers, each with its test, adjusted p-values and intervals:

(a) how many random orders beat the average baseline (:func:`replication.single_runs`);
(b) Fig. 4 at this scale: more ``s`` in the bottom half and ``f`` in the top half for the
    better models, pooled over the random models of both tables (halves study);
(c) the sandwich curve against the baseline seeds' band, each k tested against the seeds;
(d) seed noise against the differences between orders (:func:`replication.noise`);
and where training stands at the end (the slope of the learning curves).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sublayer_search.analysis.figures.replication import plot_overview, plot_single_runs
from sublayer_search.analysis.report.sections import (
    distribution_and_halves,
    halves_section,
    sandwich_section,
    seeds_section,
    trials_section,
)
from sublayer_search.analysis.report.writer import Report, Writer
from sublayer_search.analysis.store.frame import baseline_stats, select_metric, validate_trials
from sublayer_search.analysis.studies.halves import halves_study
from sublayer_search.analysis.studies.replication import (
    RANDOM_FAMILIES,
    end_slopes,
    noise,
    single_runs,
)
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison
from sublayer_search.analysis.studies.significance import ADJUST_NAMES

__all__ = ["replication_report"]

_TABLES = (("permutations", "Table 1 analogue: random permutations", "Fig. 2"),
           ("budgeted", "Table 2 analogue: parameter-budgeted draws", "Fig. 3"))


def replication_report(trials: pd.DataFrame, history: pd.DataFrame | None, out_dir: str | Path,
                       *, title: str, source: str = "", straddle: str = "fractional",
                       adjust: str = "holm") -> Report:
    """Write the replication's report (HTML, figures, CSV tables) to ``out_dir``."""
    frame = validate_trials(trials)
    metric = select_metric(frame, None)
    base = baseline_stats(frame, metric)
    w = Writer(out_dir, title)
    trials_section(w, frame, metric=metric, base=base, source=source or None, history=history)
    pooled = frame[frame["family"].isin(RANDOM_FAMILIES) | frame["baseline"]]
    random = bool((pooled["family"].isin(RANDOM_FAMILIES) & ~pooled["baseline"]).any())
    halves = halves_study(pooled, metric=metric, straddle=straddle) if random else None
    sec = w.section("The study at a glance")
    w.figure(sec, "overview", plot_overview(frame, base, halves, metric=metric, title=title))
    if history is not None and not history.empty:
        _slopes_section(w, history, frame, metric)
    for family, label, fig in _TABLES:
        sub = frame[(frame["family"] == family) | frame["baseline"]]
        if (sub["family"] == family).any():
            distribution_and_halves(w, sub, label=label, stem=family, metric=metric,
                                    straddle=straddle, halves=False, fig=fig)
    _single_runs_section(w, frame, metric, adjust)
    if random:
        halves_section(w, pooled, label="random models of both tables pooled", stem="fig4",
                       metric=metric, straddle=straddle, fig="(b) Fig. 4",
                       text="As the paper defines Fig. 4: every random model (permutations "
                            "and budgeted draws) split by the average of the baseline seeds. ")
    plain = frame[(frame["family"] == "sandwich") | frame["baseline"]]
    if plain["k"].notna().any():
        sandwich_section(w, sandwich_curve(plain, metric=metric),
                         title="(c) Fig. 5: sandwich coefficient")
        seeds_section(w, seed_comparison(plain, metric=metric, adjust=adjust),
                      label="(c) sandwich coefficients", stem="sandwich")
    _noise_section(w, frame, metric)
    return w.write()


def _slopes_section(w: Writer, history: pd.DataFrame, frame: pd.DataFrame, metric: str) -> None:
    slopes = end_slopes(history, frame, metric)
    sec = w.section("Learning curves: where training stands at the end",
                    "Least-squares slope of the validation metric over each trial's first "
                    "three and last three evaluations, per 1,000 steps (negative: still "
                    "improving). The ratio says how much of the early pace is left.")
    if not slopes.empty:
        sec.numbers += [
            ("median early slope per 1k steps", f"{slopes['early_slope_per_1k'].median():.4g}"),
            ("median end slope per 1k steps", f"{slopes['end_slope_per_1k'].median():.4g}"),
            ("median end / early slope", f"{slopes['end_to_early'].median():.3f}"),
            ("largest end / early slope", f"{slopes['end_to_early'].max():.3f}")]
    w.table(sec, "end_slopes", slopes)


def _single_runs_section(w: Writer, frame: pd.DataFrame, metric: str, adjust: str) -> None:
    runs = single_runs(frame, metric, adjust=adjust)
    if runs.empty:
        return
    sec = w.section("(a) Random orders against the average baseline, tested")
    sec.text = ("Each random order was trained with one seed, so its own seed noise is taken "
                "to be the baseline's: the difference from the baseline mean over "
                f"sd * sqrt(1 + 1/n) follows Student's t with n - 1 degrees of freedom "
                f"(n = {runs.attrs['baseline_n']} baseline seeds). p-values adjusted over the "
                f"{len(runs)} orders ({ADJUST_NAMES[adjust]}); 'better' needs the adjusted p "
                f"below {runs.attrs['alpha']:g} and the {runs.attrs['confidence']:.0%} interval "
                "below 0.")
    counts = runs["verdict"].value_counts()
    for family in RANDOM_FAMILIES:
        fam = runs[runs["family"] == family]
        if not fam.empty:
            sec.numbers.append((f"{family}: at least as good as the average baseline",
                                f"{int(fam['beats_average'].sum())} of {len(fam)}"))
    sec.numbers += [("random orders at least as good as the average baseline",
                     f"{int(runs['beats_average'].sum())} of {len(runs)}"),
                    ("better than the baseline (tested, adjusted)",
                     f"{int(counts.get('better', 0))} of {len(runs)}"),
                    ("worse than the baseline (tested, adjusted)",
                     f"{int(counts.get('worse', 0))} of {len(runs)}"),
                    ("smallest adjusted p", f"{runs['p_adjusted'].min():.3g}")]
    w.figure(sec, "random_orders_tested", plot_single_runs(runs, metric=metric))
    w.table(sec, "random_orders_tested", runs)


def _noise_section(w: Writer, frame: pd.DataFrame, metric: str) -> None:
    study = noise(frame, metric)
    sec = w.section("(d) Seed noise against the differences between orders")
    sec.text = ("The random orders (one seed each) vary by their order and by seed noise; "
                "the baseline seeds by seed noise alone. F-test (one-sided: orders vary more) "
                "and 95% interval of the variance ratio; the share of the orders' variance "
                "seed noise does not explain. Sandwich: one-way ANOVA over k (k = 0: the "
                "baseline seeds) and the intraclass correlation (share of variance between k).")
    lo, hi = study.ratio_ci
    sec.numbers += [
        ("seed sd (baseline seeds)", f"{study.seed_sd:.4g} (n={study.seed_n})"),
        ("sd over random orders", f"{study.order_sd:.4g} (n={study.order_n})"),
        ("variance ratio orders / seeds", f"{study.variance_ratio:.3g} "
                                          f"[95% CI {lo:.3g}, {hi:.3g}], F-test p = "
                                          f"{study.ratio_p:.3g}"),
        ("share of the orders' variance beyond seed noise", f"{study.order_share:.2f}"),
        ("sandwich: ANOVA over k", f"F = {study.anova_f:.3g}, p = {study.anova_p:.3g}, "
                                   f"ICC = {study.icc:.2f} ({study.anova_groups} groups)")]
    w.table(sec, "noise", study.rows())
