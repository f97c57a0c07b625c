"""Plain vectorised numpy fuzzy c-means: the baseline the C++ kernel is
benchmarked and cross-checked against. Same iteration, stopping rule and
returned pair as :func:`vflsec.kernels.fuzzy_cmeans` started from memberships.
"""
from __future__ import annotations

from typing import NamedTuple, cast

import numpy as np

__all__ = ["NumpyFCMResult", "numpy_fuzzy_cmeans"]


class NumpyFCMResult(NamedTuple):
    centers: np.ndarray  # (c, d)
    membership: np.ndarray  # (n, c)
    objective_history: np.ndarray  # J_m(U_p, V_p), p = 1..n_iter
    n_iter: int
    converged: bool


def numpy_fuzzy_cmeans(
    X: np.ndarray, n_clusters: int, m: float, max_iter: int, tol: float, u0: np.ndarray
) -> NumpyFCMResult:
    """Fuzzy c-means from initial memberships ``u0`` (n, n_clusters).

    Computed in the dtype of ``X`` (float32 stays float32). Per iteration:
    centres from ``u^m`` (one BLAS product), squared distances by
    ``|x|^2 - 2 x.v + |v|^2`` (one BLAS product; clipped at 0, so points
    on a centre are exact only up to rounding), memberships by ratios to the
    nearest centre. Stops when the largest Euclidean centre shift is below
    ``tol`` (never at the first iteration) or after ``max_iter`` updates.
    No input validation: this is a reference, not an API.
    """
    X = np.asarray(X)
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    u = np.asarray(u0, dtype=X.dtype)
    u = u / u.sum(axis=1, keepdims=True)
    if u.shape != (X.shape[0], n_clusters):
        raise ValueError(f"u0 must have shape {(X.shape[0], n_clusters)}, got {u.shape}")
    exponent = 1.0 / (m - 1.0)
    x_sq = np.einsum("ij,ij->i", X, X)
    centers = None
    history = []
    converged = False
    n_iter = 0
    um = u * u if m == 2.0 else u**m
    for n_iter in range(1, max_iter + 1):  # noqa: B007  (n_iter is a result: read after the loop)
        new_centers = (um.T @ X) / um.sum(axis=0)[:, None]
        shift = np.inf if centers is None else float(np.sqrt(((new_centers - centers) ** 2).sum(axis=1)).max())
        centers = new_centers
        d2 = x_sq[:, None] - 2.0 * (X @ centers.T) + np.einsum("ij,ij->i", centers, centers)[None, :]
        np.maximum(d2, 0.0, out=d2)
        dmin = d2.min(axis=1, keepdims=True)
        # ratio = dmin / d2 where d2 > 0, 1 where d2 == 0 (then dmin == 0 too).
        ratio = np.divide(dmin, d2, out=np.ones_like(d2), where=d2 > 0)
        w = ratio if m == 2.0 else ratio**exponent
        u = w / w.sum(axis=1, keepdims=True)
        um = u * u if m == 2.0 else u**m
        history.append(float((um * d2).sum()))
        if shift < tol:
            converged = True
            break
    # cast: centres are set by the first iteration (max_iter >= 1; no validation in this reference).
    return NumpyFCMResult(cast(np.ndarray, centers), u, np.asarray(history), n_iter, converged)
