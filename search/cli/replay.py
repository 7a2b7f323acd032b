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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sublayer_search.search.cli.output import TRIALS_SHOWN, bad
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
    p.add_argument("--top-k", type=_whole, default=3, metavar="K", help="default 3")
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


def _fmt(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "nan"


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
                               reduction_factors=GRID_FACTORS, k=args.top_k, rank_mode=rank)
            return _print_grid(rows, every, args.figure)
        report = replay(curves, settings, k=args.top_k, rank_mode=rank)
    except PriorError as exc:  # the flag, not an experiment file's field
        return bad(f"--prior: got {exc.value!r}, expected {exc.expected}")
    except ReplayError as exc:
        return bad(str(exc))
    _print_report(report, sweep.metric, curves, metric)
    return ExitCode.OK


def _judged(args: argparse.Namespace, sweep: Any) -> Any:
    """The replayed sweep as a prior table: what a prior and a calibration leave out."""
    from sublayer_search.search.replay.arrival import judged_table
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
    from sublayer_search.search.replay.arrival import concurrency, in_prior_order
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
        from sublayer_search.search.replay.calibration import calibration_for

        calibration = calibration_for(judged, k=args.top_k)
    return SchedulerSettings(
        name=args.scheduler, max_t=max_t, grace_period=args.grace_period * every,
        reduction_factor=args.reduction_factor, min_samples=args.min_samples,
        z=args.z, top_k=args.top_k, metric=metric, mode=args.mode or direction(metric),
        rule=rule, calibration=calibration)  # type: ignore[arg-type]


def _recorded(args: argparse.Namespace, uri: str | None) -> Any:
    """The recorded sweep: from the MLflow store at ``uri``, or from an export."""
    if uri is None:
        from sublayer_search.search.replay.from_export import open_export, sweep_from_export

        export = open_export(args.builtin or args.export, name=args.name,
                             builtin=args.builtin is not None)
        return sweep_from_export(export, scheduler_metric=args.metric)
    from mlflow.tracking import MlflowClient

    from sublayer_search.search.replay.store import load_sweep

    return load_sweep(MlflowClient(tracking_uri=uri), args.experiment,
                      scheduler_metric=args.metric)


def value_at_stop(curve: Any, steps: int) -> float:
    """The curve's value at its last evaluation within ``steps`` (nan: none)."""
    seen = [p.value for p in curve.points if p.step <= steps]
    return float(seen[-1]) if seen else math.nan


def _print_report(report: Any, metric: str, curves: Sequence[Any] = (),
                  scheduler_metric: str | None = None) -> None:
    """The table: ``final_<metric>`` is what the replay trained to (a stopped trial's
    value at its stop), ``recorded_final`` what the recorded sweep's run ended at."""
    by_name = {c.name: c for c in curves}
    same = scheduler_metric in (None, metric)  # the curves hold the scheduler's metric
    rows = sorted(report.trials, key=lambda t: (t.stopped_at is not None, t.name))
    left_out = 0
    if len(rows) > TRIALS_SHOWN:  # thousands of trials: the top k and the best by final
        shown = set(report.top_k) | {t.name for t in sorted(
            (t for t in rows if math.isfinite(t.final)), key=lambda t: t.final,
            reverse=report.rank_mode == "max")[:TRIALS_SHOWN // 2]}
        left_out = len(rows) - len(shown)
        rows = [t for t in rows if t.name in shown]
    width = max(len(t.name) for t in rows)
    span = max([len("order")] + [len(t.order) for t in rows])
    head = f"final_{metric}"
    print(f"{'trial':<{width}}  {'order':<{span}}  steps/full  stopped_at  {head}  recorded_final")
    for t in rows:
        stop = "" if t.stopped_at is None else str(t.stopped_at)
        reached = t.final
        if t.stopped_at is not None:
            curve = by_name.get(t.name)
            reached = value_at_stop(curve, t.steps) if curve is not None and same else math.nan
        print(f"{t.name:<{width}}  {t.order:<{span}}  {f'{t.steps}/{t.full_steps}':>10}  "
              f"{stop:>10}  {_fmt(reached):>{len(head)}}  {_fmt(t.final)}")
    if left_out:
        print(f"... {left_out} more trial(s) not listed: the rows above are the top-{report.k} "
              f"and the best {TRIALS_SHOWN // 2} by recorded final {metric}")
    if not same and report.stopped:
        print(f"note: the replay ran on {scheduler_metric}, so a stopped trial's {metric} at "
              "its stop is not known (blank)")
    used, full = sum(t.steps for t in report.trials), sum(t.full_steps for t in report.trials)
    evals = sum(t.evaluations for t in report.trials)
    full_evals = sum(t.full_evaluations for t in report.trials)
    print(f"compute: {used} of {full} trial-steps ({report.compute_fraction:.1%}), {evals} of "
          f"{full_evals} evaluations ({report.evaluation_fraction:.1%}); "
          f"candidates alone (baseline seeds left out): {report.candidate_compute_fraction:.1%}; "
          f"{len(report.stopped)} trial(s) stopped")
    _print_floor(report, curves)
    lost = [n for n in report.top_k if n not in report.kept]
    print(f"top-{report.k} by final {metric}: {', '.join(report.top_k) or 'none'}; kept "
          f"{len(report.kept)} of {len(report.top_k)}" + (f" (lost: {', '.join(lost)})"
                                                         if lost else ""))
    order = {t.name: t.order for t in report.trials}.get(report.picked or "", "")
    print(f"picked: {report.picked or 'none'}" + (f" ({order})" if order else "")
          + f"; regret {_fmt(report.regret)} ({metric})")
    if report.truncated:
        names = ", ".join(report.truncated[:10]) + (
            f" and {len(report.truncated) - 10} more" if len(report.truncated) > 10 else "")
        print(f"note: {len(report.truncated)} trial(s) end before the replay would stop them "
              f"(stopped or failed in the recorded sweep): {names}")


def _print_floor(report: Any, curves: Sequence[Any]) -> None:
    """The least compute any rule keeping the top k could have used (:mod:`.floor`)."""
    from sublayer_search.search.replay.floor import compute_floor

    if not report.top_k or not curves:
        return
    first, second = (compute_floor(report, curves, first_decision=d) for d in (1, 2))
    print(f"floor: a rule that knew every final value would still use {first.fraction:.1%} "
          f"({first.candidate_fraction:.1%} candidates alone) to keep the top-{report.k}, "
          f"stopping every other candidate at its first evaluation; {second.fraction:.1%} "
          f"({second.candidate_fraction:.1%}) if no candidate stops before its second "
          "(as curve)")
    live = [compute_floor(report, curves, first_decision=d, online=True) for d in (1, 2)]
    print(f"floor, online: knowing only the final values of the trials started so far, a "
          f"rule safe whatever comes next uses at least {live[0].fraction:.1%} "
          f"({live[0].candidate_fraction:.1%}), and {live[1].fraction:.1%} "
          f"({live[1].candidate_fraction:.1%}) from the second evaluation")


def _print_grid(rows: list[dict[str, Any]], every: int, figure: str | None) -> int:
    print("grace_evals  reduction_factor  compute  candidates  evaluations  top_k_kept  regret  "
          "picked")
    for r in rows:
        print(f"{r['grace_period'] // every:>11}  {r['reduction_factor']:>16g}  "
              f"{r['compute_fraction']:>7.1%}  {r['candidate_compute_fraction']:>10.1%}  "
              f"{r['evaluation_fraction']:>11.1%}  "
              f"{r['top_k_kept']:>7}/{r['k']}  {_fmt(r['regret']):>6}  {r['picked']}")
    if figure is not None:
        import pandas as pd

        from sublayer_search.analysis.figures.replay import plot_replay_grid

        frame = pd.DataFrame(rows).assign(grace_evals=lambda f: f["grace_period"] // every)
        plot_replay_grid(frame, figure)
        print(f"figure: {figure}")
    return ExitCode.OK
