"""Defenses for split learning, all behind the hook contract of :mod:`.base`.

VFL-AFE (:mod:`.vfl_afe`), DP-SGD VFL (:mod:`.dp_sgd`), FedPass
(:mod:`.fedpass`) and the simple baselines (:mod:`.baselines`).
"""
from .base import BatchInfo, Defense, DefenseContext, NoDefense
from .baselines import GaussianEmbeddingNoise, GaussianGradientNoise, GradientSparsification
from .dp_sgd import DPSGD
from .fedpass import FedPass
from .vfl_afe import VFLAFE, numpy_fuzzy_cmeans

__all__ = [
    "BatchInfo",
    "DPSGD",
    "Defense",
    "DefenseContext",
    "FedPass",
    "GaussianEmbeddingNoise",
    "GaussianGradientNoise",
    "GradientSparsification",
    "NoDefense",
    "VFLAFE",
    "numpy_fuzzy_cmeans",
]
