"""The replay core over plain curves (no MLflow, no Ray cluster): Ray Tune's schedulers
driven by recorded results in their order of arrival."""

from __future__ import annotations

import math

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.search.replay.engine import (
    Curve,
    Point,
    ReplayError,
    SchedulerSettings,
    replay,
    replay_grid,
    together,
)

ASHA = SchedulerSettings(name="asha", max_t=40, grace_period=10, reduction_factor=2,
                         metric="val_loss")


def curve(name: str, values: list[float], *, start: float, gap: float = 10.0,
          **extra) -> Curve:
    """Evaluations at steps 10, 20, …, arriving ``gap`` ms apart from ``start``."""
    points = tuple(Point(step=10 * (i + 1), value=v, time=start + gap * i)
                   for i, v in enumerate(values))
    return Curve(name=name, order=name, points=points, final=values[-1], **extra)


def test_asha_stops_a_late_trial_below_the_rung_cutoff_and_arrival_order_decides():
    a = curve("a", [1.0, 0.9, 0.8, 0.7], start=0)
    b = curve("b", [2.0, 1.9, 1.8, 1.7], start=100)  # worse than a at every rung, after it
    c = curve("c", [0.5, 0.4, 0.3, 0.2], start=200)
    report = replay([a, b, c], ASHA)
    assert report.stopped == {"b": 10}
    assert report.compute_fraction == pytest.approx((40 + 10 + 40) / 120)
    assert report.evaluation_fraction == pytest.approx(9 / 12)
    # b first: the rung is empty when it arrives, so ASHA keeps it
    early_b = replay([a, curve("b", [2.0, 1.9, 1.8, 1.7], start=-100), c], ASHA)
    assert "b" not in early_b.stopped


def test_top_k_kept_pick_and_regret():
    slow_start = curve("late-bloomer", [3.0, 2.0, 0.5, 0.1], start=300)  # best final
    curves = [curve("a", [1.0, 0.9, 0.8, 0.7], start=0),
              curve("b", [1.1, 1.0, 0.9, 0.8], start=100),
              curve("c", [0.9, 0.8, 0.7, 0.6], start=200), slow_start]
    report = replay(curves, ASHA, k=2)
    assert report.top_k == ("late-bloomer", "c")
    assert "late-bloomer" in report.stopped and report.kept == ("c",)
    assert report.picked == "c" and report.regret == pytest.approx(0.6 - 0.1)
    maximise = replay(curves, ASHA, k=2, rank_mode="max")  # ranking by a higher-is-better metric
    assert maximise.top_k[0] == "b"


def test_the_sweeps_asha_never_stops_a_baseline_but_rays_asha_does():
    curves = [curve("a", [1.0, 0.9, 0.8, 0.7], start=0),
              curve("base", [2.0, 1.9, 1.8, 1.7], start=100, baseline=True)]
    assert replay(curves, ASHA).stopped == {}
    plain = replay(curves, SchedulerSettings(**{**ASHA.__dict__, "name": "asha-all"}))
    assert plain.stopped == {"base": 10}
    assert replay(curves, ASHA).top_k == ("a",)  # candidates are ranked, not baselines


def test_median_rule_stops_a_trial_worse_than_the_median_of_running_means():
    others = [curve(f"t{i}", [1.0 + i / 10] * 4, start=i * 100) for i in range(3)]
    worst = curve("worst", [5.0, 5.0, 5.0, 5.0], start=1000)
    report = replay([*others, worst], SchedulerSettings(
        name="median", max_t=40, grace_period=10, min_samples=3, metric="val_loss"))
    assert report.stopped == {"worst": 10}


def test_hyperband_pauses_halves_and_ends_every_trial():
    values = [[2.0 - i / 20 + j / 100 for j in range(8)][::-1] for i in range(12)]
    curves = together([curve(f"t{i:02d}", v, start=i * 1000) for i, v in enumerate(values)])
    settings = SchedulerSettings(name="hyperband", max_t=80, reduction_factor=2,
                                 metric="val_loss")
    report = replay(curves, settings)
    assert len(report.trials) == 12 and report.stopped
    assert all(t.steps == 80 or t.stopped_at == t.steps for t in report.trials)
    assert 0 < report.compute_fraction < 1
    finals = {t.name: t.final for t in report.trials}
    for name, step in report.stopped.items():  # halving stops the worse half of its bracket
        assert any(t.steps > step and finals[t.name] < finals[name] for t in report.trials)


def test_recording_that_ends_early_is_truncated_and_failed_trials_are_not_ranked():
    curves = [curve("a", [1.0, 0.9, 0.8, 0.7], start=0),
              curve("cut", [0.5, 0.4], start=100, complete=False),
              curve("boom", [0.1, 0.05], start=200, complete=False, failed=True)]
    report = replay(curves, ASHA)
    assert "cut" in report.truncated and "boom" in report.truncated
    by_name = {t.name: t for t in report.trials}
    assert by_name["cut"].full_steps == 40 and by_name["cut"].steps == 20
    assert report.top_k == ("a",)


def test_grid_rows_per_scheduler():
    curves = [curve(f"t{i}", [1.0 + i / 10, 0.9 + i / 10, 0.8, 0.7 + i / 50], start=i * 100)
              for i in range(6)]
    asha = replay_grid(curves, ASHA, grace_periods=[10, 20], reduction_factors=[2, 3])
    assert [(r["grace_period"], r["reduction_factor"]) for r in asha] == [
        (10, 2), (10, 3), (20, 2), (20, 3)]
    assert all(0 < r["compute_fraction"] <= 1 and r["top_k_kept"] <= 3 for r in asha)
    hb = replay_grid(curves, SchedulerSettings(name="hyperband", max_t=40, metric="val_loss"),
                     grace_periods=[10, 20], reduction_factors=[2, 3])
    assert len(hb) == 2  # HyperBand has no grace period


@pytest.mark.parametrize(("make", "expected"), [
    (lambda: SchedulerSettings(name="asha", max_t=40, grace_period=50), "grace_period: got 50"),
    (lambda: SchedulerSettings(name="asha", max_t=40, reduction_factor=1), "reduction_factor"),
    (lambda: SchedulerSettings(name="pbt", max_t=40), "scheduler: got 'pbt'"),  # type: ignore[arg-type]
    (lambda: Curve(name="x", order="sf", final=1.0, points=()), "at least one evaluation"),
    (lambda: Curve(name="x", order="sf", final=1.0, points=(
        Point(step=20, value=1, time=0), Point(step=10, value=1, time=1))), "strictly increasing"),
    (lambda: replay([curve("x", [1.0], start=0)] * 2, ASHA), "distinct trial names"),
    (lambda: replay([curve("x", [1.0], start=0)], ASHA, k=0), "top_k: got 0"),
])
def test_bad_replay_input_names_the_field(make, expected):
    with pytest.raises(ReplayError, match=expected.replace("(", r"\(")):
        make()


@pytest.mark.parametrize(("argv", "expected"), [
    (["replay", "x", "--scheduler", "pbt"], "invalid choice: 'pbt'"),
    (["replay", "x", "--reduction-factor", "1"], "got '1', expected a number > 1"),
    (["replay", "x", "--grace-period", "two"], "got 'two', expected a whole number >= 1"),
    (["replay", "x", "--top-k", "0"], "got '0', expected a whole number >= 1"),
    (["replay", "x", "--tracking-uri", "sqlite:////nonexistent/m.db"], "no MLflow database"),
])
def test_replay_command_bad_input_exits_2(argv, expected, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "mlflow.db").exists()  # nothing created


def test_nan_results_do_not_break_a_replay():
    curves = [curve("a", [1.0, 0.9, 0.8, 0.7], start=0),
              curve("nan", [math.nan, math.nan], start=50, complete=False)]
    report = replay(curves, ASHA)
    assert report.top_k == ("a",) and report.picked == "a" and report.regret == 0
