"""``sublayer export``: ship a finished sweep as three flat files (:mod:`.export`).

Writes ``<name>_trials.csv``, ``<name>_curves.csv`` and ``<name>_meta.json`` into
``--out``; ``sublayer replay --export`` and ``benchmarks/searcher_oracle.py --export``
read them, and a copy in ``analysis/data/`` ships with the package.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from sublayer_search.search.cli.output import bad
from sublayer_search.spaces.exit_codes import ExitCode

__all__ = ["add_export", "run_export"]


def add_export(sub: Any) -> None:
    """Register ``export`` on the ``sublayer`` subcommands."""
    p = sub.add_parser(
        "export", help="write a finished sweep's trials and learning curves as CSV + JSON",
        description="Write every trial run of an MLflow experiment (a sweep pooled over "
                    "several runs of the experiment: all of them) as NAME_trials.csv (one row "
                    "per trial), NAME_curves.csv (every metric history) and NAME_meta.json "
                    "(metric, train settings, scheduler, experiment YAML, versions, times).")
    p.add_argument("experiment", help="MLflow experiment of the sweep")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write (created)")
    p.add_argument("--name", default=None,
                   help="start of the file names (default: the experiment's name)")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    p.set_defaults(func=run_export)


def run_export(args: argparse.Namespace) -> int:
    """``sublayer export``: 0 on success, 2 on bad input."""
    from sublayer_search.analysis.errors import AnalysisError
    from sublayer_search.analysis.paths import unusable_folder
    from sublayer_search.analysis.store.mlflow_store import StoreError, check_store

    why = unusable_folder(Path(args.out))
    if why is not None:
        return bad(f"--out: got {args.out!r}, expected a folder this user can write ({why})")
    uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
    try:
        uri = check_store(uri)
    except StoreError as exc:
        return bad(f"--tracking-uri: got {exc.uri!r}, expected {exc.expected}")

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # stdout: the paths
    from sublayer_search.search.tracking.export import export_experiment

    name = args.name or args.experiment
    try:
        paths = export_experiment(args.experiment, args.out, name=name, tracking_uri=uri)
    except AnalysisError as exc:
        hint = "; choose one with --name" if str(exc).startswith("export name") and \
            args.name is None else ""
        return bad(f"{exc}{hint}")
    except OSError as exc:
        return bad(f"--out: got {args.out!r}, expected a folder this user can write "
                    f"({exc.strerror or exc})")
    for path in paths:
        print(path)
    return ExitCode.OK
