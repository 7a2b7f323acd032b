"""Attention distance between models (Press et al. 2020, Table 7).

For two models, per token t and per self-attention sublayer: every head's attention over
key positions 0..t is a distribution; the heads of model A are matched to those of
model B with the Hungarian algorithm (``scipy.optimize.linear_sum_assignment``) so
that the summed earth mover's distance (1-D Wasserstein over positions) is minimal;
that minimum is the token's distance. The model distance is the mean over tokens
(from ``first_token``) and layers.

Inputs are numpy arrays of attention probabilities, one per ``s`` sublayer, either
``(H, T, T)`` / ``(B, H, T, T)`` (``layout="hqk"``, as ``models.lm.capture_attention``
yields) or ``(T, H, T)`` per layer (``layout="qhk"``: query token, head, key).

``engine="cdf"`` (default) computes each EMD in closed form, Σ_k |F_a(k) − F_b(k)| over
unit-spaced positions, which equals ``scipy.stats.wasserstein_distance(range(t+1),
range(t+1), a, b)`` (checked in the tests) and is vectorised; ``engine="scipy"``
calls scipy for every pair of heads (slow, for reference).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.optimize import linear_sum_assignment
from scipy.stats import wasserstein_distance

from sublayer_search.analysis.errors import AnalysisError
from sublayer_search.analysis.store.frame import sample_sd

__all__ = [
    "as_layers",
    "attention_distance",
    "distance_table",
    "group_distances",
    "layer_distances",
    "synthetic_attention",
]

_LAYOUTS = ("hqk", "qhk")
_ENGINES = ("cdf", "scipy")


def as_layers(attention: Sequence[np.ndarray], *, layout: str = "hqk") -> list[np.ndarray]:
    """Validate and convert one model's attention to a list of (B, H, T, T) float arrays."""
    if layout not in _LAYOUTS:
        raise AnalysisError(f"unknown layout {layout!r}; expected one of {', '.join(_LAYOUTS)}")
    if isinstance(attention, np.ndarray):
        raise AnalysisError("attention must be a list over s-sublayers of arrays, not one array")
    layers = []
    for i, layer in enumerate(attention):
        arr = np.asarray(layer, dtype=np.float64)
        if layout == "qhk":
            if arr.ndim != 3:
                raise AnalysisError(f"layer {i}: layout 'qhk' needs (T, H, T), got {arr.shape}")
            arr = arr.transpose(1, 0, 2)
        if arr.ndim == 3:
            arr = arr[None]
        if arr.ndim != 4 or arr.shape[-1] != arr.shape[-2]:
            raise AnalysisError(f"layer {i}: expected (H, T, T) or (B, H, T, T), got {arr.shape}")
        if not np.all(np.isfinite(arr)) or np.any(arr < 0):
            raise AnalysisError(f"layer {i}: attention must be finite and non-negative")
        layers.append(arr)
    if not layers:
        raise AnalysisError("attention has no layers (the model has no s sublayer?)")
    return layers


def _rows(layer: np.ndarray, t: int) -> np.ndarray:
    """(B, H, t+1) distributions of query t over keys 0..t, renormalised."""
    rows = layer[:, :, t, : t + 1]
    mass = rows.sum(axis=-1, keepdims=True)
    if np.any(mass <= 0):
        raise AnalysisError(f"token {t}: a head puts no attention on keys 0..{t}")
    return rows / mass


def _cost_cdf(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(B, H, H) EMD between every head of a and of b, each (B, H, n)."""
    ca = np.cumsum(a, axis=-1)[..., :-1]
    cb = np.cumsum(b, axis=-1)[..., :-1]
    return np.abs(ca[:, :, None, :] - cb[:, None, :, :]).sum(axis=-1)


def _cost_scipy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    batch, heads, n = a.shape
    pos = np.arange(n)
    cost = np.empty((batch, heads, heads))
    for k in range(batch):
        for i in range(heads):
            for j in range(heads):
                cost[k, i, j] = wasserstein_distance(pos, pos, a[k, i], b[k, j])
    return cost


def layer_distances(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    *,
    layout: str = "hqk",
    first_token: int = 1,
    engine: str = "cdf",
) -> np.ndarray:
    """Mean matched-head distance per s-sublayer (averaged over batch and tokens
    ``first_token..T-1``; token 0 has one key, so its distance is always 0)."""
    if engine not in _ENGINES:
        raise AnalysisError(f"unknown engine {engine!r}; expected one of {', '.join(_ENGINES)}")
    la, lb = as_layers(a, layout=layout), as_layers(b, layout=layout)
    if len(la) != len(lb):
        raise AnalysisError(f"models have {len(la)} and {len(lb)} s-sublayers; need the same")
    cost_fn = _cost_cdf if engine == "cdf" else _cost_scipy
    out = np.empty(len(la))
    for i, (x, y) in enumerate(zip(la, lb, strict=True)):
        if x.shape != y.shape:
            raise AnalysisError(f"layer {i}: shapes differ {x.shape} vs {y.shape}")
        seq = x.shape[-1]
        if not 0 <= first_token < seq:
            raise AnalysisError(f"first_token must lie in 0..{seq - 1}, got {first_token}")
        total, count = 0.0, 0
        for t in range(first_token, seq):
            cost = cost_fn(_rows(x, t), _rows(y, t))
            for matrix in cost:
                r, c = linear_sum_assignment(matrix)
                total += float(matrix[r, c].sum())
                count += 1
        out[i] = total / count
    return out


def attention_distance(
    a: Sequence[np.ndarray],
    b: Sequence[np.ndarray],
    *,
    layout: str = "hqk",
    first_token: int = 1,
    engine: str = "cdf",
) -> float:
    """Distance between two models: mean over tokens and s-sublayers of the minimal
    summed EMD between Hungarian-matched heads. 0 for identical attention; symmetric."""
    return float(
        np.mean(layer_distances(a, b, layout=layout, first_token=first_token, engine=engine))
    )


def distance_table(
    models: Mapping[str, Sequence[np.ndarray]],
    *,
    layout: str = "hqk",
    first_token: int = 1,
    engine: str = "cdf",
) -> pd.DataFrame:
    """Symmetric pairwise distance table (index and columns: model names; diagonal 0)."""
    names = list(models)
    if len(names) < 2:
        raise AnalysisError("a distance table needs at least two models")
    table = pd.DataFrame(0.0, index=names, columns=names)
    for x, y in combinations(names, 2):
        d = attention_distance(models[x], models[y], layout=layout, first_token=first_token,
                               engine=engine)
        table.loc[x, y] = table.loc[y, x] = d
    table.index.name = "model"
    return table


def group_distances(table: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
    """Table 7 style summary: mean, sd and count of off-diagonal distances per pair of
    groups (e.g. {"base_a": "baseline", "sw_a": "sandwich", ...})."""
    unknown = [n for n in table.index if n not in groups]
    if unknown:
        raise AnalysisError(f"no group given for model(s) {', '.join(map(str, unknown))}")
    values: dict[tuple[str, str], list[float]] = {}
    for x, y in combinations(table.index, 2):
        first, second = sorted((groups[x], groups[y]))
        values.setdefault((first, second), []).append(float(table.loc[x, y]))
    rows = [
        {"pair": f"{g1} vs {g2}", "mean": float(np.mean(v)),
         "sd": sample_sd(v), "n": len(v)}
        for (g1, g2), v in sorted(values.items())
    ]
    return pd.DataFrame(rows, columns=["pair", "mean", "sd", "n"])


def synthetic_attention(
    n_layers: int,
    *,
    heads: int = 4,
    context: int = 16,
    batch: int = 1,
    seed: int = 0,
    locality: float = 0.5,
) -> list[np.ndarray]:
    """Random causal attention probabilities, one (B, H, T, T) array per layer: softmax of
    Gaussian scores minus ``locality`` × (query − key). For examples and tests."""
    if min(n_layers, heads, context, batch) < 1:
        raise AnalysisError("n_layers, heads, context and batch must be positive")
    rng = np.random.default_rng(seed)
    q = np.arange(context)[:, None]
    k = np.arange(context)[None, :]
    bias = np.where(k <= q, -locality * (q - k), -np.inf)
    layers = []
    for _ in range(n_layers):
        scores = rng.normal(size=(batch, heads, context, context)) + bias
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        layers.append(probs / probs.sum(axis=-1, keepdims=True))
    return layers
