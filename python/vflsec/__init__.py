"""vflsec: secure compute for vertical federated learning.

Differential privacy and homomorphic encryption on the same vertical models,
with the hot numerical kernels (pairwise distances, fuzzy c-means, secure
Gaussian noise) in C++. See ``vflsec.kernels``.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

from . import _core, kernels
from ._arrays import check_positive_int as _check_positive_int
from .kernels import NoiseGenerator
from .kernels import _cuda as _kernels_cuda

try:
    __version__ = _version("vflsec")
except PackageNotFoundError:  # running from a build tree
    __version__ = getattr(_core, "__version__", "0+unknown")


def set_num_threads(n: int) -> None:
    """Set the number of threads every vflsec kernel uses (OpenMP).

    The initial value comes from ``OMP_NUM_THREADS`` when set, otherwise the
    number of available cores.
    """
    _core.set_num_threads(_check_positive_int(n, "n"))


def get_num_threads() -> int:
    """Number of threads the kernels use."""
    return int(_core.get_num_threads())


def cuda_available() -> bool:
    """True when vflsec was built with its CUDA kernels and a CUDA device is visible.

    The ``vflsec.kernels`` functions then accept CUDA torch tensors and
    compute on their GPU. False (never an error) on CPU-only builds and on
    machines without a GPU or driver.
    """
    return _kernels_cuda.cuda_available()


def cpu_features() -> dict:
    """SIMD features of this CPU as seen by the runtime dispatcher."""
    return dict(_core.cpu_features())


__all__ = [
    "NoiseGenerator",
    "__version__",
    "cpu_features",
    "cuda_available",
    "get_num_threads",
    "kernels",
    "set_num_threads",
]
