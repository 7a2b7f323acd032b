"""The store's side of ``benchmarks/scale.py``: its size, its metric points, the REST request
the printed runs link opens, and copies of a sweep's trial runs (``--amplify``)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

METRIC = "val_toy"


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return dict(json.load(resp))


def rest_times(backend: str, folder: Path, experiment_id: str) -> dict[str, float]:
    """Seconds for the runs link's first page (100 trials, best first) and the whole list."""
    from postgres_helpers import tracking_server

    with tracking_server(backend, folder / "server") as server:
        search = f"{server.url}/ajax-api/2.0/mlflow/runs/search"
        body = {"experiment_ids": [experiment_id], "max_results": 100,
                "order_by": [f"metrics.`final_{METRIC}` ASC"], "run_view_type": "ACTIVE_ONLY"}
        t0 = time.perf_counter()
        first = post(search, body)
        page_s = time.perf_counter() - t0
        t0, token, seen = time.perf_counter(), None, 0
        while True:
            got = post(search, {**body, "max_results": 1000,
                                **({"page_token": token} if token else {})})
            seen += len(got.get("runs", []))
            token = got.get("next_page_token")
            if not token:
                break
        return {"runs_page_s": page_s, "runs_page_n": len(first.get("runs", [])),
                "runs_all_s": time.perf_counter() - t0, "runs_all_n": seen}


def store_size_mb(store: str, uri: str, db: Path) -> float:
    if store == "sqlite":
        return sum(p.stat().st_size for p in db.parent.glob(db.name + "*")) / 2**20
    import psycopg

    with psycopg.connect(uri) as conn, conn.cursor() as cur:
        cur.execute("SELECT pg_database_size(current_database())")
        return float(cur.fetchone()[0]) / 2**20  # type: ignore[index]


def metric_points(uri: str, experiment_id: str) -> int:
    import sqlalchemy

    engine = sqlalchemy.create_engine(uri)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sqlalchemy.text(
                "SELECT count(*) FROM metrics m JOIN runs r ON m.run_uuid = r.run_uuid "
                "WHERE r.experiment_id = :e"), {"e": int(experiment_id)}).scalar() or 0)
    finally:
        engine.dispose()


def amplify(uri: str, experiment_id: str, to: int) -> int:
    """Copy the experiment's trial runs (runs, tags, params, metrics, latest_metrics rows, in
    one SQL transaction) until it holds ``to`` of them: the analysis commands at a size the
    sweep cannot reach on this machine, on runs exactly as a sweep wrote them. The copies get
    new run ids and names, their own ``ray.trial_id``, and times shifted by the sweep's
    length per round of copies (a replay sees them arrive as a longer sweep's would).
    Returns the runs added."""
    import uuid

    import sqlalchemy as sa

    engine = sa.create_engine(uri)
    meta = sa.MetaData()
    names = ("runs", "tags", "params", "metrics", "latest_metrics")
    tables = {t: sa.Table(t, meta, autoload_with=engine) for t in names}
    try:
        with engine.begin() as conn:
            ids = [r[0] for r in conn.execute(sa.text(
                "SELECT r.run_uuid FROM runs r JOIN tags t ON r.run_uuid = t.run_uuid WHERE "
                "r.experiment_id = :e AND t.key = 'sublayer.role' AND t.value = 'trial'"),
                {"e": int(experiment_id)})]
            rows: dict[str, dict[str, list[dict[str, Any]]]] = {t: {} for t in names}
            for t, table in tables.items():
                for row in conn.execute(sa.select(table).where(table.c.run_uuid.in_(ids))):
                    rows[t].setdefault(row.run_uuid, []).append(dict(row._mapping))
            new: dict[str, list[dict[str, Any]]] = {t: [] for t in names}
            runs = [r for (r,) in (rows["runs"][i] for i in ids)]
            span = max(r["end_time"] or 0 for r in runs) - min(r["start_time"] for r in runs) + 1
            for k in range(max(0, to - len(ids))):
                src, run_id = ids[k % len(ids)], uuid.uuid4().hex
                shift = (k // len(ids) + 1) * span  # each round of copies after the last one
                (run,) = rows["runs"][src]
                name = f"{run['name']}~{k}"
                new["runs"].append({**run, "run_uuid": run_id, "name": name,
                                    "start_time": run["start_time"] + shift,
                                    "end_time": (run["end_time"] or 0) + shift,
                                    "artifact_uri": str(run["artifact_uri"]).replace(src, run_id)})
                for tag in rows["tags"].get(src, []):
                    value = {"mlflow.runName": name, "ray.trial_id": f"copy{k}"}.get(
                        tag["key"], tag["value"])
                    new["tags"].append({**tag, "run_uuid": run_id, "value": value})
                new["params"] += [{**r, "run_uuid": run_id} for r in rows["params"].get(src, [])]
                for t in ("metrics", "latest_metrics"):  # as if the sweep had gone on
                    new[t] += [{**r, "run_uuid": run_id, "timestamp": r["timestamp"] + shift}
                               for r in rows[t].get(src, [])]
            for t in names:
                for start in range(0, len(new[t]), 20_000):
                    conn.execute(tables[t].insert(), new[t][start:start + 20_000])
            return len(new["runs"])
    finally:
        engine.dispose()
