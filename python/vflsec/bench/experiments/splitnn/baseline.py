"""The benchmark's baseline VFL-AFE: the same defense with the common
alternatives to vflsec's kernels, so ``vflsec bench splitnn`` (Table 3) can
time both.

:class:`BaselineVFLAFE` computes the pairwise-distance statistics with
``torch.cdist`` plus torch reductions and the fuzzy c-means with plain numpy
(:func:`numpy_fuzzy_cmeans`, random memberships start) instead of
:func:`vflsec.kernels.pairwise_distance_stats` and
:func:`vflsec.kernels.fuzzy_cmeans`. Everything else, the noise release
included (the lattice release from a ChaCha20
:class:`vflsec.kernels.NoiseGenerator`), is the production defense's.
(``h + torch.randn`` in floating point is not a DP release; the benchmark
times it on its own, outside the defense.) This is benchmark code only: the
production defense is :class:`vflsec.splitnn.defenses.VFLAFE`.
"""
from __future__ import annotations

from typing import Any, Optional, Type

import numpy as np

from ....splitnn.defenses.vfl_afe import VFLAFE

__all__ = ["IMPLS", "BaselineVFLAFE", "afe_class", "numpy_fuzzy_cmeans"]

# "vflsec": the production defense (vflsec's kernels); "baseline": BaselineVFLAFE.
IMPLS = ("vflsec", "baseline")
_EPS = 1e-12


def numpy_fuzzy_cmeans(X: np.ndarray, n_clusters: int, *, m: float = 2.0, max_iter: int = 100, tol: float = 1e-4,
                       seed: Optional[int] = None):
    """Plain numpy fuzzy c-means (random memberships start; the benchmark's
    baseline). Returns ``(labels, confidence)``."""
    X = np.asarray(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    u = rng.random((X.shape[0], n_clusters))
    u /= u.sum(axis=1, keepdims=True)
    centers = None
    for _ in range(max_iter):
        um = u ** m
        new_centers = (um.T @ X) / np.maximum(um.sum(axis=0), _EPS)[:, None]
        d = np.sqrt(((X[:, None, :] - new_centers[None, :, :]) ** 2).sum(axis=2))
        inv = np.fmax(d, _EPS) ** (-2.0 / (m - 1.0))
        u = inv / inv.sum(axis=1, keepdims=True)
        shift = np.inf if centers is None else float(np.max(np.linalg.norm(new_centers - centers, axis=1)))
        centers = new_centers
        if shift < tol:
            break
    return u.argmax(axis=1), u.max(axis=1)


class BaselineVFLAFE(VFLAFE):
    """VFL-AFE with ``torch.cdist`` distance statistics and a numpy FCM (the
    benchmark's baseline; same parameters, name and variants as VFLAFE)."""

    def _distance_moments(self, h: Any):
        import torch

        n = h.shape[0]
        d = torch.cdist(h.detach(), h.detach())
        iu = torch.triu_indices(n, n, offset=1, device=d.device)
        d = d[iu[0], iu[1]].double()
        return float(d.mean()), float(d.std(unbiased=False)), float(d.max())

    def cluster_gradients(self, grad: Any, seed: int):
        g = self.normalised_gradients(grad)
        if not isinstance(g, np.ndarray):
            g = g.cpu().numpy()  # the numpy baseline runs on the host
        return numpy_fuzzy_cmeans(g, self.n_clusters_, m=self.fcm_m, max_iter=self.fcm_max_iter, tol=1e-4, seed=seed)


_CLASSES = {"vflsec": VFLAFE, "baseline": BaselineVFLAFE}


def afe_class(impl: str) -> Type[VFLAFE]:
    """The VFL-AFE class of a benchmark ``impl`` ("vflsec" or "baseline")."""
    if impl not in _CLASSES:
        raise ValueError(f"impl must be one of {IMPLS}, got {impl!r}")
    return _CLASSES[impl]
