"""``benchmarks/model_throughput.py``'s interval of the tokens/s ratio (the timing itself
needs Hugging Face ``transformers``, the ``bench`` extra, and runs as a benchmark)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "model_throughput", REPO / "benchmarks" / "model_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_steady_rounds_give_a_tight_interval_around_the_ratio(bench):
    other = [1.00, 1.01, 0.99, 1.00, 1.02, 0.98, 1.00, 1.01, 0.99]
    ours = [s / 1.25 for s in other]  # 1.25x the tokens/s in every round
    lo, hi = bench.ratio_interval(ours, other)
    assert lo == pytest.approx(1.25) and hi == pytest.approx(1.25)


def test_noisy_rounds_widen_the_interval_past_a_target(bench):
    other = [1.00, 1.30, 0.95, 1.20, 1.05, 0.90, 1.25, 1.00, 1.10]
    ours = [0.80, 1.20, 0.70, 1.10, 0.85, 0.80, 0.95, 0.90, 0.80]  # ratio noise per round
    lo, hi = bench.ratio_interval(ours, other)
    point = (sorted(other)[4]) / (sorted(ours)[4])
    assert lo < point < hi
    assert lo < 1.2 < hi  # a median ratio of 1.24 that the noise cannot tell from 1.2
    assert bench.ratio_interval(ours, other) == (lo, hi)  # seeded: the same every run
