"""Simple baseline defenses: fixed-scale Gaussian noise and gradient sparsification.

* :class:`GaussianEmbeddingNoise` -- the passive party adds ``N(0, scale^2)``
  to every embedding coordinate it sends (no clipping: no DP guarantee).
* :class:`GaussianGradientNoise` -- the active party adds ``N(0, scale^2)``
  to the gradients it returns (a label-leakage defense).
* :class:`GradientSparsification` -- the active party keeps, per sample, the
  ``ceil(keep_fraction * d)`` largest-magnitude gradient coordinates and zeroes the rest.

The two noise defenses release through the lattice Gaussian mechanism
(:func:`.base.gaussian_release`), like the DP defenses: a float ``x + noise``
would let the receiver tell inputs apart by the rounding grid of the sum.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

from ..._arrays import check_real
from .base import BatchInfo, Defense, check_seed, gaussian_release
from .vfl_afe import _derived_seed

__all__ = ["GaussianEmbeddingNoise", "GaussianGradientNoise", "GradientSparsification"]


class _NoiseMixin:
    def _release(self, key: str, x: Any) -> Any:
        """``x`` plus ``N(0, scale^2)`` per coordinate, on the lattice (gradient passes through)."""
        from ...kernels import NoiseGenerator

        gen = self._generators.get(key)
        if gen is None:
            gen = NoiseGenerator() if self.seed is None else NoiseGenerator(_derived_seed(self.seed, self.variant, key))
            self._generators[key] = gen
        return gaussian_release(x, self.scale, gen)

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_generators"] = {}
        return state


class GaussianEmbeddingNoise(_NoiseMixin, Defense):
    """Fixed-scale Gaussian noise on the released embeddings (name "noise",
    variant "embedding"). ``seed=None``: secure noise; an int: reproducible."""

    name = "noise"
    variant = "embedding"

    def __init__(self, scale: float, *, seed: Optional[int] = None):
        self.scale = check_real(scale, "scale", low=0.0, low_inclusive=False)
        self.seed = check_seed(seed)
        self._generators: Dict[str, Any] = {}

    def transform_embedding(self, party: str, h: Any, batch: BatchInfo) -> Any:
        return self._release(party, h)


class GaussianGradientNoise(_NoiseMixin, Defense):
    """Fixed-scale Gaussian noise on the gradients returned to each passive
    party (name "noise", variant "gradient")."""

    name = "noise"
    variant = "gradient"

    def __init__(self, scale: float, *, seed: Optional[int] = None):
        self.scale = check_real(scale, "scale", low=0.0, low_inclusive=False)
        self.seed = check_seed(seed)
        self._generators: Dict[str, Any] = {}

    def transform_gradient(self, grads: Dict[str, Any], batch: BatchInfo) -> Dict[str, Any]:
        return {p: self._release(p, g) for p, g in grads.items()}


class GradientSparsification(Defense):
    """Per sample, keep the ``k = ceil(keep_fraction * d)`` gradient entries of
    largest magnitude and zero the others (name "sparsify"; ties broken by
    ``torch.topk``, so exactly ``k`` entries survive)."""

    name = "sparsify"

    def __init__(self, keep_fraction: float):
        self.keep_fraction = check_real(keep_fraction, "keep_fraction", low=0.0, low_inclusive=False, high=1.0)

    @property
    def variant(self) -> str:
        return f"keep={self.keep_fraction:g}"

    def sparsify(self, g: Any) -> Any:
        import torch

        if g.ndim != 2:
            raise ValueError(f"gradient must be 2-D (batch, d), got shape {tuple(g.shape)}")
        k = max(1, math.ceil(self.keep_fraction * g.shape[1] - 1e-9))
        top = torch.topk(g.abs(), k, dim=1).indices
        mask = torch.zeros_like(g, dtype=torch.bool).scatter_(1, top, True)
        return torch.where(mask, g, torch.zeros_like(g))

    def transform_gradient(self, grads: Dict[str, Any], batch: BatchInfo) -> Dict[str, Any]:
        return {p: self.sparsify(g) for p, g in grads.items()}
