"""One sample per content key (issue 46): a trial trained again with the same order,
seed and settings is one sample, the latest finished; distinct seeds all stay."""

from __future__ import annotations

import pandas as pd
import pytest
from analysis_helpers import frame, trial

from sublayer_search.analysis.store.replays import one_per_content_key
from sublayer_search.analysis.studies.seeds import seed_comparison


def _keyed(order: str, value: float, seed: int, end: int, *, baseline: bool = False,
           status: str = "finished", config: str = "h1") -> dict[str, object]:
    row = trial(order, value, seed=seed, baseline=baseline, status=status)
    row.update(config_hash=config, end_ms=end)
    return row


def _walk() -> pd.DataFrame:
    """Baseline seeds 0-2 and ``ssff`` seeds 0-1, every one trained three times (the
    walk run, run, run), an interrupted one killed, and one with other settings."""
    rows = []
    for sweep in range(3):
        rows += [_keyed("sfsf", 3.0 + 0.01 * s + 0.001 * sweep, s, 100 * sweep + s,
                        baseline=True) for s in range(3)]
        rows += [_keyed("ssff", 2.9 + 0.01 * s + 0.001 * sweep, s, 100 * sweep + 10 + s)
                 for s in range(2)]
    rows.append(_keyed("ssff", 9.9, 1, 999, status="killed"))
    rows.append(_keyed("ssff", 2.5, 0, 50, config="other"))  # other settings: another key
    return frame(*rows)


def test_the_latest_finished_replay_is_kept_and_the_others_counted() -> None:
    walked, replays = one_per_content_key(_walk())
    finished = walked[walked["status"] == "finished"]
    assert replays.dropped == 10 and replays.keys == 5 and len(replays.run_ids) == 10
    assert "5 trial(s) were trained more than once" in replays.message()
    assert "10 earlier replay(s) left out" in replays.message()
    kept = finished[finished["config_hash"] == "h1"].set_index(["order", "seed"])["final"]
    assert kept.to_dict() == pytest.approx({  # the third sweep's
        ("sfsf", 0): 3.002, ("sfsf", 1): 3.012, ("sfsf", 2): 3.022, ("ssff", 0): 2.902,
        ("ssff", 1): 2.912})
    assert (walked["status"] == "killed").sum() == 1  # not a sample; left as it was
    assert ((finished["config_hash"] == "other") & (finished["final"] == 2.5)).sum() == 1


def test_the_walk_counts_each_seed_once_in_the_verdicts() -> None:
    walked, _ = one_per_content_key(_walk())
    row = seed_comparison(walked[walked["config_hash"] == "h1"], metric="val_ppl").row("ssff")
    assert row["n"] == 2 and row["baseline_n"] == 3
    replayed = seed_comparison(_walk().query("config_hash == 'h1'"), metric="val_ppl").row("ssff")
    assert replayed["n"] == 6  # without the rule: every replay an independent sample


def test_rows_without_settings_or_seed_are_never_merged() -> None:
    rows = frame(trial("sfsf", 3.0, baseline=True, seed=0), trial("sfsf", 3.1, baseline=True,
                                                                  seed=0))
    same, replays = one_per_content_key(rows)
    assert len(same) == 2 and replays.dropped == 0 and replays.message() == ""
