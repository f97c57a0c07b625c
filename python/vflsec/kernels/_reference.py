"""Plain vectorized numpy implementations, the baselines of the benchmarks."""
from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist


def numpy_fuzzy_cmeans(X: np.ndarray, n_clusters: int, m: float, max_iter: int, tol: float, u0: np.ndarray):
    """Fuzzy c-means with numpy/scipy array operations (same update order as
    :func:`vflsec.kernels.fuzzy_cmeans` started from the membership ``u0``).
    Returns ``(centers, membership, n_iter)``."""
    U = np.asarray(u0, dtype=np.float64)
    V_prev = None
    p = 2.0 / (m - 1.0)
    n_iter = 0
    for n_iter in range(1, max_iter + 1):
        Um = U ** m
        V = (Um.T @ X) / Um.sum(axis=0)[:, None]
        D = np.fmax(cdist(X, V), np.finfo(np.float64).eps)
        inv = D ** (-p)
        U = inv / inv.sum(axis=1, keepdims=True)
        if V_prev is not None and np.max(np.linalg.norm(V - V_prev, axis=1)) < tol:
            break
        V_prev = V
    return V, U, n_iter
