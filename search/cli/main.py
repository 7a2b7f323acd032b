"""The ``sublayer`` command line: ``train``, ``spaces sample``, ``sweep``, ``ui``, ``analyze``, ``replay``, ``export``.

Every bad input prints one clear message to stderr and exits with status 2 before
anything is written, Ray is started or MLflow is touched.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

from sublayer_search.search.cli.fetch import add_fetch
from sublayer_search.search.cli.output import bad as _bad
from sublayer_search.search.cli.spaces import cmd_registered as _cmd_registered
from sublayer_search.search.cli.spaces import cmd_spaces_sample as _cmd_spaces_sample
from sublayer_search.search.cli.spaces import registered_text as _registered_text
from sublayer_search.search.cli.spaces import spaces_epilog as _spaces_epilog
from sublayer_search.search.cli.sweep import (
    MAX_TRIALS,
    plan_file,
    print_dry_run,
    run_planned,
    too_many_trials,
    warn_cluster,
)
from sublayer_search.spaces.exit_codes import ExitCode, exit_code_help

__all__ = ["MAX_TRIALS", "main"]

QUIET_LOGGERS = ("mlflow.store.db.utils", "alembic")
"""Their INFO lines ("Creating initial MLflow database tables", migrations) are noise here."""


# -- sublayer train ---------------------------------------------------------------------
def _cmd_train(args: argparse.Namespace) -> int:
    from sublayer_search.models.lm_workload import fit
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
def _cmd_sweep(args: argparse.Namespace) -> int:
    from sublayer_search.search.core.problems import ExperimentError
    from sublayer_search.search.plan.sweep_plan import trial_table

    notes: list[str] | None = [] if args.dry_run else None  # --dry-run: estimates are notes
    try:
        plan = plan_file(args, notes)  # every problem of the file at once
    except ExperimentError as exc:
        return _bad(str(exc))
    rows = trial_table(plan)
    refused = too_many_trials(args, rows)
    if refused is not None:
        return _bad(refused)
    warn_cluster(args, plan)
    if args.dry_run:
        print_dry_run(args, plan, rows, notes)
        return ExitCode.OK
    return run_planned(args, plan, rows)


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


def _add_spaces(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``sublayer spaces`` (alone: what is registered) and ``spaces sample``."""
    from sublayer_search.spaces.registry import ALL_SPACES

    p = sub.add_parser("spaces", help="inspect search spaces; alone: what is registered",
                       description="Alone: every registered space, searcher, stopping rule "
                                   "and task, and where it came from (built in, or a plugin).")
    p.set_defaults(func=_cmd_registered)
    ssub = p.add_subparsers(dest="spaces_command")
    s = ssub.add_parser("sample", help="print the orders of a space with their counts and costs",
                        description="Print the orders of a space with their counts and costs.",
                        epilog=_spaces_epilog(),
                        formatter_class=argparse.RawDescriptionHelpFormatter)

    names = list(ALL_SPACES)
    s.add_argument("space", help=f"{', '.join(names[:-1])} or {names[-1]}")
    s.add_argument("args", nargs="*", help="space arguments as NAME=VALUE (e.g. n=16 k=[0,6])")
    s.add_argument("--kind", default="lm", choices=["lm", "encoder", "decoder"],
                   help="model kind whose sublayers the orders use (default: lm)")
    s.add_argument("--preset", default=None, metavar="NAME",
                   help="a model preset (debug, tiny, press2020) whose dims weigh the hybrid "
                        "kinds: units of orders with w, r or e, and a space that weighs "
                        "its kinds (budgeted_kinds) need one")
    s.set_defaults(func=_cmd_spaces_sample)


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

    _add_spaces(sub)

    p = sub.add_parser("sweep", help="run an experiment file on Ray Tune, tracked in MLflow",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=_registered_text())
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
    for add in (replay_cli.add_replay, export_cli.add_export, add_fetch):
        add(sub)
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
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv) or argv[:1] == ["spaces"] and len(argv) == 1:
        from sublayer_search.search.core.plugins import PluginError, load_installed
        from sublayer_search.search.plan import experiment as _declares  # noqa: F401

        try:  # installed plugins, listed with the built-ins (each registers on import)
            load_installed()
        except PluginError as exc:
            return _bad(f"a plugin cannot be used:\n{exc}")
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
        return _internal_error(exc, argv)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
