"""A sweep over orders with the hybrid kinds: the dry run counts them, their settings are
checked before anything starts and recorded only when set, searchers that weigh order
features refuse them, and a real sweep trains and records them."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_experiment
from mlflow.tracking import MlflowClient

from sublayer_search.analysis.store.trial_record import TrialRecord
from sublayer_search.models.accounting import param_count
from sublayer_search.models.config import model_preset
from sublayer_search.search.cli.main import main
from sublayer_search.spaces.exit_codes import ExitCode

ORDERS = ["swsf", "rfrf", "sese"]


def _experiment(tmp_path: Path, **extra) -> Path:
    return write_experiment(tmp_path, "hybrid", orders=ORDERS,
                            tracking_uri=f"sqlite:///{tmp_path}/mlflow.db",
                            **{"model": {"preset": "debug", "dropout": 0.0,
                                         "sublayers": {"window": 4}}, **extra})


def test_the_dry_run_counts_each_kind(tmp_path: Path, capsys) -> None:
    assert main(["sweep", str(_experiment(tmp_path)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("name"))
    assert header.split() == ["name", "family", "seed", "n_s", "n_f", "n_w", "n_r", "n_e",
                              "units", "params", "active_params", "flops_per_token", "order"]
    for order in ORDERS:
        cfg = model_preset("debug", order=order, vocab_size=65, sublayers={"window": 4})
        line = next(line for line in out.splitlines() if line.startswith(order))
        assert f"{param_count(cfg):,}" in line or str(param_count(cfg)) in line, (order, line)
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize(("extra", "message"), [
    ({"model": {"preset": "debug", "sublayers": {"top_k": 9}}},
     "model.sublayers.top_k: got 9, expected an integer in 1..4"),
    ({"search": {"algorithm": "evolution", "num_samples": 4}},
     "search.algorithm: got 'evolution', expected grid, optuna or oneshot for orders with the "
     "hybrid kinds w, r, e (the space holds 'swsf')"),
    ({"search": {"algorithm": "surrogate", "num_samples": 4}},
     "for orders with the hybrid kinds w, r, e (the space holds 'swsf')"),
    ({"search": {"prior": "press2020"}},
     "search.prior: got 'press2020', expected no prior for orders with the hybrid kinds"),
])
def test_what_cannot_run_is_refused_before_anything_starts(tmp_path, capsys, extra, message):
    assert main(["sweep", str(_experiment(tmp_path, **extra))]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "ray_results").exists()


@pytest.mark.slow
def test_a_real_sweep_trains_and_records_the_hybrid_orders(tmp_path: Path) -> None:
    path = _experiment(tmp_path, baseline={"order": "sfsf", "seeds": 2})
    assert main(["sweep", str(path)]) == 0
    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    exp = client.get_experiment_by_name("hybrid")
    runs = [r for r in client.search_runs([exp.experiment_id])
            if r.data.tags.get("sublayer.role") == "trial"]
    records = {r.order: r for r in map(TrialRecord.from_mlflow, runs)}
    assert set(records) == set(ORDERS) | {"sfsf"}
    for order, record in records.items():
        if order == "sfsf":  # the baseline seeds
            continue
        cfg = model_preset("debug", order=order, vocab_size=65, sublayers={"window": 4})
        assert record.params == param_count(cfg) and record.final is not None, order
        assert record.settings["model.sublayers.window"] == "4"  # set, so recorded
        assert not any(k.startswith("model.sublayers.") and k != "model.sublayers.window"
                       for k in record.settings)  # the defaults are not
    assert records["swsf"].settings.get("n_w") == "1" and records["sese"].settings["n_e"] == "2"
    assert records["swsf"].kind_units == "w=1.0" and records["sfsf"].kind_units is None
    out = tmp_path / "report"
    assert main(["analyze", "--experiment", "hybrid", "--tracking-uri",
                 f"sqlite:///{tmp_path}/mlflow.db", "--out", str(out)]) == 0
    report = (out / "report.html").read_text()
    assert "mean w bottom / top" in report and "mean e bottom / top" in report, report


def test_budgeted_draws_over_any_kinds_are_weighed_at_the_models_dims(tmp_path, capsys) -> None:
    """The space gets the model section's dims: every planned order's units land within
    the tolerance of the budget, as the dry-run table accounts them."""
    path = _experiment(tmp_path, space={"type": "budgeted_kinds", "symbols": "srf",
                                        "budget_units": 8, "count": 4, "tolerance": 0.05},
                       baseline={"order": "sfsfsfsf"})
    assert main(["sweep", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    column = next(line for line in out if line.startswith("name")).split().index("units")
    lines = [line.split() for line in out if line.startswith("draw")]
    assert len(lines) == 4
    for line in lines:
        assert abs(float(line[column]) - 8) <= 0.4, line


def test_budgeted_draws_name_a_bad_argument_before_anything_starts(tmp_path, capsys) -> None:
    path = _experiment(tmp_path, space={"type": "budgeted_kinds", "symbols": "sq",
                                        "budget_units": 8, "count": 4})
    assert main(["sweep", str(path)]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "space.symbols: got 'sq', expected distinct lm sublayer symbols" in err, err
    assert not (tmp_path / "mlflow.db").exists()


def test_budgeted_draws_wait_for_a_model_section_without_problems(tmp_path, capsys) -> None:
    path = _experiment(tmp_path, space={"type": "budgeted_kinds", "symbols": "srf",
                                        "budget_units": 8, "count": 4},
                       model={"preset": "debug", "d_model": -3})
    assert main(["sweep", str(path), "--dry-run"]) == ExitCode.BAD_INPUT
    err = capsys.readouterr().err
    assert "model.d_model: got -3" in err and "space.dims" not in err, err
