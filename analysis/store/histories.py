"""Metric histories of many runs in few requests (``sublayer analyze``, ``export``, ``replay``).

``MlflowClient.get_metric_history`` reads one metric of one run per request: a sweep of
5,000 trials with ten metrics is 50,000 requests. :func:`read_histories` reads one metric
of many runs at once instead, with what the store offers:

- a database store (``sqlite:///…``, ``postgresql://…``, ``mysql://…``): the store's own
  ``get_metric_history_bulk``, one query per metric and :data:`DB_CHUNK` runs;
- an MLflow server (``http(s)://…``): the REST endpoint its UI reads charts with
  (``ajax-api/2.0/mlflow/metrics/get-history-bulk``), one request per metric and
  :data:`REST_CHUNK` runs (the server's limit);
- any other store (a file store, a plugin): one request per run and metric, as before.

A reply that reaches its limit of points may have been cut: its runs are read again one
by one, so a long history is never truncated. Nothing is cached: every call reads the
store. mlflow is imported lazily.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.entities import Metric
    from mlflow.tracking import MlflowClient

__all__ = ["DB_CHUNK", "DB_LIMIT", "REST_CHUNK", "REST_LIMIT", "BULK_HISTORY_ENDPOINT",
           "read_histories"]

DB_CHUNK = 500
"""Runs per query to a database store (well under SQLite's limit of bound parameters)."""
DB_LIMIT = 1_000_000
"""Points per query to a database store; a reply this long is read again run by run."""
REST_CHUNK = 100
"""Runs per request to an MLflow server (the most its bulk endpoint accepts)."""
REST_LIMIT = 25_000
"""Points per request to an MLflow server (the most its bulk endpoint returns)."""
BULK_HISTORY_ENDPOINT = "/ajax-api/2.0/mlflow/metrics/get-history-bulk"

History = dict[tuple[str, str], list["Metric"]]


def _store(client: MlflowClient) -> Any:
    """The client's tracking store, or None where this MLflow keeps it elsewhere."""
    tracking = getattr(client, "_tracking_client", None)
    return getattr(tracking, "store", None) if tracking is not None else None


def _by_key(wanted: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = defaultdict(list)
    for run_id, run_keys in wanted.items():
        for key in run_keys:
            keys[key].append(run_id)
    return keys


def _one_by_one(client: MlflowClient, run_ids: list[str], key: str, out: History) -> None:
    for run_id in run_ids:
        out[(run_id, key)] = list(client.get_metric_history(run_id, key))


def _db_chunk(store: Any, run_ids: list[str], key: str) -> list[tuple[str, Metric]] | None:
    rows = store.get_metric_history_bulk(run_ids, key, DB_LIMIT)
    if len(rows) >= DB_LIMIT:
        return None
    return [(r.run_id, r) for r in rows]  # MetricWithRunId is a Metric


def _rest_chunk(store: Any, run_ids: list[str], key: str) -> list[tuple[str, Metric]] | None:
    from mlflow.entities import Metric
    from mlflow.utils.rest_utils import http_request, verify_rest_response

    response = http_request(store.get_host_creds(), BULK_HISTORY_ENDPOINT, "GET",
                            params={"run_id": run_ids, "metric_key": key,
                                    "max_results": REST_LIMIT})
    points = verify_rest_response(response, BULK_HISTORY_ENDPOINT).json().get("metrics", [])
    if len(points) >= REST_LIMIT:
        return None
    return [(p["run_id"], Metric(p["key"], float(p["value"]), int(p["timestamp"]),
                                 int(p.get("step", 0)))) for p in points]


def read_histories(client: MlflowClient, wanted: Mapping[str, Iterable[str]]) -> History:
    """``{(run_id, key): [Metric, …]}`` for every run id of ``wanted`` and each of its keys,
    every point in the order ``get_metric_history`` gives (time, step, value); a key a run
    never logged maps to ``[]``. Requests: one per key and chunk of runs (see the module)."""
    from mlflow.store.tracking.rest_store import RestStore

    store = _store(client)
    if isinstance(store, RestStore):
        chunk, read = REST_CHUNK, _rest_chunk
    elif store is not None and hasattr(store, "get_metric_history_bulk"):
        chunk, read = DB_CHUNK, _db_chunk
    else:
        chunk, read = 0, None
    out: History = {}
    for key, run_ids in _by_key(wanted).items():
        for start in range(0, len(run_ids), chunk or len(run_ids) or 1):
            part = run_ids[start:start + chunk] if chunk else run_ids
            rows = read(store, part, key) if read is not None else None
            if rows is None:  # no bulk read here, or a reply that may have been cut
                _one_by_one(client, part, key, out)
                continue
            found: dict[str, list[Metric]] = {run_id: [] for run_id in part}
            for run_id, metric in rows:
                found.setdefault(run_id, []).append(metric)
            for run_id, points in found.items():
                points.sort(key=lambda m: (m.timestamp, m.step, m.value))
                out[(run_id, key)] = points
    return out
