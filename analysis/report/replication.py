"""The report of a complete replication of Press et al. (2020) run with this product.

``sublayer analyze --paper mini_press2020`` runs it on the shipped export
(``analysis/data/mini_press2020_*``); any sweep with the same families (random
permutations, budgeted draws, sandwiches with seeds, baseline seeds) can use it. It
answers, each with its test, adjusted p-values and intervals:

(a) how many random orders beat the average baseline (:func:`replication.single_runs`);
(b) Fig. 4 at this scale: more ``s`` in the bottom half and ``f`` in the top half for the
    better models, claimed within each family (:func:`replication.by_family`: the
    families differ in attention budget), the random models of both tables pooled
    (halves study) shown as the paper defines Fig. 4;
(c) the sandwich curve against the baseline seeds' band, each k tested against the seeds
    (Welch's t over every baseline seed decides: a shared seed shares the batch order,
    not the initial weights; the paired t-test beside it, never deciding; Holm over the
    k), and
    the set of k that cannot be told apart from the best mean;
(d) seed noise against the differences between orders (:func:`replication.noise`), per
    family and pooled;
and where training stands at the end (the slope of the learning curves). Every answer
carries the scale it holds at (:func:`replication.scale_statement`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from sublayer_search.analysis.figures.replication import plot_overview, plot_single_runs
from sublayer_search.analysis.report.pareto import pareto_section
from sublayer_search.analysis.report.sections import (
    distribution_and_halves,
    halves_section,
    sandwich_section,
    seeds_section,
    trials_section,
)
from sublayer_search.analysis.report.writer import Report, Writer
from sublayer_search.analysis.store.frame import (
    baseline_stats,
    select_metric,
    usable,
    validate_trials,
)
from sublayer_search.analysis.studies.halves import halves_study
from sublayer_search.analysis.studies.replication import (
    RANDOM_FAMILIES,
    by_family,
    end_slopes,
    noise,
    scale_statement,
    single_runs,
)
from sublayer_search.analysis.studies.sandwich import sandwich_curve
from sublayer_search.analysis.studies.seeds import seed_comparison
from sublayer_search.analysis.studies.significance import ADJUST_NAMES
from sublayer_search.spaces.generators.sandwich import SANDWICH

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
    families = by_family(frame, metric, straddle=straddle) if random else None
    scale = scale_statement(frame, history, metric)
    plain = frame[(frame["family"] == SANDWICH) | frame["baseline"]]
    sandwiches = plain["k"].notna().any()
    verdicts = seed_comparison(plain, metric=metric, adjust=adjust) if sandwiches else None
    sec = w.section("The study at a glance")
    sec.numbers.append(("scale", scale))
    w.figure(sec, "overview", plot_overview(frame, base, halves, metric=metric, title=title,
                                            families=families,
                                            verdicts=None if verdicts is None else verdicts.table))
    if history is not None and not history.empty:
        _slopes_section(w, history, frame, metric)
    for family, label, fig in _TABLES:
        sub = frame[(frame["family"] == family) | frame["baseline"]]
        if (sub["family"] == family).any():
            distribution_and_halves(w, sub, label=label, stem=family, metric=metric,
                                    straddle=straddle, halves=False, fig=fig)
    _single_runs_section(w, frame, metric, adjust, scale)
    if random and families is not None:
        halves_section(w, pooled, label="random models of both tables pooled", stem="fig4",
                       metric=metric, straddle=straddle, fig="(b) Fig. 4",
                       text="As the paper defines Fig. 4: every random model (permutations "
                            "and budgeted draws) split by the average of the baseline seeds. "
                            "The families differ in attention budget (budgeted draws vary "
                            "their number of s), so the pooled test mixes the order's effect "
                            "with more attention: the claim is made per family ('(b, d)' "
                            "section), not pooled. ",
                       scale=scale)
        _family_section(w, families, scale)
    if verdicts is not None:
        sandwich_section(w, sandwich_curve(plain, metric=metric),
                         title="(c) Fig. 5: sandwich coefficient", adjust=adjust, scale=scale)
        seeds_section(w, verdicts, label="(c) sandwich coefficients", stem="sandwich",
                      scale=scale)
    _noise_section(w, frame, metric, scale)
    pareto_section(w, frame, metric=metric)  # budgeted draws vary the cost: a front
    return w.write()


def _family_section(w: Writer, families: pd.DataFrame, scale: str) -> None:
    sec = w.section("(b, d) Each family alone and pooled")
    sec.text = ("The two random families differ: permutations all hold 6 s + 6 f, budgeted "
                "draws vary their s/f mix. The Fig. 4 pattern (Spearman of the metric with the "
                "bottom-half share of s; Mann–Whitney of bottom-half s, at least as good as the "
                "baseline mean vs not) and the variance share of (d) for each family alone and "
                "pooled; a pooled figure that one family does not show rests on the other.")
    sec.numbers.append(("scale", scale))
    for r in families.itertuples():
        sec.numbers += [
            (f"{r.family} (n={r.n}): Fig. 4 pattern",
             f"Spearman rho = {r.spearman_rho:+.2f}, p = {r.spearman_p:.2g}; Mann–Whitney "
             f"p = {r.mann_whitney_p:.2g} ({r.n_better} at least as good as the baseline "
             "mean, untested)"),
            (f"{r.family} (n={r.n}): variance ratio orders / seeds",
             f"{r.variance_ratio:.2g} [95% CI {r.ratio_ci_low:.2g}, {r.ratio_ci_high:.2g}], "
             f"two-sided F-test p = {r.ratio_p:.2g}; share beyond seed noise "
             f"{r.order_share:.0%} [95% CI {r.share_ci_low:.0%}, {r.share_ci_high:.0%}]")]
    w.table(sec, "by_family", families)


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


def _single_runs_section(w: Writer, frame: pd.DataFrame, metric: str, adjust: str,
                         scale: str) -> None:
    runs = single_runs(frame, metric, adjust=adjust)
    if runs.empty:
        return
    sec = w.section("(a) Random orders against the average baseline, tested")
    one = runs.attrs["one_seed"]
    sec.text = ("An order trained with one seed cannot estimate its own seed noise, so its "
                "test assumes that noise is the baseline's: the difference from the baseline "
                "mean over sd * sqrt(1 + 1/n) follows Student's t with n - 1 degrees of "
                f"freedom (n = {runs.attrs['baseline_n']} baseline seeds; a prediction-interval "
                "test). An order with several seeds is tested with its own variance (Welch's t "
                "and t interval). Columns 'test' and 'assumption' say which, per order. "
                f"p-values adjusted over the {len(runs)} orders ({ADJUST_NAMES[adjust]}); "
                f"'better' needs the adjusted p below {runs.attrs['alpha']:g} and the "
                f"{runs.attrs['confidence']:.0%} interval below 0.")
    sec.numbers.append(("scale", scale))
    sec.numbers.append(("assumption", f"{one} of {len(runs)} orders have one seed: their seed sd "
                                      f"is taken to be the baseline's "
                                      f"{runs.attrs['baseline_sd']:.2g}"))
    several = _seed_sds(frame, metric)
    if several:
        sec.numbers.append(("seed sd of the orders trained with several seeds (any family)",
                            f"{min(several):.3f} to {max(several):.3f} over {len(several)} "
                            f"orders (baseline {runs.attrs['baseline_sd']:.2g}): the "
                            "equal-noise assumption is a simplification"))
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


def _seed_sds(frame: pd.DataFrame, metric: str) -> list[float]:
    rows = usable(frame, metric)
    rows = rows[~rows["baseline"]]
    sds = rows.groupby("order")["final"].agg(["std", "count"])
    return [float(s) for s in sds.loc[sds["count"] >= 2, "std"]]


def _noise_section(w: Writer, frame: pd.DataFrame, metric: str, scale: str) -> None:
    study = noise(frame, metric)
    sec = w.section("(d) Seed noise against the differences between orders")
    sec.text = ("The random orders (one seed each) vary by their order and by seed noise; "
                "the baseline seeds by seed noise alone. Two-sided F-test of equal variances "
                "and 95% interval of the variance ratio; the share of the orders' variance "
                "seed noise does not explain, with the interval the ratio's implies (it "
                "takes every order's seed sd to be the baseline's). Sandwich: one-way ANOVA over k (k = 0: the "
                "baseline seeds) and the intraclass correlation (share of variance between k).")
    lo, hi = study.ratio_ci
    sec.text += (" Pooled over both random families here; each family alone is in the "
                 "'(b, d)' section.")
    sec.numbers.append(("scale", scale))
    sec.numbers += [
        ("seed sd (baseline seeds)", f"{study.seed_sd:.4g} (n={study.seed_n})"),
        ("sd over random orders", f"{study.order_sd:.4g} (n={study.order_n})"),
        ("variance ratio orders / seeds", f"{study.variance_ratio:.3g} "
                                          f"[95% CI {lo:.3g}, {hi:.3g}], F-test p = "
                                          f"{study.ratio_p:.3g}"),
        ("share of the orders' variance beyond seed noise (pooled)",
         f"{study.order_share:.2f} [95% CI {study.share_ci[0]:.2f}, {study.share_ci[1]:.2f}]"),
        ("sandwich: ANOVA over k", f"F = {study.anova_f:.3g}, p = {study.anova_p:.3g}, "
                                   f"ICC = {study.icc:.2f} ({study.anova_groups} groups)")]
    w.table(sec, "noise", study.rows())
