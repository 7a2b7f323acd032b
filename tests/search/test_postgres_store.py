"""Eight concurrent trials tracked in MLflow on PostgreSQL, and on the default SQLite.

PostgreSQL: a real server (initdb in a temporary folder, 127.0.0.1, a free port) under
a real ``mlflow server --backend-store-uri postgresql://…``; the sweep writes over HTTP
and the rows are read back both through MLflow and straight from PostgreSQL.
SQLite: the same sweep on the default store (a ``sqlite:///`` file written by the
driver), whose log must hold no "database is locked".

Either way: one run per trial (none lost, none twice), each evaluation once, no run
left RUNNING, and the trials really overlapped in time.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import run_cli, scratch, subprocess_env, tail, write_experiment
from mlflow.tracking import MlflowClient
from postgres_helpers import postgres_server, tracking_server

pytestmark = pytest.mark.slow

ORDERS = ["sfsf", "ssff", "ffss", "fsfs"]
SEEDS = [0, 1]
TRIALS = len(ORDERS) * len(SEEDS)  # 8, all at once: 8 logical CPUs, 1 CPU per trial
TRAIN = {"steps": 40, "batch_size": 8, "eval_every": 20, "eval_batches": 2}


def _sweep(tmp_path: Path, name: str, uri: str) -> str:
    """Run the 8-trial sweep to ``uri``; return the driver's whole log."""
    path = write_experiment(tmp_path, name, orders=ORDERS, tracking_uri=uri, seeds=SEEDS,
                            max_concurrent=TRIALS, train=TRAIN,
                            ray={"storage_path": str(tmp_path / "ray"), "num_cpus": TRIALS})
    log = tmp_path / "sweep.log"
    with scratch("sublayer-home") as home:
        done = run_cli(["sweep", str(path)], env=subprocess_env(home), log=log, timeout=240)
    assert done.returncode == 0, f"sweep failed ({done.returncode}):\n{tail(log)}"
    return log.read_text(errors="replace")


def _most_at_once(runs: list) -> int:
    """The largest number of trial runs open at the same moment."""
    edges = sorted([(r.info.start_time, 1) for r in runs] + [(r.info.end_time, -1) for r in runs])
    now = most = 0
    for _, change in edges:
        now += change
        most = max(most, now)
    return most


def _check_runs(client: MlflowClient, name: str, log: str) -> list:
    exp = client.get_experiment_by_name(name)
    assert exp is not None, log[-3000:]
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("sublayer.role") == "sweep"]
    children = [r for r in runs if r.data.tags.get("sublayer.role") == "trial"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", log[-3000:]
    assert len(runs) == TRIALS + 1, [r.info.run_name for r in runs]
    expected = sorted(f"{o}@seed{s}" for o in ORDERS for s in SEEDS)
    assert sorted(r.info.run_name for r in children) == expected  # none lost, none twice
    assert not [r for r in runs if r.info.status == "RUNNING"]
    every = TRAIN["eval_every"]
    for run in children:
        assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
        assert run.data.tags["mlflow.parentRunId"] == parents[0].info.run_id
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert sorted(steps) == list(range(every, TRAIN["steps"] + 1, every)), steps
        assert "final_val_bpc" in run.data.metrics
    assert _most_at_once(children) >= 2, "the trials never ran at the same time"
    assert "database is locked" not in log.lower(), log[-3000:]
    return children


def test_eight_concurrent_trials_on_postgresql_backed_mlflow(tmp_path: Path) -> None:
    with postgres_server() as pg, tracking_server(pg.uri, tmp_path / "mlflow") as server:
        log = _sweep(tmp_path, "pg_eight", server.url)
        _check_runs(MlflowClient(server.url), "pg_eight", log)
        # the rows are in PostgreSQL itself (the server did not fall back to anything else)
        rows = pg.query("SELECT r.status, count(*) FROM runs r JOIN experiments e "
                        "ON r.experiment_id = e.experiment_id WHERE e.name = 'pg_eight' "
                        "GROUP BY r.status")
        assert dict(rows) == {"FINISHED": TRIALS + 1}, rows
        points = pg.query("SELECT count(*), count(DISTINCT (m.run_uuid, m.step)) FROM metrics m "
                          "JOIN runs r ON m.run_uuid = r.run_uuid JOIN experiments e ON "
                          "r.experiment_id = e.experiment_id WHERE e.name = 'pg_eight' AND "
                          "m.key = 'val_loss'")
        evals = TRAIN["steps"] // TRAIN["eval_every"]
        assert points == [(TRIALS * evals, TRIALS * evals)], points
        server_log = server.log.read_text(errors="replace").lower()
        assert "deadlock" not in server_log and "traceback" not in server_log, server_log[-3000:]


def test_eight_concurrent_trials_on_the_default_sqlite_store(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = _sweep(tmp_path, "sqlite_eight", uri)
    _check_runs(MlflowClient(uri), "sqlite_eight", log)


def test_a_database_this_client_cannot_open_is_bad_input(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The server accepts connections, so only logging in finds out: a database that does
    not exist or a user the server refuses is named before Ray starts (exit 2), as
    ``analyze`` names it; the real database passes the same check."""
    from sublayer_search.search.cli.main import main
    from sublayer_search.search.plan.preflight import tracking_problems

    monkeypatch.setenv("HOME", str(tmp_path))
    with postgres_server() as pg:
        assert tracking_problems(pg.uri) == []
        base = pg.uri.rsplit("/", 1)[0]  # postgresql://USER@127.0.0.1:PORT
        nope = f"{base}/nope"
        path = write_experiment(tmp_path, "pg_bad", orders=["sfsf"], tracking_uri=nope)
        assert main(["sweep", str(path)]) == 2
        out, err = capsys.readouterr()
        assert (f"tracking.uri: got '{nope}', expected a database this client can log in to "
                f"(the server says: ") in err and 'database "nope" does not exist' in err
        assert out == "" and not (tmp_path / "ray_results").exists()

        stranger = f"postgresql://stranger@127.0.0.1:{pg.port}/mlflow"
        assert main(["analyze", "--experiment", "X", "--out", str(tmp_path / "r"),
                     "--tracking-uri", stranger]) == 2
        err = capsys.readouterr().err
        assert f"--tracking-uri: got '{stranger}', expected a database this client" in err
        assert 'role "stranger" does not exist' in err
        assert not (tmp_path / "r").exists()
