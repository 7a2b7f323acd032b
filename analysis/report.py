"""Write an analysis report: figures (PNG + SVG), one CSV per table, a one-page HTML.

Layout of ``out_dir``: ``figures/<name>.png|.svg``, ``tables/<name>.csv``, ``report.html``.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from . import iot_paper, paper, plots
from .distribution import distribution
from .errors import AnalysisError
from .frame import baseline_stats, candidates, select_metric, validate_trials
from .halves import halves_study
from .iot import (
    BASELINE_TRIALS,
    iot_baseline,
    is_translation,
    routing_matrix,
    routing_shares,
    subset_study,
    translation_seeds,
)
from .sandwich import sandwich_curve
from .seeds import seed_comparison, seed_comparison_from_stats

__all__ = ["Report", "attach_to_sweep", "experiment_report", "iot_paper_report", "paper_report"]


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:auto} img{max-width:49%} "
    "td,th{padding:2px 8px;text-align:left} table{border-collapse:collapse} "
    "tr:nth-child(even){background:#f4f4f4}"
)


@dataclass(frozen=True, kw_only=True)
class Report:
    """Paths written by a report and its key numbers (label -> value)."""

    out_dir: Path
    html: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]
    numbers: dict[str, object]


@dataclass
class _Section:
    title: str
    text: str = ""
    figures: list[str] = field(default_factory=list)
    numbers: list[tuple[str, object]] = field(default_factory=list)
    tables: list[str] = field(default_factory=list)
    inline: list[tuple[str, pd.DataFrame]] = field(default_factory=list)


class _Writer:
    def __init__(self, out_dir: str | Path, title: str) -> None:
        self.out = Path(out_dir)
        self.title = title
        self.sections: list[_Section] = []
        self.figures: list[Path] = []
        self.tables: list[Path] = []
        (self.out / "figures").mkdir(parents=True, exist_ok=True)
        (self.out / "tables").mkdir(parents=True, exist_ok=True)

    def section(self, title: str, text: str = "") -> _Section:
        self.sections.append(_Section(title, text))
        return self.sections[-1]

    def figure(self, section: _Section, name: str, fig: Figure) -> None:
        for ext in ("png", "svg"):
            path = self.out / "figures" / f"{name}.{ext}"
            fig.savefig(path, dpi=120 if ext == "png" else None)
            self.figures.append(path)
        plt.close(fig)
        section.figures.append(name)

    def table(self, section: _Section, name: str, frame: pd.DataFrame, *, index=False) -> None:
        path = self.out / "tables" / f"{name}.csv"
        frame.to_csv(path, index=index)
        self.tables.append(path)
        section.tables.append(name)

    def numbers(self) -> dict[str, object]:
        return {f"{s.title}: {k}": v for s in self.sections for k, v in s.numbers}

    def write(self) -> Report:
        path = self.out / "report.html"
        path.write_text(self._html(), encoding="utf-8")
        return Report(out_dir=self.out, html=path, figures=tuple(self.figures),
                      tables=tuple(self.tables), numbers=self.numbers())

    def _html(self) -> str:
        esc = html.escape
        parts = [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{esc(self.title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>{esc(self.title)}</h1>",
        ]
        for s in self.sections:
            parts.append(f"<h2>{esc(s.title)}</h2>")
            if s.text:
                parts.append(f"<p>{esc(s.text)}</p>")
            if s.numbers:
                parts.append("<table>")
                parts += [f"<tr><th>{esc(k)}</th><td>{esc(_fmt(v))}</td></tr>" for k, v in
                          s.numbers]
                parts.append("</table>")
            parts += [f"<img src='figures/{esc(n)}.svg' alt='{esc(n)}'>" for n in s.figures]
            for caption, frame in s.inline:
                parts.append(f"<h3>{esc(caption)}</h3>")
                parts.append(_blank_missing(frame).to_html(index=False))
            if s.tables:
                links = ", ".join(f"<a href='tables/{esc(n)}.csv'>{esc(n)}.csv</a>"
                                  for n in s.tables)
                parts.append(f"<p>Tables: {links}</p>")
        parts.append("</body></html>")
        return "\n".join(parts)


def _blank_missing(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype(object).map(lambda v: "" if v is None or v is pd.NA or (
        isinstance(v, float) and math.isnan(v)) else _fmt(v))


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _distribution_and_halves(
    w: _Writer, frame: pd.DataFrame, *, label: str, stem: str, metric: str, straddle: str,
    halves: bool = True,
) -> None:
    info = distribution(frame, metric=metric)
    sec = w.section(f"{label}: distribution")
    sec.text = ("Candidate trials against the baseline seeds. 'At least as good' means a "
                "value no worse than the reference (<= for perplexity/bpc/loss).")
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
        ("failed / diverged / unfinished", info.n_unusable),
    ]
    w.figure(sec, f"{stem}_distribution", plots.plot_distribution(info))
    w.table(sec, f"{stem}_distribution", info.models)
    w.table(sec, f"{stem}_distribution_summary", pd.DataFrame([summary]))
    if halves:
        _halves_section(w, frame, label=label, stem=stem, metric=metric, straddle=straddle)


def _halves_section(
    w: _Writer, frame: pd.DataFrame, *, label: str, stem: str, metric: str, straddle: str
) -> None:
    h = halves_study(frame, metric=metric, straddle=straddle)
    sec = w.section(f"{label}: bottom / top halves")
    sec.text = ("Each model is cut in half by parameter count (f = 2 s-units); counts of each "
                f"sublayer kind per half, straddling sublayer counted '{straddle}'.")
    for group, n in h.group_sizes().items():
        if n:
            sec.numbers.append((
                f"{group} (n={n}): mean s bottom / top",
                f"{h.mean(group, 'bottom', 's'):.2f} / {h.mean(group, 'top', 's'):.2f}"))
            sec.numbers.append((
                f"{group} (n={n}): mean f bottom / top",
                f"{h.mean(group, 'bottom', 'f'):.2f} / {h.mean(group, 'top', 'f'):.2f}"))
    if h.mann_whitney is not None:
        mw = h.mann_whitney
        sec.numbers.append(("Mann–Whitney U, bottom-half s (better vs not)",
                            f"U = {mw.statistic:.1f}, p = {mw.pvalue:.3g}, "
                            f"rank-biserial r = {mw.rank_biserial:+.2f}"))
    if h.spearman is not None:
        sec.numbers.append(("Spearman: metric vs bottom-half attention share",
                            f"rho = {h.spearman.rho:+.2f}, p = {h.spearman.pvalue:.3g}, "
                            f"n = {h.spearman.n}"))
    w.figure(sec, f"{stem}_halves", plots.plot_halves(h))
    w.figure(sec, f"{stem}_position_map", plots.plot_position_map(h))
    w.table(sec, f"{stem}_halves_models", h.models)
    w.table(sec, f"{stem}_halves_means", h.means)
    w.table(sec, f"{stem}_position_map", h.position)
    tests = []
    if h.mann_whitney is not None:
        tests.append({"test": "mann_whitney_bottom_s", **asdict(h.mann_whitney)})
    if h.spearman is not None:
        tests.append({"test": "spearman_metric_bottom_share", **asdict(h.spearman)})
    if tests:
        w.table(sec, f"{stem}_halves_tests", pd.DataFrame(tests))


def _seeds_section(w: _Writer, info, *, label: str, stem: str) -> None:
    sec = w.section(f"{label}: seeds")
    sec.text = ("'Better than the baseline' is claimed only when Welch's t-test is significant "
                f"(alpha {info.alpha:g}) and the {info.confidence:.0%} confidence interval of "
                "the difference excludes 0 on the better side.")
    for _, row in info.table.iterrows():
        sec.numbers.append((str(row["name"]), str(row["statement"])))
    w.figure(sec, f"{stem}_seeds", plots.plot_seeds(info))
    w.table(sec, f"{stem}_seeds", info.table)


def experiment_report(
    frame: pd.DataFrame,
    out_dir: str | Path,
    *,
    title: str,
    metric: str | None = None,
    straddle: str = "fractional",
    history: pd.DataFrame | None = None,
    routing: pd.DataFrame | None = None,
) -> Report:
    """Run every study that applies to a sweep's trial frame and write the report.

    Always: trials table and status counts; with candidates: distribution and halves;
    with sandwich coefficients: sandwich curve; with ≥ 2 seeds of an order: seeds.
    A translation sweep (param ``task`` = translation or a BLEU metric) gets the
    translation sections instead (see :func:`_translation_sections`); ``routing`` is
    ``runs.load_routing``'s frame for the per-split x per-order BLEU matrix.
    AnalysisError when the frame has no metric or no finished baseline.
    """
    frame = validate_trials(frame)
    if frame.empty:
        raise AnalysisError("the experiment has no trial runs (tag sublayer.role=trial)")
    metric = select_metric(frame, metric)
    if is_translation(frame):
        return _translation_report(frame, out_dir, title=title, metric=metric,
                                   history=history, routing=routing)
    base = baseline_stats(frame, metric)
    w = _Writer(out_dir, title)
    _trials_section(w, frame, metric=metric, base=base, source=None, history=history)
    cands = candidates(frame, metric)
    if not cands.empty:
        _distribution_and_halves(w, frame, label="Sweep", stem="sweep", metric=metric,
                                 straddle=straddle)
        if cands["k"].notna().any():
            info = sandwich_curve(frame, metric=metric)
            sec = w.section("Sandwich coefficient")
            sec.numbers += [("best k", info.best_k),
                            ("k at least as good as the average baseline",
                             str(info.ks_beating("average"))),
                            ("k at least as good as the best baseline",
                             str(info.ks_beating("best")))]
            w.figure(sec, "sandwich", plots.plot_sandwich(info))
            w.table(sec, "sandwich", info.points)
        if cands.groupby("order").size().max() >= 2:
            _seeds_section(w, seed_comparison(frame, metric=metric), label="Sweep", stem="sweep")
    return w.write()


def _trials_section(w: _Writer, frame: pd.DataFrame, *, metric: str, base, source: str | None,
                    history: pd.DataFrame | None) -> None:
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


def _translation_report(
    frame: pd.DataFrame, out_dir: str | Path, *, title: str, metric: str,
    history: pd.DataFrame | None, routing: pd.DataFrame | None,
) -> Report:
    """Translation sweep: trials; distribution (when baseline trials exist); sandwich
    curve per side; the IOT studies (BLEU per subset and per size, the paper's Table 3
    beside it, routing shares, routing matrix); seeds per candidate. No halves study:
    the ``order`` of a translation trial is its decoder order only."""
    if "bleu" not in metric.lower():
        raise AnalysisError(f"a translation sweep is studied on a BLEU metric, got {metric!r}")
    base, source = iot_baseline(frame, metric)
    w = _Writer(out_dir, title)
    _trials_section(w, frame, metric=metric, base=base, source=source, history=history)
    cands = candidates(frame, metric)
    if cands.empty:
        return w.write()
    if source == BASELINE_TRIALS:
        _distribution_and_halves(w, frame, label="Sweep", stem="sweep", metric=metric,
                                 straddle="fractional", halves=False)
        if cands["k"].notna().any():
            sides = frame["side"] if "side" in frame.columns else pd.Series(None,
                                                                            index=frame.index)
            for side in sorted({s for s in sides[cands.index] if isinstance(s, str)}) or [None]:
                keep = frame["baseline"] | (sides == side if side else sides.isna())
                info = sandwich_curve(frame[keep], metric=metric)
                label = f" ({side} side)" if side else ""
                sec = w.section(f"Sandwich coefficient{label}")
                sec.numbers += [("best k", info.best_k),
                                ("k at least as good as the average baseline",
                                 str(info.ks_beating("average")))]
                stem = f"sandwich_{side}" if side else "sandwich"
                w.figure(sec, stem, plots.plot_sandwich(info))
                w.table(sec, stem, info.points)
    if "subset" in frame.columns and cands["subset"].notna().any():
        _iot_sections(w, frame, metric=metric, routing=routing)
    seeds = translation_seeds(frame, metric=metric)
    if (seeds.table["n"] >= 2).any():
        _seeds_section(w, seeds, label="Translation", stem="translation")
    return w.write()


def _paper_comparison(sizes: pd.DataFrame) -> pd.DataFrame:
    t3 = iot_paper.table3().set_index("size")
    out = sizes[sizes["stack"] == "decoder"][["size", "n_subsets", "n", "mean", "sd",
                                              "difference", "best_subset"]].copy()
    out = out.rename(columns={"mean": "ours_mean", "sd": "ours_sd", "difference": "ours_gain"})
    out["paper_subset"] = out["size"].map(t3["subset"])
    out["paper_bleu"] = out["size"].map(t3["value"])
    out["paper_gain"] = out["size"].map(t3["gain"])
    out["paper_source"] = iot_paper.TABLE3
    return out.reset_index(drop=True)


def _iot_sections(w: _Writer, frame: pd.DataFrame, *, metric: str,
                  routing: pd.DataFrame | None) -> None:
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
    comparison = _paper_comparison(info.sizes)
    if not comparison.empty:
        w.table(sec, "iot_paper_comparison", comparison)
        sec.inline.append(("ours vs Zhu et al. (2021) Table 3 (IWSLT14 De→En)", comparison))
    if any(str(c).startswith("route_share_") for c in frame.columns):
        try:
            shares = routing_shares(frame)
        except AnalysisError:
            shares = None
        if shares is not None:
            sec = w.section("IOT: routing shares",
                            "Final share of validation sentences the predictor routes to "
                            "each order (argmax), mean over seeds.")
            for r in shares.dominant().itertuples():
                sec.numbers.append((f"subset {{{','.join(r.subset)}}}: most used order",
                                    f"{r.code} ({r.block}) {r.mean:.2f}"))
            w.figure(sec, "iot_route_shares", plots.plot_route_shares(shares))
            w.table(sec, "iot_route_shares", shares.shares)
            w.table(sec, "iot_route_shares_by_trial", shares.by_trial)
    if routing is not None and not routing.empty:
        m = routing_matrix(routing)
        sec = w.section("IOT: per-split × per-order BLEU (the paper's Fig. 2)",
                        "Rows: the validation sentences routed to an order; columns: BLEU "
                        "when that split is decoded with each order forced.")
        sec.numbers.append(("splits whose routed order decodes them best",
                            f"{int(m.diagonal['diagonal_best'].sum())} of {len(m.diagonal)}"))
        w.figure(sec, "iot_routing_bleu", plots.plot_routing_matrix(m))
        w.table(sec, "iot_routing_cells", m.cells)
        w.table(sec, "iot_routing_diagonal", m.diagonal)


def iot_paper_report(out_dir: str | Path) -> Report:
    """Zhu et al. (2021) IOT results from the published numbers (Table 3, IWSLT14 De→En),
    with Press et al. (2020)'s WMT14 En-De sandwich translation results."""
    w = _Writer(out_dir, "Zhu et al. (2021): instance-wise layer reordering, published results")
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
    sec = w.section("Other published tables")
    for name, table in iot_paper.published_tables().items():
        if name != "zhu2021_table3":
            w.table(sec, name, table)
            sec.inline.append((name.replace("_", " "), table))
    return w.write()


def paper_report(out_dir: str | Path, *, straddle: str = "fractional") -> Report:
    """Reproduce the Press et al. (2020) studies from the published numbers."""
    w = _Writer(out_dir, "Press et al. (2020): sublayer reordering, published results")
    for table, label in ((1, "Table 1 (random permutations)"), (2, "Table 2 (budgeted)")):
        frame = paper.trials(table)
        sec = w.section(f"{label}: data", f"Source: {paper.SOURCE}, Table {table}.")
        w.table(sec, f"press2020_table{table}", frame)
        _distribution_and_halves(w, frame, label=label, stem=f"table{table}",
                                 metric=paper.METRIC, straddle=straddle)
    points = paper.sandwich_points()
    info = sandwich_curve(points)
    statements = paper.sandwich_statements()
    sec = w.section("Sandwich coefficient (Fig. 5)",
                    "Only k = 6 and k = 15 have stated dev perplexities; the markers below "
                    "the curve are the paper's verbal statements per k.")
    sec.numbers += [(f"sandwich16_{int(r.k)} dev ppl", r.mean) for r in info.points.itertuples()]
    sec.numbers += [("stated: k beating the average baseline",
                     str(statements.loc[statements["beats_average"], "k"].tolist())),
                    ("stated: k beating the best baseline",
                     str(statements.loc[statements["beats_best"], "k"].tolist()))]
    w.figure(sec, "sandwich", plots.plot_sandwich(info, statements=statements,
                                                  title="Sandwich^16_k (stated values)"))
    w.table(sec, "sandwich_points", points)
    w.table(sec, "sandwich_statements", statements)
    _seeds_section(w, seed_comparison_from_stats(paper.sandwich_seed_summary()),
                   label="Sandwich^16_6 over 5 seeds", stem="sandwich16_6")
    sec = w.section("Other published tables")
    for name, table in paper.published_tables().items():
        if name not in ("sandwich_statements",):
            w.table(sec, f"press2020_{name}", table)
            sec.inline.append((name.replace("_", " "), table))
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

    from .runs import find_sweep_run

    run_id = find_sweep_run(experiment, tracking_uri)
    if run_id is None:
        raise AnalysisError(
            f"experiment {experiment!r} has no parent run tagged sublayer.role=sweep to attach to"
        )
    MlflowClient(tracking_uri=tracking_uri).log_artifacts(run_id, str(out_dir), artifact_path)
    return run_id
