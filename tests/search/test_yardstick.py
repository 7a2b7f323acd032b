"""Noise-aware yardsticks: eps-good orders, regret in seed sds (search/recorded/yardstick.py),
in the searcher benchmark and in ``sublayer replay``."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import pytest

from sublayer_search.search.cli.main import main
from sublayer_search.search.recorded.yardstick import (
    eps_good,
    regret_in_sds,
    seed_noise,
)
from sublayer_search.search.replay.engine import SchedulerSettings, replay
from sublayer_search.search.searchers.prior import builtin_tables
from tests.search.test_prior import _bench
from tests.search.test_replay import curve

BASE = "sfsfsfsf"


def test_seed_noise_reads_the_interleaved_baseline_before_any_other_repeat() -> None:
    records = [(BASE, 1.0), (BASE, 1.2), ("ssffssff", 5.0), ("ssffssff", 9.0),
               ("ssffssff", 1.0), ("ssssffff", 2.0)]
    noise = seed_noise(records)
    assert noise is not None and noise.order == BASE and noise.n == 2
    assert noise.sd == pytest.approx(statistics.stdev([1.0, 1.2]))
    # no interleaved repeat: the most repeated order gives the scale
    other = seed_noise([r for r in records if r[0] != BASE])
    assert other is not None and other.order == "ssffssff" and other.n == 3
    assert seed_noise([("sf", 1.0), ("fs", 2.0)]) is None  # nothing repeated: no scale
    assert seed_noise([(BASE, 1.0), (BASE, 1.0)]) is None  # no spread: no scale
    assert seed_noise([(BASE, 1.0), (BASE, math.nan), (BASE, 2.0)]).n == 2  # type: ignore[union-attr]


def test_eps_good_counts_orders_within_eps_seed_sds_of_the_best() -> None:
    values = {"a": 1.00, "b": 1.05, "c": 1.10, "d": 1.30}
    assert eps_good(values, eps=1, sd=0.05) == {"a", "b"}
    assert eps_good(values, eps=2, sd=0.05) == {"a", "b", "c"}
    assert eps_good(values, eps=0, sd=0.05) == {"a"}
    assert eps_good(values, eps=1, sd=0.05, mode="max") == {"d"}
    with pytest.raises(ValueError, match="eps, sd: got"):
        eps_good(values, eps=1, sd=0.0)
    assert regret_in_sds(1.10, 1.00, 0.05) == pytest.approx(2.0)
    assert math.isnan(regret_in_sds(1.1, 1.0, 0.0))


def test_benchmark_reports_evaluations_to_an_eps_good_order(capsys) -> None:
    """Press Table 1: the baseline's 5 seeds give sd 0.34 ppl; the count of eps-good orders
    is the table's, and no searcher reaches one later than it reaches the top 1."""
    bench = _bench()
    table1 = next(t for t in builtin_tables("press2020") if t.table.endswith("table1"))
    values = table1.values()
    sd = statistics.stdev([v for o, v in table1.records if o == "sf" * 16])
    best = min(values.values())
    want = sum(v - best <= sd + 1e-12 for v in values.values())
    res = bench.judge(table1, [], seeds=4, searchers=["random", "surrogate"], eps=1.0)
    assert res["seed_sd"] == pytest.approx(sd) and res["eps_good"] == want
    for r in res["searchers"].values():
        assert r["good"]["median"] <= r["top1"]["median"]
    wide = bench.judge(table1, [], seeds=2, searchers=["random"], eps=3.0)
    assert wide["eps_good"] > want
    assert bench.main(["--seeds", "2", "--searchers", "random", "--eps", "1"]) == 0
    out = capsys.readouterr().out
    assert f"eps-good: {want} order(s) within 1 x seed sd 0.3393" in out
    with pytest.raises(SystemExit):
        bench.main(["--eps", "-1"])
    assert "--eps: got -1.0" in capsys.readouterr().err
    assert bench.main(["--seeds", "2", "--searchers", "random", "--json"]) == 0
    assert all("eps_good" in r for r in json.loads(capsys.readouterr().out))


ASHA = SchedulerSettings(name="asha", max_t=40, grace_period=10, reduction_factor=2,
                         metric="val_loss")


def test_replay_reports_regret_in_seed_sds_and_whether_an_eps_good_order_was_kept() -> None:
    base = [dataclasses.replace(curve(f"base@{s}", [1.0, 0.9, 0.8, v], start=10 * s,
                                      baseline=True), order=BASE)
            for s, v in enumerate([0.70, 0.80])]  # two seeds of one order: sd 0.0707
    late = curve("late", [3.0, 2.0, 0.9, 0.50], start=300)  # the best final, stopped by ASHA
    near = curve("near", [3.1, 2.1, 1.0, 0.54], start=310)  # within 1 sd of late: stopped too
    kept = curve("kept", [0.9, 0.8, 0.7, 0.65], start=200)
    report = replay([*base, kept, late, near], ASHA, k=2)
    sd = statistics.stdev([0.70, 0.80])
    assert report.noise is not None and report.noise.sd == pytest.approx(sd)
    assert set(report.eps_good) == {"late", "near"} and report.kept_eps_good == ()
    assert report.picked == "kept"
    assert report.regret_sds == pytest.approx((0.65 - 0.50) / sd)
    wide = replay([*base, kept, late, near], ASHA, k=2, eps=3.0)
    assert wide.kept_eps_good == ("kept",)
    alone = replay([kept, late], ASHA, k=2)  # no baseline seed twice: no scale
    assert alone.noise is None and alone.eps_good == () and math.isnan(alone.regret_sds)


def test_replay_command_prints_the_eps_good_line(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["replay", "--builtin", "replay40", "--scheduler", "asha", "--eps", "2"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("eps-good"))
    assert "within 2 x seed sd" in line and "candidate trial(s); kept" in line
    assert "seed sds" in next(x for x in out.splitlines() if x.startswith("picked:"))
    assert main(["replay", "--builtin", "replay40", "--eps", "-1"]) == 2
    assert "--eps: got '-1'" in capsys.readouterr().err
