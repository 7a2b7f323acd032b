"""What ``sublayer replay`` prints: the trial table, compute, top-k, eps-good and grid lines."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sublayer_search.search.cli.output import TRIALS_SHOWN
from sublayer_search.spaces.exit_codes import ExitCode

if TYPE_CHECKING:
    from sublayer_search.search.recorded.curves import Curve
    from sublayer_search.search.replay.report import ReplayReport

__all__ = ["print_grid", "print_report", "value_at_stop"]


def _fmt(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "nan"


def value_at_stop(curve: Curve, steps: int) -> float:
    """The curve's value at its last evaluation within ``steps`` (nan: none)."""
    seen = [p.value for p in curve.points if p.step <= steps]
    return float(seen[-1]) if seen else math.nan


def print_report(report: ReplayReport, metric: str, curves: Sequence[Curve] = (),
                  scheduler_metric: str | None = None) -> None:
    """The table: ``final_<metric>`` is what the replay trained to (a stopped trial's
    value at its stop), ``recorded_final`` what the recorded sweep's run ended at."""
    by_name = {c.name: c for c in curves}
    same = scheduler_metric in (None, metric)  # the curves hold the scheduler's metric
    rows = sorted(report.trials, key=lambda t: (t.stopped_at is not None, t.name))
    left_out = 0
    if len(rows) > TRIALS_SHOWN:  # thousands of trials: the top k and the best by final
        shown = set(report.top_k) | {t.name for t in sorted(
            (t for t in rows if math.isfinite(t.final)), key=lambda t: t.final,
            reverse=report.rank_mode == "max")[:TRIALS_SHOWN // 2]}
        left_out = len(rows) - len(shown)
        rows = [t for t in rows if t.name in shown]
    width = max(len(t.name) for t in rows)
    span = max([len("order")] + [len(t.order) for t in rows])
    head = f"final_{metric}"
    print(f"{'trial':<{width}}  {'order':<{span}}  steps/full  stopped_at  {head}  recorded_final")
    for t in rows:
        stop = "" if t.stopped_at is None else str(t.stopped_at)
        reached = t.final
        if t.stopped_at is not None:
            curve = by_name.get(t.name)
            reached = value_at_stop(curve, t.steps) if curve is not None and same else math.nan
        print(f"{t.name:<{width}}  {t.order:<{span}}  {f'{t.steps}/{t.full_steps}':>10}  "
              f"{stop:>10}  {_fmt(reached):>{len(head)}}  {_fmt(t.final)}")
    if left_out:
        print(f"... {left_out} more trial(s) not listed: the rows above are the top-{report.k} "
              f"and the best {TRIALS_SHOWN // 2} by recorded final {metric}")
    if not same and report.stopped:
        print(f"note: the replay ran on {scheduler_metric}, so a stopped trial's {metric} at "
              "its stop is not known (blank)")
    used, full = sum(t.steps for t in report.trials), sum(t.full_steps for t in report.trials)
    evals = sum(t.evaluations for t in report.trials)
    full_evals = sum(t.full_evaluations for t in report.trials)
    print(f"compute: {used} of {full} trial-steps ({report.compute_fraction:.1%}), {evals} of "
          f"{full_evals} evaluations ({report.evaluation_fraction:.1%}); "
          f"candidates alone (baseline seeds left out): {report.candidate_compute_fraction:.1%}; "
          f"{len(report.stopped)} trial(s) stopped")
    _print_floor(report, curves)
    lost = [n for n in report.top_k if n not in report.kept]
    print(f"top-{report.k} by final {metric}: {', '.join(report.top_k) or 'none'}; kept "
          f"{len(report.kept)} of {len(report.top_k)}" + (f" (lost: {', '.join(lost)})"
                                                         if lost else ""))
    order = {t.name: t.order for t in report.trials}.get(report.picked or "", "")
    print(f"picked: {report.picked or 'none'}" + (f" ({order})" if order else "")
          + f"; regret {_fmt(report.regret)} ({metric})"
          + (f" = {report.regret_sds:.2f} seed sds" if report.noise and report.picked else ""))
    _print_eps_good(report)
    if report.truncated:
        names = ", ".join(report.truncated[:10]) + (
            f" and {len(report.truncated) - 10} more" if len(report.truncated) > 10 else "")
        print(f"note: {len(report.truncated)} trial(s) end before the replay would stop them "
              f"(stopped or failed in the recorded sweep): {names}")


def _print_eps_good(report: Any) -> None:
    """Whether the replay kept an order no seed tells apart from the best (yardstick)."""
    if report.noise is None:
        print("eps-good: not known (the sweep trained no baseline seed twice, so no seed sd)")
        return
    good, kept = report.eps_good, report.kept_eps_good
    print(f"eps-good (final within {report.eps:g} x {report.noise.describe()} of the best): "
          f"{len(good)} candidate trial(s); kept {len(kept)}"
          + ("" if kept else " (none kept: every order a seed cannot tell from the best was "
             "stopped)"))


def _print_floor(report: Any, curves: Sequence[Any]) -> None:
    """The least compute any rule keeping the top k could have used (:mod:`.floor`)."""
    from sublayer_search.search.replay.floor import compute_floor

    if not report.top_k or not curves:
        return
    first, second = (compute_floor(report, curves, first_decision=d) for d in (1, 2))
    print(f"floor: a rule that knew every final value would still use {first.fraction:.1%} "
          f"({first.candidate_fraction:.1%} candidates alone) to keep the top-{report.k}, "
          f"stopping every other candidate at its first evaluation; {second.fraction:.1%} "
          f"({second.candidate_fraction:.1%}) if no candidate stops before its second "
          "(as curve)")
    live = [compute_floor(report, curves, first_decision=d, online=True) for d in (1, 2)]
    print(f"floor, online: knowing only the final values of the trials started so far, a "
          f"rule safe whatever comes next uses at least {live[0].fraction:.1%} "
          f"({live[0].candidate_fraction:.1%}), and {live[1].fraction:.1%} "
          f"({live[1].candidate_fraction:.1%}) from the second evaluation")


def print_grid(rows: list[dict[str, Any]], every: int, figure: str | None) -> int:
    print("grace_evals  reduction_factor  compute  candidates  evaluations  top_k_kept  "
          "eps_good_kept  regret  regret_sds  picked")
    for r in rows:
        print(f"{r['grace_period'] // every:>11}  {r['reduction_factor']:>16g}  "
              f"{r['compute_fraction']:>7.1%}  {r['candidate_compute_fraction']:>10.1%}  "
              f"{r['evaluation_fraction']:>11.1%}  "
              f"{r['top_k_kept']:>8}/{r['k']}  {r['eps_good_kept']:>10}/{r['eps_good']:<2}  "
              f"{_fmt(r['regret']):>6}  {_fmt(r['regret_sds']):>10}  {r['picked']}")
    if figure is not None:
        import pandas as pd

        from sublayer_search.analysis.figures.replay import plot_replay_grid

        frame = pd.DataFrame(rows).assign(grace_evals=lambda f: f["grace_period"] // every)
        plot_replay_grid(frame, figure)
        print(f"figure: {figure}")
    return ExitCode.OK
