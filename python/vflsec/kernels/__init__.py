"""Accelerated kernels: exact pairwise distances and their statistics, fuzzy
c-means, and cryptographically secure Gaussian noise.

Every function accepts numpy arrays, array-likes and torch CPU tensors, and
returns the caller's type. float32 and float64 inputs are computed in their
own precision; integers are converted to float64.

Each CPU kernel family picks its instruction-set path at run time;
:func:`kernel_isa` reports it and :func:`force_isa` pins it (``vflsec.kernels.isa``).
"""
from .distances import DistanceStats, pairwise_distance_stats, pairwise_distances
from .fcm import FCMResult, fuzzy_cmeans
from .isa import force_isa, kernel_isa, supported_isas
from .noise import (
    LATTICE_BITS,
    PER_DRAW_LOG_RATIO,
    SUPPORT_SIGMAS,
    NoiseGenerator,
    add_gaussian_noise,
    discrete_gaussian,
    gaussian_noise,
    lattice_gaussian,
    lattice_sigma,
    lattice_spacing,
)

__all__ = [
    "DistanceStats",
    "FCMResult",
    "LATTICE_BITS",
    "NoiseGenerator",
    "PER_DRAW_LOG_RATIO",
    "SUPPORT_SIGMAS",
    "add_gaussian_noise",
    "discrete_gaussian",
    "force_isa",
    "fuzzy_cmeans",
    "gaussian_noise",
    "kernel_isa",
    "lattice_gaussian",
    "lattice_sigma",
    "lattice_spacing",
    "pairwise_distance_stats",
    "pairwise_distances",
    "supported_isas",
]
