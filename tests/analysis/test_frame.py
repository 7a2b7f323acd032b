from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from analysis_helpers import frame, trial

from sublayer_search.analysis import (
    TRIAL_COLUMNS,
    AnalysisError,
    baseline_stats,
    lower_is_better,
    validate_trials,
)
from sublayer_search.analysis.store.frame import select_metric


def test_analysis_error_is_value_error():
    assert issubclass(AnalysisError, ValueError)


def test_validate_coerces_types_and_keeps_extras():
    f = frame(trial("sfsf", 10.0, baseline=True, seed=0), trial("ssff", 9.0, k=1))
    f["extra"] = ["a", "b"]
    out = validate_trials(f)
    assert list(out.columns[: len(TRIAL_COLUMNS)]) == list(TRIAL_COLUMNS)
    assert str(out["seed"].dtype) == "Int64" and out["baseline"].dtype == bool
    assert out["extra"].tolist() == ["a", "b"]


def test_validate_rejects_missing_columns_and_bad_status():
    f = frame(trial("sfsf", 10.0, baseline=True))
    with pytest.raises(AnalysisError, match="missing column.*final"):
        validate_trials(f.drop(columns=["final"]))
    f.loc[0, "status"] = "exploded"
    with pytest.raises(AnalysisError, match="unknown status.*exploded"):
        validate_trials(f)
    with pytest.raises(AnalysisError, match="DataFrame"):
        validate_trials([1, 2])


def test_select_metric():
    f = frame(trial("sfsf", 10.0, baseline=True), trial("ssff", 1.2, metric="val_bpc"))
    with pytest.raises(AnalysisError, match="mixes metrics"):
        select_metric(f)
    assert select_metric(f, "val_bpc") == "val_bpc"
    with pytest.raises(AnalysisError, match="unknown metric 'val_bleu'.*val_bpc, val_ppl"):
        select_metric(f, "val_bleu")


def test_baseline_stats_and_missing_baseline():
    f = frame(trial("sfsf", 10.0, baseline=True, seed=0), trial("sfsf", 12.0, baseline=True,
              seed=1), trial("sfsf", np.nan, baseline=True, seed=2, status="diverged"))
    b = baseline_stats(f, "val_ppl")
    assert (b.n, b.mean, b.best) == (2, 11.0, 10.0)
    assert b.sd == pytest.approx(np.sqrt(2.0))
    with pytest.raises(AnalysisError, match="no finished baseline"):
        baseline_stats(frame(trial("ssff", 9.0)), "val_ppl")


def test_lower_is_better():
    assert lower_is_better("val_ppl") and lower_is_better("val_bpc") and lower_is_better("loss")
    assert not lower_is_better("val_bleu") and not lower_is_better("accuracy")


def test_trials_frame_empty_has_schema():
    f = pd.DataFrame(columns=list(TRIAL_COLUMNS))
    assert validate_trials(f).empty


def test_orders_are_canonicalised_and_bad_orders_rejected():
    f = frame(trial("sfsf", 10.0, baseline=True))
    f.loc[0, "order"] = "s^2 (sf) f^2"
    assert validate_trials(f).loc[0, "order"] == "sssfff"
    f.loc[0, "order"] = "sfx"
    with pytest.raises(AnalysisError, match="row 0: invalid order 'sfx'"):
        validate_trials(f)
