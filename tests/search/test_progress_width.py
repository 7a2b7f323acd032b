"""The progress line fits the terminal it is drawn on: a real pty sized to 80, 120 and 0
columns (a pty that reports no size), and a stream that is not a terminal."""

from __future__ import annotations

import fcntl
import io
import os
import struct
import termios
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Variant
from sublayer_search.search.run.progress import (
    Snapshot,
    SweepProgress,
    render,
    snapshot,
    starting_line,
)

NAME, ORDER = "perm03@seed0", "sssfsfffsfsfsfsf"


def _trial(status: str, value: float | None, step: int) -> SimpleNamespace:
    planned = Trial(name=NAME, candidate="perm03", variant=Variant(order=ORDER), seed=0,
                    space="permutations")
    result = {"step": step, "status": "running"} | ({} if value is None else {"val_bpc": value})
    return SimpleNamespace(status=status, config={"trial": planned}, last_result=result)


TRIALS = [_trial("TERMINATED", 3.2144, 160), _trial("RUNNING", 3.5, 80),
          _trial("RUNNING", None, 0)] + [_trial("PENDING", None, 0)] * 7


@pytest.fixture
def pty_of() -> Iterator:
    """A function giving the writing end of a fresh pty of ``columns`` columns."""
    opened: list[int] = []

    def make(columns: int) -> io.TextIOWrapper:
        leader, follower = os.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
        opened.append(leader)
        stream = open(follower, "w", encoding="utf-8", closefd=True)  # noqa: SIM115
        opened_streams.append(stream)
        return stream

    opened_streams: list[io.TextIOWrapper] = []
    yield make
    for stream in opened_streams:
        stream.close()
    for fd in opened:
        os.close(fd)


def _drawn(stream: io.TextIOWrapper) -> list[str]:
    out = io.StringIO()
    cb = SweepProgress(total=10, metric="val_bpc", steps=160, stream=stream, tty_every=0.0,
                       clock=iter(range(0, 10_000, 7)).__next__)
    assert cb.tty == stream.isatty()
    cb.stream = _Tee(stream, out)
    cb.on_step_end(iteration=1, trials=TRIALS)
    cb.on_experiment_end(trials=TRIALS)
    return [part for chunk in out.getvalue().split("\r\x1b[K") for part in chunk.splitlines()
            if part]


class _Tee:
    """Writes to the terminal and keeps a copy: the pty's size is read from the first."""

    def __init__(self, stream: io.TextIOWrapper, copy: io.StringIO) -> None:
        self.stream, self.copy = stream, copy

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def write(self, text: str) -> int:
        self.copy.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()


@pytest.mark.parametrize("columns", [80, 120])
def test_the_line_fits_a_terminal_with_counts_best_elapsed_and_eta_first(pty_of,
                                                                         columns: int) -> None:
    lines = _drawn(pty_of(columns))
    assert lines
    for line in lines:
        assert len(line) < columns, line
        assert "1/10 done" in line and "best val_bpc 3.214" in line
        assert "elapsed " in line and "ETA " in line and "…" not in line
    # at 120 the whole counts and the best trial's name fit, its order does not
    assert ("1 finished, 2 running, 7 pending" in lines[-1]) == (columns == 120)
    assert (NAME in lines[-1]) == (columns == 120) and ORDER not in lines[-1]


def test_a_terminal_reporting_no_width_gets_80_columns_not_an_ellipsis(pty_of) -> None:
    lines = _drawn(pty_of(0))
    assert lines and all(len(line) < 80 and "ETA " in line and line != "…" for line in lines)


def test_off_a_terminal_the_whole_line_is_written() -> None:
    out = io.StringIO()
    cb = SweepProgress(total=10, metric="val_bpc", steps=160, stream=out, line_every=0.0)
    assert not cb.tty
    cb.on_step_end(iteration=1, trials=TRIALS)
    line = out.getvalue().splitlines()[0]
    assert line.startswith("sweep 1/10 done: 1 finished, 2 running, 7 pending, 0 failed")
    assert f"best val_bpc 3.214 {NAME} ({ORDER})" in line and "ETA " in line


def test_render_drops_the_extras_before_the_essentials() -> None:
    snap = Snapshot(total=10, finished=3, running=2, failed=1, elapsed=125.0, metric="val_bpc",
                    best_value=2.0512, best_name=NAME, best_order=ORDER)
    full = render(snap)
    assert f"{NAME} ({ORDER})" in full and render(snap, len(full)) == full
    no_order = render(snap, len(full) - 1)
    assert NAME in no_order and ORDER not in no_order and "3 finished" in no_order
    tight = render(snap, 79)
    assert tight == "4/10 done, 2 running, 1 failed | best val_bpc 2.051 | elapsed 2:05 | ETA 3:08"
    assert render(snap, 30) == "4/10 | 2.051 | 2:05 | ETA 3:08"
    assert len(render(snap, 12)) == 12 and render(snap, 12).endswith("…")
    assert len(starting_line(10, "val_bpc", 79)) <= 79
    assert starting_line(10, "val_bpc").endswith("| starting Ray and MLflow")


def test_trials_an_interrupt_ended_count_as_killed_not_stopped() -> None:
    """Tune ends every trial on Ctrl-C: one whose last result is not ``done`` was killed
    (``--resume`` trains it); stopped is the scheduler's word alone."""
    killed = _trial("TERMINATED", 3.3, 80)
    killed.last_result["done"] = False
    early = _trial("TERMINATED", 3.4, 80)
    early.last_result["done"] = True  # the scheduler's stop marks the result done
    snap = snapshot([killed, early, _trial("PENDING", None, 0)], total=3, metric="val_bpc",
                    mode="min", elapsed=1.0, steps=160)
    assert (snap.killed, snap.stopped, snap.ended, snap.pending) == (1, 1, 1, 1)
    assert render(snap).startswith("sweep 1/3 done: 0 finished, 1 stopped, 1 killed, "
                                   "0 running, 1 pending")
