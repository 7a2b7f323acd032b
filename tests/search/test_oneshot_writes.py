"""The supernet run's buffered writes on a real SQLite MLflow store: each curve step once,
also when a journal left by a stopped or killed stage 1 is replayed."""

from __future__ import annotations

import json
from pathlib import Path

from mlflow.tracking import MlflowClient

from sublayer_search.search.oneshot.writes import SupernetWrites


def _writes(client: MlflowClient, run_id: str, journal: Path) -> SupernetWrites:
    return SupernetWrites(client, run_id, limit_s=5, max_ops=100, journal=journal)


def test_a_replayed_journal_writes_each_curve_step_once(tmp_path: Path) -> None:
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("s")).info.run_id
    journal = tmp_path / "run" / "supernet_backlog.jsonl"

    writes = _writes(client, run_id, journal)
    assert writes.curve({"step": 10, "val_loss": 2.0, "lr": 1e-3})
    assert writes.curve({"step": 20, "val_loss": 1.5})
    assert not writes.curve({"step": 20, "val_loss": 9.9})  # a resumed task sends it again
    assert not journal.exists()  # no outage, no file

    # a journal as a killed driver leaves it: 20 was written before the kill, 30 was not
    ops = [{"op": "curve", "step": s, "time": 1000 + s, "metrics": {"val_loss": 1.0 / s}}
           for s in (20, 30)]
    journal.parent.mkdir(parents=True)
    journal.write_text("".join(json.dumps(op) + "\n" for op in ops))
    resumed = _writes(client, run_id, journal)  # replays it before anything else
    assert not journal.exists()
    assert not resumed.curve({"step": 30, "val_loss": 7.0})  # queued by the journal
    assert resumed.curve({"step": 40, "val_loss": 0.9})
    resumed.text("rank,order\n1,sfsf\n", "ranking.csv")
    resumed.table({"rank": [1], "order": ["sfsf"]}, "ranking.json")
    resumed.table({"rank": [1], "order": ["sfsf"]}, "ranking.json")  # replayed: not appended
    resumed.tags({"sublayer.status": "finished"}, {"ranked_orders": 1.0}, 40)
    resumed.end("FINISHED")
    resumed.flush()

    history = client.get_metric_history(run_id, "val_loss")
    assert sorted((m.step, m.value) for m in history) == [(10, 2.0), (20, 1.5), (30, 1 / 30),
                                                    (40, 0.9)]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.tags["sublayer.status"] == "finished"
    assert run.data.metrics["ranked_orders"] == 1.0
    table = json.loads(Path(client.download_artifacts(run_id, "ranking.json",
                                                      str(tmp_path))).read_text())
    assert table["data"] == [[1, "sfsf"]]
