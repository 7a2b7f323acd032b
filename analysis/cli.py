"""``sublayer analyze``: figures, CSVs and an HTML report for a sweep or the paper's data.

The ``sublayer`` CLI (search/cli.py) adds a subparser with :func:`add_arguments` and
calls :func:`run_analyze`; ``python -m sublayer_search.analysis.cli`` runs it standalone.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from sublayer_search.spaces.cost import STRADDLE

from .errors import AnalysisError

__all__ = ["PAPERS", "add_arguments", "main", "run_analyze"]

PAPERS = ("press2020", "zhu2021")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``analyze`` options to ``parser``."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--experiment", help="MLflow experiment (sweep) name to analyse")
    source.add_argument("--paper", choices=PAPERS,
                        help="analyse a paper's published numbers (press2020: Press et al. "
                             "2020; zhu2021: IOT, Zhu et al. 2021)")
    parser.add_argument("--tracking-uri", default=None,
                        help="MLflow tracking URI (default: MLFLOW_TRACKING_URI / mlflow default)")
    parser.add_argument("--out", required=True, help="output folder for figures, CSVs, HTML")
    parser.add_argument("--metric", default=None,
                        help="metric to study (default: the sweep's main validation metric)")
    parser.add_argument("--straddle", choices=STRADDLE, default="fractional",
                        help="how the sublayer across the middle counts in the halves study")
    parser.add_argument("--history", action="store_true",
                        help="also load metric histories and plot learning curves")
    parser.add_argument("--no-attach", action="store_true",
                        help="do not attach the report to the sweep's parent MLflow run")


def run_analyze(args: argparse.Namespace) -> int:
    """Run the analysis described by parsed ``args``; 0 on success, 2 on bad input."""
    try:
        return _run(args)
    except ValueError as exc:  # AnalysisError, SpaceError, OrderError...
        print(f"sublayer analyze: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    from . import report

    experiment: str = getattr(args, "experiment", None) or ""
    paper = getattr(args, "paper", None)
    out = getattr(args, "out", None)
    straddle = getattr(args, "straddle", "fractional")
    if not out:
        raise AnalysisError("--out is required")
    if bool(experiment) == bool(paper):
        raise AnalysisError("give exactly one of --experiment NAME or --paper "
                            + "|".join(PAPERS))
    if paper:
        if paper not in PAPERS:
            raise AnalysisError(f"unknown paper {paper!r}; expected one of {', '.join(PAPERS)}")
        if paper == "zhu2021":
            result = report.iot_paper_report(out)
        else:
            result = report.paper_report(out, straddle=straddle)
    else:
        from . import runs
        from .iot import is_translation

        uri = getattr(args, "tracking_uri", None)
        history = None
        if getattr(args, "history", False):
            trials, history = runs.load(experiment, uri, history=True)
        else:
            trials = runs.load(experiment, uri)
        routing = None
        if is_translation(trials) and "subset" in trials.columns and trials["subset"].notna(
        ).any():
            routing = runs.load_routing(experiment, uri)
        result = report.experiment_report(
            trials, out, title=f"Sweep {experiment!r}", metric=getattr(args, "metric", None),
            straddle=straddle, history=history, routing=routing,
        )
        if not getattr(args, "no_attach", False):
            try:
                run_id = report.attach_to_sweep(out, experiment=experiment, tracking_uri=uri)
                print(f"attached the report to sweep run {run_id}")
            except AnalysisError as exc:
                print(f"sublayer analyze: warning: {exc}; report not attached", file=sys.stderr)
    print(f"wrote {result.html} ({len(result.figures)} figure files, "
          f"{len(result.tables)} tables)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sublayer analyze", description=__doc__)
    add_arguments(parser)
    return run_analyze(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
