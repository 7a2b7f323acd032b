"""random_batch and eval_batches on plain arrays and memory-mapped ids."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sublayer_search.models.data import DataError, eval_batches, random_batch


@pytest.fixture
def ids(tmp_path) -> np.ndarray:
    np.save(tmp_path / "ids.npy", np.arange(1000, dtype=np.uint16))
    return np.load(tmp_path / "ids.npy", mmap_mode="r")


def test_random_batch_shapes_and_shift(ids):
    g = torch.Generator().manual_seed(0)
    x, y = random_batch(ids, context=16, batch_size=5, generator=g)
    assert x.shape == y.shape == (5, 16)
    assert x.dtype == y.dtype == torch.long
    assert torch.equal(y, x + 1)  # ids are 0..999: contiguous blocks, y = x shifted by one
    assert torch.equal(x[:, 1:], y[:, :-1])
    assert int(y.max()) <= 999


def test_random_batch_is_deterministic(ids):
    def batch(seed: int) -> torch.Tensor:
        x, _ = random_batch(
            ids, context=8, batch_size=4, generator=torch.Generator().manual_seed(seed)
        )
        return x

    assert torch.equal(batch(1), batch(1))
    assert not torch.equal(batch(1), batch(2))


def test_random_batch_reaches_both_ends():
    ids = np.arange(5)
    g = torch.Generator().manual_seed(0)
    starts = {
        int(random_batch(ids, context=3, batch_size=8, generator=g)[0][0, 0]) for _ in range(20)
    }
    assert starts == {0, 1}  # offsets 0..len-context-1, the last block ends at the last id


def test_random_batch_too_short():
    with pytest.raises(DataError, match="shorter than context"):
        random_batch(np.arange(8), context=8, batch_size=1)


@pytest.mark.parametrize(("n", "context", "batch_size"), [(1000, 64, 4), (129, 32, 2), (10, 3, 5)])
def test_eval_batches_cover_the_split(n, context, batch_size):
    ids = np.arange(n, dtype=np.int64)
    batches = list(eval_batches(ids, context=context, batch_size=batch_size))
    xs = torch.cat([x.reshape(-1) for x, _ in batches])
    ys = torch.cat([y.reshape(-1) for _, y in batches])
    assert torch.equal(xs, torch.arange(n - 1))  # non-overlapping, in order
    assert torch.equal(ys, torch.arange(1, n))  # every id after the first predicted once
    n_full, rest = divmod(n - 1, context)
    assert len(batches) == -(-n_full // batch_size) + (1 if rest else 0)
    assert all(x.shape[1] == context for x, _ in batches[: -(-n_full // batch_size)])
    if rest:
        assert batches[-1][0].shape == (1, rest)


def test_eval_batches_limit(ids):
    batches = list(eval_batches(ids, context=10, batch_size=3, limit=2))
    assert len(batches) == 2
    assert [tuple(x.shape) for x, _ in batches] == [(3, 10), (3, 10)]
    assert sum(1 for _ in eval_batches(ids, context=100, batch_size=100, limit=5)) == 2
    with pytest.raises(DataError):
        list(eval_batches(ids, context=10, batch_size=3, limit=0))
