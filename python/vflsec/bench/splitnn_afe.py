"""VFL-AFE split-learning pieces shared by ``vflsec bench splitnn`` and its
``rescale`` section (:mod:`.splitnn`, :mod:`.splitnn_rescale`): the data
record, the Table 2 variants, the defense factory and the fit, so neither of
the two modules imports the other's internals.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, List, Optional, Tuple, cast

import numpy as np

__all__ = ["DELTA", "VARIANTS", "SplitData", "make_afe"]

DELTA = 1e-2
VARIANTS = {"vanilla": (False, False), "R": (True, False), "D": (False, True), "full": (True, True)}


@dataclasses.dataclass
class SplitData:
    """A vertically split train/test set: ``parts`` hold the passive parties' blocks."""

    name: str
    train_parts: List[np.ndarray]
    y_train: np.ndarray
    test_parts: List[np.ndarray]
    y_test: np.ndarray
    kind: str  # "tabular" or "image"
    image_shape: Optional[Tuple[int, int]] = None  # full image (H, W) for "image"
    source: str = ""


def _bottom_factory(data: SplitData):
    from ..splitnn.models import cnn_bottom, mlp_bottom

    if data.kind == "image":
        h, w = cast(Tuple[int, int], data.image_shape)  # set whenever kind is "image"
        return lambda p: cnn_bottom((h, p // h), 64)
    return lambda p: mlp_bottom(p, (64,), 32)


def make_afe(variant: str, cfg: Dict[str, Any], *, kind: str, impl: str = "vflsec", seed: Optional[int] = None,
             **options: Any):
    """The VFL-AFE defense of a Table 2 ``variant`` with the benchmark's settings
    for data of ``kind`` ("tabular" or "image": which epsilon and FCM threshold
    of ``cfg`` apply; ``options``: further VFLAFE keywords, e.g. ``rescale_shrink``); ``impl``
    "baseline" is the benchmark's torch.cdist / numpy-FCM variant
    (:mod:`.splitnn_afe_baseline`)."""
    from .splitnn_afe_baseline import afe_class

    rescale, adjust = VARIANTS[variant]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the paper's classic calibration warns for epsilon >= 1
        return afe_class(impl)(t=cfg["t"], epsilon=cfg["epsilon"][kind], delta=DELTA, rescale=rescale,
                      adjust=adjust,
                      kl_weight=cfg["kl_weight"], contrastive_weight=cfg["contrastive_weight"],
                      confidence_threshold=cfg["confidence_threshold"][kind],
                      calibration=cfg["calibration"], seed=seed, **options)


def _fit(data: SplitData, defense: Any, *, epochs: int, batch_size: int, lr: float, seed: int, device: str):
    from ..splitnn import SplitNNClassifier

    return SplitNNClassifier(bottoms=_bottom_factory(data), defense=defense, epochs=epochs, batch_size=batch_size,
                             lr=lr, seed=seed, device=device).fit(data.train_parts, data.y_train)
