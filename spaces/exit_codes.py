"""``ExitCode``: what every ``sublayer`` command's exit status means (shared by the CLIs of
``search`` and ``analysis``; dependency-free like :mod:`.records`)."""

from __future__ import annotations

from enum import IntEnum

__all__ = ["ExitCode", "exit_code_help"]


class ExitCode(IntEnum):
    """Exit statuses of every ``sublayer`` command."""

    OK = 0
    """Success (a sweep: every trial finished, or ``failure.tolerate: true``)."""
    FAILED = 1
    """Failed trials, a failed supernet, or an internal error (its traceback in a log file)."""
    BAD_INPUT = 2
    """Bad input: one message naming the field, the value and what was expected; nothing
    was written, Ray was not started and MLflow was not touched."""
    TRACKING_OUTAGE = 75
    """``EX_TEMPFAIL``: MLflow stayed unreachable; the writes are journalled, run again
    with ``--resume`` once it is back."""
    INTERRUPTED = 130
    """Ctrl-C (128 + SIGINT): the runs are KILLED in MLflow; ``--resume`` continues."""


_WORDS = {
    ExitCode.OK: "success",
    ExitCode.FAILED: "failed trials or internal error",
    ExitCode.BAD_INPUT: "bad input",
    ExitCode.TRACKING_OUTAGE: "MLflow unreachable (retry with --resume)",
    ExitCode.INTERRUPTED: "interrupted",
}


def exit_code_help() -> str:
    """Every exit status in one line, for ``--help`` (``0 success, 1 …, 130 interrupted``)."""
    return "Exit status: " + ", ".join(f"{int(c)} {_WORDS[c]}" for c in ExitCode) + "."
