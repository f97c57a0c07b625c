"""Defenses for split learning, all behind the hook contract of :mod:`.base`."""
from .base import BatchInfo, Defense, DefenseContext, NoDefense
from .baselines import GaussianEmbeddingNoise, GaussianGradientNoise, GradientSparsification
from .vfl_afe import VFLAFE, numpy_fuzzy_cmeans

__all__ = [
    "BatchInfo",
    "Defense",
    "DefenseContext",
    "GaussianEmbeddingNoise",
    "GaussianGradientNoise",
    "GradientSparsification",
    "NoDefense",
    "VFLAFE",
    "numpy_fuzzy_cmeans",
]
