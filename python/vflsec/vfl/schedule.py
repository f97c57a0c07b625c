"""The mini-batch schedule every party of a VFL job computes on its own.

The order of rows in an epoch is a pure function of public job fields
``(n_samples, batch_size, seed, epoch)`` (and ``shard_rows`` for a GLM job),
so the parties of a vertical job (GLM or split learning), and an adversary
replaying a transcript (:mod:`vflsec.attacks.views`), all derive the same
batches without talking.

Two orders, each visiting every row exactly once per epoch:

* ``shard_rows=0`` (the default): a permutation of all rows;
* ``shard_rows=S > 0``, shard-local: the rows in the aligned order cut into
  shards of ``S`` consecutive rows (the last one may be shorter); the epoch
  takes the shards in an order permuted from ``(seed, epoch)`` and each
  shard's rows permuted within it, all concatenated and cut into batches as
  above (a batch may span consecutive shards of that order). A party that
  keeps its rows as files, one per shard (``vflsec party`` with ``shard_rows``
  in the job, :mod:`vflsec.glm.shards`), then reads each shard once per epoch
  and holds at most two of them.

Neither order is secret (every party computes it) nor a random sample, so no
privacy guarantee built on it may claim amplification by sampling or
shuffling: the DP accounting of the GLM protocols that take a schedule
(:mod:`vflsec.glm.hdp`, :mod:`vflsec.glm.he_dp`) assumes only that every row
is in exactly one batch per epoch, which both orders meet.
"""
from __future__ import annotations

from typing import List

import numpy as np

__all__ = ["batch_indices", "epoch_order"]


def epoch_order(n_samples: int, seed: int, epoch: int, shard_rows: int = 0) -> np.ndarray:
    """The order of the rows ``range(n_samples)`` in epoch ``epoch``: a
    permutation drawn from ``(seed, epoch)``; with ``shard_rows`` > 0 the
    shard-local permutation (module docstring)."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    if not shard_rows:
        return rng.permutation(n_samples)
    shard_rows = int(shard_rows)
    if shard_rows < 0:
        raise ValueError(f"shard_rows must be >= 0, got {shard_rows}")
    n_shards = -(-int(n_samples) // shard_rows)
    order = np.empty(int(n_samples), dtype=np.int64)
    filled = 0
    for shard in rng.permutation(n_shards):
        first = int(shard) * shard_rows
        size = min(shard_rows, int(n_samples) - first)
        order[filled:filled + size] = first + rng.permutation(size)
        filled += size
    return order


def batch_indices(n_samples: int, batch_size: int, seed: int, epoch: int,
                  shard_rows: int = 0) -> List[np.ndarray]:
    """Mini-batches of one epoch: :func:`epoch_order` (a permutation of
    ``range(n_samples)`` drawn from ``(seed, epoch)``, shard-local with
    ``shard_rows`` > 0), cut into ``ceil(n / batch_size)`` consecutive
    chunks (the last one may be smaller)."""
    order = epoch_order(n_samples, seed, epoch, shard_rows)
    return [order[start:start + batch_size] for start in range(0, n_samples, batch_size)]
