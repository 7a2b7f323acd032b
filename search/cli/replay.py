"""``sublayer replay``: what a scheduler would have saved on a finished sweep.

Reads the sweep's learning curves from MLflow (:mod:`.replay_store`) or from an export
(``--export DIR|NAME_meta.json``, ``--builtin NAME``: :mod:`.replay_export`), replays them
through the scheduler (:mod:`.replay`) and prints the compute it used against the full
sweep, which of the top-k orders survived and the regret of its pick. ``--grid`` replays
a small grid of grace periods and reduction factors; ``--figure`` draws it.
``--arrival prior`` re-times the sweep into the prior's queue order (``--prior``, the
replayed study left out), ``--rule comeback`` replays comeback stopping (its calibration
leaves the replayed study out): docs/search.md.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from sublayer_search.search.cli.output import bad
from sublayer_search.search.cli.replay_output import print_grid, print_report
from sublayer_search.spaces.exit_codes import ExitCode

if TYPE_CHECKING:
    from sublayer_search.search.replay.engine import SchedulerSettings

__all__ = ["GRID_GRACE", "GRID_FACTORS", "add_replay", "run_replay"]

GRID_GRACE = (1, 2, 3)
"""Grace periods (evaluations) of ``--grid``."""
GRID_FACTORS = (2.0, 3.0, 4.0)
"""Reduction factors of ``--grid``."""
_SCHEDULERS = ("asha", "asha-all", "hyperband", "median", "curve")  # replay.SCHEDULERS, no Ray


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a whole number >= 1")
    return value


def _factor(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 1):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number > 1 (e.g. 2 or 3)")
    return value


def _nonnegative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a number >= 0 (e.g. 2)")
    return value


def _add_ranking(p: argparse.ArgumentParser) -> None:
    """What the replay is judged by: the top k, and eps-good orders in seed sds."""
    p.add_argument("--top-k", type=_whole, default=3, metavar="K", help="default 3")
    p.add_argument("--eps", type=_nonnegative, default=1.0, metavar="EPS",
                   help="a candidate is eps-good when its final is within EPS baseline seed "
                        "sds of the best: the report says whether one was kept and the pick's "
                        "regret in seed sds (default 1)")


def add_replay(sub: Any) -> None:
    """Register ``replay`` on the ``sublayer`` subcommands."""
    p = sub.add_parser(
        "replay", help="replay a finished sweep's learning curves through a trial scheduler",
        description="Run a trial scheduler over the learning curves a finished sweep recorded "
                    "in MLflow (or in an export of `sublayer export`), as if the sweep were happening (results in their recorded order "
                    "of arrival), and report the compute it would have used, which of the top-k "
                    "orders it keeps and the regret of the order it would pick.")
    p.add_argument("experiment", nargs="?", default=None,
                   help="MLflow experiment of the sweep (its latest sweep is used)")
    p.add_argument("--export", default=None, metavar="PATH",
                   help="replay an export of `sublayer export` instead: its folder (with --name "
                        "when it holds several) or its NAME_meta.json")
    p.add_argument("--name", default=None, help="with --export: the export's name")
    p.add_argument("--builtin", default=None, metavar="NAME",
                   help="replay a study shipped with the package (e.g. mini_press2020)")
    p.add_argument("--scheduler", default="asha", choices=_SCHEDULERS,
                   help="asha: the sweeps' ASHA (baselines train to the end); asha-all: Ray's "
                        "ASHA over every trial; hyperband; median: median stopping rule; "
                        "curve: the sweeps' learning-curve stopping (default: asha)")
    p.add_argument("--grace-period", type=_whole, default=1, metavar="N",
                   help="evaluations before a trial can be stopped (asha, median; default 1)")
    p.add_argument("--reduction-factor", type=_factor, default=2.0, metavar="R",
                   help="halving rate (asha, hyperband; default 2)")
    p.add_argument("--max-t", type=_whole, default=None, metavar="N",
                   help="evaluations a trial trains at most (default: the sweep's train.steps)")
    p.add_argument("--z", type=_nonnegative, default=2.0, metavar="Z",
                   help="curve: noise margin in baseline seed standard deviations (default 2)")
    p.add_argument("--min-samples", type=_whole, default=3, metavar="N",
                   help="median: trials needed for a median (default 3)")
    p.add_argument("--metric", default=None,
                   help="metric the scheduler compares (default: the sweep's main metric; a "
                        "live sweep's ASHA uses scheduler.metric, val_loss unless set)")
    p.add_argument("--mode", default=None, choices=["min", "max"],
                   help="direction of --metric (default: from its name)")
    _add_ranking(p)
    p.add_argument("--arrival", default=None, choices=["recorded", "together", "prior"],
                   help="recorded: trials start and report when they did; together: all start "
                        "at once; prior: they start in the prior's queue order (baseline seeds "
                        "first, then best-predicted first) with the sweep's own concurrency and "
                        "durations (default: together for hyperband, recorded otherwise)")
    p.add_argument("--prior", action="append", default=None, metavar="NAMES",
                   help="with --arrival prior: the studies the prior is fitted on, comma-"
                        "separated or repeated (default: the built-ins press2020, "
                        "mini_press2020, replay40); the replayed study is left out by content")
    p.add_argument("--rule", default=None, choices=["comeback", "margin"],
                   help="curve: margin (default, what a sweep's type: curve runs): z seed "
                        "sds plus slope credit; comeback: stop a candidate that trails the "
                        "top-k further than eventual top-k candidates of the other shipped "
                        "studies ever did (its calibration leaves the replayed study out)")
    p.add_argument("--grid", action="store_true",
                   help=f"replay grace periods {list(GRID_GRACE)} x reduction factors "
                        f"{[int(f) for f in GRID_FACTORS]} and print one row each")
    p.add_argument("--figure", default=None, metavar="PATH",
                   help="with --grid: draw compute fraction against top-k kept (PNG)")
    p.add_argument("--tracking-uri", default=None,
                   help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    p.set_defaults(func=run_replay)


def run_replay(args: argparse.Namespace) -> int:
    """``sublayer replay``: 0 on success, 2 on bad input."""
    import os

    from sublayer_search.analysis.store.mlflow_store import StoreError, check_store
    from sublayer_search.spaces.records import direction

    problem = _argument_problem(args)
    if problem is not None:
        return bad(problem)
    uri = None
    if args.experiment is not None:
        uri = args.tracking_uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"
        try:
            uri = check_store(uri)
        except StoreError as exc:
            return bad(f"--tracking-uri: got {exc.uri!r}, expected {exc.expected}")

    from sublayer_search.search.replay.engine import (
        ReplayError,
        replay,
        replay_grid,
    )
    from sublayer_search.search.searchers.prior import PriorError

    try:
        sweep = _recorded(args, uri)
        judged = _judged(args, sweep)
        every, metric = sweep.eval_every, sweep.scheduler_metric
        settings = _settings(args, sweep, judged)
        max_t = settings.max_t
        arrival = args.arrival or ("together" if args.scheduler == "hyperband" else "recorded")
        curves, arrival_line = _arrive(args, sweep, judged, arrival)
        rank = direction(sweep.metric)
        print(f"sweep {sweep.experiment!r} (run {sweep.parent_run_id}): {len(curves)} trials, "
              f"scheduler {sweep.recorded_scheduler}, main metric {sweep.metric}; replay: "
              f"{args.scheduler} on {metric} ({settings.mode}), max_t {max_t} steps, "
              f"one evaluation every {every} steps, arrival {arrival}")
        if arrival_line:
            print(arrival_line)
        if settings.calibration is not None:
            print(f"rule: comeback; {settings.calibration.describe()}")
        if args.grid:
            graces = [g * every for g in GRID_GRACE if g * every <= max_t]
            rows = replay_grid(curves, settings, grace_periods=graces,
                               reduction_factors=GRID_FACTORS, k=args.top_k, rank_mode=rank,
                               eps=args.eps)
            return print_grid(rows, every, args.figure)
        report = replay(curves, settings, k=args.top_k, rank_mode=rank, eps=args.eps)
    except PriorError as exc:  # the flag, not an experiment file's field
        return bad(f"--prior: got {exc.value!r}, expected {exc.expected}")
    except ReplayError as exc:
        return bad(str(exc))
    print_report(report, sweep.metric, curves, metric)
    return ExitCode.OK


def _judged(args: argparse.Namespace, sweep: Any) -> Any:
    """The replayed sweep as a prior table: what a prior and a calibration leave out."""
    from sublayer_search.search.recorded.arrival import judged_table
    from sublayer_search.spaces.records import direction

    return judged_table(args.builtin or sweep.experiment, sweep.curves,
                        mode=direction(sweep.metric))


def _arrive(args: argparse.Namespace, sweep: Any, judged: Any, arrival: str
            ) -> tuple[list[Any], str]:
    """The curves in ``arrival`` order, and for ``prior`` the line that says how."""
    from sublayer_search.search.replay.engine import ReplayError, together
    from sublayer_search.search.searchers.prior import PriorError

    if arrival == "together":
        return together(sweep.curves), ""
    if arrival == "recorded":
        return list(sweep.curves), ""
    from sublayer_search.search.recorded.arrival import concurrency, in_prior_order
    from sublayer_search.search.searchers.prior import BUILTIN_PRIORS, resolve_prior


    names = [n.strip() for given in (args.prior or [",".join(BUILTIN_PRIORS)])
             for n in given.split(",") if n.strip()]
    if not names:
        raise ReplayError("--prior", ",".join(args.prior or []), "study names")
    try:
        prior = resolve_prior(names, tracking_uri=None, exclude=[judged])
    except PriorError as exc:
        if exc.expected.startswith("a study other than"):
            raise ReplayError("--prior", ", ".join(names), "a study other than the replayed "
                              "one (every table it names is the replayed study's, left out "
                              "by content)") from None
        raise
    curves = in_prior_order(sweep.curves, prior)
    slots = concurrency(sweep.curves)
    return curves, (f"arrival prior: {prior.describe()}; trials start in its queue order "
                    f"(baseline seeds first, then best-predicted first), {slots} at a time "
                    "(the most the recorded sweep ran at once), durations as recorded")


def _argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with the command line's combination of arguments, if anything."""
    import os

    if args.figure is not None and not args.grid:
        return f"--figure: got {args.figure!r} without --grid, expected --grid with it"
    if args.figure is not None and not os.path.isdir(os.path.dirname(os.path.abspath(args.figure))):
        return f"--figure: got {args.figure!r}, expected a path in an existing folder"
    given = {k: v for k, v in (("EXPERIMENT", args.experiment), ("--export", args.export),
                               ("--builtin", args.builtin)) if v is not None}
    if not given:
        return ("EXPERIMENT: got none, expected an MLflow experiment, --export PATH or "
                "--builtin NAME")
    if len(given) > 1:
        return (f"{'/'.join(given)}: got {', '.join(map(repr, given.values()))}, expected "
                "only one of them")
    if args.prior is not None and args.arrival != "prior":
        return (f"--prior: got {','.join(args.prior)!r} without --arrival prior, expected "
                "--arrival prior with it")
    if args.rule is not None and args.scheduler != "curve":
        return (f"--rule: got {args.rule!r} with --scheduler {args.scheduler}, expected "
                "--scheduler curve with it")
    if args.name is not None and args.export is None:
        return f"--name: got {args.name!r} without --export, expected --export with it"
    return None


def _settings(args: argparse.Namespace, sweep: Any, judged: Any) -> SchedulerSettings:
    """The scheduler settings of the replay (steps of the recorded sweep; ``max_t`` and
    the grace period given in evaluations; the comeback rule calibrated without the
    ``judged`` study); ReplayError for a grace period past max_t."""
    from sublayer_search.search.replay.engine import ReplayError, SchedulerSettings
    from sublayer_search.search.replay.settings import DEFAULT_RULE
    from sublayer_search.spaces.records import direction

    every = sweep.eval_every
    max_t = sweep.steps if args.max_t is None else min(args.max_t * every, sweep.steps)
    if args.grace_period * every > max_t:
        raise ReplayError("--grace-period", args.grace_period,
                          f"at most {max_t // every} evaluations (max_t: {max_t} steps, "
                          f"one evaluation every {every} steps)")
    metric = sweep.scheduler_metric
    rule = args.rule or DEFAULT_RULE
    calibration = None
    if args.scheduler == "curve" and rule == "comeback":
        from sublayer_search.search.stopping.calibration import calibration_for

        calibration = calibration_for(judged, k=args.top_k)
    return SchedulerSettings(
        name=args.scheduler, max_t=max_t, grace_period=args.grace_period * every,
        reduction_factor=args.reduction_factor, min_samples=args.min_samples,
        z=args.z, top_k=args.top_k, metric=metric, mode=args.mode or direction(metric),
        rule=rule, calibration=calibration)  # type: ignore[arg-type]


def _recorded(args: argparse.Namespace, uri: str | None) -> Any:
    """The recorded sweep: from the MLflow store at ``uri``, or from an export."""
    if uri is None:
        from sublayer_search.search.recorded.from_export import open_export, sweep_from_export

        export = open_export(args.builtin or args.export, name=args.name,
                             builtin=args.builtin is not None)
        return sweep_from_export(export, scheduler_metric=args.metric)
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.replay.store import load_sweep

    return load_sweep(MlflowClient(tracking_uri=uri), args.experiment,
                      scheduler_metric=args.metric)
