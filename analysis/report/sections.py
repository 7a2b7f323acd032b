"""The report sections every sweep shares: trials, distribution, halves, sandwich, seeds.

Each function runs (or is given) one study and adds its section to a
:class:`~analysis.report.writer.Writer`: key numbers, figures and tables.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pandas as pd

from sublayer_search.analysis.figures import plots as plots
from sublayer_search.analysis.report.writer import Writer
from sublayer_search.analysis.store.frame import BaselineStats
from sublayer_search.analysis.studies.distribution import distribution
from sublayer_search.analysis.studies.halves import halves_study
from sublayer_search.analysis.studies.sandwich import SandwichInfo, headline, leaders
from sublayer_search.analysis.studies.seeds import SeedsInfo
from sublayer_search.analysis.studies.significance import ADJUST_NAMES, PAIRED
from sublayer_search.spaces.kinds import hybrid_kinds

__all__ = ["distribution_and_halves", "halves_section", "sandwich_section", "seeds_section",
           "trials_section"]


def trials_section(w: Writer, frame: pd.DataFrame, *, metric: str, base: BaselineStats,
                   source: str | None, history: pd.DataFrame | None) -> None:
    sec = w.section("Trials")
    status = frame["status"].value_counts()
    sec.numbers += [("trials", len(frame)), ("metric", metric)]
    sec.numbers += [(f"status {s}", int(n)) for s, n in status.items()]
    sec.numbers.append(("baseline", f"{base.mean:.4g} ± {base.sd:.2g} (n={base.n}), "
                                    f"best {base.best:.4g}"
                                    + (f" ({source})" if source else "")))
    w.table(sec, "trials", frame)
    if history is not None and not history.empty:
        w.figure(sec, "history", plots.plot_history(history, frame, metric=metric))
        w.table(sec, "history", history)


SEEDS_REF = "see Fig. 6, over seeds, for tests"
"""Where a report's tests over seeds are (:func:`seeds_ref` when it may have none)."""
NO_SEEDS_REF = ("this sweep trains one seed per order, so nothing is tested: give the space "
                "more seeds, e.g. seeds: 3, to test orders over seeds")
GUIDANCE_REF = "see the guidance section for tests over seeds"


def seeds_ref(seeds: bool, guidance: bool = False) -> str:
    """The pointer to a report's tests over seeds: Fig. 6, the guidance section, or none."""
    return GUIDANCE_REF if guidance else SEEDS_REF if seeds else NO_SEEDS_REF


def distribution_and_halves(
    w: Writer, frame: pd.DataFrame, *, label: str, stem: str, metric: str, straddle: str,
    halves: bool = True, fig: str = "Fig. 2/3", halves_fig: str = "Fig. 4",
    seeds_ref: str = SEEDS_REF,
) -> None:
    """The distribution section (the paper's ``fig``: Fig. 2 for Table 1, Fig. 3 for
    Table 2) and, with ``halves``, the halves section (``halves_fig``)."""
    info = distribution(frame, metric=metric)
    sec = w.section(f"{fig}: {label}, every model against the baseline seeds")
    sec.text = ("Candidate trials against the baseline seeds. 'At least as good' means a "
                "value no worse than the reference (<= for perplexity/bpc/loss). These are "
                "counts of single runs, not tested claims: a claim that an order beats the "
                f"baseline needs several seeds ({seeds_ref}).")
    summary = info.summary()
    sec.numbers += [
        ("candidates", info.n_models),
        ("baseline mean ± sd", f"{info.baseline.mean:.4g} ± {info.baseline.sd:.2g}"),
        ("best baseline", info.baseline.best),
        ("at least as good as the average baseline",
         f"{info.count_at_least_average} of {info.n_models}"),
        ("at least as good as the best baseline",
         f"{info.count_at_least_best} of {info.n_models}"),
        ("best candidate", f"{summary['best_name']} = {summary['best_value']:.4g} "
                           f"({summary['best_order']})"),
        ("failed / diverged / killed (Ctrl-C) / still running", info.n_unusable),
    ]
    w.figure(sec, f"{stem}_distribution", plots.plot_distribution(info, title=(
        f"{fig}: {info.count_at_least_average} of {info.n_models} models at least as good as "
        "the average baseline\n(single runs against a mean: an untested count)")))
    w.table(sec, f"{stem}_distribution", info.models)
    w.table(sec, f"{stem}_distribution_summary", pd.DataFrame([summary]))
    if halves:
        halves_section(w, frame, label=label, stem=stem, metric=metric, straddle=straddle,
                       fig=halves_fig)


def halves_section(
    w: Writer, frame: pd.DataFrame, *, label: str, stem: str, metric: str, straddle: str,
    fig: str = "Fig. 4", text: str = "", scale: str | None = None,
) -> None:
    h = halves_study(frame, metric=metric, straddle=straddle)
    sec = w.section(f"{fig}: {label}, sublayers in the bottom and top halves")
    sec.text = (text + "Each model is cut in half by parameter count (f = 2 s-units); counts "
                f"of each sublayer kind per half, straddling sublayer counted '{straddle}'. "
                "'Better' = a value at least as good as the baseline mean: an untested "
                "grouping, not a claim that these models beat the baseline.")
    if scale:
        sec.numbers.append(("scale", scale))
    for group, n in h.group_sizes().items():
        if n:
            sec.numbers.append((
                f"{group} (n={n}, untested grouping): mean s bottom / top",
                f"{h.mean(group, 'bottom', 's'):.2f} / {h.mean(group, 'top', 's'):.2f}"))
            sec.numbers.append((
                f"{group} (n={n}, untested grouping): mean f bottom / top",
                f"{h.mean(group, 'bottom', 'f'):.2f} / {h.mean(group, 'top', 'f'):.2f}"))
    hybrid = list(hybrid_kinds("".join(dict.fromkeys(h.means["kind"]))))
    if hybrid:  # the hybrid kinds: where each sits, and a test per kind
        sec.text += (" The hybrid kinds weigh the s-units each trial recorded; per kind, a "
                     "Mann–Whitney test of its bottom-half count, Holm-adjusted over the kinds.")
        _hybrid_numbers(sec, h, hybrid)
    if h.mann_whitney is not None:
        mw = h.mann_whitney
        sec.numbers.append(("Mann–Whitney U, bottom-half s (better vs not)",
                            f"U = {mw.statistic:.1f}, p = {mw.pvalue:.3g}, "
                            f"rank-biserial r = {mw.rank_biserial:+.2f}"))
    if h.spearman is not None:
        sec.numbers.append(("Spearman: metric vs bottom-half attention share",
                            f"rho = {h.spearman.rho:+.2f}, p = {h.spearman.pvalue:.3g}, "
                            f"n = {h.spearman.n}"))
    w.figure(sec, f"{stem}_halves", plots.plot_halves(
        h, title=f"{fig}: mean sublayer counts per half\nmodels grouped at the baseline "
                 "mean (an untested grouping)"))
    w.figure(sec, f"{stem}_position_map", plots.plot_position_map(
        h, title=f"{fig}, by depth: share of parameters in self-attention"))
    w.table(sec, f"{stem}_halves_models", h.models)
    present = [k for k in dict.fromkeys(h.means["kind"]) if f"bottom_{k}" in h.models
               and (h.models[[f"bottom_{k}", f"top_{k}"]] > 0).any(axis=None)]
    w.table(sec, f"{stem}_halves_means", h.means[h.means["kind"].isin(present)])
    w.table(sec, f"{stem}_position_map", h.position)
    tests = []
    if h.mann_whitney is not None:
        tests.append({"test": "mann_whitney_bottom_s", **asdict(h.mann_whitney)})
    if h.spearman is not None:
        tests.append({"test": "spearman_metric_bottom_share", **asdict(h.spearman)})
    if tests:
        w.table(sec, f"{stem}_halves_tests", pd.DataFrame(tests))
    if hybrid and h.per_kind is not None and len(h.per_kind):
        w.table(sec, f"{stem}_halves_per_kind", h.per_kind)


def _hybrid_numbers(sec: Any, h: Any, hybrid: list[str]) -> None:
    for group, n in h.group_sizes().items():
        for kind in hybrid if n else []:
            sec.numbers.append((
                f"{group} (n={n}, untested grouping): mean {kind} bottom / top",
                f"{h.mean(group, 'bottom', kind):.2f} / {h.mean(group, 'top', kind):.2f}"))
    for row in ([] if h.per_kind is None else h.per_kind.to_dict("records")):
        sec.numbers.append((
            f"Mann–Whitney U, bottom-half {row['kind']} (better vs not)",
            f"U = {row['U']:.1f}, p = {row['p']:.3g}, Holm-adjusted p = "
            f"{row['p_adjusted']:.3g}, rank-biserial r = {row['rank_biserial']:+.2f}"))


def sandwich_section(w: Writer, info: SandwichInfo, *,
                     title: str = "Fig. 5: sandwich coefficient",
                     stem: str = "sandwich", vs_best: bool = True, adjust: str = "holm",
                     scale: str | None = None, seeds_ref: str = SEEDS_REF) -> None:
    """The k with the lowest mean, the set of k that cannot be told apart from it
    (:func:`analysis.studies.sandwich.leaders`), the ks at least as good as the average
    (and, with ``vs_best``, the best) baseline, the curve and its points."""
    lead = leaders(info, adjust=adjust)
    top = lead.attrs["best_k"]
    sec = w.section(title)
    sec.text = ("Mean per k against the baseline seeds; 'at least as good' compares means "
                f"and is not a tested claim ({seeds_ref}). The k with the "
                "best mean is tested against every other k with Welch's t over every seed "
                "(a shared seed shares the batch order only, not the initial weights, so "
                "the paired t-test over shared seeds is shown beside it, never deciding); "
                f"{ADJUST_NAMES[adjust]} over the comparisons, alpha "
                f"{lead.attrs['alpha']:g}; the table has both tests side by side, column "
                "'decides' names the one that decides; a 'best k' is named only when no "
                "other k is left in its set.")
    if scale:
        sec.numbers.append(("scale", scale))
    if not lead.attrs["tested"]:
        best_text = f"k = {top} has the best mean (one run per k: untested, no best k claimed)"
    elif len(lead.attrs["leaders"]) == 1:
        best_text = f"k = {top}: every other k is told apart from it (tested)"
    else:
        ks = ", ".join(map(str, sorted(lead.attrs["leaders"])))
        best_text = (f"k = {top} has the best mean, but k = {ks} cannot be told apart from it "
                     "(no best k claimed)")
    if lead.attrs["tested"]:
        sec.numbers.append(("decides", f"{lead.attrs['decides']} ("
                                       f"{lead.attrs['comparisons']} comparisons)"))
    head = headline(lead)
    sec.numbers += [("best k", best_text),
                    ("k at least as good as the average baseline",
                     str(info.ks_beating("average")))]
    if vs_best:
        sec.numbers.append(("k at least as good as the best baseline",
                            str(info.ks_beating("best"))))
    w.figure(sec, stem, plots.plot_sandwich(info, title=f"{title.split(':')[0]}: "
                                               f"{info.metric} against the sandwich "
                                               f"coefficient k\n{head}"))
    w.table(sec, stem, info.points)
    w.table(sec, f"{stem}_leaders", lead)


def seeds_section(w: Writer, info: SeedsInfo, *, label: str, stem: str,
                  scale: str | None = None) -> None:
    sec = w.section(f"Fig. 6: {label}, over seeds against the baseline")
    rule = str(info.table["decides"].iloc[0]) if len(info.table) else "unpaired (no test)"
    test = ("the paired t-test over the seeds each order shares with the baseline (every "
            "order's seeds are all among the baseline's, and a seed fixes the initial "
            "weights as well as the batches)"
            if rule == PAIRED else "Welch's t-test per order against every baseline seed")
    label = rule.replace("unpaired (", "unpaired: ").rstrip(")") if rule != PAIRED else rule
    sec.text = (f"Test that decides ({label}): {test}; p-values adjusted for the number of "
                f"orders compared ({ADJUST_NAMES[info.adjust]}). 'Better' (or 'worse') than "
                f"the baseline is claimed only when the adjusted p is below alpha "
                f"{info.alpha:g} and the {info.confidence:.0%} confidence interval of the "
                "difference (paired t interval, or Welch t interval: with few seeds a "
                "percentile bootstrap is too narrow) excludes 0 on that side; otherwise 'no "
                "evidence'. A seed here fixes the batch order only: different orders draw "
                "their initial weights differently, so the pairing of shared seeds is not "
                "real and Welch's t over every seed decides; the paired t-test over shared "
                "seeds is shown beside it and never decides. Both are in the "
                "table side by side (welch_p_adjusted, welch_verdict, paired_p_adjusted, "
                "paired_verdict; 'decides' names the one that decides). The Wilcoxon "
                "signed-rank test over shared seeds is shown, unadjusted, and never decides "
                "(with n pairs its exact two-sided p cannot go below 2 / 2^n: 0.25 for 3). "
                "Each line gives the effect (difference of means) with its interval, the "
                "baseline's seed sd, the seeds per arm that would detect the observed "
                "difference at 80% power (post hoc: computed from the observed effect) and "
                "the planned power of this design for a stated difference of one baseline "
                "seed sd (two-sided t, alpha 0.05).")
    if len(info.table):
        calls = info.table["verdict"].value_counts()
        sec.numbers.append(("decides", f"{rule}: {int(calls.get('better', 0))} better, "
                                       f"{int(calls.get('worse', 0))} worse, "
                                       f"{int(calls.get('no evidence', 0))} no evidence of "
                                       f"{len(info.table)}"))
    if scale:
        sec.numbers.append(("scale", scale))
    for _, row in info.table.iterrows():
        sec.numbers.append((str(row["name"]), str(row["statement"])))
    w.figure(sec, f"{stem}_seeds", plots.plot_seeds(info))
    w.table(sec, f"{stem}_seeds", info.table)
