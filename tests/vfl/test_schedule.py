"""The public mini-batch schedule (vflsec.vfl.schedule): the global permutation unchanged, and the
shard-local order of ``shard_rows`` (issue 28: an epoch streams a party's Parquet shards one by one)."""
from __future__ import annotations

import numpy as np
import pytest

from vflsec.glm.job import GLMJob
from vflsec.vfl.schedule import batch_indices, epoch_order


def _before_shards(n, b, seed, epoch):
    """The schedule as it was before shard_rows existed (every committed result was trained on it)."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    order = rng.permutation(n)
    return [order[start:start + b] for start in range(0, n, b)]


@pytest.mark.parametrize("n,b,seed,epoch", [(10, 4, 3, 0), (1000, 64, 0, 7), (4097, 4096, 12, 2), (5, 5, 1, 0)])
def test_shard_rows_0_is_the_global_permutation_bit_for_bit(n, b, seed, epoch):
    old = _before_shards(n, b, seed, epoch)
    for new in (batch_indices(n, b, seed, epoch), batch_indices(n, b, seed, epoch, 0)):
        assert len(new) == len(old)
        assert all(x.dtype == y.dtype and x.tobytes() == y.tobytes() for x, y in zip(new, old))
    job = GLMJob("plain", n_samples=n, batch_size=b, seed=seed, epochs=epoch + 1)
    assert job.shard_rows == 0
    from_job = [idx for e, _, idx in job.batches() if e == epoch]
    assert all(x.tobytes() == y.tobytes() for x, y in zip(from_job, old))


@pytest.mark.parametrize("n,S", [(1000, 100), (1000, 128), (1001, 1000), (999, 1000), (64, 64), (130, 64)])
def test_every_row_once_per_epoch_shard_by_shard(n, S):
    for epoch in range(3):
        order = epoch_order(n, seed=5, epoch=epoch, shard_rows=S)
        assert sorted(order.tolist()) == list(range(n))
        # The epoch takes whole shards one after the other: each shard's rows form one run of the order.
        shards = order // S
        starts = np.flatnonzero(np.r_[True, shards[1:] != shards[:-1]])
        visited = shards[starts]
        assert sorted(visited.tolist()) == list(range(-(-n // S)))  # each shard once
        sizes = np.diff(np.r_[starts, n])
        assert all(size == min(S, n - shard * S) for shard, size in zip(visited, sizes))  # the last one shorter


def test_a_batch_spans_at_most_two_consecutive_shards_of_the_order():
    n, S, b = 1000, 96, 64
    visited = []
    for idx in batch_indices(n, b, seed=2, epoch=1, shard_rows=S):
        shards = list(dict.fromkeys((idx // S).tolist()))
        assert 1 <= len(shards) <= 2
        if visited and visited[-1] == shards[0]:
            shards = shards[1:]
        visited.extend(shards)
    assert sorted(visited) == list(range(-(-n // S)))  # the batches walk the shards in order, each once


def test_the_order_is_a_function_of_the_seed_and_the_epoch():
    first = batch_indices(500, 32, seed=7, epoch=3, shard_rows=100)
    again = batch_indices(500, 32, seed=7, epoch=3, shard_rows=100)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(first, again))
    others = [epoch_order(500, 7, 4, 100), epoch_order(500, 8, 3, 100), epoch_order(500, 7, 3, 0),
              epoch_order(500, 7, 3, 50)]
    whole = np.concatenate(first)
    assert all(not np.array_equal(whole, other) for other in others)
    # Both the shards' order and the rows within a shard are shuffled.
    orders = {tuple(dict.fromkeys((epoch_order(500, 7, e, 100) // 100).tolist())) for e in range(6)}
    assert len(orders) > 1
    assert not np.array_equal(whole[:100], np.sort(whole[:100]))


def test_a_job_with_shard_rows_trains_on_the_shard_local_batches():
    job = GLMJob("plain", n_samples=300, batch_size=32, epochs=2, seed=4, shard_rows=64)
    for epoch in range(2):
        from_job = [idx for e, _, idx in job.batches() if e == epoch]
        expected = batch_indices(300, 32, 4, epoch, 64)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(from_job, expected))


def test_negative_shard_rows_is_refused():
    with pytest.raises(ValueError, match="shard_rows must be >= 0"):
        epoch_order(10, 0, 0, -4)
