"""The steps of ``sublayer sweep FILE``: plan the file, read its prior, print the dry run,
or run the sweep and turn its outcome into an exit status.

Only planning is imported up front by the steps that plan: Ray, MLflow and the tracking
code load in :func:`run_planned`, so ``--dry-run`` stays light.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from typing import TYPE_CHECKING, Any

from sublayer_search.search.cli.output import print_table, print_trials
from sublayer_search.search.cli.spaces import shown_order
from sublayer_search.spaces.exit_codes import ExitCode
from sublayer_search.spaces.kinds import all_symbols
from sublayer_search.spaces.records import FAILED_STATUSES

if TYPE_CHECKING:
    from sublayer_search.search.plan.experiment import Experiment
    from sublayer_search.search.plan.sweep_plan import SweepPlan
    from sublayer_search.search.run.sweep import SweepOutcome

__all__ = ["ESTIMATED", "MAX_TRIALS", "plan_file", "print_dry_run", "run_planned",
           "scheduler_line", "too_many_trials", "warn_cluster"]

MAX_TRIALS = 10_000
"""A larger plan runs only with ``--yes`` (a typo in a space can ask for millions)."""
ESTIMATED = ("params", "active_params", "flops_per_token")
"""The dry run's columns that depend on the vocabulary (marked ``~`` while it is estimated)."""


def plan_file(args: argparse.Namespace, notes: list[str] | None) -> SweepPlan[Any, Any, Any, Any]:
    """The file checked in one pass and planned (a ``SweepPlan``); raises
    ``ExperimentError`` with every problem the file has."""
    from sublayer_search.search.core.problems import ExperimentError, Problem
    from sublayer_search.search.plan.experiment import load_experiment
    from sublayer_search.search.plan.preflight import plan_size_problems
    from sublayer_search.search.plan.steps import plan_sweep

    found: list[Problem] = []  # the file's problems, reported with the plan's
    exp = load_experiment(args.file, found=found)
    too_big = plan_size_problems(exp)  # refused before a single order is drawn
    if too_big:
        raise ExperimentError(args.file, found + too_big)
    return plan_sweep(exp, args.file, address=args.address, check_resources=not args.dry_run,
                      notes=notes, tracking_uri=args.tracking_uri, found=found)


def too_many_trials(args: argparse.Namespace, rows: list[dict[str, Any]]) -> str | None:
    """Why a plan this large does not run without ``--yes`` (None when it may)."""
    if len(rows) <= MAX_TRIALS or args.yes or args.dry_run:
        return None
    return (f"{args.file}: the plan has {len(rows):,} trials (more than {MAX_TRIALS:,}); "
            "check it with --dry-run, then run it with --yes")


def warn_cluster(args: argparse.Namespace, plan: SweepPlan[Any, Any, Any, Any]) -> None:
    """Warnings for a cluster run (an address, or a Slurm job), dry run or not: a SQLite
    tracking store on a network file system."""
    from sublayer_search.search.tracking.network_fs import cluster_run, network_fs_warnings

    exp = plan.experiment
    if not cluster_run(args.address or exp.ray.address):
        return
    field = "--tracking-uri" if args.tracking_uri else "tracking.uri"
    for warning in network_fs_warnings(args.tracking_uri or exp.tracking.uri, field):
        print(f"sublayer: warning: {warning}", file=sys.stderr)


def scheduler_line(exp: Experiment) -> str:
    """What early stopping the sweep does, for the dry run (its rule says)."""
    from sublayer_search.search.stopping.registry import stopping_rule

    return stopping_rule(exp.scheduler.type).describe(exp.scheduler, exp.train)


def print_dry_run(args: argparse.Namespace, plan: SweepPlan[Any, Any, Any, Any], rows: list[dict[str, Any]],
                  notes: list[str] | None) -> None:
    """Notes and warnings on stderr; the trial table, the models, the searcher's budget,
    the scheduler, the prior and the queue it orders on stdout."""
    from sublayer_search.search.cli.disk_estimate import disk_lines
    from sublayer_search.search.cli.node_fit import fit_lines
    from sublayer_search.search.plan.resources import resource_problems
    from sublayer_search.search.run.proxy_stage import proxy_lines
    from sublayer_search.search.searchers.queue import queue_lines
    from sublayer_search.search.searchers.registry import dry_run_footer  # the searcher's own

    for note in notes or []:
        print(f"sublayer: note: {note}", file=sys.stderr)
    for problem in resource_problems(plan.experiment, args.address):
        print(f"sublayer: warning: {problem} (a cluster must provide this; give --address "
              "to check it there)", file=sys.stderr)
    estimate = plan.task.estimate  # counts resting on a vocabulary not built yet: ~
    shown = [{**r, "order": shown_order(r["order"], t.variant.params()),
              **({c: f"~{r[c]}" for c in ESTIMATED if c in r} if estimate else {})}
             for r, t in zip(rows, plan.trials, strict=True)]
    kinds = [f"n_{k}" for k in all_symbols() if k not in "sfc"]  # n_h and the hybrid kinds
    half = [c for c in (*kinds, "guidance", "stacks") if any(c in r for r in rows)]
    active = ["active_params"] if any("active_params" in r for r in rows) else []
    print_table(shown, ["name", "family", "seed", "n_s", "n_f", *half, "units", "params",
                        *active, "flops_per_token", "order"])
    if estimate:
        print(f"~ {' and '.join(c for c in ESTIMATED if any(c in r for r in rows))} "
              f"assume {estimate}")
    for line in plan.describe_models():  # a translation sweep: IOT and baseline depths
        print(line)
    print(dry_run_footer(plan))
    for line in proxy_lines(plan):
        print(line)
    print(f"scheduler: {scheduler_line(plan.experiment)}")
    lines, warnings = fit_lines(plan.experiment, args.address)  # a cluster's nodes
    for line in lines:
        print(line)
    for warning in warnings:
        print(f"sublayer: warning: {warning}", file=sys.stderr)
    for line in disk_lines(plan.experiment, rows, approximate=bool(estimate)):
        print(line)
    for line in queue_lines(plan):  # search.prior: fitted once, at planning
        print(line)


def run_planned(args: argparse.Namespace, plan: SweepPlan[Any, Any, Any, Any], rows: list[dict[str, Any]]) -> int:
    """Run the sweep (Ray auth: a local sweep keeps token auth on, on 127.0.0.1; with
    ``--address`` the cluster's); the exit status of its outcome."""
    from sublayer_search.search.cli.output import bad
    from sublayer_search.search.core.problems import ExperimentError
    from sublayer_search.search.oneshot.stage_one import OneShotError
    from sublayer_search.search.run.progress import line_width, starting_line
    from sublayer_search.search.run.sweep import TrackingOutage, nothing_to_resume, run_sweep

    if args.resume and (done := nothing_to_resume(plan, args.tracking_uri)):
        print(f"sublayer: {done}", file=sys.stderr)  # at once, without starting Ray
        return ExitCode.OK
    print(starting_line(len(rows), plan.metric, line_width(sys.stderr)), file=sys.stderr,
          flush=True)
    from sublayer_search.search.tracking.links import resume_command

    try:
        outcome = run_sweep(plan, resume=args.resume, address=args.address,
                            tracking_uri=args.tracking_uri)
    except ExperimentError as exc:
        return bad(str(exc))
    except OneShotError as exc:  # the supernet failed: like failed trials
        print(f"sublayer: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    except TrackingOutage as exc:  # EX_TEMPFAIL: try again later
        print(f"sublayer: {exc}; once MLflow is back: {resume_command(args.file)}",
              file=sys.stderr)
        return ExitCode.TRACKING_OUTAGE
    return report_outcome(args, plan, outcome)


def report_outcome(args: argparse.Namespace, plan: SweepPlan[Any, Any, Any, Any], outcome: SweepOutcome) -> int:
    """The closing table and links; the exit status: interrupted, failed trials (unless
    ``failure.tolerate``) or OK."""
    from sublayer_search.analysis.store.mlflow_store import redact_uri
    from sublayer_search.search.tracking.links import closing_lines, resume_command

    exp = plan.experiment
    print_trials(outcome.trials, ["name", "family", "seed", "status", "steps", plan.metric,
                                  f"best_{plan.metric}"], metric=plan.metric, mode=plan.mode)
    uri = redact_uri(args.tracking_uri or exp.tracking.uri)  # shown: no password
    if outcome.reused:
        print(f"{outcome.reused} trial(s) reused from earlier runs (reuse: true)")
    print(f"{len(outcome.trials)} trial(s) tracked in MLflow experiment "
          f"{exp.experiment_name!r} (parent run {outcome.parent_run_id}) at {uri}")
    for line in closing_lines(uri=uri, experiment=exp.experiment_name,
                              experiment_id=outcome.experiment_id, metric=plan.metric,
                              mode=plan.mode):
        print(line)
    if outcome.interrupted:
        print("sublayer: sweep interrupted; its unfinished trials are killed (MLflow status "
              f"KILLED); continue it with: {resume_command(args.file)}", file=sys.stderr)
        return ExitCode.INTERRUPTED
    return _failure_status(outcome.trials, tolerate=exp.failure.tolerate)


def _failure_status(trials: list[dict[str, Any]], *, tolerate: bool) -> int:
    """FAILED when trials failed or diverged (said on stderr), unless tolerated."""
    bad = Counter(str(r["status"]) for r in trials if r["status"] in FAILED_STATUSES)
    if not bad:
        return ExitCode.OK
    words = ", ".join(f"{n} {status}" for status, n in sorted(bad.items()))
    if tolerate:
        print(f"sublayer: {words} (failure.tolerate: true, so the sweep still succeeds)",
              file=sys.stderr)
        return ExitCode.OK
    print(f"sublayer: {words} of {len(trials)} trial(s); their runs in MLflow say "
          "why (tag sublayer.error). Exit status 1 (set failure.tolerate: true if failures "
          "are expected)", file=sys.stderr)
    return ExitCode.FAILED
