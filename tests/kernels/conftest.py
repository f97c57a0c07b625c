"""Shared by the kernel tests (the CUDA kernels' host and GPU runs check fcm on the same data)."""
import numpy as np
import pytest


@pytest.fixture(scope="session")
def blobs():
    """``blobs(n, d, c, dtype, seed=0)``: ``n`` rows around ``c`` random centres in ``d`` dimensions."""
    def make(n, d, c, dtype, seed=0):
        rng = np.random.default_rng(seed)
        centers = rng.standard_normal((c, d)) * 5
        return (centers[rng.integers(0, c, n)] + rng.standard_normal((n, d))).astype(dtype)

    return make
