"""Simple baseline defenses: fixed-scale Gaussian noise and gradient sparsification.

* :class:`GaussianEmbeddingNoise` -- the passive party adds ``N(0, scale^2)``
  to every embedding coordinate it sends (no clipping: no DP guarantee).
* :class:`GaussianGradientNoise` -- the active party adds ``N(0, scale^2)``
  to the gradients it returns (a label-leakage defense).
* :class:`GradientSparsification` -- the active party keeps, per sample, the
  ``ceil(keep_fraction * d)`` largest-magnitude gradient coordinates and zeroes the rest.

Every parameter is keyword-only (``GaussianEmbeddingNoise(scale=0.3)``).
The two noise defenses release through the lattice Gaussian
(:func:`.base.gaussian_release`) under the catalogue's ``noise_embedding`` /
``noise_gradient`` names (:class:`.base.UnaccountedNoise`, ``mechanism``),
like the DP defenses: a float ``x + noise`` would let the receiver tell inputs
apart by the rounding grid of the sum. Nothing bounds what they release, so
``privacy_spent()`` is None: they claim no guarantee.
"""
from __future__ import annotations

import math
from typing import Any, Dict, Optional

from ..._arrays import check_real
from .base import BatchInfo, Defense, UnaccountedNoise, check_seed, gaussian_release
from .base import derived_seed as _derived_seed
from .registry import register_defense

__all__ = ["GaussianEmbeddingNoise", "GaussianGradientNoise", "GradientSparsification"]


class _NoiseMixin:
    # Set by the concrete defenses (annotations only: no class attributes).
    scale: float
    seed: Optional[int]
    variant: Optional[str]
    mechanism_name: str  # the release's name in vflsec.dp.mechanisms.MECHANISMS

    @property
    def mechanism(self) -> UnaccountedNoise:
        """The release this defense makes (no guarantee: ``privacy_spent()`` is None)."""
        return UnaccountedNoise(self.mechanism_name, self.scale)

    def _release(self, key: str, x: Any) -> Any:
        """``x`` plus ``N(0, scale^2)`` per coordinate, on the lattice (gradient passes through)."""
        from ...kernels import NoiseGenerator

        generators = self.__dict__.setdefault("_generators", {})
        gen = generators.get(key)
        if gen is None:
            gen = NoiseGenerator() if self.seed is None else NoiseGenerator(_derived_seed(self.seed, self.variant, key))
            generators[key] = gen
        return gaussian_release(x, self.mechanism, gen)

    def check_params(self) -> None:
        check_real(self.scale, "scale", low=0.0, low_inclusive=False)
        check_seed(self.seed)

    def __getstate__(self):
        # Noise generators cannot (and must not) be copied: every copy starts its own.
        state = dict(self.__dict__)
        state["_generators"] = {}
        return state


class GaussianEmbeddingNoise(_NoiseMixin, Defense):
    """Fixed-scale Gaussian noise on the released embeddings (name "noise",
    variant "embedding"). ``seed=None``: secure noise; an int: reproducible."""

    name = "noise"
    variant = "embedding"
    mechanism_name = "noise_embedding"

    def __init__(self, *, scale: float, seed: Optional[int] = None):
        self.scale = scale
        self.seed = seed

    def transform_embedding(self, party: str, h: Any, batch: BatchInfo) -> Any:
        return self._release(party, h)


class GaussianGradientNoise(_NoiseMixin, Defense):
    """Fixed-scale Gaussian noise on the gradients returned to each passive
    party (name "noise", variant "gradient")."""

    name = "noise"
    variant = "gradient"
    mechanism_name = "noise_gradient"

    def __init__(self, *, scale: float, seed: Optional[int] = None):
        self.scale = scale
        self.seed = seed

    def transform_gradient(self, grads: Dict[str, Any], batch: BatchInfo) -> Dict[str, Any]:
        return {p: self._release(p, g) for p, g in grads.items()}


class GradientSparsification(Defense):
    """Per sample, keep the ``k = ceil(keep_fraction * d)`` gradient entries of
    largest magnitude and zero the others (name "sparsify"; ties broken by
    ``torch.topk``, so exactly ``k`` entries survive)."""

    name = "sparsify"
    resume_refusal = None  # a pure function of each batch's gradients

    def __init__(self, *, keep_fraction: float):
        self.keep_fraction = keep_fraction

    def check_params(self) -> None:
        check_real(self.keep_fraction, "keep_fraction", low=0.0, low_inclusive=False, high=1.0)

    # Derived from keep_fraction, so read-only here (Defense declares a plain class attribute).
    @property
    def variant(self) -> str:  # type: ignore[override]
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


register_defense("noise_embedding", GaussianEmbeddingNoise)
register_defense("noise_gradient", GaussianGradientNoise)
register_defense("sparsify", GradientSparsification)
