"""Several sweeps as one study (``sublayer analyze --experiment A --experiment B``).

The trial frames of the sweeps are stacked (an ``experiment`` column says where each
trial came from; run ids are unique across an MLflow store) and studied as one: the
baseline seeds of every sweep form one baseline. Pooling is refused unless every sweep
has the same main metric. A trial trained again (same order, seed and settings, in one
experiment's several sweeps or across pooled ones) is one sample: the latest finished is
kept (:mod:`analysis.store.replays`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import validate_trials
from sublayer_search.analysis.store.replays import one_per_content_key

__all__ = ["load_pooled", "main_metric", "pool"]


def main_metric(frame: pd.DataFrame) -> str:
    """The sweep's metric; several joined with ', ' (a mixed sweep), or 'none'."""
    names = sorted({m for m in frame["metric"] if isinstance(m, str)}) if len(frame) else []
    return ", ".join(names) or "none"


def pool(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One trial frame of the named sweeps' frames; AnalysisError naming each sweep and its
    metric when they do not share one main metric."""
    if not frames:
        raise AnalysisError("--experiment: give at least one sweep to analyse")
    metrics = {name: main_metric(frame) for name, frame in frames.items()}
    if len(set(metrics.values())) > 1:
        listed = "; ".join(f"{name!r}: {metric}" for name, metric in metrics.items())
        raise AnalysisError(f"--experiment: pooled sweeps must share one main metric, got "
                            f"{listed}")
    parts = [validate_trials(frame).assign(experiment=name) for name, frame in frames.items()]
    pooled = pd.concat(parts, ignore_index=True)
    dupes = pooled.loc[pooled["run_id"].duplicated(), "run_id"].tolist()
    if dupes:
        raise AnalysisError(f"--experiment: the same run is in several sweeps: {dupes[:5]}")
    return validate_trials(pooled)


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame | None:
    frames = [f for f in frames if f is not None and not f.empty]
    return pd.concat(frames, ignore_index=True) if frames else None


def load_pooled(
    experiments: Sequence[str], tracking_uri: str, *, history: bool = False
) -> tuple[pd.DataFrame, pd.DataFrame | None, pd.DataFrame | None]:
    """Load and pool the sweeps: (trials, history or None, routing or None). The trials
    keep one finished trial per content key (:func:`~.replays.one_per_content_key`;
    ``trials.attrs["replays"]`` says what was left out)."""
    from sublayer_search.analysis.store import runs
    from sublayer_search.analysis.store.iot_frame import is_translation

    if len(set(experiments)) != len(experiments):
        raise AnalysisError(f"--experiment: a sweep is named twice: {list(experiments)}")
    frames: dict[str, pd.DataFrame] = {}
    histories: list[pd.DataFrame] = []
    routings: list[pd.DataFrame] = []
    for name in experiments:
        if history:
            frames[name], hist = runs.load(name, tracking_uri, history=True)
            histories.append(hist)
        else:
            frames[name] = runs.load(name, tracking_uri)
        trials = frames[name]
        if is_translation(trials) and "subset" in trials.columns and trials["subset"].notna(
        ).any():
            routings.append(runs.load_routing(name, tracking_uri))
    trials = frames[experiments[0]] if len(frames) == 1 else pool(frames)
    trials, replays = one_per_content_key(trials)
    trials.attrs["replays"] = replays
    hist_frame = _concat(histories) if history else None
    if history and hist_frame is None:
        hist_frame = histories[0]
    if hist_frame is not None and replays.run_ids:
        hist_frame = hist_frame[~hist_frame["run_id"].isin(replays.run_ids)]
    return trials, hist_frame, _concat(routings)
