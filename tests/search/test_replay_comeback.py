"""Comeback stopping (``sublayer replay --scheduler curve --rule comeback``) on hand-made
curves: a hopeless candidate stops, a slow starter the calibration says can come back is
kept, baselines never stop, and the calibration never includes the judged study."""

from __future__ import annotations

import math

import numpy as np
import pytest
from curve_helpers import EVERY, STEPS
from curve_helpers import curve as _curve
from curve_helpers import shape as _shape

from sublayer_search.search.cli.main import main
from sublayer_search.search.recorded.arrival import judged_table
from sublayer_search.search.recorded.from_export import open_export, sweep_from_export
from sublayer_search.search.replay.engine import Curve, Point, SchedulerSettings, replay
from sublayer_search.search.stopping.calibration import (
    SAFETY,
    Calibration,
    calibrate,
    calibration_for,
    calibration_line,
    comeback_events,
    deficit,
)
from sublayer_search.search.stopping.comeback import ComebackStopping


def _flat(comeback: float) -> Calibration:
    fractions = tuple((i + 1) / 8 for i in range(7))
    return Calibration(k=3, fractions=fractions, comeback=(comeback,) * 7, sources=("hand",))


def _sweep(*, extra: list[Curve] = ()) -> list[Curve]:  # type: ignore[assignment]
    """Two baseline seeds that finish first, seven close candidates, then ``extra``."""
    curves = [_curve(f"base{s}", _shape(3.6, 2.95 + 0.01 * s), start=0.0, baseline=True)
              for s in range(2)]
    curves += [_curve(f"good{i}", _shape(3.60 + 0.01 * i, 2.90 + 0.01 * i), start=100.0 + i)
               for i in range(7)]
    return curves + list(extra)


def _settings(calibration: Calibration, **kw: float) -> SchedulerSettings:
    return SchedulerSettings(name="curve", rule="comeback", calibration=calibration,
                             max_t=STEPS, grace_period=EVERY, metric="val_bpc", mode="min",
                             **kw)  # type: ignore[arg-type]


def test_a_hopeless_candidate_stops_at_its_first_evaluation():
    hopeless = _curve("hopeless", _shape(4.5, 3.9), start=110.0)
    report = replay(_sweep(extra=[hopeless]), _settings(_flat(1.0)))
    assert report.stopped == {"hopeless": EVERY}
    assert report.kept == report.top_k == ("good0", "good1", "good2")


def test_a_slow_starter_is_kept_when_the_calibration_says_it_can_come_back():
    slow = _curve("slow", _shape(3.75, 2.80, bend=2.2), start=110.0)
    kept = replay(_sweep(extra=[slow]), _settings(_flat(10.0)))
    assert "slow" not in kept.stopped and kept.picked == "slow"
    assert kept.top_k[0] == "slow" and kept.kept == kept.top_k
    # the same curve against a calibration that saw no such comeback: stopped, and lost
    lost = replay(_sweep(extra=[slow]), _settings(_flat(0.5)))
    assert lost.stopped.get("slow") == EVERY and "slow" not in lost.kept


def test_baselines_are_never_stopped():
    curves = _sweep() + [_curve("base_bad", _shape(4.5, 3.9), start=110.0, baseline=True)]
    report = replay(curves, _settings(_flat(0.0), z=0.0))
    assert all(t.survived and t.steps == STEPS for t in report.trials if t.baseline)


def test_no_decision_before_the_field_and_two_seeds():
    hopeless = _curve("hopeless", _shape(4.5, 3.9), start=110.0)
    few = [c for c in _sweep(extra=[hopeless]) if c.name not in ("good4", "good5", "good6")]
    assert replay(few, _settings(_flat(0.0))).stopped == {}  # a field of 5 (itself included) < 2 x k
    one_seed = [c for c in _sweep(extra=[hopeless]) if c.name != "base1"]
    assert replay(one_seed, _settings(_flat(0.0))).stopped == {}


def test_the_seed_floor_keeps_a_candidate_within_seed_noise():
    close = _curve("close", [v + 0.04 for v in _shape(3.62, 2.92)], start=110.0)
    tight = replay(_sweep(extra=[close]), _settings(_flat(0.0), z=0.0))
    assert "close" in tight.stopped  # beyond the k-th best, no comeback allowed
    # seeds ending 0.05 apart: 2 sds of their difference is far more than 0.04
    noisy = [_curve("base1", _shape(3.6, 3.0), start=0.0, baseline=True) if c.name == "base1"
             else c for c in _sweep(extra=[close])]
    assert "close" not in replay(noisy, _settings(_flat(0.0), z=2.0)).stopped


def test_a_larger_comeback_never_trains_less():
    slow = _curve("slow", _shape(3.75, 2.80, bend=2.2), start=110.0)
    used = [replay(_sweep(extra=[slow]), _settings(_flat(c))).compute_fraction
            for c in (0.0, 0.5, 2.0, 50.0)]
    assert used == sorted(used) and used[0] < used[-1]


def test_finished_top_candidates_widen_the_comeback():
    sched = ComebackStopping(calibration=_flat(0.0), max_t=STEPS, metric="m", mode="min")

    class T:
        def __init__(self, tid: str) -> None:
            self.trial_id, self.config = tid, {"trial": {"baseline": False}}

    values = {f"c{i}": [3.6 + 0.01 * i, 2.9 + 0.01 * i] for i in range(6)}
    values["late"] = [3.7, 2.5]  # last at its first evaluation, best at the end
    for tid, (first, _) in values.items():
        sched.on_trial_result(None, T(tid), {"step": 100, "m": first})
    assert sched.comeback(100) == 0.0
    for tid, (_, last) in values.items():
        sched.on_trial_result(None, T(tid), {"step": STEPS, "m": last})
        sched.on_trial_complete(None, T(tid), {"step": STEPS, "m": last})
    field = np.array([v[0] for v in values.values()])
    assert sched.comeback(100) == pytest.approx(deficit(3.7, field, 3))
    assert sched.comeback(100) > 1


def test_maximised_metrics_are_mirrored():
    hopeless = _curve("hopeless", _shape(4.5, 3.9), start=110.0)
    mirrored = [Curve(name=c.name, order=c.order, baseline=c.baseline, start=c.start,
                      final=-c.final, points=tuple(Point(step=p.step, value=-p.value,
                                                         time=p.time) for p in c.points))
                for c in _sweep(extra=[hopeless])]
    settings = SchedulerSettings(name="curve", rule="comeback", calibration=_flat(1.0),
                                 max_t=STEPS, grace_period=EVERY, metric="acc", mode="max")
    assert replay(mirrored, settings, rank_mode="max").stopped == {"hopeless": EVERY}


def test_calibration_by_hand():
    # four candidates, two evaluations (fractions 0.5 and 1); k = 1, a field of 2 at least
    study = [({0.5: 1.0, 1.0: 0.1}, 0.1), ({0.5: 0.0, 1.0: 0.5}, 0.5),
             ({0.5: 2.0, 1.0: 0.9}, 0.9), ({0.5: 4.0, 1.0: 0.8}, 0.8)]
    events = comeback_events(study, k=1, min_field=2, arrivals=0)
    # the winner (index 0) arrives first: a field of 1 < 2 at its own evaluation; none
    assert events == []
    winner_last = [study[1], study[2], study[3], study[0]]
    events = comeback_events(winner_last, k=1, min_field=2, arrivals=0)
    field = np.array([0.0, 2.0, 4.0, 1.0])
    assert events == [(0.5, pytest.approx(deficit(1.0, field, 1)))]
    cal = calibrate({"hand": winner_last}, k=1, arrivals=0)
    assert cal.fractions == (0.5,) and cal.at(0.1) == cal.at(0.5) == events[0][1]


def test_the_envelope_never_rises_with_training():
    cal = calibration_for()
    assert list(cal.comeback) == sorted(cal.comeback, reverse=True)
    assert cal.sources == ("replay40", "mini_press2020") and cal.events > 0
    assert all(math.isfinite(c) and c >= 0 for c in cal.comeback)
    assert f"{SAFETY:g}x" in calibration_line() and "replay40, mini_press2020" in calibration_line()


@pytest.mark.parametrize("study,other", [("replay40", "mini_press2020"),
                                         ("mini_press2020", "replay40")])
def test_the_calibration_leaves_the_judged_study_out_by_content(study, other):
    sweep = sweep_from_export(open_export(study, builtin=True))
    assert calibration_for(judged_table(study, sweep.curves)).sources == (other,)
    renamed = judged_table("a_copy_under_another_name", sweep.curves)
    assert calibration_for(renamed).sources == (other,)
    stranger = judged_table("stranger", sweep.curves[:0])
    assert calibration_for(stranger).sources == ("replay40", "mini_press2020")


def test_bad_constructor_arguments_are_refused():
    with pytest.raises(ValueError, match="grace_period=0"):
        ComebackStopping(calibration=_flat(1.0), max_t=STEPS, grace_period=0)
    with pytest.raises(ValueError, match="calibration"):
        SchedulerSettings(name="curve", rule="comeback", max_t=STEPS)
    with pytest.raises(ValueError, match="rule: got 'nope'"):
        SchedulerSettings(name="curve", rule="nope", max_t=STEPS)  # type: ignore[arg-type]


def test_replay_command_with_rule_comeback(capsys):
    assert main(["replay", "--builtin", "replay40", "--scheduler", "curve", "--rule",
                 "comeback"]) == 0
    out = capsys.readouterr().out
    rule = next(line for line in out.splitlines() if line.startswith("rule: comeback"))
    assert "calibrated on mini_press2020 (" in rule  # never on replay40 itself
    assert "kept 3 of 3" in out and "floor, online:" in out


def test_replay_command_refuses_a_rule_without_curve(capsys):
    assert main(["replay", "--builtin", "replay40", "--rule", "comeback"]) == 2
    err = capsys.readouterr().err
    assert "--rule: got 'comeback' with --scheduler asha, expected --scheduler curve" in err
