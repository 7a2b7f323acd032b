from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from sublayer_search.analysis import (
    AnalysisError,
    attention_distance,
    distance_table,
    group_distances,
    layer_distances,
    synthetic_attention,
)


def test_import_analysis_does_not_import_torch():
    import subprocess

    code = "import sublayer_search.analysis, sublayer_search.analysis.store.runs, sublayer_search.analysis.report.build, sys; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_zero_against_itself_symmetric_positive_for_different_inputs():
    a = synthetic_attention(3, heads=3, context=12, seed=0)
    b = synthetic_attention(3, heads=3, context=12, seed=1)
    assert attention_distance(a, a) == 0.0
    d_ab, d_ba = attention_distance(a, b), attention_distance(b, a)
    assert d_ab > 0
    assert d_ab == pytest.approx(d_ba)


def test_hand_example_one_token_two_heads():
    # T = 2: token 1 attends over keys {0, 1}; EMD between point masses at 0 and 1 is 1
    a = np.zeros((2, 2, 2))
    a[:, 0, 0] = 1.0
    a[0, 1] = [1.0, 0.0]
    a[1, 1] = [0.0, 1.0]
    b = a[::-1].copy()  # same heads, swapped: the Hungarian matching undoes the swap
    assert attention_distance([a], [b]) == 0.0
    c = a.copy()
    c[0, 1] = [0.0, 1.0]  # now both heads of c point at key 1
    # best matching: c0<->a1 (0) and c1<->a0 (1) -> summed EMD 1 for the only token
    assert attention_distance([a], [c]) == pytest.approx(1.0)
    # with token 0 included (always 0), the mean halves
    assert attention_distance([a], [c], first_token=0) == pytest.approx(0.5)


def test_head_permutation_invariance_and_scipy_engine_agree():
    a = synthetic_attention(2, heads=3, context=8, batch=2, seed=3)
    b = synthetic_attention(2, heads=3, context=8, batch=2, seed=4)
    permuted = [layer[:, [2, 0, 1]] for layer in b]
    assert attention_distance(a, b) == pytest.approx(attention_distance(a, permuted))
    cdf = layer_distances(a, b)
    ref = layer_distances(a, b, engine="scipy")
    assert np.allclose(cdf, ref)
    # one EMD from the closed form equals scipy's
    p, q = a[0][0, 0, 5, :6], b[0][0, 1, 5, :6]
    closed = np.abs(np.cumsum(p) - np.cumsum(q))[:-1].sum()
    assert closed == pytest.approx(wasserstein_distance(range(6), range(6), p, q))


def test_qhk_layout_matches_hqk():
    a = synthetic_attention(2, heads=2, context=6, seed=5)
    b = synthetic_attention(2, heads=2, context=6, seed=6)
    as_qhk = [x[0].transpose(1, 0, 2) for x in a]
    bs_qhk = [x[0].transpose(1, 0, 2) for x in b]
    assert attention_distance(as_qhk, bs_qhk, layout="qhk") == pytest.approx(
        attention_distance(a, b))


def test_table_and_groups():
    models = {
        "base0": synthetic_attention(2, heads=2, context=8, seed=0, locality=2.0),
        "base1": synthetic_attention(2, heads=2, context=8, seed=1, locality=2.0),
        "sw0": synthetic_attention(2, heads=2, context=8, seed=2, locality=0.0),
    }
    t = distance_table(models)
    assert list(t.index) == ["base0", "base1", "sw0"]
    assert np.allclose(t.to_numpy(), t.to_numpy().T)
    assert np.all(np.diag(t.to_numpy()) == 0)
    assert (t.to_numpy()[~np.eye(3, dtype=bool)] > 0).all()
    g = group_distances(t, {"base0": "baseline", "base1": "baseline", "sw0": "sandwich"})
    g = g.set_index("pair")
    assert g.loc["baseline vs baseline", "n"] == 1 and g.loc["baseline vs sandwich", "n"] == 2
    assert g.loc["baseline vs baseline", "mean"] == pytest.approx(t.loc["base0", "base1"])
    with pytest.raises(AnalysisError, match="no group given"):
        group_distances(t, {"base0": "baseline"})


def test_bad_inputs():
    a = synthetic_attention(2, heads=2, context=6, seed=0)
    with pytest.raises(AnalysisError, match="same"):
        attention_distance(a, a[:1])
    with pytest.raises(AnalysisError, match="non-negative"):
        attention_distance([-a[0]], [a[0]])
    with pytest.raises(AnalysisError, match="shapes differ"):
        attention_distance(a, synthetic_attention(2, heads=3, context=6))
    with pytest.raises(AnalysisError, match="list over s-sublayers"):
        attention_distance(a[0], a[0])
    with pytest.raises(AnalysisError, match="layout"):
        attention_distance(a, a, layout="khq")
    with pytest.raises(AnalysisError, match="at least two"):
        distance_table({"x": a})
