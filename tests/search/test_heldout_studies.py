"""The two held-out studies (``heldout_budget32``, ``heldout_wikichars``) are what their
configs train, ship whole, and stay out of everything a rule is fitted or calibrated on:
the built-in prior and the comeback calibration read only the shipped studies, so the
held-out ones judge a rule without having shaped it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from shipped_study import check_programme

from sublayer_search.analysis.store.study_export import BUILTIN_EXPORTS, builtin_export
from sublayer_search.search.cli.main import main
from sublayer_search.search.plan.experiment import load_experiment
from sublayer_search.search.recorded.from_export import sweep_from_export
from sublayer_search.search.recorded.yardstick import eps_good, seed_noise
from sublayer_search.search.replay.engine import SchedulerSettings, replay
from sublayer_search.search.searchers.prior import BUILTIN_PRIORS, resolve_prior
from sublayer_search.search.stopping.calibration import CURVE_STUDIES

REPO = Path(__file__).resolve().parents[2]
HELD_OUT = ("heldout_budget32", "heldout_wikichars")
METRIC = "val_bpc"
END_TO_END = {"heldout_budget32": ("25500 of 49500", "51.5"),
              "heldout_wikichars": ("16400 of 33000", "49.7")}
"""Trial-steps with the prior's queue and the default curve rule (benchmarks/RESULTS.md)."""


@pytest.fixture(scope="module", params=HELD_OUT)
def study(request: pytest.FixtureRequest) -> tuple[str, Any]:
    assert request.param in BUILTIN_EXPORTS
    return request.param, builtin_export(request.param)


def test_each_is_the_programme_in_configs_every_curve_whole(study: tuple[str, Any]) -> None:
    name, shipped = study
    path = REPO / "configs" / f"{name}.yaml"
    assert yaml.safe_load(shipped.meta["experiment_yaml"]) == yaml.safe_load(path.read_text())
    config = load_experiment(path)  # data paths resolved beside the file
    trials = check_programme(shipped, config, baselines=3, metric=METRIC)
    candidates = trials[~trials["baseline"].astype(bool)]
    assert candidates["order"].nunique() >= 30


def test_each_has_a_seed_sd_and_eps_good_orders(study: tuple[str, Any]) -> None:
    _, shipped = study
    rows = [(str(r.order), float(r.final)) for r in shipped.trials.itertuples()]
    noise = seed_noise(rows)
    assert noise is not None and noise.n == 3 and noise.sd > 0
    means: dict[str, list[float]] = {}
    for order, final in rows:
        means.setdefault(order, []).append(final)
    values = {o: sum(v) / len(v) for o, v in means.items()}
    good = eps_good(values, eps=1.0, sd=noise.sd, mode="min")
    assert 1 <= len(good) < len(values)


def test_no_fit_or_calibration_reads_a_held_out_study() -> None:
    assert not set(HELD_OUT) & set(BUILTIN_PRIORS)
    assert not set(HELD_OUT) & set(CURVE_STUDIES)
    described = resolve_prior(list(BUILTIN_PRIORS)).describe()
    assert "heldout" not in described


def test_the_default_stopping_keeps_the_baselines_whole(study: tuple[str, Any]) -> None:
    _, shipped = study
    sweep = sweep_from_export(shipped)
    report = replay(sweep.curves, SchedulerSettings(
        name="curve", max_t=sweep.steps, grace_period=sweep.eval_every, metric=METRIC,
        mode="min"))
    assert all(t.survived and t.steps == sweep.steps for t in report.trials if t.baseline)
    assert 0 < report.compute_fraction < 1


def test_replay_reports_the_held_out_study_end_to_end(study: tuple[str, Any],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The end-to-end figure benchmarks/RESULTS.md states for each held-out study."""
    name, _ = study
    assert main(["replay", "--builtin", name, "--scheduler", "curve", "--arrival", "prior"]) == 0
    out = capsys.readouterr().out
    assert "eps-good (final within 1 x seed sd" in out and "3 seeds of sfsf" in out
    assert f"compute: {END_TO_END[name][0]} trial-steps ({END_TO_END[name][1]}%)" in out
    assert "regret 0 (val_bpc) = 0.00 seed sds" in out
