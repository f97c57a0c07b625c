"""Defenses for split learning, all behind the hook contract of :mod:`.base`.

VFL-AFE (:mod:`.vfl_afe`; its training losses in :mod:`.afe_losses`), DP-SGD
VFL (:mod:`.dp_sgd`), FedPass (:mod:`.fedpass`) and the simple baselines
(:mod:`.baselines`), each
registered under a unique name in :mod:`.registry` (``none``, ``vfl_afe``,
``dp_sgd``, ``fedpass``, ``noise_embedding``, ``noise_gradient``,
``sparsify``): ``make_defense("vfl_afe", t=10.0, epsilon=5.0)``.
"""
from .base import BatchInfo, Defense, DefenseContext, NoDefense
from .baselines import GaussianEmbeddingNoise, GaussianGradientNoise, GradientSparsification
from .dp_sgd import DPSGD
from .fedpass import FedPass
from .registry import available_defenses, get_defense, make_defense, register_defense
from .vfl_afe import VFLAFE

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
    "available_defenses",
    "get_defense",
    "make_defense",
    "register_defense",
]
