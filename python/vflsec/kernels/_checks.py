"""Argument checks and result types shared by the CPU kernels
(:mod:`.distances`, :mod:`.fcm`, :mod:`.noise`) and their CUDA dispatch
(:mod:`._cuda`): both sides validate the same way, and :mod:`._cuda` imports
this module instead of the kernel modules that dispatch to it.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Optional, Union

import numpy as np

from .._arrays import check_positive_int, check_real

__all__ = ["DistanceStats", "FCMResult"]

# ----------------------------------------------------------- distances

@dataclass(frozen=True)
class DistanceStats:
    """Statistics of the pairwise Euclidean distances of the rows of X.

    ``std`` is the population standard deviation (``ddof=0``), as
    ``numpy.std`` of ``scipy.spatial.distance.pdist(X)``.
    """

    count: int
    mean: float
    std: float
    min: float
    max: float

    def quantile(self, p: float) -> float:
        """Quantile ``p`` of a Gaussian with this mean and standard deviation.

        ``mean + std * sqrt(2) * erfinv(2p - 1)``: the sensitivity estimate of
        VFL-AFE (``p = 0.9987`` gives about ``mean + 3 std``). ``0 < p < 1``.
        """
        from scipy.special import erfinv

        p = check_real(p, "p", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)
        return float(self.mean + self.std * math.sqrt(2.0) * float(erfinv(2.0 * p - 1.0)))


# Binary exponent range of max|x| inside which no sum of squared coordinate
# differences can overflow (for any realistic d), so that only differences
# below ~1e-19 (float32) or ~1e-154 (float64) lose precision to underflow.
# Outside it the data are scaled by a power of two (exact) and the results
# scaled back.
_SAFE_EXPONENTS = {np.dtype(np.float32): (-32, 32), np.dtype(np.float64): (-256, 256)}


def _exponent_for(largest: float, dtype: np.dtype) -> int:
    """The scale exponent for data of dtype ``dtype`` with max|x| = ``largest``."""
    if largest == 0.0:
        return 0
    exponent = math.frexp(largest)[1]
    low, high = _SAFE_EXPONENTS[np.dtype(dtype)]
    return exponent if not low <= exponent <= high else 0


# ----------------------------------------------------------------- fcm

MAX_ITER_LIMIT = 100_000
"""Most centre updates :func:`vflsec.kernels.fuzzy_cmeans` accepts. The C++
loop runs with the GIL released and cannot be interrupted (Ctrl-C is seen
when it returns), so its length is bounded."""
_MAX_ITER_LIMIT = MAX_ITER_LIMIT




@dataclass(frozen=True)
class FCMResult:
    """Result of :func:`fuzzy_cmeans`.

    The array fields are numpy arrays, or torch tensors when ``X`` was a
    tensor. ``centers``, ``membership`` and ``confidence`` have the
    computation dtype (float32 or float64); ``labels`` is int64 and
    ``objective_history`` float64.

    Attributes
    ----------
    centers : (n_clusters, d) final centres ``V_p``.
    membership : (n, n_clusters) memberships ``U_p = U(V_p)``; rows sum to 1.
    labels : (n,) ``argmax`` of each membership row (the first on ties).
    confidence : (n,) the largest membership of each row.
    n_iter : number of centre updates ``p`` performed.
    objective : ``J_m(U_p, V_p)`` of the returned pair, as a Python float
        (accumulated in float64 whatever the dtype).
    converged : whether ``center_shift < tol`` (False if stopped by ``max_iter``).
    objective_history : (n_iter,) ``J_1, ..., J_p``; the last equals ``objective``.
    center_shift : ``shift_p``, the largest Euclidean centre movement of the
        last update (``inf`` when ``n_iter == 1`` after a membership start).
    """

    centers: Any
    membership: Any
    labels: Any
    confidence: Any
    n_iter: int
    objective: float
    converged: bool
    objective_history: Any
    center_shift: float


def _check_seed(seed: Any) -> Union[None, int, np.random.Generator]:
    if seed is None or isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be None, a non-negative integer or a numpy Generator, got {type(seed).__name__}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    return int(seed)


def _random_membership(n: int, c: int, rng: np.random.Generator, dtype: np.dtype) -> np.ndarray:
    u = rng.random((n, c))
    u /= u.sum(axis=1, keepdims=True)
    return np.ascontiguousarray(u, dtype=dtype)


def _check_span(lo: float, hi: float, d: int, dtype: np.dtype) -> None:
    span = hi - lo
    limit = float(np.finfo(dtype).max) / 4.0
    if span > 0.0 and (not np.isfinite(span) or span * span * d > limit):
        raise ValueError(
            f"X spans {span:.3g}, so squared distances would overflow {np.dtype(dtype)}; "
            "rescale the data" + (" or use float64" if dtype == np.float32 else "")
        )


def _init_mode(init: Any) -> Optional[str]:
    """"random" or "kmeans++" for ``init`` None or a string; None for an array start."""
    if init is not None and not isinstance(init, str):
        return None
    mode = "random" if init is None else init
    if mode not in ("random", "kmeans++"):
        raise ValueError(f"init must be None, 'random', 'kmeans++' or an array, got {init!r}")
    return mode


def _check_parameters(n: int, n_clusters: Any, m: Any, max_iter: Any, tol: Any, seed: Any) -> tuple:
    """Validated (n_clusters, m, max_iter, tol, seed) for ``n`` points."""
    if isinstance(n_clusters, bool) or not isinstance(n_clusters, numbers.Integral):
        raise TypeError(f"n_clusters must be an integer, got {type(n_clusters).__name__}")
    n_clusters = int(n_clusters)
    if not 2 <= n_clusters <= n:
        raise ValueError(f"n_clusters must be between 2 and the number of points {n}, got {n_clusters}")
    m = check_real(m, "m", low=1.0, low_inclusive=False)
    max_iter = check_positive_int(max_iter, "max_iter")
    if max_iter > _MAX_ITER_LIMIT:
        raise ValueError(f"max_iter must be <= {_MAX_ITER_LIMIT}, got {max_iter}")
    tol = check_real(tol, "tol", low=0.0, low_inclusive=False)
    return n_clusters, m, max_iter, tol, _check_seed(seed)


# --------------------------------------------------------------- noise

# |standard normal| <= sqrt(-2 ln 2^-53) < 8.6: keep sigma * z finite in the dtype.
_MAX_Z = 8.6


def _check_sigma(sigma: Any, dtype: np.dtype) -> float:
    sigma = check_real(sigma, "sigma", low=0.0)
    limit = float(np.finfo(dtype).max) / (2 * _MAX_Z)
    if sigma > limit:
        raise ValueError(f"sigma={sigma} is too large for {dtype} noise (maximum {limit:.3g}): samples would overflow")
    return sigma
