"""The ``sublayer`` command line: ``train``, ``spaces sample``, ``sweep``, ``ui``, ``analyze``, ``replay``, ``export``.

Every bad input prints one clear message to stderr and exits with status 2 before
anything is written, Ray is started or MLflow is touched.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sublayer_search.search.cli.output import bad as _bad
from sublayer_search.search.cli.output import print_table as _print_table
from sublayer_search.search.cli.output import print_trials as _print_trials
from sublayer_search.search.cli.spaces import cmd_spaces_sample as _cmd_spaces_sample
from sublayer_search.search.cli.spaces import shown_order as _shown_order
from sublayer_search.search.cli.spaces import spaces_epilog as _spaces_epilog
from sublayer_search.spaces.exit_codes import ExitCode, exit_code_help
from sublayer_search.spaces.records import FAILED_STATUSES

__all__ = ["main"]

MAX_TRIALS = 10_000
"""A larger plan runs only with ``--yes`` (a typo in a space can ask for millions)."""
ESTIMATED = ("params", "flops_per_token")
"""The dry run's columns that depend on the vocabulary (marked ``~`` while it is estimated)."""
QUIET_LOGGERS = ("mlflow.store.db.utils", "alembic")
"""Their INFO lines ("Creating initial MLflow database tables", migrations) are noise here."""


# -- sublayer train ---------------------------------------------------------------------
def _cmd_train(args: argparse.Namespace) -> int:
    from sublayer_search.models.lm_family import fit
    from sublayer_search.models.training_loop import use_threads
    from sublayer_search.search.cli.train import build_spec, progress_printer, usable_cpus

    try:
        spec = build_spec(args)
    except ValueError as exc:
        return _bad(str(exc))
    from sublayer_search.models.accounting import flops_per_token, param_count
    from sublayer_search.models.data import load_corpus

    try:
        corpus = load_corpus(spec.data)
    except ValueError as exc:
        return _bad(str(exc))
    model = spec.model if spec.model.vocab_size else spec.model.with_vocab(corpus.vocab_size)
    threads = use_threads(args.threads or usable_cpus())
    why = "--threads" if args.threads else "one per CPU this command may use; --threads N to change"
    print(f"order {model.order}  ({len(model.order)} sublayers)  params {param_count(model):,}  "
          f"FLOPs/token {flops_per_token(model):,}  corpus {spec.data.name} "
          f"({len(corpus.train):,} train tokens, vocab {corpus.vocab_size})  "
          f"torch threads {threads} ({why})")
    on_step, on_eval = progress_printer(spec)
    result = fit(spec, on_eval, corpus=corpus, on_step=on_step,
                 checkpoint_dir=args.checkpoint_dir, resume_from=args.resume_from)
    m = result.metrics
    print(f"done: status {result.status}, {result.steps} steps, "
          + ", ".join(f"{k} {v:.4g}" for k, v in m.items()
                      if k != "step" and isinstance(v, float)))
    return ExitCode.OK if result.status == "finished" else ExitCode.FAILED


# -- sublayer sweep -------------------------------------------------------------------------
def _scheduler_line(exp: Any) -> str:
    """What early stopping the sweep does, for the dry run."""
    spec, every = exp.scheduler, exp.train.eval_every
    if spec.type == "fifo":
        return "fifo (no early stopping: every trial trains all its steps)"
    grace = f"grace {spec.grace_period} evaluation(s) ({spec.grace_period * every} steps)"
    if spec.type == "asha":
        rule = f"asha, {grace}, reduction factor {spec.reduction_factor:g}"
    else:
        rule = f"curve, {grace}, z {spec.z:g}, keeps the top {spec.top_k}"
    return f"{rule}, on {spec.metric} ({spec.mode}); baseline seeds are never stopped"


def _cmd_sweep(args: argparse.Namespace) -> int:
    from sublayer_search.search.plan.experiment import Experiment, load_experiment
    from sublayer_search.search.plan.preflight import plan_size_problems
    from sublayer_search.search.plan.problems import ExperimentError, Problem
    from sublayer_search.search.plan.resources import resource_problems
    from sublayer_search.search.plan.sweep_plan import SweepPlan, plan_sweep, trial_table

    notes: list[str] | None = [] if args.dry_run else None
    found: list[Problem] = []  # the file's problems, reported with the plan's

    def planned(exp: Experiment) -> SweepPlan:
        too_big = plan_size_problems(exp)  # refused before a single order is drawn
        if too_big:
            raise ExperimentError(args.file, found + too_big)
        return plan_sweep(exp, args.file, address=args.address, check_resources=not args.dry_run,
                          notes=notes, tracking_uri=args.tracking_uri, found=found)

    try:
        exp = load_experiment(args.file, found=found)
        plan = planned(exp)
    except ExperimentError as exc:
        return _bad(str(exc))
    from sublayer_search.search.searchers.prior import PriorError, prior_for

    try:  # search.prior: its studies are read and fitted before anything runs
        prior = prior_for(exp.search.prior, algorithm=exp.search.algorithm,
                          tracking_uri=args.tracking_uri or exp.tracking.uri)
    except PriorError as exc:
        return _bad(str(ExperimentError(args.file, exc.problems)))
    rows = trial_table(plan)
    if len(rows) > MAX_TRIALS and not args.yes and not args.dry_run:
        return _bad(f"{args.file}: the plan has {len(rows):,} trials (more than {MAX_TRIALS:,}); "
                    "check it with --dry-run, then run it with --yes")
    if args.dry_run:
        for note in notes or []:
            print(f"sublayer: note: {note}", file=sys.stderr)
        for problem in resource_problems(exp, args.address):
            print(f"sublayer: warning: {problem} (a cluster must provide this; give --address "
                  "to check it there)", file=sys.stderr)
        estimate = plan.task.estimate  # counts resting on a vocabulary not built yet: ~
        shown = [{**r, "order": _shown_order(r["order"], t.variant.params()),
                  **({c: f"~{r[c]}" for c in ESTIMATED if c in r} if estimate else {})}
                 for r, t in zip(rows, plan.trials, strict=True)]
        half = [c for c in ("n_h", "guidance", "stacks") if any(c in r for r in rows)]
        _print_table(shown, ["name", "family", "seed", "n_s", "n_f", *half, "units", "params",
                             "flops_per_token", "order"])
        if estimate:
            print(f"~ {' and '.join(ESTIMATED)} assume {estimate}")
        from sublayer_search.search.oneshot.plan import (
            dry_run_footer,  # a searcher's budget, a one-shot's stages
        )

        for line in plan.describe_models():  # a translation sweep: IOT and baseline depths
            print(line)
        print(dry_run_footer(plan))
        print(f"scheduler: {_scheduler_line(exp)}")
        if prior is not None:
            print(f"search.prior: {prior.describe()}")
        return ExitCode.OK
    # Ray auth: a local sweep keeps token auth on, on 127.0.0.1 (local_ray); --address: the cluster's
    from sublayer_search.search.oneshot.stage_one import OneShotError
    from sublayer_search.search.run.progress import starting_line
    from sublayer_search.search.run.sweep import TrackingOutage, run_sweep

    print(starting_line(len(rows), plan.metric), file=sys.stderr, flush=True)
    from sublayer_search.search.tracking.links import closing_lines, program

    try:
        outcome = run_sweep(plan, resume=args.resume, address=args.address,
                            tracking_uri=args.tracking_uri)
    except ExperimentError as exc:
        return _bad(str(exc))
    except OneShotError as exc:  # the supernet failed: like failed trials
        print(f"sublayer: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    except TrackingOutage as exc:  # EX_TEMPFAIL: try again later
        print(f"sublayer: {exc}; once MLflow is back: {program()} sweep {args.file} --resume",
              file=sys.stderr)
        return ExitCode.TRACKING_OUTAGE
    _print_trials(outcome.trials, ["name", "family", "seed", "status", "steps", plan.metric,
                                   f"best_{plan.metric}"], metric=plan.metric, mode=plan.mode)
    from sublayer_search.analysis.store.mlflow_store import redact_uri

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
        print(f"sublayer: sweep interrupted; its runs are KILLED in MLflow. Continue it with: "
              f"{program()} sweep {shlex.quote(args.file)} --resume", file=sys.stderr)
        return ExitCode.INTERRUPTED
    bad = Counter(str(r["status"]) for r in outcome.trials if r["status"] in FAILED_STATUSES)
    if bad:
        words = ", ".join(f"{n} {status}" for status, n in sorted(bad.items()))
        if exp.failure.tolerate:
            print(f"sublayer: {words} (failure.tolerate: true, so the sweep still succeeds)",
                  file=sys.stderr)
            return ExitCode.OK
        print(f"sublayer: {words} of {len(outcome.trials)} trial(s); their runs in MLflow say "
              "why (tag sublayer.error). Exit status 1 (set failure.tolerate: true if failures "
              "are expected)", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


# -- sublayer ui ----------------------------------------------------------------------------
def _port(text: str) -> int:
    """argparse ``type`` of ``--port``: a TCP port number 1..65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"got {text!r}, expected a TCP port number in 1..65535")
    return port


def _tracking_uri(text: str) -> str:
    """argparse ``type`` of ``--tracking-uri``: not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"got {text!r}, expected an MLflow tracking URI (e.g. "
                                         "sqlite:///mlflow.db or http://127.0.0.1:5000)")
    return text


def _cmd_ui(args: argparse.Namespace) -> int:
    from sublayer_search.search.cli.ui import serve
    return serve(tracking_uri=args.tracking_uri, host=args.host, port=args.port)


# -- sublayer analyze -----------------------------------------------------------------------
def _cmd_analyze(args: argparse.Namespace) -> int:
    from sublayer_search.analysis.cli import run_analyze
    from sublayer_search.search.tracking.attention import sweep_attention
    # Table 7 needs the trained models (torch), which analysis never imports: it gets this
    args.attention_study = lambda experiment, uri, trials: sweep_attention(
        experiment, tracking_uri=uri, trials=trials)
    return run_analyze(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sublayer", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Architecture search over transformer sublayer orders: train one order, "
                    "sample search spaces,\nrun sweeps on Ray Tune tracked in MLflow, serve "
                    "the MLflow UI and analyse sweeps.",
        epilog="sublayer COMMAND --help describes each command.\n" + exit_code_help())
    sub = parser.add_subparsers(dest="command", required=True)

    from sublayer_search.search.cli import export as export_cli
    from sublayer_search.search.cli import replay as replay_cli
    from sublayer_search.search.cli.train import add_train_arguments

    p = sub.add_parser("train", help="train one order on a corpus")
    add_train_arguments(p)
    p.set_defaults(func=_cmd_train)

    p = sub.add_parser("spaces", help="inspect search spaces")
    ssub = p.add_subparsers(dest="spaces_command", required=True)
    s = ssub.add_parser("sample", help="print the orders of a space with their counts and costs",
                        description="Print the orders of a space with their counts and costs.",
                        epilog=_spaces_epilog(),
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    from sublayer_search.spaces.registry import ALL_SPACES

    names = list(ALL_SPACES)
    s.add_argument("space", help=f"{', '.join(names[:-1])} or {names[-1]}")
    s.add_argument("args", nargs="*", help="space arguments as NAME=VALUE (e.g. n=16 k=[0,6])")
    s.add_argument("--kind", default="lm", choices=["lm", "encoder", "decoder"],
                   help="model kind whose sublayers the orders use (default: lm)")
    s.set_defaults(func=_cmd_spaces_sample)

    p = sub.add_parser("sweep", help="run an experiment file on Ray Tune, tracked in MLflow")
    p.add_argument("file", help="experiment YAML (see configs/)")
    p.add_argument("--dry-run", action="store_true", help="print the trial table and stop")
    p.add_argument("--resume", action="store_true", help="finish a sweep whose driver was killed")
    p.add_argument("--address", default=None, help="Ray cluster address (default: $RAY_ADDRESS "
                   "or a local Ray)")
    p.add_argument("--tracking-uri", default=None, help="MLflow tracking URI (default: the file's "
                   "tracking.uri, sqlite:///mlflow.db)")
    p.add_argument("--yes", action="store_true", help=f"run a plan of more than {MAX_TRIALS:,} "
                   "trials")
    p.set_defaults(func=_cmd_sweep)

    p = sub.add_parser("ui", help="open the MLflow UI on a sweep's store",
                       description="Serve the MLflow UI on a store of sweeps (a light `mlflow "
                                   "server`) until Ctrl-C.")
    p.add_argument("--tracking-uri", type=_tracking_uri, default="sqlite:///mlflow.db",
                   help="the MLflow store to show (default: sqlite:///mlflow.db, where `sublayer "
                        "sweep` writes by default)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; the UI "
                        "has no authentication, so another address is warned about)")
    p.add_argument("--port", type=_port, default=5000,
                   help="TCP port, 1..65535 (default: 5000; one in use is refused with a free "
                        "one named)")
    p.set_defaults(func=_cmd_ui)

    p = sub.add_parser("analyze", help="figures, tables and a report from sweeps or paper data")
    from sublayer_search.analysis.cli import add_arguments
    add_arguments(p)
    p.set_defaults(func=_cmd_analyze)
    replay_cli.add_replay(sub)
    export_cli.add_export(sub)
    return parser


def _internal_error(exc: Exception, argv: Sequence[str]) -> int:
    """One line on stderr for an unexpected error; its traceback goes to a private log file."""
    import tempfile
    import time
    import traceback

    text = "".join(traceback.format_exception(exc))
    lines = str(exc).strip().splitlines()
    what = f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    folder = os.path.join(tempfile.gettempdir(), "sublayer-errors")
    stamp = f"{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.stat(folder).st_uid != os.getuid():  # someone else's folder: a file of our own
            raise PermissionError
        fd, path = tempfile.mkstemp(prefix=f"{stamp}-", suffix=".log", dir=folder)
    except OSError:
        try:
            fd, path = tempfile.mkstemp(prefix=f"sublayer-error-{stamp}-", suffix=".log")
        except OSError as log_exc:
            fd, path = -1, f"nowhere ({log_exc.strerror or log_exc})"
    if fd >= 0:
        try:
            with os.fdopen(fd, "w") as fh:  # mkstemp: mode 0600, only this user reads it
                fh.write(f"sublayer {' '.join(argv)}\n{text}")
        except OSError as log_exc:
            path += f" (incomplete: {log_exc.strerror or log_exc})"
    where = f"details in {path}"
    print(f"sublayer: internal error: {what} ({where})", file=sys.stderr)
    return ExitCode.FAILED


class _Notes(logging.Handler):
    """``sublayer: …`` on stderr for the product's INFO notes (a cache being built)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"sublayer: {record.getMessage()}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass


def _say_slow_steps() -> None:
    """On a terminal, the notes the product logs before a slow step (a first use of a
    corpus learns its BPE vocabulary: seconds without a word otherwise). Off a terminal
    (logs, CI, tests) stderr keeps to results and errors."""
    notes = logging.getLogger("sublayer_search.notes")
    if not sys.stderr.isatty() or any(isinstance(h, _Notes) for h in notes.handlers):
        return
    notes.setLevel(logging.INFO)
    notes.addHandler(_Notes())


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    _say_slow_steps()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its message; usage errors are 2
        return int(exc.code or ExitCode.OK)
    try:
        return int(args.func(args) or ExitCode.OK)
    except KeyboardInterrupt:  # a second Ctrl-C: the sweep's runs were closed as KILLED
        print("sublayer: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as exc:  # not bad input (that is exit 2): no raw traceback for the user
        return _internal_error(exc, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
