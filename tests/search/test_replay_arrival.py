"""``sublayer replay --arrival prior``: a recorded sweep re-timed so that its trials start
in the prior's queue order, with the sweep's own concurrency and durations. The engine on
hand-made curves, then the real command on the shipped ``replay40``."""

from __future__ import annotations

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.search.recorded.arrival import (
    concurrency,
    in_prior_order,
    judged_table,
    retime,
)
from sublayer_search.search.recorded.from_export import open_export, sweep_from_export
from sublayer_search.search.replay.engine import Curve, Point, ReplayError
from sublayer_search.search.searchers.prior import OrderPrior, builtin_tables, same_study
from sublayer_search.search.searchers.queue import prior_queue


def _curve(name: str, start: float, offsets: list[float], *, end: float | None = None,
           baseline: bool = False, order: str = "sf") -> Curve:
    points = tuple(Point(step=10 * (i + 1), value=3.0 - i / 10, time=start + o)
                   for i, o in enumerate(offsets))
    return Curve(name=name, order=order, points=points, final=points[-1].value,
                 baseline=baseline, start=start, end=None if end is None else start + end)


def _running_at_once(curves: list[Curve]) -> int:
    return max(sum(1 for c in curves if c.started <= t < c.ended) for t in
               (c.started for c in curves))


def test_concurrency_is_the_most_trials_that_ran_at_once():
    one_after_another = [_curve("a", 0, [5, 10]), _curve("b", 10, [5, 10])]
    assert concurrency(one_after_another) == 1  # b starts as a ends: a slot handed on
    two = [_curve("a", 0, [5, 10]), _curve("b", 1, [5, 10]), _curve("c", 11, [5, 10])]
    assert concurrency(two) == 2
    assert concurrency([_curve("a", 0, [5])]) == 1


def test_retime_keeps_durations_and_concurrency_and_follows_the_queue():
    curves = [_curve("a", 0, [4, 8], end=9), _curve("b", 1, [1, 2]),
              _curve("c", 3, [10, 20], end=25), _curve("d", 40, [2, 3]),
              _curve("e", 41, [6, 7])]
    queue = ["d", "e", "a", "c", "b"]
    out = retime(curves, queue, slots=2)
    assert [c.name for c in out] == queue
    by = {c.name: c for c in curves}
    for c in out:  # every offset from its own start as recorded, its end too
        old = by[c.name]
        assert [p.time - c.started for p in c.points] == [p.time - old.started
                                                          for p in old.points]
        assert c.ended - c.started == old.ended - old.started
        assert [(p.step, p.value) for p in c.points] == [(p.step, p.value) for p in old.points]
    starts = [c.started for c in out]
    assert starts == sorted(starts) and starts[:2] == [0.0, 0.0]  # two slots from the start
    assert _running_at_once(out) == 2
    # each later trial starts when the earliest running one ends: d ends at 3, e at 7
    assert out[2].started == 3.0 and out[3].started == 7.0
    assert out[4].started == min(out[2].ended, out[3].ended)


def test_retime_refuses_a_bad_queue_or_no_slot():
    curves = [_curve("a", 0, [1]), _curve("b", 0, [1])]
    with pytest.raises(ReplayError, match="queue"):
        retime(curves, ["a"], slots=1)
    with pytest.raises(ReplayError, match="concurrency: got 0"):
        retime(curves, ["a", "b"], slots=0)


def test_prior_order_is_the_queue_baselines_first():
    # the prior scores an order by its share of s in the bottom half: fewer is better here
    prior = OrderPrior(sources=("hand",), mean=(0.0, 0.0), sd=(1.0, 1.0), coef=(1.0, 0.0),
                       weight=1.0)
    curves = [_curve("low_s", 0, [1, 2], order="ffss"), _curve("base", 0, [1, 2],
                                                                order="sfsf", baseline=True),
              _curve("high_s", 3, [1, 2], order="ssff"), _curve("mid", 4, [1, 2],
                                                               order="sffs")]
    out = in_prior_order(curves, prior)
    expected = prior_queue(sorted(curves, key=lambda c: c.started), orders=lambda c: [c.order],
                           baseline=lambda c: c.baseline, prior=prior)
    assert [c.name for c in out] == [c.name for c in expected] == ["base", "low_s", "mid",
                                                                    "high_s"]
    assert _running_at_once(out) == concurrency(curves) == 2


def test_the_replayed_study_is_its_shipped_tables_by_content():
    sweep = sweep_from_export(open_export("replay40", builtin=True))
    judged = judged_table("a_copy", sweep.curves)
    assert all(same_study(t, judged) for t in builtin_tables("replay40"))
    assert not any(same_study(t, judged) for t in builtin_tables("press2020"))


def _lines(out: str) -> dict[str, str]:
    heads = ("arrival prior:", "compute:", "floor, online:", "top-3", "picked:")
    return {h: next(line for line in out.splitlines() if line.startswith(h)) for h in heads}


def test_replay_command_arrival_prior_on_replay40(capsys):
    assert main(["replay", "--builtin", "replay40", "--scheduler", "curve", "--arrival",
                 "prior"]) == 0
    lines = _lines(capsys.readouterr().out)
    arrival = lines["arrival prior:"]
    assert "press2020/table1" in arrival and "mini_press2020/permutations" in arrival
    assert "replay40/" not in arrival  # the replayed study is left out of its prior
    assert "2 at a time" in arrival
    assert "trial-steps (" in lines["compute:"] and "kept " in lines["top-3"]
    assert "regret" in lines["picked:"]
    # started best-predicted first, fewer trials are leaders: the online floor drops
    assert main(["replay", "--builtin", "replay40", "--scheduler", "curve"]) == 0
    recorded = next(line for line in capsys.readouterr().out.splitlines()
                    if line.startswith("floor, online:"))

    def at_least(line: str) -> float:
        return float(line.split("at least ")[1].split("%")[0])

    assert at_least(lines["floor, online:"]) < at_least(recorded)


def test_replay_command_prior_names(capsys):
    assert main(["replay", "--builtin", "replay40", "--arrival", "prior", "--prior",
                 "press2020"]) == 0
    arrival = _lines(capsys.readouterr().out)["arrival prior:"]
    assert "press2020/table1" in arrival and "mini_press2020" not in arrival
    assert main(["replay", "--builtin", "replay40", "--arrival", "prior", "--prior",
                 "replay40"]) == 2
    err = capsys.readouterr().err
    assert "--prior: got 'replay40', expected a study other than the replayed one" in err
    assert main(["replay", "--builtin", "replay40", "--prior", "press2020"]) == 2
    assert "--prior: got 'press2020' without --arrival prior" in capsys.readouterr().err
    assert main(["replay", "--builtin", "replay40", "--arrival", "prior", "--prior",
                 "no_such_study"]) == 2
    assert "--prior: got 'no_such_study', expected one of press2020" in \
        capsys.readouterr().err
