"""Learning-curve stopping (``scheduler: {type: curve}``), driven by recorded curves.

Ray Tune's own scheduler interface is called by the replay engine exactly as a live
sweep calls it (``test_curve_sweep.py`` checks that on a real sweep). These curves are
built here: baseline seeds that finish first, a clear loser, a slow starter that
overtakes the field, and early leaders that flatten out.
"""

from __future__ import annotations

import math

import pytest
from curve_helpers import EVERY, STEPS
from curve_helpers import curve as _curve
from curve_helpers import shape as _shape

from sublayer_search.search.replay.engine import Curve, Point, SchedulerSettings, replay
from sublayer_search.search.stopping.curve import CurveStopping


def _sweep() -> list[Curve]:
    curves = [_curve(f"base{s}", _shape(3.6 + 0.02 * (s - 1), 2.95 + 0.01 * (s - 1)),
                     start=0.0, baseline=True) for s in range(3)]
    curves += [
        _curve("leader_a", _shape(3.55, 2.90), start=100.0),
        _curve("leader_b", _shape(3.56, 2.91), start=100.0),
        _curve("leader_c", _shape(3.57, 2.92), start=101.0),
        _curve("loser", _shape(3.80, 3.40), start=102.0),
        # worst of all at its first two evaluations, best at the end: steep and late
        _curve("slow_starter", _shape(3.90, 2.80, bend=2.2), start=103.0),
    ]
    return curves


def _settings(name: str = "curve", **kw: float) -> SchedulerSettings:
    return SchedulerSettings(name=name, max_t=STEPS, grace_period=EVERY, metric="val_bpc",
                             mode="min", **kw)  # type: ignore[arg-type]


def test_the_slow_starter_is_kept_and_the_clear_loser_stopped():
    report = replay(_sweep(), _settings())
    assert set(report.top_k) == {"slow_starter", "leader_a", "leader_b"}
    assert report.kept == report.top_k and report.regret == 0
    assert report.picked == "slow_starter"
    assert report.stopped == {"loser": 2 * EVERY}  # its second evaluation: the first with a slope
    assert all(t.survived for t in report.trials if t.baseline)
    assert report.compute_fraction < 1 and report.candidate_compute_fraction < 1


def test_asha_with_the_old_defaults_loses_the_slow_starter():
    """The failure the curve rule answers: grace 1, reduction 2 stops it at the first rung."""
    report = replay(_sweep(), _settings("asha", reduction_factor=2.0))
    assert "slow_starter" in report.stopped and report.regret > 0.05


def test_without_slope_credit_the_slow_starter_is_lost():
    """The slope credit, not the noise margin alone, is what keeps it."""
    curves = _sweep()
    sched = CurveStopping(max_t=STEPS, grace_period=EVERY, metric="val_bpc", mode="min",
                          slope_credit=False)
    import sublayer_search.search.replay.engine as engine

    made = engine.make_scheduler
    engine.make_scheduler = lambda settings: sched  # type: ignore[assignment]
    try:
        report = replay(curves, _settings())
    finally:
        engine.make_scheduler = made
    assert "slow_starter" in report.stopped


def test_no_candidate_is_stopped_at_its_first_evaluation():
    report = replay(_sweep(), _settings(z=0.0))
    assert report.stopped and min(report.stopped.values()) >= 2 * EVERY


def test_nothing_is_stopped_without_finished_baseline_seeds():
    """Sigma is the spread of the baseline seeds: with fewer than two, no decision."""
    curves = [c for c in _sweep() if not c.baseline or c.name == "base0"]
    report = replay(curves, _settings(z=0.0))
    assert report.stopped == {}
    assert report.candidate_compute_fraction == pytest.approx(1.0)


def test_a_larger_margin_never_trains_less():
    used = [replay(_sweep(), _settings(z=z)).compute_fraction for z in (0.0, 2.0, 50.0, 1e4)]
    assert used == sorted(used) and used[0] < used[-1] == 1.0


def test_maximised_metrics_are_mirrored():
    flipped = [Curve(name=c.name, order=c.order, baseline=c.baseline, start=c.start,
                     final=-c.final, points=tuple(Point(step=p.step, value=-p.value,
                                                        time=p.time) for p in c.points))
               for c in _sweep()]
    settings = SchedulerSettings(name="curve", max_t=STEPS, grace_period=EVERY,
                                 metric="val_bpc", mode="max")
    report = replay(flipped, settings, rank_mode="max")
    assert report.stopped == {"loser": 2 * EVERY} and report.picked == "slow_starter"


def test_candidate_compute_leaves_the_baseline_seeds_out():
    report = replay(_sweep(), _settings())
    cands = [t for t in report.trials if not t.baseline]
    assert report.candidate_compute_fraction == pytest.approx(
        sum(t.steps for t in cands) / (len(cands) * STEPS))
    assert report.compute_fraction == pytest.approx(
        (sum(t.steps for t in cands) + 3 * STEPS) / (8 * STEPS))


@pytest.mark.parametrize(("kw", "field"), [({"z": -1.0}, "z"), ({"z": math.nan}, "z"),
                                           ({"top_k": 0}, "top_k")])
def test_bad_settings_name_the_field(kw, field):
    with pytest.raises(ValueError, match=f"^{field}: got"):
        _settings(**kw)


def test_bad_constructor_arguments_are_refused():
    with pytest.raises(ValueError, match="grace_period=0"):
        CurveStopping(max_t=STEPS, grace_period=0)


# -- on the shipped study (real recorded curves) -------------------------------------------
def _bench():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_asha.py"
    spec = importlib.util.spec_from_file_location("replay_asha_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def shipped():
    from sublayer_search.search.recorded.from_export import open_export, sweep_from_export

    return sweep_from_export(open_export("mini_press2020", builtin=True))


def _mini(shipped, name: str, curves=None, **kw: float):
    settings = SchedulerSettings(name=name, max_t=shipped.steps, metric=shipped.metric,  # type: ignore[arg-type]
                                 mode="min", grace_period=shipped.eval_every, **kw)
    return replay(list(curves or shipped.curves), settings)


def test_the_default_keeps_the_shipped_top3_with_the_baselines_whole(shipped):
    report = _mini(shipped, "curve")
    assert len(report.kept) == 3 and report.regret == 0
    assert all(t.survived and t.steps == shipped.steps for t in report.trials if t.baseline)
    # the figures docs/search.md states (benchmarks/replay_asha.py, recorded arrival)
    assert report.compute_fraction == pytest.approx(0.694, abs=0.0005)
    assert report.candidate_compute_fraction == pytest.approx(0.648, abs=0.0005)


def test_when_the_shipped_winners_start_slowly_asha_loses_them_and_curve_keeps_them(shipped):
    top = _mini(shipped, "curve").top_k
    slow = _bench().slow_winners(shipped.curves, top)
    first = sorted(c.points[0].value for c in slow if not c.baseline)
    for c in slow:  # the winners now start in the worse half, and end where they did
        if c.name in top:
            assert c.points[0].value >= first[len(first) // 2]
            assert c.points[-1].value == next(o for o in shipped.curves if o.name == c.name).final
    assert _mini(shipped, "asha", slow, reduction_factor=2.0).kept == ()
    kept = _mini(shipped, "curve", slow)
    assert kept.kept == top and kept.regret == 0


def test_replay_command_prints_both_compute_figures(capsys):
    from sublayer_search.search.cli.main import main

    assert main(["replay", "--builtin", "mini_press2020", "--scheduler", "curve"]) == 0
    out = capsys.readouterr().out
    assert "(69.4%)" in out and "candidates alone (baseline seeds left out): 64.8%" in out
    assert "kept 3 of 3" in out


@pytest.mark.parametrize("value", ["-1", "nan", "two"])
def test_replay_command_refuses_a_bad_z(capsys, value):
    from sublayer_search.search.cli.main import main

    assert main(["replay", "--builtin", "mini_press2020", "--scheduler", "curve", "--z",
                 value]) == 2
    assert f"--z: got {value!r}, expected a number >= 0" in capsys.readouterr().err
