"""``sublayer analyze``: figures, CSVs and an HTML report for a sweep or the paper's data.

The ``sublayer`` CLI (search/cli/main.py) adds a subparser with :func:`add_arguments` and
calls :func:`run_analyze`; ``python -m sublayer_search.analysis.cli`` runs it standalone.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.paths import unusable_folder
from sublayer_search.analysis.studies.significance import (
    ADJUST,  # light: the parser is built on every ``sublayer`` call
)
from sublayer_search.spaces.cost import STRADDLE

if TYPE_CHECKING:
    from sublayer_search.analysis.report.writer import Report
from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["PAPERS", "add_arguments", "main", "run_analyze"]

PAPERS = ("press2020", "zhu2021", "crossformer", "mini_press2020", "hybrid_mini")
STUDIES = ("sweep", "replication")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``analyze`` options to ``parser``."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiment", action="append",
                        help="MLflow experiment (sweep) name to analyse; repeat it to pool "
                             "several sweeps of the same main metric into one study")
    source.add_argument("--paper", choices=PAPERS,
                        help="analyse a paper's published numbers (press2020: Press et al. "
                             "2020; zhu2021: IOT, Zhu et al. 2021; crossformer: cross-layer "
                             "guidance, Tables 1, 2, 3, 6; mini_press2020: this product's "
                             "own small-scale replication of Press et al., shipped as data; "
                             "hybrid_mini: its small study of attention among recurrences)")
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    parser.add_argument("--out", required=True, help="output folder for figures, CSVs, HTML")
    parser.add_argument("--metric", default=None,
                        help="metric to study (default: the sweep's main validation metric)")
    parser.add_argument("--straddle", choices=STRADDLE, default="fractional",
                        help="how the sublayer across the middle counts in the halves study")
    parser.add_argument("--adjust", choices=ADJUST, default="holm",
                        help="adjustment of the seed tests' p-values for the number of "
                             "comparisons: holm (default), bh (Benjamini–Hochberg) or none")
    parser.add_argument("--study", choices=STUDIES, default=None,
                        help="sweep (default): the studies that apply to any sweep; "
                             "replication: a Press et al. programme (random permutations, "
                             "budgeted draws, sandwiches with seeds, baseline seeds) answered "
                             "with tested single runs, Fig. 4, Fig. 5, seed noise and the "
                             "learning curves' end slope (loads the histories). With --paper: "
                             "only mini_press2020 (a shipped sweep; default replication)")
    parser.add_argument("--history", action="store_true",
                        help="also load metric histories and plot learning curves")
    parser.add_argument("--include-stopped", action="store_true",
                        help="count trials stopped early by the scheduler (ASHA) at their last "
                             "value; by default they are kept apart from every study")
    parser.add_argument("--proxy", default=None, metavar="EXPERIMENT",
                        help="a proxy sweep (task: mad) of the same orders in the same store: "
                             "the report adds how far its ranking agrees with this sweep's "
                             "(Kendall tau, top-5 recall, bootstrap intervals) and the compute "
                             "ratio")
    parser.add_argument("--no-attach", action="store_true",
                        help="do not attach the report to the sweep's parent MLflow run")


def run_analyze(args: argparse.Namespace) -> int:
    """Run the analysis described by parsed ``args``; 0 on success, 2 on bad input."""
    try:
        return _run(args)
    except ValueError as exc:  # AnalysisError, SpaceError, OrderError...
        print(f"sublayer analyze: error: {exc}", file=sys.stderr)
        return ExitCode.BAD_INPUT


def _run(args: argparse.Namespace) -> int:
    given = getattr(args, "experiment", None) or []
    experiments: list[str] = [given] if isinstance(given, str) else list(given)
    paper = getattr(args, "paper", None)
    study = getattr(args, "study", None)
    out = _checked_out(experiments[0] if experiments else "", paper,
                       getattr(args, "out", None), study)
    proxy_name = getattr(args, "proxy", None)
    if paper and proxy_name is not None and (
            paper not in ("mini_press2020", "hybrid_mini")
            or (study or ("sweep" if paper == "hybrid_mini" else "replication")) != "sweep"):
        raise AnalysisError(f"--proxy: got {proxy_name!r} with --paper {paper}"
                            f"{' --study ' + study if study else ''}, expected it with "
                            "--experiment, or with a shipped sweep's studies of any sweep "
                            "(--paper hybrid_mini, or --paper mini_press2020 --study sweep)")
    if paper:
        result = _paper_report(args, paper, out, study)
    else:
        result = _experiment_report(args, experiments, out, study)
    print(f"wrote {result.html} ({len(result.figures)} figure files, "
          f"{len(result.tables)} tables)")
    return ExitCode.OK


def _checked_out(experiment: str, paper: str | None, out: str | None,
                 study: str | None) -> str:
    """The report's folder; AnalysisError for a command line that asks for no report, for
    two at once, or for one that cannot be written."""
    if not out:
        raise AnalysisError(f"--out: got {out!r}, expected a folder for the report")
    if bool(experiment) == bool(paper):
        raise AnalysisError("give exactly one of --experiment NAME or --paper "
                            + "|".join(PAPERS))
    if paper and paper not in PAPERS:
        raise AnalysisError(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
    why = unusable_folder(Path(out))
    if why:
        raise AnalysisError(f"--out: got {out!r}, expected a folder for the report ({why})")
    if paper and study and paper not in ("mini_press2020", "hybrid_mini"):
        raise AnalysisError(f"--study: got {study!r} with --paper {paper}, expected no --study: "
                            f"{paper} is published numbers with a report of its own; --study "
                            "applies to --experiment and the shipped sweeps")
    return out


def _paper_report(args: argparse.Namespace, paper: str, out: str, study: str | None) -> Report:
    """The report of a paper's published numbers (or of the built-in mini study)."""
    from sublayer_search.analysis.report import build as report

    adjust = getattr(args, "adjust", "holm")
    straddle = getattr(args, "straddle", "fractional")
    proxy = None
    if getattr(args, "proxy", None) is not None:  # checked: a shipped sweep's studies
        from sublayer_search.analysis.store.pooling import load_pooled

        uri = _store(getattr(args, "tracking_uri", None), [args.proxy])
        proxy = (args.proxy, load_pooled([args.proxy], uri, history=False)[0])
    if paper == "zhu2021":
        return report.iot_paper_report(out)
    if paper == "crossformer":
        return report.crossformer_paper_report(out)
    if paper == "mini_press2020":
        return report.builtin_study_report(paper, out, straddle=straddle, adjust=adjust,
                                           study=study or "replication", proxy=proxy)
    if paper == "hybrid_mini":  # no Press et al. programme: the studies of any sweep
        return report.builtin_study_report(paper, out, straddle=straddle, adjust=adjust,
                                           study=study or "sweep", proxy=proxy)
    return report.paper_report(out, straddle=straddle, adjust=adjust)


def _experiment_report(args: argparse.Namespace, experiments: list[str], out: str,
                       study: str | None) -> Report:
    """The report of sweeps in an MLflow store, attached to their parent runs."""
    from sublayer_search.analysis.report import build as report
    from sublayer_search.analysis.store.frame import with_stopped
    from sublayer_search.analysis.store.iot_frame import is_translation
    from sublayer_search.analysis.store.pooling import load_pooled

    adjust = getattr(args, "adjust", "holm")
    straddle = getattr(args, "straddle", "fractional")
    uri = _store(getattr(args, "tracking_uri", None), experiments)
    replication = study == "replication"
    trials, history, routing = load_pooled(
        experiments, uri, history=getattr(args, "history", False) or replication)
    replays = trials.attrs.get("replays")
    if replays is not None and replays.message():
        print(f"sublayer analyze: {replays.message()}")
    loaded = trials
    if getattr(args, "include_stopped", False):
        trials = with_stopped(trials)
    attention = None  # Table 7, from trained models: given by the caller (``search``)
    attention_study = getattr(args, "attention_study", None)
    if attention_study is not None and len(experiments) == 1 and not is_translation(trials):
        attention = attention_study(experiments[0], uri, loaded)
    proxy_name = getattr(args, "proxy", None)
    proxy = None
    if proxy_name is not None:
        if replication:
            raise AnalysisError(f"--proxy: got {proxy_name!r} with --study replication, "
                                "expected it with the studies of any sweep (no --study)")
        proxy = (proxy_name, load_pooled([proxy_name], uri, history=False)[0])
    if replication:
        from sublayer_search.analysis.report.replication import replication_report

        result = replication_report(trials, history, out, title=_title(experiments),
                                    straddle=straddle, adjust=adjust)
    else:
        result = report.experiment_report(
            trials, out, title=_title(experiments), metric=getattr(args, "metric", None),
            straddle=straddle, history=history, routing=routing, adjust=adjust,
            attention=attention, proxy=proxy,
        )
    for name in [] if getattr(args, "no_attach", False) else experiments:
        try:
            run_id = report.attach_to_sweep(out, experiment=name, tracking_uri=uri)
            print(f"attached the report to sweep run {run_id} ({name})")
        except AnalysisError as exc:
            print(f"sublayer analyze: warning: {exc}; report not attached", file=sys.stderr)
    return result


def _title(experiments: list[str]) -> str:
    if len(experiments) == 1:
        return f"Sweep {experiments[0]!r}"
    return f"Sweeps {', '.join(map(repr, experiments))} pooled"


def _store(tracking_uri: str | None, experiments: Sequence[str] = ()) -> str:
    """The URI of an existing MLflow store, checked before anything is read or written."""
    from sublayer_search.analysis.store.mlflow_store import StoreError, check_store, open_store

    try:
        uri = check_store(tracking_uri)
        open_store(uri)
    except StoreError as exc:
        wanted = ", ".join(map(repr, experiments))
        looking = f" (looking for experiment {wanted})" if wanted else ""
        if tracking_uri is not None:
            raise AnalysisError(f"--tracking-uri: got {exc.uri!r}, expected {exc.expected}"
                                f"{looking}") from None
        where = "$MLFLOW_TRACKING_URI" if os.environ.get("MLFLOW_TRACKING_URI") else "its default"
        raise AnalysisError(f"--tracking-uri not given, and MLflow's store ({where}) is not "
                            f"usable{looking}: got {exc.uri!r}, expected {exc.expected}; give "
                            "--tracking-uri") from None
    return uri


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sublayer analyze", description=__doc__)
    add_arguments(parser)
    return run_analyze(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
