"""A finished sweep as three flat files: the shape ``sublayer export`` writes and reads.

``<name>_trials.csv``  one row per trial: the columns of :func:`analysis.store.runs.load`
                       (all-empty ones left out) plus ``start_ms`` and ``end_ms``
                       (trial start, and its end: the time of ``final_<metric>``, else
                       the run's end time; ms since the epoch).
``<name>_curves.csv``  every metric history of every trial, long: ``CURVE_COLUMNS``.
``<name>_meta.json``   the sweep: experiment, metric, mode, train settings, scheduler,
                       the experiment YAML, versions, sweep times, trials per status,
                       the trial columns' dtypes (so a read gives the loaded frame back)
                       and ``format`` (:data:`FORMAT`).

Flat names, because the package data of ``analysis/data`` is ``*.csv`` and ``*.json``:
an export copied there ships with the package (:func:`builtin_export`). pandas only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import IO, Any

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import HISTORY_COLUMNS, validate_trials

__all__ = [
    "BUILTIN_EXPORTS",
    "CURVE_COLUMNS",
    "FORMAT",
    "TIME_COLUMNS",
    "StudyExport",
    "builtin_export",
    "export_files",
    "export_names",
    "open_export",
    "read_export",
    "write_export",
]

FORMAT = 1
"""Version of the file layout; :func:`read_export` refuses any other."""
TIME_COLUMNS: tuple[str, ...] = ("start_ms", "end_ms")
"""Trial columns an export adds to the loaded frame (replay needs them)."""
CURVE_COLUMNS: tuple[str, ...] = ("run_id", "name", "key", "step", "value", "time_ms")
SUFFIXES: tuple[str, ...] = ("_trials.csv", "_curves.csv", "_meta.json")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_PACKAGE = "sublayer_search.analysis"


@dataclass(frozen=True, kw_only=True)
class StudyExport:
    """One exported sweep, as read back."""

    name: str
    trials: pd.DataFrame = field(repr=False)
    """The trial frame of :func:`analysis.store.runs.load` (validated) plus ``TIME_COLUMNS``."""
    history: pd.DataFrame = field(repr=False)
    """``HISTORY_COLUMNS`` (run_id, key, step, value) plus ``name`` and ``time_ms``."""
    meta: dict[str, Any] = field(repr=False)

    @property
    def metric(self) -> str:
        """The sweep's main metric."""
        return str(self.meta["metric"])


def export_files(out_dir: str | Path, name: str) -> list[Path]:
    """The three paths of export ``name`` in ``out_dir`` (trials, curves, meta)."""
    return [Path(out_dir) / f"{name}{suffix}" for suffix in SUFFIXES]


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AnalysisError(f"export name: got {name!r}, expected letters, digits, '_', '.' "
                            "or '-' (it starts the file names)")
    return name


def _dtype(series: pd.Series) -> str:
    kind = str(series.dtype)  # "str": pandas' inferred string dtype (NA is NaN)
    return kind if kind in ("Int64", "int64", "float64", "bool", "str") else "object"


def write_export(trials: pd.DataFrame, history: pd.DataFrame, meta: dict[str, Any],
                 out_dir: str | Path, name: str) -> list[Path]:
    """Write export ``name`` into ``out_dir`` (created if needed); the three paths.

    ``trials``: the loaded trial frame with ``TIME_COLUMNS``; ``history``: long frame
    with ``CURVE_COLUMNS`` (``name`` is filled from the trials when missing); ``meta``:
    JSON-able facts of the sweep, to which ``format``, ``name``, ``exported_at``,
    ``statuses`` (trials per status), ``columns`` (trial dtypes) and ``text_without_na``
    (text columns without a missing value: their empty cells read back as ``""``) are added.
    """
    _check_name(name)
    frame = validate_trials(trials)
    missing = [c for c in TIME_COLUMNS if c not in frame.columns]
    if missing:
        raise AnalysisError(f"trials: missing column(s) {', '.join(missing)} (replay needs them)")
    curves = history.copy()
    if "name" not in curves.columns:
        curves["name"] = curves["run_id"].map(dict(zip(frame["run_id"], frame["name"],
                                                       strict=True)))
    absent = [c for c in CURVE_COLUMNS if c not in curves.columns]
    if absent:
        raise AnalysisError(f"history: missing column(s) {', '.join(absent)}; "
                            f"expected {', '.join(CURVE_COLUMNS)}")
    curves = curves[list(CURVE_COLUMNS)].sort_values(["run_id", "key", "step"], kind="stable")
    kept = [c for c in frame.columns if c in TIME_COLUMNS or not frame[c].isna().all()]
    counts = frame["status"].value_counts()
    info = {**meta, "format": FORMAT, "name": name,
            "exported_at": meta.get("exported_at") or datetime.now(UTC).isoformat(timespec="seconds"),
            "trials": len(frame),
            "statuses": {str(k): int(v) for k, v in sorted(counts.items())},
            "columns": {c: _dtype(frame[c]) for c in frame.columns},
            "text_without_na": [c for c in frame.columns if _dtype(frame[c]) in ("str", "object")
                                and frame[c].notna().all()]}
    paths = export_files(out_dir, name)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    frame[kept].to_csv(paths[0], index=False)
    curves.to_csv(paths[1], index=False)
    paths[2].write_text(json.dumps(info, indent=2, sort_keys=False, default=str) + "\n",
                        encoding="utf-8")
    return paths


Opener = Callable[[str], IO[str]]


def _open_in(directory: Path) -> Opener:
    return lambda file: (directory / file).open(encoding="utf-8", newline="")


def _read_meta(opener: Opener, file: str) -> dict[str, Any]:
    try:
        with opener(file) as fh:
            meta = json.load(fh)
    except json.JSONDecodeError as exc:
        raise AnalysisError(f"{file}: not JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise AnalysisError(f"{file}: expected a JSON object, got {type(meta).__name__}")
    if meta.get("format") != FORMAT:
        raise AnalysisError(f"{file}: format {meta.get('format')!r}, expected {FORMAT} "
                            "(written by sublayer export)")
    lacking = [k for k in ("metric", "columns") if not meta.get(k)]
    if lacking or not isinstance(meta["columns"], dict):
        raise AnalysisError(f"{file}: missing {', '.join(lacking) or 'columns'} "
                            "(written by sublayer export)")
    return meta


def _read_csv(opener: Opener, file: str, dtypes: dict[str, str],
              required: tuple[str, ...]) -> pd.DataFrame:
    try:
        with opener(file) as fh:
            frame = pd.read_csv(fh, dtype={c: ("str" if t == "object" else t)
                                           for c, t in dtypes.items()},
                                float_precision="round_trip", keep_default_na=False,
                                na_values=[""])
    except (ValueError, pd.errors.ParserError) as exc:
        raise AnalysisError(f"{file}: unreadable ({exc})") from exc
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise AnalysisError(f"{file}: missing column(s) {', '.join(missing)}")
    for column, kind in dtypes.items():
        if column in frame.columns and kind == "object":
            frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return frame


def _trials(opener: Opener, file: str, meta: dict[str, Any]) -> pd.DataFrame:
    columns: dict[str, str] = meta["columns"]
    required = tuple(c for c in ("run_id", "order", "status", *TIME_COLUMNS) if c in columns)
    read = _read_csv(opener, file, {c: t for c, t in columns.items() if t != "bool"}, required)
    extra = [c for c in read.columns if c not in columns]
    if extra:
        raise AnalysisError(f"{file}: column(s) {', '.join(extra)} not in the meta's columns")
    for column, kind in columns.items():  # all-empty columns were left out of the file
        if column not in read.columns:
            read[column] = (pd.array([pd.NA] * len(read), dtype="Int64") if kind == "Int64"
                            else float("nan") if kind == "float64" else None)
            if kind == "str":
                read[column] = read[column].astype("str")
    for column in meta.get("text_without_na", []):  # CSV writes "" and NA alike
        if column in read.columns:
            read[column] = read[column].where(read[column].notna(), "")
    try:
        frame = validate_trials(read[list(columns)])
        for column, kind in columns.items():
            if kind in ("float64", "int64", "Int64", "str"):
                frame[column] = frame[column].astype(kind)
    except (TypeError, ValueError) as exc:
        raise AnalysisError(f"{file}: {exc}") from exc
    return frame


def _read(opener: Opener, name: str, where: str,
          exists: Callable[[str], bool]) -> StudyExport:
    files = [f"{name}{suffix}" for suffix in SUFFIXES]
    absent = [f for f in files if not exists(f)]
    if absent:
        raise AnalysisError(f"export {name!r} in {where}: missing {', '.join(absent)} "
                            f"(an export is {', '.join(files)}, written by sublayer export)")
    meta = _read_meta(opener, files[2])
    trials = _trials(opener, files[0], meta)
    history = _read_csv(opener, files[1], {"run_id": "str", "name": "str", "key": "str", "step": "int64",
                                           "value": "float64", "time_ms": "Int64"},
                        CURVE_COLUMNS)
    history = history[[*HISTORY_COLUMNS, "name", "time_ms"]]
    unknown = sorted(set(history["run_id"]) - set(trials["run_id"]))
    if unknown:
        raise AnalysisError(f"{files[1]}: run_id(s) {', '.join(unknown[:3])} are no trial of "
                            f"{files[0]}")
    trials.attrs.update(experiment=meta.get("experiment", name), export=name, source=where)
    return StudyExport(name=name, trials=trials, history=history.reset_index(drop=True),
                       meta=meta)


def export_names(directory: str | Path) -> list[str]:
    """Names of the exports in ``directory`` (files ``<name>_meta.json``), sorted."""
    return sorted(p.name[: -len(SUFFIXES[2])] for p in Path(directory).glob(f"*{SUFFIXES[2]}"))


def read_export(directory: str | Path, name: str) -> StudyExport:
    """Read export ``name`` from ``directory``; AnalysisError naming the file at fault."""
    folder = Path(directory)
    if not folder.is_dir():
        raise AnalysisError(f"export folder: got {str(directory)!r}, expected an existing folder")
    return _read(_open_in(folder), _check_name(name), str(folder),
                 lambda file: (folder / file).is_file())


def _data() -> Any:
    return resources.files(_PACKAGE) / "data"


def _builtin_names() -> tuple[str, ...]:
    try:
        files = [p.name for p in _data().iterdir()]
    except (FileNotFoundError, NotADirectoryError):  # pragma: no cover - broken install
        return ()
    return tuple(sorted(f[: -len(SUFFIXES[2])] for f in files if f.endswith(SUFFIXES[2])))


BUILTIN_EXPORTS: tuple[str, ...] = _builtin_names()
"""Exports shipped in the package (``analysis/data/<name>_meta.json`` …)."""


def builtin_export(name: str) -> StudyExport:
    """A shipped export by name (:data:`BUILTIN_EXPORTS`)."""
    if name not in BUILTIN_EXPORTS:
        shipped = (f"one of {', '.join(BUILTIN_EXPORTS)}" if BUILTIN_EXPORTS
                   else "a shipped study (this installation ships none)")
        raise AnalysisError(f"built-in study: got {name!r}, expected {shipped}")
    data = _data()
    return _read(lambda file: (data / file).open("r", encoding="utf-8", newline=""), name,
                 f"the package data ({_PACKAGE}/data)", lambda file: (data / file).is_file())


def open_export(source: str | os.PathLike[str], *, name: str | None = None) -> StudyExport:
    """The export ``source`` names: a ``<name>_meta.json`` file, a folder (with ``name``, or
    holding exactly one export) or, when no such path exists, a built-in name."""
    where = Path(source)
    if where.is_file() and where.name.endswith(SUFFIXES[2]):
        return read_export(where.parent, where.name[: -len(SUFFIXES[2])])
    if where.is_dir():
        if name is None:
            names = export_names(where)
            if len(names) != 1:
                raise AnalysisError(f"export folder {str(source)!r}: holds "
                                    f"{', '.join(names) or 'no export'}, expected one export "
                                    "(or give its name)")
            name = names[0]
        return read_export(where, name)
    if not where.exists() and name is None and str(source) in BUILTIN_EXPORTS:
        return builtin_export(str(source))
    raise AnalysisError(f"export: got {str(source)!r}, expected a folder of exports, a "
                        f"<name>{SUFFIXES[2]} file or a built-in study "
                        f"({', '.join(BUILTIN_EXPORTS) or 'none shipped'})")
