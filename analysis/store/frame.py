"""The tidy trial frame: column schema, validation and shared helpers for the studies.

One row per trial. Required columns (``TRIAL_COLUMNS``):

======== ==============================================================
run_id   MLflow run id (or a synthetic id for paper rows)
name     run name, e.g. ``sandwich16_6@seed2``
order    canonical order string (``sfsf...``)
family   space name, or ``"baseline"``
space    space name of the sweep
seed     training seed (nullable int)
k        sandwich coefficient (nullable int)
n_s/n_f  sublayer counts (nullable int)
units    cost in ``s``-units (float)
params   sublayer parameters (nullable int)
metric   name of the main validation metric (``val_ppl``, ``val_bpc``...)
final    final value of that metric (float, NaN when missing)
best     best value during training (float, NaN when missing)
status   finished | stopped | failed | diverged | killed | running
baseline bool
======== ==============================================================

Extra columns (``n_c``, ``candidate``, ``source``...) are kept as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.spaces.order import any_order
from sublayer_search.spaces.records import TrialStatus, direction

__all__ = [
    "HISTORY_COLUMNS",
    "STATUSES",
    "TRIAL_COLUMNS",
    "BaselineStats",
    "at_least_as_good",
    "baseline_stats",
    "candidates",
    "lower_is_better",
    "sample_sd",
    "select_metric",
    "stopped_candidates",
    "trials_frame",
    "usable",
    "validate_trials",
    "with_stopped",
]

TRIAL_COLUMNS: tuple[str, ...] = (
    "run_id",
    "name",
    "order",
    "family",
    "space",
    "seed",
    "k",
    "n_s",
    "n_f",
    "units",
    "params",
    "metric",
    "final",
    "best",
    "status",
    "baseline",
)
HISTORY_COLUMNS: tuple[str, ...] = ("run_id", "key", "step", "value")
STATUSES: tuple[str, ...] = tuple(s.value for s in (
    TrialStatus.FINISHED, TrialStatus.STOPPED, TrialStatus.FAILED, TrialStatus.DIVERGED,
    TrialStatus.KILLED, TrialStatus.RUNNING,
))
"""The frame's statuses. ``stopped``: ended early by the scheduler (ASHA); its values are
those of the last step it reached (column ``steps``). Studies leave stopped trials out
unless the frame went through :func:`with_stopped`."""

_INT_COLUMNS = ("seed", "k", "n_s", "n_f", "params")
_FLOAT_COLUMNS = ("units", "final", "best")
_STR_COLUMNS = ("run_id", "name", "order", "family", "space", "metric", "status")


def lower_is_better(metric: str) -> bool:
    """True for losses, perplexity and bits per character; False for BLEU/accuracy-like names
    (:func:`spaces.records.direction`)."""
    return direction(metric) == "min"


def sample_sd(values: Sequence[float] | np.ndarray | pd.Series) -> float:
    """The sample standard deviation (ddof=1); NaN for fewer than two values."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")


def trials_frame(rows: Iterable[Mapping[str, object]]) -> pd.DataFrame:
    """Build a validated trial frame from row mappings (missing optional values become NA)."""
    rows = list(rows)
    frame = pd.DataFrame(rows)
    for column in TRIAL_COLUMNS:
        if column not in frame.columns:
            frame[column] = pd.NA
    extra = [c for c in frame.columns if c not in TRIAL_COLUMNS]
    return validate_trials(frame[list(TRIAL_COLUMNS) + extra])


def validate_trials(frame: pd.DataFrame) -> pd.DataFrame:
    """Check the schema and coerce dtypes; return a new frame. Raises AnalysisError."""
    if not isinstance(frame, pd.DataFrame):
        raise AnalysisError(f"expected a pandas DataFrame of trials, got {type(frame).__name__}")
    missing = [c for c in TRIAL_COLUMNS if c not in frame.columns]
    if missing:
        raise AnalysisError(
            f"trial frame is missing column(s) {', '.join(missing)}; "
            f"required: {', '.join(TRIAL_COLUMNS)}"
        )
    out = frame.copy().reset_index(drop=True)
    for column in _INT_COLUMNS:
        try:
            out[column] = pd.to_numeric(out[column], errors="raise").astype("Int64")
        except (TypeError, ValueError) as exc:
            raise AnalysisError(f"column {column!r} must hold integers or NA: {exc}") from exc
    for column in _FLOAT_COLUMNS:
        try:
            out[column] = pd.to_numeric(out[column], errors="raise").astype(float)
        except (TypeError, ValueError) as exc:
            raise AnalysisError(f"column {column!r} must hold numbers or NA: {exc}") from exc
    for column in _STR_COLUMNS:
        out[column] = out[column].astype("object").where(out[column].notna(), None)
    out["order"] = [_canonical(o, i) for i, o in enumerate(out["order"])]
    out["baseline"] = out["baseline"].map(_as_bool).astype(bool)
    bad = sorted({s for s in out["status"] if s not in STATUSES})
    if bad:
        raise AnalysisError(f"unknown status value(s) {bad}; expected one of {', '.join(STATUSES)}")
    return out


def _canonical(order: object, row: int) -> str | None:
    if order is None:
        return None
    try:
        return any_order(str(order))
    except ValueError as exc:
        raise AnalysisError(f"row {row}: {exc}") from exc


def _as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"true", "1", "yes"}
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return False
    return bool(value)


def select_metric(frame: pd.DataFrame, metric: str | None = None) -> str:
    """The metric to study: ``metric`` if the frame has it, else the frame's only metric."""
    available = sorted({m for m in frame["metric"] if isinstance(m, str)})
    if metric is not None:
        if metric not in available:
            raise AnalysisError(
                f"unknown metric {metric!r}; this frame has: {', '.join(available) or 'none'}"
            )
        return metric
    if not available:
        raise AnalysisError("the trial frame names no metric (column 'metric' is empty)")
    if len(available) > 1:
        raise AnalysisError(
            f"the frame mixes metrics {', '.join(available)}; pass metric= to choose one"
        )
    return available[0]


def with_stopped(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with early-stopped trials counted as finished at their last value (an
    explicit choice: ``sublayer analyze --include-stopped``); column ``stopped`` marks them."""
    out = frame.copy()
    out["stopped"] = out["status"] == TrialStatus.STOPPED
    out.loc[out["stopped"], "status"] = TrialStatus.FINISHED.value
    return out


def stopped_candidates(frame: pd.DataFrame, metric: str, *,
                       column: str = "final") -> pd.DataFrame:
    """Candidate trials stopped early (their last value finite): a group of their own."""
    rows = frame[(frame["metric"] == metric) & (frame["status"] == TrialStatus.STOPPED)
                 & ~frame["baseline"]]
    return rows[np.isfinite(rows[column].to_numpy(dtype=float))]


def usable(frame: pd.DataFrame, metric: str, *, column: str = "final") -> pd.DataFrame:
    """Finished rows of ``metric`` with a finite ``column`` value (failed/diverged dropped)."""
    if column not in ("final", "best"):
        raise AnalysisError(f"column must be 'final' or 'best', got {column!r}")
    rows = frame[(frame["metric"] == metric) & (frame["status"] == TrialStatus.FINISHED)]
    return rows[np.isfinite(rows[column].to_numpy(dtype=float))]


def candidates(frame: pd.DataFrame, metric: str, *, column: str = "final") -> pd.DataFrame:
    """Usable non-baseline rows."""
    rows = usable(frame, metric, column=column)
    return rows[~rows["baseline"]]


def study_inputs(frame: pd.DataFrame, metric: str | None, *, column: str = "final",
                 require_rows: bool = True) -> tuple[pd.DataFrame, str, BaselineStats, pd.DataFrame]:
    """The common start of every study: (validated frame, metric, baseline stats, candidates)."""
    frame = validate_trials(frame)
    metric = select_metric(frame, metric)
    base = baseline_stats(frame, metric, column=column)
    rows = candidates(frame, metric, column=column)
    if require_rows and rows.empty:
        raise AnalysisError(f"no usable non-baseline trial for metric {metric!r}")
    return frame, metric, base, rows


@dataclass(frozen=True, kw_only=True)
class BaselineStats:
    """Summary of the baseline trials (sd is the sample sd, ddof=1; NaN for one value)."""

    metric: str
    values: tuple[float, ...]
    lower_is_better: bool

    def __post_init__(self) -> None:
        if not self.values:
            raise AnalysisError("baseline statistics need at least one baseline value")

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))

    @property
    def sd(self) -> float:
        return sample_sd(self.values)

    @property
    def best(self) -> float:
        return float(min(self.values) if self.lower_is_better else max(self.values))


def baseline_stats(frame: pd.DataFrame, metric: str, *, column: str = "final") -> BaselineStats:
    """Statistics of the finished baseline trials; AnalysisError when there are none."""
    rows = usable(frame, metric, column=column)
    values = rows.loc[rows["baseline"], column].to_numpy(dtype=float)
    if len(values) == 0:
        raise AnalysisError(
            f"no finished baseline trial for metric {metric!r} (rows with baseline=True, "
            "tag sublayer.baseline=true); every study compares against the baseline"
        )
    return BaselineStats(
        metric=metric, values=tuple(float(v) for v in values),
        lower_is_better=lower_is_better(metric),
    )


def at_least_as_good(values: np.ndarray | pd.Series, reference: float, *, lower: bool) -> np.ndarray:
    """Elementwise ``value <= reference`` (or ``>=`` when higher is better)."""
    arr = np.asarray(values, dtype=float)
    return arr <= reference if lower else arr >= reference
