"""Load a sweep's trials from MLflow into the tidy trial frame (see ``analysis.store.frame``).

One experiment per sweep, a parent run tagged ``sublayer.role=sweep`` and one child run
per trial tagged ``sublayer.role=trial``, read as a
:class:`~sublayer_search.analysis.store.trial_record.TrialRecord` (the names of its
params, tags and metrics are declared there). mlflow is imported lazily.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import (
    HISTORY_COLUMNS,
    lower_is_better,
    trials_frame,
)
from sublayer_search.analysis.store.guidance_frame import guidance_fields
from sublayer_search.analysis.store.histories import read_histories
from sublayer_search.analysis.store.mlflow_store import open_store
from sublayer_search.analysis.store.trial_record import ROUTING_ARTIFACT, TrialRecord
from sublayer_search.spaces.guidance_params import GUIDANCE_TAG
from sublayer_search.spaces.records import Role, Tag, TrialStatus, route_share, route_share_code

if TYPE_CHECKING:  # pragma: no cover
    from mlflow.tracking import MlflowClient

__all__ = [
    "ROUTING_ARTIFACT",
    "ROUTING_COLUMNS",
    "TRANSLATION_COLUMNS",
    "experiment_names",
    "find_sweep_run",
    "history_frame",
    "load",
    "load_history",
    "load_routing",
    "routing_rows",
    "load_with_runs",
    "runs_with_role",
    "search_all",
]

TRANSLATION_COLUMNS: tuple[str, ...] = (
    "task", "encoder_order", "decoder_order", "subset", "subset_size", "codes", "stack", "side",
    "bleu_tokenize",
)
"""Extra columns of translation trials (dropped from the frame when no run has them);
``route_share_<code>`` columns (final share of validation sentences routed to each
decoder order) are added for every code any run logged."""
ROUTING_COLUMNS: tuple[str, ...] = ("run_id", "name", "subset", "seed", "routed", "forced",
                                    "bleu")

_TRIAL_FILTER = f"tags.`{Tag.ROLE}` = '{Role.TRIAL}'"
_SWEEP_FILTER = f"tags.`{Tag.ROLE}` = '{Role.SWEEP}'"
_PAGE = 1000


_client = open_store


def experiment_names(tracking_uri: str | None = None) -> list[str]:
    """Names of the experiments in the store, sorted."""
    client = _client(tracking_uri)
    return sorted(e.name for e in client.search_experiments())


def _experiment_id(client: MlflowClient, experiment: str) -> str:
    if not experiment:
        raise AnalysisError("an experiment name is required")
    found = client.get_experiment_by_name(experiment)
    if found is None:
        names = sorted(e.name for e in client.search_experiments())
        raise AnalysisError(
            f"unknown experiment {experiment!r} in this store; available "
            f"experiments: {', '.join(repr(n) for n in names) or 'none'}"
        )
    return str(found.experiment_id)


def search_all(client: MlflowClient, experiment_id: str, filter_string: str) -> list[Any]:
    """Every run of the experiment that ``filter_string`` selects, oldest first, read in
    pages of ``_PAGE`` runs."""
    runs: list[Any] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], filter_string=filter_string, max_results=_PAGE, page_token=token,
            order_by=["attributes.start_time ASC"],
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def _number(text: str | None, kind: type = float) -> Any:
    if text is None or text == "" or text.lower() in ("none", "null", "nan"):
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    if kind is int:
        return int(value) if math.isfinite(value) and value == int(value) else None
    return value


def _best_from_history(client: MlflowClient, run_id: str, metric: str) -> float | None:
    values = [m.value for m in client.get_metric_history(run_id, metric)]
    values = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    return min(values) if lower_is_better(metric) else max(values)


def _row(client: MlflowClient, run: Any) -> dict[str, Any]:
    """The frame row of a trial run, read through its :class:`TrialRecord`."""
    record = TrialRecord.from_mlflow(run)
    best_value = record.best
    if best_value is None and record.metric and record.metric in record.latest:
        best_value = _best_from_history(client, run.info.run_id, record.metric)
    return {
        "run_id": record.run_id,
        "name": record.name,
        "order": record.order,
        "family": record.family,
        "space": record.space,
        "seed": record.seed,
        "k": record.k,
        "n_s": record.n_s,
        "n_f": record.n_f,
        "units": record.units,
        "params": record.params,
        "metric": record.metric,
        "final": record.final,
        "best": best_value,
        "status": (record.status or TrialStatus.FAILED).value,
        "baseline": record.baseline,
        "n_c": record.n_c,
        "candidate": record.candidate,
        "flops_per_token": record.flops_per_token,
        "config_hash": record.config_hash,
        "parent_run_id": record.parent_run_id,
        "trial_id": record.trial_id,
        "steps": record.steps,
        "end_ms": record.end_ms,
        "start_ms": getattr(run.info, "start_time", None),
        **_translation_fields(record),
        **({"kind_units": record.kind_units} if record.kind_units else {}),
        **guidance_fields(record.settings, {GUIDANCE_TAG: record.guidance} if record.guidance
                          else {}, record.latest, run_id=run.info.run_id),
    }


def _codes(text: str | None) -> str | None:
    """``"1,2,4,6"``, ``"[1, 2, 4, 6]"`` or ``"1246"`` -> ``"1,2,4,6"``."""
    if not text:
        return None
    digits = re.findall(r"\d+", text)
    if len(digits) == 1 and len(digits[0]) > 1:  # "1246": one digit per code
        digits = list(digits[0])
    return ",".join(str(int(d)) for d in digits) or None


def _translation_fields(record: TrialRecord) -> dict[str, Any]:
    subset = record.subset
    codes = _codes(record.codes) or (",".join(subset) if subset else None)
    size = record.subset_size
    if size is None and subset:
        size = len(subset)
    fields: dict[str, Any] = {
        "task": record.task,
        "encoder_order": record.encoder_order,
        "decoder_order": record.decoder_order,
        "subset": subset,
        "subset_size": size,
        "codes": codes,
        "stack": record.settings.get("stack") or None,
        "side": record.side,
        "bleu_tokenize": record.settings.get("translation.bleu_tokenize") or None,
    }
    for key, value in record.latest.items():
        code = route_share_code(key)
        if code is not None:
            fields[route_share(code)] = float(value)
    return fields


def _drop_empty_translation_columns(trials: pd.DataFrame) -> pd.DataFrame:
    empty = [c for c in TRANSLATION_COLUMNS if c in trials.columns and trials[c].isna().all()]
    out = trials.drop(columns=empty)
    if "subset_size" in out.columns:
        out["subset_size"] = out["subset_size"].astype("Int64")
    codes = {c: code for c in out.columns if (code := route_share_code(c)) is not None}
    shares = sorted(codes, key=codes.__getitem__)
    rest = [c for c in out.columns if c not in shares]
    return out[rest + shares]


@overload
def load(
    experiment: str, tracking_uri: str | None = ..., history: Literal[False] = ...
) -> pd.DataFrame: ...
@overload
def load(
    experiment: str, tracking_uri: str | None = ..., history: Literal[True] = ...
) -> tuple[pd.DataFrame, pd.DataFrame]: ...
def load(
    experiment: str, tracking_uri: str | None = None, history: bool = False
) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """One row per trial of ``experiment`` (child runs tagged ``sublayer.role=trial``).

    Failed, diverged and killed trials stay, flagged in ``status``. With ``history=True``
    returns ``(trials, history)`` where history is a long frame run_id, key, step, value
    of every logged metric. Unknown experiment → AnalysisError listing the available ones.
    Translation trials add ``TRANSLATION_COLUMNS`` and ``route_share_<code>`` columns;
    guided sweeps add ``guidance_frame.GUIDANCE_COLUMNS``.
    """
    client = _client(tracking_uri)
    trials, runs = load_with_runs(experiment, tracking_uri, client=client)
    if not history:
        return trials
    return trials, history_frame(client, runs)


def load_with_runs(experiment: str, tracking_uri: str | None = None, *,
                   client: MlflowClient | None = None) -> tuple[pd.DataFrame, list[Any]]:
    """:func:`load`'s trials frame and the MLflow trial runs it was made from (one search,
    for callers that need both, such as ``sublayer export``)."""
    client = client or _client(tracking_uri)
    experiment_id = _experiment_id(client, experiment)
    runs = search_all(client, experiment_id, _TRIAL_FILTER)
    trials = _drop_empty_translation_columns(trials_frame(_row(client, run) for run in runs))
    trials.attrs.update(experiment=experiment, experiment_id=experiment_id,
                        tracking_uri=tracking_uri)
    return trials, runs


def history_frame(client: MlflowClient, runs: list[Any], *, when: bool = False) -> pd.DataFrame:
    """Every logged metric's history of ``runs``: ``HISTORY_COLUMNS`` (run_id, key, step,
    value); with ``when`` also the run's ``name`` and each point's ``time_ms``. Reads one
    metric of many runs per request (:func:`~.histories.read_histories`)."""
    points = read_histories(client, {run.info.run_id: run.data.metrics for run in runs})
    names = {run.info.run_id: run.info.run_name for run in runs}
    cols: dict[str, list[Any]] = {c: [] for c in ("run_id", "name", "key", "step", "value",
                                                  "time_ms")}
    for (run_id, key), metrics in points.items():
        cols["run_id"] += [run_id] * len(metrics)
        cols["name"] += [names[run_id]] * len(metrics)
        cols["key"] += [key] * len(metrics)
        cols["step"] += [m.step for m in metrics]
        cols["value"] += [m.value for m in metrics]
        cols["time_ms"] += [m.timestamp for m in metrics]
    columns = ["run_id", "name", "key", "step", "value", "time_ms"] if when \
        else list(HISTORY_COLUMNS)
    frame = pd.DataFrame({c: cols[c] for c in columns}, columns=columns)
    frame["step"] = frame["step"].astype("int64")
    frame["value"] = frame["value"].astype(float)
    if when:
        frame["time_ms"] = frame["time_ms"].astype("Int64")
    return frame.sort_values(["run_id", "key", "step"], kind="stable").reset_index(drop=True)


def runs_with_role(client: MlflowClient, experiment_id: str, role: Role) -> list[Any]:
    """Every run of the experiment tagged ``sublayer.role`` = ``role``, oldest first."""
    return search_all(client, experiment_id, f"tags.`{Tag.ROLE}` = '{role}'")


def load_history(
    experiment: str, tracking_uri: str | None = None, *, keys: list[str] | None = None
) -> pd.DataFrame:
    """Metric history (run_id, key, step, value) of the experiment's trials."""
    client = _client(tracking_uri)
    runs = search_all(client, _experiment_id(client, experiment), _TRIAL_FILTER)
    frame = history_frame(client, runs)
    return frame if keys is None else frame[frame["key"].isin(keys)].reset_index(drop=True)


def find_sweep_run(experiment: str, tracking_uri: str | None = None) -> str | None:
    """Run id of the experiment's latest parent run (``sublayer.role=sweep``), or None."""
    client = _client(tracking_uri)
    runs = search_all(client, _experiment_id(client, experiment), _SWEEP_FILTER)
    return runs[-1].info.run_id if runs else None


def routing_rows(
    matrix: object, *, run_id: str = "", name: str | None = None, subset: str | None = None,
    seed: int | None = None,
) -> list[dict[str, Any]]:
    """Long rows (``ROUTING_COLUMNS``) of one ``routing_bleu.json`` matrix
    ``{"<routed code>": {"<forced code>": bleu}}``; AnalysisError when malformed."""
    where = f"{ROUTING_ARTIFACT} of run {run_id or '?'}"
    if not isinstance(matrix, dict):
        raise AnalysisError(f"{where}: expected an object of rows, got {type(matrix).__name__}")
    rows = []
    for routed, cells in matrix.items():
        if not str(routed).isdigit() or not isinstance(cells, dict):
            raise AnalysisError(f"{where}: row {routed!r} must be a code with an object of "
                                "forced code -> BLEU")
        for forced, value in cells.items():
            number = _number(str(value)) if not isinstance(value, bool) else None
            if not str(forced).isdigit() or number is None:
                raise AnalysisError(f"{where}: cell [{routed}][{forced}] = {value!r} is not "
                                    "a code with a BLEU number")
            rows.append({"run_id": run_id, "name": name, "subset": subset, "seed": seed,
                         "routed": int(routed), "forced": int(forced), "bleu": float(number)})
    return rows


def _routing_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(ROUTING_COLUMNS))
    frame["seed"] = pd.to_numeric(frame["seed"]).astype("Int64")
    frame["routed"] = frame["routed"].astype("int64")
    frame["forced"] = frame["forced"].astype("int64")
    frame["bleu"] = frame["bleu"].astype(float)
    return frame


def load_routing(experiment: str, tracking_uri: str | None = None) -> pd.DataFrame:
    """The per-split x per-order BLEU matrices (artifact ``routing_bleu.json``) of the
    experiment's finished trials, downloaded with ``MlflowClient.download_artifacts``, as a
    long frame (``ROUTING_COLUMNS``: routed = code the predictor chose for the split,
    forced = code used to decode it). Runs without the artifact are skipped."""
    client = _client(tracking_uri)
    runs = search_all(client, _experiment_id(client, experiment), _TRIAL_FILTER)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="sublayer-routing-") as tmp:
        for run in runs:
            record = TrialRecord.from_mlflow(run)
            if record.status != TrialStatus.FINISHED:
                continue
            run_id = run.info.run_id
            if ROUTING_ARTIFACT not in {a.path for a in client.list_artifacts(run_id)}:
                continue
            dest = Path(tmp) / run_id
            dest.mkdir()
            path = client.download_artifacts(run_id, ROUTING_ARTIFACT, str(dest))
            try:
                matrix = json.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise AnalysisError(f"{ROUTING_ARTIFACT} of run {run_id}: {exc}") from exc
            rows += routing_rows(matrix, run_id=run_id, name=record.name,
                                 subset=record.subset, seed=record.seed)
    return _routing_frame(rows)
