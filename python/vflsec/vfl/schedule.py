"""The mini-batch schedule every party of a VFL job computes on its own.

The order of rows in an epoch is a pure function of public job fields
``(n_samples, batch_size, seed, epoch)``, so the parties of a vertical job
(GLM or split learning), and an adversary replaying a transcript
(:mod:`vflsec.attacks.views`), all derive the same batches without talking.
"""
from __future__ import annotations

from typing import List

import numpy as np

__all__ = ["batch_indices"]


def batch_indices(n_samples: int, batch_size: int, seed: int, epoch: int) -> List[np.ndarray]:
    """Mini-batches of one epoch: a permutation of ``range(n_samples)`` drawn
    from ``(seed, epoch)``, cut into ``ceil(n / batch_size)`` consecutive
    chunks (the last one may be smaller)."""
    rng = np.random.default_rng([int(seed), int(epoch)])
    order = rng.permutation(n_samples)
    return [order[start:start + batch_size] for start in range(0, n_samples, batch_size)]
