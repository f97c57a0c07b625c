"""Fuzzy c-means clustering (Bezdek 1984) with a multi-threaded C++ core.

VFL-AFE runs it on every batch of returned gradients (C = number of classes)
and keeps the points whose confidence (largest membership) is high enough.

Iteration ``p = 1, 2, ...`` (``V_0`` the initial centres, ``U_0`` the initial
memberships; a centre start sets ``U_0 = U(V_0)``)::

    v_j  <- sum_i u_ij^m x_i / sum_i u_ij^m           (from U_{p-1})
    u_ij <- 1 / sum_k (d_ij / d_ik)^(2 / (m - 1))      (d_ij = ||x_i - v_j||)
    J_p   = J_m(U_p, V_p) = sum_i sum_j u_ij^m d_ij^2
    shift_p = max_j ||v_j^(p) - v_j^(p-1)||            (Euclidean, absolute)

and it stops after the first ``p`` with ``shift_p < tol`` or at
``p = max_iter``. With a membership start (``None``, ``"random"`` or an
``(n, c)`` array) ``shift_1`` is undefined (there are no previous centres), so
the earliest stop is ``p = 2``. The result holds the final pair ``(V_p, U_p)``
and ``objective = J_m(U_p, V_p)`` of that same pair; ``objective_history[p-1]
= J_p``, non-increasing up to rounding.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .. import _core
from .._arrays import as_float_array
from . import _cuda
from ._checks import FCMResult, _check_parameters, _check_span, _init_mode, _random_membership

__all__ = ["FCMResult", "fuzzy_cmeans"]

def _kmeans_plus_plus(X: np.ndarray, c: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++ seeding (Arthur & Vassilvitskii 2007): each new centre is a
    data point drawn with probability proportional to its squared distance to
    the nearest centre chosen so far."""
    n = X.shape[0]
    X64 = X.astype(np.float64, copy=False)
    chosen = [int(rng.integers(n))]
    closest = ((X64 - X64[chosen[0]]) ** 2).sum(axis=1)
    for _ in range(1, c):
        cumulative = np.cumsum(closest)
        total = cumulative[-1]
        if total > 0.0 and np.isfinite(total):
            # side="right" never lands on a zero-weight point (a chosen one).
            idx = int(np.searchsorted(cumulative, rng.random() * total, side="right"))
            idx = min(idx, n - 1)
        else:  # fewer distinct points than clusters: any point will do
            idx = int(rng.integers(n))
        chosen.append(idx)
        np.minimum(closest, ((X64 - X64[idx]) ** 2).sum(axis=1), out=closest)
    return np.ascontiguousarray(X[chosen])


def _check_membership(u: np.ndarray) -> None:
    if u.min() < 0:
        raise ValueError("init memberships must be nonnegative")
    # einsum: 5x faster than u.sum(axis=1) on narrow rows, and unlike a BLAS
    # product it leaves no OpenBLAS threads spinning against the kernel's.
    sums = np.einsum("ij->i", u)
    # Rows that sum to 1 show rounding of about c * eps (float32 as well).
    slack = 1e-6 + u.shape[1] * float(np.finfo(u.dtype).eps)
    worst = float(np.abs(sums - 1.0).max())
    if worst > slack:
        raise ValueError(f"init membership rows must sum to 1 (within {slack:.3g}); "
                         f"the worst row is off by {worst:.3g}")


# |x| above which centre rounding errors squared could overflow: 2^500 in
# float64, 2^40 in float32 (far below their sqrt(max) / eps).
_TRANSLATE_ABOVE = {np.dtype(np.float64): 2.0**500, np.dtype(np.float32): 2.0**40}


def _offset_for(X: np.ndarray, centers: Optional[np.ndarray]) -> Optional[np.ndarray]:
    lo, hi = X.min(axis=0), X.max(axis=0)
    if centers is not None:
        lo, hi = np.minimum(lo, centers.min(axis=0)), np.maximum(hi, centers.max(axis=0))
    if max(float(np.abs(lo).max()), float(np.abs(hi).max())) <= _TRANSLATE_ABOVE[X.dtype]:
        return None
    return (lo / 2 + hi / 2).astype(X.dtype)


def _check_scale(X: np.ndarray, centers: Optional[np.ndarray]) -> None:
    # Every centre after the first update lies in the bounding box of X, so
    # squared distances are at most d * span^2; initial centres widen the box.
    lo, hi = float(X.min()), float(X.max())
    if centers is not None:
        lo, hi = min(lo, float(centers.min())), max(hi, float(centers.max()))
    _check_span(lo, hi, X.shape[1], X.dtype)


def fuzzy_cmeans(
    X: Any,
    n_clusters: int,
    *,
    m: float = 2.0,
    max_iter: int = 300,
    tol: float = 1e-5,
    init: Any = None,
    seed: Any = None,
) -> FCMResult:
    """Fuzzy c-means clustering of the rows of ``X``.

    Parameters
    ----------
    X : (n, d) array-like or torch tensor (CPU or CUDA), finite. float32 and
        float64 are computed in their own precision (float32 centre sums and
        the objective are accumulated in float64); integers are converted to
        float64. A CUDA tensor is clustered on its GPU and the array fields
        of the result are tensors on that device; an array ``init`` is copied
        there, ``None``/``"random"`` draws the CPU's memberships (then copied),
        and ``"kmeans++"`` makes the CPU's generator calls with the distances
        computed on the GPU.
    n_clusters : int, ``2 <= n_clusters <= n``.
    m : float > 1, the fuzzifier.
    max_iter : int in [1, 100000] (``MAX_ITER_LIMIT``), the most centre updates.
        Long runs are computed in slices of about 0.1 s of native work, so
        Ctrl-C (``KeyboardInterrupt``) stops them promptly; the result does not
        depend on the slicing.
    tol : float > 0. Stop once no centre moves more than ``tol`` (Euclidean
        norm, absolute, in data units) in one update. In float32 choose it
        above the float32 resolution at the data's scale.
    init : how to start.

        * ``None`` or ``"random"``: memberships drawn uniformly from
          ``numpy.random.default_rng(seed)`` and normalised per row.
        * ``"kmeans++"``: k-means++ centres drawn with that generator; the
          memberships follow from them.
        * an array of shape ``(n_clusters, d)``: initial centres.
        * an array of shape ``(n, n_clusters)``: initial memberships,
          nonnegative, rows summing to 1 within ``1e-6 + n_clusters * eps``
          (then renormalised exactly). A shape matching both ``(n_clusters,
          d)`` and ``(n, n_clusters)`` (possible only when
          ``n == n_clusters == d``) is read as centres.
    seed : None, an int >= 0 or a ``numpy.random.Generator``: the generator
        for ``"random"`` and ``"kmeans++"`` (ignored for array starts).

    Returns
    -------
    FCMResult

    Notes
    -----
    A point at distance 0 from a centre gets membership 1 there (split evenly
    over several coincident centres), with no division by zero. If every
    ``u_ij^m`` of a cluster underflows to 0 (``m`` very close to 1, or
    huge), that centre stays where it was; an initial membership matrix that
    gives a cluster no weight at all raises ``ValueError``. Results are
    deterministic and independent of the number of threads
    (:func:`vflsec.set_num_threads`).
    """
    if _cuda.is_cuda_tensor(X):
        return _cuda.fuzzy_cmeans(X, n_clusters, m=m, max_iter=max_iter, tol=tol, init=init, seed=seed)
    x, wrap = as_float_array(X, "X", ndim=2)
    n, d = x.shape
    n_clusters, m, max_iter, tol, seed = _check_parameters(n, n_clusters, m, max_iter, tol, seed)

    init_centers = init_membership = None
    mode = _init_mode(init)
    if mode is not None:
        rng = np.random.default_rng(seed)
        if mode == "random":
            init_membership = _random_membership(n, n_clusters, rng, x.dtype)
        else:
            init_centers = _kmeans_plus_plus(x, n_clusters, rng)
    else:
        start, _ = as_float_array(init, "init", ndim=2, dtype=x.dtype)
        if start.shape == (n_clusters, d):
            init_centers = start
        elif start.shape == (n, n_clusters):
            _check_membership(start)  # the core divides each row by its sum
            init_membership = start
        else:
            raise ValueError(
                f"init array must have shape (n_clusters, d) = {(n_clusters, d)} for centres or "
                f"(n, n_clusters) = {(n, n_clusters)} for memberships, got {start.shape}"
            )
    _check_scale(x, init_centers)
    # Far from the origin, a centre's rounding error (eps * |x|) squared can
    # overflow even when the data's spread is small (|x| >= 1e170 in float64):
    # then the data are translated to the centre of their bounding box, which
    # leaves memberships, labels and ``tol`` (an absolute shift) unchanged.
    offset = _offset_for(x, init_centers)
    if offset is not None:
        x = np.ascontiguousarray(x - offset)
        if init_centers is not None:
            init_centers = np.ascontiguousarray(init_centers - offset)

    core = _core.fuzzy_cmeans_f32 if x.dtype == np.float32 else _core.fuzzy_cmeans_f64
    # The native loop releases the GIL and cannot see Ctrl-C, so it runs in
    # slices of at most _iterations_per_call(...) updates and Python checks for
    # signals between them. A slice resumes from the previous slice's centres,
    # which is exact: a centre start recomputes U(V_p) with the same pass the
    # loop uses, and its first shift is ||V_(p+1) - V_p||, as without slicing.
    per_call = _iterations_per_call(n, n_clusters, d)
    histories = []
    n_iter = 0
    while True:
        (centers, membership, labels, confidence, history, done_iter, converged, shift, weightless) = core(
            x, n_clusters, m, min(per_call, max_iter - n_iter), tol, init_centers, init_membership
        )
        if weightless >= 0:
            raise ValueError(
                f"init memberships give cluster {weightless} no weight (every u^m is 0), so its centre is undefined"
            )
        histories.append(history)
        n_iter += int(done_iter)
        if converged or n_iter >= max_iter:
            break
        init_centers, init_membership = centers, None
    history = histories[0] if len(histories) == 1 else np.concatenate(histories)
    if offset is not None:
        centers = np.ascontiguousarray(centers + offset)
    return FCMResult(
        centers=wrap(centers),
        membership=wrap(membership),
        labels=wrap(labels),
        confidence=wrap(confidence),
        n_iter=n_iter,
        objective=float(history[-1]),
        converged=bool(converged),
        objective_history=wrap(history),
        center_shift=float(shift),
    )


# Work per native call in n * c * d units (one update costs about 0.1-0.7 ns
# per unit here): a slice of 0.1-0.4 s, the longest Ctrl-C waits on typical
# sizes. At least _MIN_ITERATIONS_PER_CALL updates per slice, because each
# slice repeats one membership pass (at most 10% more work on huge inputs).
_WORK_PER_CALL = 5e8
_MIN_ITERATIONS_PER_CALL = 10


def _iterations_per_call(n: int, c: int, d: int) -> int:
    return max(_MIN_ITERATIONS_PER_CALL, int(_WORK_PER_CALL // (n * c * d)))
