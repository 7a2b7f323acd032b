"""``sublayer replay``'s table: a stopped trial's ``final_<metric>`` is its value at the
stop; the recorded full run's final is a column of its own (issue 30, friction 9)."""

from __future__ import annotations

from sublayer_search.search.cli.main import main
from sublayer_search.search.cli.replay_output import value_at_stop
from sublayer_search.search.replay.engine import Curve, Point
from sublayer_search.spaces.exit_codes import ExitCode


def test_value_at_stop_is_the_last_evaluation_reached():
    c = Curve(name="a", order="sf", final=2.0, points=tuple(
        Point(step=s, value=v, time=float(s)) for s, v in ((100, 4.0), (200, 3.0), (300, 2.0))))
    assert value_at_stop(c, 200) == 3.0 and value_at_stop(c, 250) == 3.0
    assert value_at_stop(c, 300) == 2.0


def test_a_stopped_trial_shows_its_value_at_the_stop(capsys):
    assert main(["replay", "--builtin", "mini_press2020"]) == ExitCode.OK
    lines = capsys.readouterr().out.splitlines()
    head = lines[1].split()
    assert head[-2:] == ["final_val_bpc", "recorded_final"]
    rows = [line.split() for line in lines[2:] if "/800" in line]
    stopped = [r for r in rows if len(r) == 6]
    full = [r for r in rows if len(r) == 5]
    assert stopped and full
    for name, _, steps, stop, at_stop, recorded in stopped:
        assert steps.split("/")[0] == stop
        assert at_stop != recorded, name  # at 100-400 steps the bpc is far from the end
        assert float(at_stop) > float(recorded)
    for _, _, _, final, recorded in full:
        assert final == recorded


def test_past_forty_trials_the_table_lists_the_top_and_the_best_and_counts_the_rest(capsys):
    from sublayer_search.search.cli.replay_output import print_report as _print_report
    from sublayer_search.search.replay.engine import replay
    from sublayer_search.search.replay.settings import SchedulerSettings

    curves = [Curve(name=f"t{i:03d}", order="sf", final=1.0 + i / 100, points=tuple(
        Point(step=s, value=1.0 + i / 100 + 1 / s, time=i + s / 1000) for s in (100, 200, 300)))
        for i in range(120)]
    report = replay(curves, SchedulerSettings(name="asha", metric="val_bpc", mode="min",
                                              max_t=300, grace_period=100), k=3)
    _print_report(report, "val_bpc", curves)
    out = capsys.readouterr().out.splitlines()
    rows = [line.split()[0] for line in out[1:] if line.split()[1:2] == ["sf"]]
    assert len(rows) == 20 and {"t000", "t001", "t002"} <= set(rows)
    assert set(rows) == {f"t{i:03d}" for i in range(20)}  # the best by recorded final
    assert any(line.startswith("... 100 more trial(s) not listed") for line in out)
    assert any(line.startswith("compute:") for line in out)
