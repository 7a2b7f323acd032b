"""A sweep's closing table stays readable at thousands of trials: it summarises."""

from __future__ import annotations

from sublayer_search.search.cli.output import TRIALS_SHOWN, print_trials

COLUMNS = ["name", "status", "val_loss"]


def _rows(n: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [
        {"name": f"t{i}", "status": "finished", "val_loss": 10.0 - i / n} for i in range(n)]
    rows[7].update(status="failed", val_loss=None)
    rows[9].update(status="diverged", val_loss=float("nan"))
    return rows


def test_a_small_sweep_lists_every_trial(capsys) -> None:
    print_trials(_rows(12), COLUMNS, metric="val_loss", mode="min")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + 12 and lines[1].startswith("t0 ")


def test_five_thousand_trials_are_summarised(capsys) -> None:
    print_trials(_rows(5000), COLUMNS, metric="val_loss", mode="min")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) < 2 * TRIALS_SHOWN
    assert lines[0] == "5,000 trials: 4,998 finished, 1 failed, 1 diverged"
    best = [line.split()[0] for line in lines[3:3 + TRIALS_SHOWN // 2]]
    assert best == [f"t{i}" for i in range(4999, 4999 - TRIALS_SHOWN // 2, -1)]
    assert any(line.startswith("failed: 2 ") for line in lines)
    assert {"t7", "t9"} <= {line.split()[0] for line in lines[-2:]}


def test_the_best_of_a_maximised_metric_come_first(capsys) -> None:
    print_trials(_rows(100), COLUMNS, metric="val_loss", mode="max")
    lines = capsys.readouterr().out.splitlines()
    assert "highest first" in lines[1] and lines[3].split()[0] == "t0"
