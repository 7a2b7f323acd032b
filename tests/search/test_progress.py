"""The live sweep progress line: rendering (pure), trial counting, TTY vs. log output,
and one real sweep whose output carries progress lines and runnable closing commands."""

from __future__ import annotations

import io
import shlex
from types import SimpleNamespace

import pytest

from sublayer_search.search.core.trial import Trial
from sublayer_search.search.core.variant import Variant
from sublayer_search.search.run.progress import (
    Snapshot,
    SweepProgress,
    format_duration,
    render,
    snapshot,
)


def _trial(ray_status: str, name: str, order: str, **result: object) -> SimpleNamespace:
    planned = Trial(name=name, candidate=name.split("@")[0], variant=Variant(order=order),
                    seed=0, space="permutations")
    return SimpleNamespace(status=ray_status, config={"trial": planned},
                           last_result=dict(result))


TRIALS = [
    _trial("TERMINATED", "sandwich4_1@seed0", "ssfsfsff", val_bpc=2.5, status="finished"),
    _trial("TERMINATED", "perm00@seed0", "sfffssfs", val_bpc=2.1, status="finished"),
    _trial("TERMINATED", "perm01@seed0", "ffffssss", val_bpc=9.0, status="diverged"),
    _trial("ERROR", "perm02@seed0", "fsfsfsfs"),
    _trial("RUNNING", "baseline@seed1", "sfsfsfsf", val_bpc=1.9),
    _trial("PENDING", "baseline@seed2", "sfsfsfsf"),
]


def test_render_shows_counts_best_elapsed_and_eta() -> None:
    snap = Snapshot(total=10, finished=3, running=2, failed=1, elapsed=125.0, metric="val_bpc",
                    best_value=2.0512, best_name="sandwich4_2@seed0", best_order="sssfsfff")
    line = render(snap)
    assert line.startswith("sweep 4/10 done: 3 finished, 2 running, 4 pending, 1 failed")
    assert "best val_bpc 2.051 sandwich4_2@seed0 (sssfsfff)" in line
    assert "elapsed 2:05" in line
    assert "ETA 3:08" in line  # 125 s / 4 ended * 6 left = 187.5 s


def test_render_before_any_result_and_cut_to_width() -> None:
    line = render(Snapshot(total=3, metric="val_loss"))
    assert "0 finished, 0 running, 3 pending, 0 failed" in line
    assert "best val_loss -" in line and "ETA ?" in line
    assert len(render(Snapshot(total=3), width=40)) <= 40
    assert len(render(Snapshot(total=3), width=15)) == 15
    assert format_duration(3725) == "1:02:05" and format_duration(None) == "?"


def test_snapshot_counts_trials_and_picks_the_best_reported_value() -> None:
    snap = snapshot(TRIALS, total=10, metric="val_bpc", mode="min", elapsed=60.0)
    assert (snap.finished, snap.running, snap.failed, snap.pending) == (2, 1, 2, 5)
    # the running trial's latest value counts; a diverged trial's value never does
    assert (snap.best_value, snap.best_name, snap.best_order) == (1.9, "baseline@seed1",
                                                                   "sfsfsfsf")
    best_max = snapshot(TRIALS, total=6, metric="val_bpc", mode="max", elapsed=1.0)
    assert best_max.best_name == "sandwich4_1@seed0"


def test_a_trial_ended_short_of_its_steps_counts_as_stopped_not_finished() -> None:
    """An interrupted sweep (or a scheduler) ends trials that last reported ``running``
    short of the planned steps: the line says stopped, never finished."""
    trials = [_trial("TERMINATED", "a@seed0", "sfsf", val_bpc=3.0, status="running", step=40),
              _trial("TERMINATED", "b@seed0", "ssff", val_bpc=2.0, status="running", step=160),
              _trial("TERMINATED", "c@seed0", "fsfs", val_bpc=2.5, status="finished", step=160)]
    snap = snapshot(trials, total=3, metric="val_bpc", mode="min", elapsed=1.0, steps=160)
    assert (snap.finished, snap.stopped, snap.ended) == (2, 1, 3)
    assert render(snap).startswith("sweep 3/3 done: 2 finished, 1 stopped, 0 running")
    unplanned = snapshot(trials, total=3, metric="val_bpc", mode="min", elapsed=1.0)
    assert (unplanned.finished, unplanned.stopped) == (3, 0)
    assert "stopped" not in render(unplanned)


def test_callback_redraws_in_place_on_a_tty() -> None:
    out = io.StringIO()
    cb = SweepProgress(total=6, metric="val_bpc", stream=out, tty=True, tty_every=0.0)
    cb.on_step_end(iteration=1, trials=TRIALS[:2])
    cb.on_trial_complete(iteration=2, trials=TRIALS, trial=TRIALS[1])
    cb.on_experiment_end(trials=TRIALS)
    text = out.getvalue()
    assert text.count("\r\x1b[K") == 3 and text.endswith("\n") and text.count("\n") == 1


def test_callback_prints_periodic_lines_off_a_tty() -> None:
    out = io.StringIO()
    cb = SweepProgress(total=6, metric="val_bpc", stream=out, tty=False, line_every=3600,
                       end_every=0.0)
    for i in range(5):  # throttled: one line, not five
        cb.on_step_end(iteration=i, trials=TRIALS[:2])
    cb.on_trial_complete(iteration=6, trials=TRIALS, trial=TRIALS[1])  # a trial ended: a line
    cb.on_experiment_end(trials=TRIALS)
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and all(line.startswith("sweep ") for line in lines)
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()


def test_thousands_of_ended_trials_print_a_few_lines() -> None:
    """A line per ended trial would be 5,000 lines (and 5,000 reads of every trial)."""
    out = io.StringIO()
    cb = SweepProgress(total=5000, metric="val_bpc", stream=out, tty=False, line_every=3600,
                       end_every=3600)
    cb.setup()
    for i in range(1000):
        cb.on_trial_complete(iteration=i, trials=TRIALS, trial=TRIALS[0])
    cb.on_trial_error(iteration=1001, trials=TRIALS, trial=TRIALS[0])  # a failure: a line
    cb.on_experiment_end(trials=TRIALS)
    assert len(out.getvalue().splitlines()) == 3


def _simulated_sweep(*, trials: int, concurrency: int, startup: float, step_time: float,
                     steps: int, eval_every: int) -> list[tuple[float, int, float | None]]:
    """(time, trials ended, ETA shown) of a progress line drawn every second of a sweep of
    equal trials run ``concurrency`` at a time, each reporting every ``eval_every`` steps
    after ``startup`` seconds; the clock is simulated, the callback is the real one."""
    length = startup + steps * step_time
    starts = [(i // concurrency) * length for i in range(trials)]
    now = [0.0]
    out = io.StringIO()
    cb = SweepProgress(total=trials, metric="val_bpc", steps=steps, stream=out, tty=False,
                       line_every=0.0, end_every=0.0, clock=lambda: now[0])
    cb.setup()
    seen = []
    end = max(starts) + length
    t = 0.0
    while t < end:
        now[0] = t
        states = []
        for start in starts:
            if t < start:
                states.append(SimpleNamespace(status="PENDING", config={}, last_result={}))
                continue
            trained = max(0.0, t - start - startup) / step_time
            reported = min(steps, int(trained // eval_every) * eval_every)
            ended = reported >= steps
            states.append(SimpleNamespace(
                status="TERMINATED" if ended else "RUNNING", config={},
                last_result={"step": reported, "val_bpc": 3.0,
                             "status": "finished" if ended else "running"}))
        snap_line = len(out.getvalue().splitlines())
        cb.show(states, force=True)
        lines = out.getvalue().splitlines()
        if len(lines) > snap_line:
            line = lines[-1]
            ended = int(line.split()[1].split("/")[0])
            eta = line.rsplit("ETA ", 1)[1]
            minutes, seconds = eta.split(":") if eta != "?" else (None, None)
            seen.append((t, ended, None if minutes is None else int(minutes) * 60 + int(seconds)))
        t += 1.0
    return seen


def test_eta_is_steady_on_a_sweep_of_equal_trials() -> None:
    """The quickstart's shape (10 trials two at a time, three evaluations each): the ETA is
    known from the first report, before any trial ends, and after the first third of the
    sweep the finish it predicts never swings by more than 2x, nor strays 2x from the truth."""
    seen = _simulated_sweep(trials=10, concurrency=2, startup=6.0, step_time=0.1, steps=450,
                            eval_every=150)
    end = 5 * (6.0 + 45.0)
    first_report = 6.0 + 15.0
    assert all(eta is not None for t, ended, eta in seen if t >= first_report + 1), seen[:30]
    assert any(eta is not None and ended == 0 for t, ended, eta in seen)
    later = [(t, t + eta) for t, ended, eta in seen if ended >= 10 / 3 and eta is not None]
    assert later
    finishes = [finish for _, finish in later]
    assert max(finishes) / min(finishes) <= 2.0, later
    left = [(end - t, finish - t) for t, finish in later if end - t > 10]
    assert all(0.5 <= shown / true <= 2.0 for true, shown in left), left


def test_elapsed_counts_from_the_sweep_command_not_from_tune(monkeypatch) -> None:
    """Ray and MLflow take a while to start: the elapsed time is the wall time since the
    sweep command printed its first line."""
    from sublayer_search.search.run import progress

    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    progress.starting_line(3, "val_bpc")
    now[0] = 160.0  # Ray and MLflow started a minute later
    out = io.StringIO()
    cb = SweepProgress(total=3, metric="val_bpc", stream=out, tty=False, line_every=0.0,
                       clock=lambda: now[0])
    cb.setup()
    now[0] = 225.0
    cb.show(TRIALS[:1], force=True)
    assert "elapsed 2:05" in out.getvalue().splitlines()[-1]


def test_a_tables_floats_share_one_format(capsys) -> None:
    from sublayer_search.search.cli.output import print_table

    print_table([{"name": "a", "val_bpc": 3.15}, {"name": "b", "val_bpc": 3.218},
                 {"name": "c", "val_bpc": 12.5}, {"name": "d", "val_bpc": float("nan")}],
                ["name", "val_bpc"])
    column = [line.split()[1] for line in capsys.readouterr().out.splitlines()[1:]]
    assert column == ["3.150", "3.218", "12.500", "nan"]
    print_table([{"units": 12.0}, {"units": 12.5}, {"units": 13.0}], ["units"])
    assert capsys.readouterr().out.split()[1:] == ["12.0", "12.5", "13.0"]
    print_table([{"lr": 3e-5}, {"lr": 1.5e-4}], ["lr"])
    assert capsys.readouterr().out.split()[1:] == ["3.000e-05", "1.500e-04"]


@pytest.mark.slow
def test_a_real_sweep_prints_progress_and_runnable_closing_lines(tmp_path) -> None:
    from helpers import run_cli, scratch, subprocess_env, write_experiment

    with scratch("sublayer-progress") as home:
        exp_file = write_experiment(tmp_path, "progress_check", orders=["sfsf", "ssff", "fsfs"],
                                    tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                                    max_concurrent=2)
        log = tmp_path / "sweep.log"
        env = subprocess_env(home)
        env.pop("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS")  # Tune's default loggers, as users get
        done = run_cli(["sweep", str(exp_file)], env=env, log=log, timeout=150)
    out = done.stdout
    assert done.returncode == 0, out[-4000:]
    progress = [line for line in out.splitlines() if line.startswith("sweep ")]
    assert progress, out[-4000:]
    assert "sweep 3/3 done: 3 finished, 0 running, 0 pending, 0 failed" in progress[-1]
    assert "best val_bpc " in progress[-1] and "@seed0 (" in progress[-1]
    assert "TensorBoard" not in out and "Configuration for experiment" not in out
    ui = next(line for line in out.splitlines() if line.startswith("serve the MLflow UI with: "))
    analyze = next(line for line in out.splitlines() if line.startswith("analyse the sweep with: "))
    ui_cmd = shlex.split(ui.split(": ", 1)[1])
    assert ui_cmd[1:] == ["ui", "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db"]
    analyze_cmd = shlex.split(analyze.split(": ", 1)[1])
    assert analyze_cmd[1:] == ["analyze", "--experiment", "progress_check", "--tracking-uri",
                               f"sqlite:///{tmp_path}/mlflow.db", "--out",
                               "reports/progress_check"]
