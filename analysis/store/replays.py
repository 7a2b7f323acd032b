"""A trial trained again is one sample, not two.

An experiment can hold several sweeps of the same experiment file: ``make run``
interrupted and started again, then ``--resume``d, trains some trials twice. Each such
replay has the same *content key*: the order, the seed, the settings
(``config_hash``: every setting but the order and the seed) and what else tells models
apart (baseline or candidate, task, side, IOT codes, guidance). Counting replays as
independent samples shrinks the seed spread and invents verdicts, so the studies keep
one finished trial per content key: the latest finished (``end_ms``). Distinct seeds,
across sweeps and pooled experiments, all stay. Rows without a settings hash or a seed
(published paper data, hand-made frames) are never merged; unfinished rows stay as
they are (no study counts them).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sublayer_search.spaces.records import TrialStatus

__all__ = ["CONTENT_KEY", "IDENTITY_COLUMNS", "Replays", "one_per_content_key"]

CONTENT_KEY: tuple[str, ...] = ("order", "seed", "config_hash")
IDENTITY_COLUMNS: tuple[str, ...] = ("baseline", "task", "side", "stack", "encoder_order",
                                     "decoder_order", "codes", "guidance")
"""Columns that, where the frame has them, also tell two trials apart."""


@dataclass(frozen=True, kw_only=True)
class Replays:
    """What :func:`one_per_content_key` left out: ``dropped`` earlier finished replays
    (their run ids in ``run_ids``) of ``keys`` content keys trained more than once."""

    dropped: int
    keys: int
    run_ids: tuple[str, ...]

    def message(self) -> str:
        """One line for the output; empty when nothing was left out."""
        if not self.dropped:
            return ""
        return (f"kept one finished trial per content key (order, seed, settings): "
                f"{self.keys} trial(s) were trained more than once; the latest finished of "
                f"each is kept and {self.dropped} earlier replay(s) left out, so a rerun "
                "is not counted as new evidence")


def one_per_content_key(frame: pd.DataFrame) -> tuple[pd.DataFrame, Replays]:
    """``frame`` with one finished row per content key (the latest finished by
    ``end_ms``, else the last row) and what was left out; ``frame.attrs`` are kept."""
    if not set(CONTENT_KEY) <= set(frame.columns) or frame.empty:
        return frame, Replays(dropped=0, keys=0, run_ids=())
    finished = frame["status"] == TrialStatus.FINISHED.value
    keyed = finished & frame["config_hash"].notna() & frame["seed"].notna()
    columns = [*CONTENT_KEY, *(c for c in IDENTITY_COLUMNS if c in frame.columns)]
    rows = frame.loc[keyed, columns].astype("string").fillna("")
    when = (frame.loc[keyed, "end_ms"] if "end_ms" in frame.columns
            else pd.Series(pd.NA, index=rows.index))
    rows = rows.assign(_when=pd.to_numeric(when, errors="coerce").fillna(-1),
                       _row=range(len(rows)))
    rows = rows.sort_values(["_when", "_row"], kind="stable")
    later = rows.duplicated(columns, keep="last")
    drop = rows.index[later]
    keys = int(rows.loc[later, columns].drop_duplicates().shape[0])
    out = frame.drop(index=drop).reset_index(drop=True)
    out.attrs.update(frame.attrs)
    run_ids = tuple(str(r) for r in frame.loc[drop, "run_id"])
    return out, Replays(dropped=len(drop), keys=keys, run_ids=run_ids)
