"""Accelerated kernels: exact pairwise distances and their statistics, fuzzy
c-means, and cryptographically secure Gaussian noise.

Every function accepts numpy arrays, array-likes and torch CPU tensors, and
returns the caller's type. float32 and float64 inputs are computed in their
own precision; integers are converted to float64.
"""
from .distances import DistanceStats, pairwise_distance_stats, pairwise_distances
from .fcm import FCMResult, fuzzy_cmeans
from .noise import NoiseGenerator, add_gaussian_noise, discrete_gaussian, gaussian_noise

__all__ = [
    "DistanceStats",
    "FCMResult",
    "NoiseGenerator",
    "add_gaussian_noise",
    "discrete_gaussian",
    "fuzzy_cmeans",
    "gaussian_noise",
    "pairwise_distance_stats",
    "pairwise_distances",
]
