"""Fuzzy c-means clustering (Bezdek 1984) on the C++ core.

VFL-AFE clusters every batch of returned gradients with C = number of classes
and keeps the confidently assigned samples; this is that kernel.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Tuple

import numpy as np

from .. import _core
from .._arrays import as_float_array, check_positive_int, check_real

__all__ = ["FCMResult", "fuzzy_cmeans"]

_INIT_NAMES = ("random", "kmeans++")


@dataclass(frozen=True)
class FCMResult:
    """Result of :func:`fuzzy_cmeans`.

    ``objective`` is ``J_m(U, V) = sum_i sum_j u_ij^m ||x_i - v_j||^2`` at the
    returned centres ``V`` and the membership ``U`` computed from them;
    ``objective_history[t]`` is the same quantity after iteration ``t + 1``
    (non-increasing). ``labels`` is the argmax membership, ``confidence`` the
    max membership of each row.
    """

    centers: Any
    membership: Any
    labels: Any
    confidence: Any
    n_iter: int
    objective: float
    converged: bool
    objective_history: Tuple[float, ...] = ()


def _kmeans_plus_plus(X: np.ndarray, c: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (Arthur and Vassilvitskii 2007) of ``c`` centres."""
    n = X.shape[0]
    centers = np.empty((c, X.shape[1]), dtype=X.dtype)
    centers[0] = X[rng.integers(n)]
    closest = np.sum((X - centers[0]) ** 2, axis=1, dtype=np.float64)
    for j in range(1, c):
        total = closest.sum()
        # All remaining points coincide with chosen centres: any pick is as good.
        idx = rng.integers(n) if total <= 0 else rng.choice(n, p=closest / total)
        centers[j] = X[idx]
        np.minimum(closest, np.sum((X - centers[j]) ** 2, axis=1, dtype=np.float64), out=closest)
    return centers


def fuzzy_cmeans(
    X: Any,
    n_clusters: int,
    *,
    m: float = 2.0,
    max_iter: int = 300,
    tol: float = 1e-5,
    init: Any = None,
    seed: Optional[int] = None,
) -> FCMResult:
    """Fuzzy c-means clustering of the rows of ``X``.

    Alternates the centre update ``v_j = sum_i u_ij^m x_i / sum_i u_ij^m`` and
    the membership update ``u_ij = 1 / sum_k (d_ij / d_ik)^(2/(m-1))`` until the
    largest Euclidean shift of a centre between two iterations is below
    ``tol``, or ``max_iter`` iterations. A row that coincides with a centre
    gets membership 1 there (split evenly if it coincides with several).

    Parameters
    ----------
    X : (n, d) array-like or torch CPU tensor (float32/float64 kept, ints -> float64).
    n_clusters : int, 2 <= n_clusters <= n.
    m : fuzzifier, > 1.
    max_iter : >= 1.
    tol : > 0, on the largest centre shift.
    init : None or "random": a random membership matrix from
        ``numpy.random.default_rng(seed)``, rows normalized; "kmeans++":
        k-means++ centres; or an array: shape ``(n_clusters, d)`` is taken as
        initial centres, shape ``(n, n_clusters)`` as an initial membership
        (non-negative, rows summing to 1 within 1e-6). When both shapes
        coincide (``n == n_clusters`` and ``d == n_clusters``) the array is
        taken as centres.
    seed : None or an int >= 0, for the random and k-means++ initializations.

    The run from an initial membership matches ``skfuzzy.cluster.cmeans``
    started from the same membership, iteration for iteration. Results are
    deterministic for a fixed seed and thread count.
    """
    Xa, wrap = as_float_array(X, "X", ndim=2)
    n, d = Xa.shape
    c = check_positive_int(n_clusters, "n_clusters")
    if c < 2:
        raise ValueError(f"n_clusters must be >= 2, got {c}")
    if c > n:
        raise ValueError(f"n_clusters must be <= the number of rows of X ({n}), got {c}")
    m = check_real(m, "m", low=1.0, low_inclusive=False)
    max_iter = check_positive_int(max_iter, "max_iter")
    tol = check_real(tol, "tol", low=0.0, low_inclusive=False)
    if seed is not None:
        seed = check_positive_int(seed, "seed", minimum=0)

    dtype = Xa.dtype
    U = np.empty((n, c), dtype=dtype)
    V = np.empty((c, d), dtype=dtype)
    if init is None or (isinstance(init, str) and init == "random"):
        rng = np.random.default_rng(seed)
        u0 = rng.random((n, c))
        U[...] = u0 / u0.sum(axis=1, keepdims=True)
        from_centers = False
    elif isinstance(init, str):
        if init != "kmeans++":
            raise ValueError(f"init must be None, one of {_INIT_NAMES} or an array, got {init!r}")
        V[...] = _kmeans_plus_plus(Xa, c, np.random.default_rng(seed))
        from_centers = True
    else:
        arr, _ = as_float_array(init, "init", ndim=2, dtype=dtype)
        if arr.shape == (c, d):
            V[...] = arr
            from_centers = True
        elif arr.shape == (n, c):
            if (arr < 0).any():
                raise ValueError("init membership has negative entries")
            sums = arr.sum(axis=1, dtype=np.float64)
            if not np.allclose(sums, 1.0, rtol=0, atol=1e-6):
                raise ValueError("init membership rows must sum to 1 (within 1e-6)")
            U[...] = arr
            from_centers = False
        else:
            raise ValueError(
                f"init array must have shape (n_clusters, d) = {(c, d)} (centres) or "
                f"(n, n_clusters) = {(n, c)} (membership), got {arr.shape}"
            )

    run = _core.fuzzy_cmeans_f32 if dtype == np.float32 else _core.fuzzy_cmeans_f64
    n_iter, converged, objective, history, labels, confidence = run(Xa, c, m, max_iter, tol, from_centers, V, U)
    return FCMResult(
        centers=wrap(V),
        membership=wrap(U),
        labels=wrap(labels),
        confidence=wrap(confidence),
        n_iter=int(n_iter),
        objective=float(objective),
        converged=bool(converged),
        objective_history=tuple(float(h) for h in history),
    )
