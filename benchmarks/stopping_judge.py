"""Judge early stopping against its online floor: study x arrival x rule, one table.

For each shipped study with whole recorded curves (``replay40``, ``mini_press2020``) and
each held-out one (``heldout_budget32``, ``heldout_wikichars``: recorded after every rule's
constants were fixed, never used to choose one), each
arrival (``recorded``: as the sweep ran; ``prior``: re-timed so that trials start in the
prior's queue order, the prior fitted on the other studies) and each rule (the margin
rule of ``scheduler: {type: curve}`` at z = 2, its default, and at z = 0; the comeback
rule, calibrated on the *other* shipped study's curves), the row runs the command it
prints (``sublayer replay``) and reads its lines: compute (the first percentage of
``compute:``), the online floor (the first figure of ``floor, online:``), compute minus
that floor in points, the top 3 kept, whether an *eps-good* order (final within one
baseline seed sd of the best) was kept and the regret of the order the rule would pick, in
seed sds.

A second table replays the synthetic *slow winners* variant of ``benchmarks/replay_asha.py``
(the true top 3 start at the candidates' 75th percentile at the first evaluation, the
penalty fading out by half of training, their finals unchanged: what ASHA's first rung
lost on another corpus), recorded arrival, through the library (no command prints it).

Targets: the comeback rule keeps the top 3 with compute <= online floor + 10 points,
every study and arrival; with ``--arrival prior``, top 3 kept at <= 40 % compute. End to
end (the default rule, margin z = 2, with ``--arrival prior``): an eps-good order kept
(regret <= 1 seed sd) at <= 50 % of the exhaustive sweep's trial-steps on every study,
held-out ones included, and the mean compute of the held-out studies within 10 points of
the shipped ones'. Nothing here is tuned: the rules' constants are fixed in their
modules, and each study's calibration leaves that study out.

    .venv/bin/python benchmarks/stopping_judge.py
    .venv/bin/python benchmarks/stopping_judge.py --json
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import re
import sys
from pathlib import Path
from typing import Any

from sublayer_search.search.cli.main import main as sublayer

SHIPPED = ("replay40", "mini_press2020")
HELD_OUT = ("heldout_budget32", "heldout_wikichars")
STUDIES = (*SHIPPED, *HELD_OUT)
ARRIVALS = ("recorded", "prior")
RULES = {"margin z=2": ["--rule", "margin", "--z", "2"],
         "margin z=0": ["--rule", "margin", "--z", "0"],
         "comeback": ["--rule", "comeback"]}
"""Rule label -> the flags after ``--scheduler curve``."""


def row(study: str, arrival: str, rule: str) -> dict[str, Any]:
    """One replay through the real command, read back from what it prints."""
    argv = ["replay", "--builtin", study, "--scheduler", "curve", "--arrival", arrival,
            *RULES[rule]]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = sublayer(argv)
    text = out.getvalue()
    if code != 0:
        raise SystemExit(f"sublayer {' '.join(argv)} exited {code}")
    compute = float(re.search(r"trial-steps \(([\d.]+)%\)", text).group(1))  # type: ignore[union-attr]
    floor = float(re.search(r"uses at least ([\d.]+)%", text).group(1))  # type: ignore[union-attr]
    kept, of = (int(v) for v in re.search(r"kept (\d+) of (\d+)", text).groups())  # type: ignore[union-attr]
    regret = float(re.search(r"= ([\d.]+) seed sds", text).group(1))  # type: ignore[union-attr]
    good, good_kept = (int(v) for v in re.search(  # type: ignore[union-attr]
        r"(\d+) candidate trial\(s\); kept (\d+)", text).groups())
    return {"study": study, "held_out": study in HELD_OUT, "arrival": arrival, "rule": rule,
            "compute": compute, "floor_online": floor, "above_floor": round(compute - floor, 1),
            "kept": kept, "of": of, "eps_good": good, "eps_good_kept": good_kept,
            "regret_sds": regret, "command": "sublayer " + " ".join(argv)}


def slow_winner_rows() -> list[dict[str, Any]]:
    """Each study's slow-winners variant through the margin rule (z 2) and comeback."""
    from sublayer_search.search.recorded.arrival import judged_table
    from sublayer_search.search.recorded.from_export import open_export, sweep_from_export
    from sublayer_search.search.replay.engine import SchedulerSettings, replay
    from sublayer_search.search.replay.floor import compute_floor
    from sublayer_search.search.stopping.calibration import calibration_for
    from sublayer_search.spaces.records import direction

    path = Path(__file__).resolve().parent / "replay_asha.py"
    spec = importlib.util.spec_from_file_location("replay_asha_bench", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rows = []
    for study in SHIPPED:
        sweep = sweep_from_export(open_export(study, builtin=True))
        metric, rank = sweep.scheduler_metric, direction(sweep.metric)
        common: dict[str, Any] = {"name": "curve", "max_t": sweep.steps, "metric": metric,
                                  "grace_period": sweep.eval_every, "mode": direction(metric)}
        top = replay(sweep.curves, SchedulerSettings(**common), rank_mode=rank).top_k
        curves = bench.slow_winners(sweep.curves, top)
        calibration = calibration_for(judged_table(study, sweep.curves))
        for rule, extra in (("margin z=2", {"rule": "margin", "z": 2.0}),
                            ("comeback", {"rule": "comeback", "calibration": calibration})):
            report = replay(curves, SchedulerSettings(**common, **extra), rank_mode=rank)
            floor = compute_floor(report, curves, online=True).fraction
            rows.append({"study": study, "arrival": "recorded, slow winners", "rule": rule,
                         "compute": round(100 * report.compute_fraction, 1),
                         "floor_online": round(100 * floor, 1),
                         "above_floor": round(100 * (report.compute_fraction - floor), 1),
                         "kept": len(report.kept), "of": len(report.top_k)})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = [row(s, a, r) for s in STUDIES for a in ARRIVALS for r in RULES]
    held_out = slow_winner_rows()
    if args.json:
        print(json.dumps({"rows": rows, "slow_winners": held_out}, indent=2))
        return 0
    print(f"{'study':<18} {'set':<8} {'arrival':<9} {'rule':<11} {'compute':>7} {'floor':>6} "
          f"{'+points':>7} {'top3':>5} {'eps-good':>8} {'regret':>6}  command")
    for r in rows:
        print(f"{r['study']:<18} {'held out' if r['held_out'] else 'shipped':<8} "
              f"{r['arrival']:<9} {r['rule']:<11} {r['compute']:>6.1f}% "
              f"{r['floor_online']:>5.1f}% {r['above_floor']:>+7.1f} {r['kept']:>3}/{r['of']} "
              f"{r['eps_good_kept']:>4}/{r['eps_good']:<3} {r['regret_sds']:>6.2f}  {r['command']}")
    print("\nsynthetic slow winners (benchmarks/replay_asha.py's variant), recorded arrival")
    for r in held_out:
        print(f"{r['study']:<15} {r['rule']:<11} {r['compute']:>6.1f}% {r['floor_online']:>5.1f}% "
              f"{r['above_floor']:>+7.1f} {r['kept']:>3}/{r['of']}")
    print("\ncomeback: top 3 kept, compute <= online floor + 10 points:")
    for r in (r for r in rows if r["rule"] == "comeback"):
        met = r["kept"] == r["of"] and r["above_floor"] <= 10.0
        print(f"  {r['study']:<15} {r['arrival']:<9} {'met' if met else 'MISSED'}")
    print("comeback, arrival prior: top 3 kept at <= 40 % compute:")
    for r in (r for r in rows if r["rule"] == "comeback" and r["arrival"] == "prior"):
        met = r["kept"] == r["of"] and r["compute"] <= 40.0
        print(f"  {r['study']:<15} {'met' if met else 'MISSED'}")
    end = [r for r in rows if r["rule"] == "margin z=2" and r["arrival"] == "prior"]
    print("end to end (default rule, arrival prior): an eps-good order kept at <= 50 % compute:")
    for r in end:
        met = r["eps_good_kept"] > 0 and r["regret_sds"] <= 1.0 and r["compute"] <= 50.0
        print(f"  {r['study']:<18} {r['compute']:5.1f}%  regret {r['regret_sds']:.2f} sds  "
              f"{'met' if met else 'MISSED'}")
    shipped = [r["compute"] for r in end if not r["held_out"]]
    held = [r["compute"] for r in end if r["held_out"]]
    if shipped and held:
        gap = sum(held) / len(held) - sum(shipped) / len(shipped)
        print(f"  held-out minus shipped mean compute: {gap:+.1f} points "
              f"{'met' if abs(gap) <= 10.0 else 'MISSED'} (at most 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
