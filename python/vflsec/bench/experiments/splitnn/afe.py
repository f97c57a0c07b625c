"""VFL-AFE as the benchmark trains it, shared by the Table 2 / Table 3 cells
(:mod:`.cells`) and the rescale section (:mod:`.rescale`): the Table 2
variants, the defense factory with the run's settings, and the fit."""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional, Tuple, cast

from .data import SplitData

__all__ = ["DELTA", "VARIANTS", "fit_split_model", "make_afe"]

DELTA = 1e-2
# Table 2 variant -> (rescale, adjust)
VARIANTS = {"vanilla": (False, False), "R": (True, False), "D": (False, True), "full": (True, True)}


def _bottom_factory(data: SplitData):
    from ....splitnn.models import cnn_bottom, mlp_bottom

    if data.kind == "image":
        h, w = cast(Tuple[int, int], data.image_shape)  # set whenever kind is "image"
        return lambda p: cnn_bottom((h, p // h), 64)
    return lambda p: mlp_bottom(p, (64,), 32)


def make_afe(variant: str, cfg: Dict[str, Any], *, kind: str, impl: str = "vflsec", seed: Optional[int] = None,
             **options: Any):
    """The VFL-AFE defense of a Table 2 ``variant`` with the benchmark's settings
    for data of ``kind`` ("tabular" or "image": which epsilon and FCM threshold
    of ``cfg`` apply; ``options``: further VFLAFE keywords, e.g. ``rescale_shrink``); ``impl``
    "baseline" is the benchmark's torch.cdist / numpy-FCM variant (:mod:`.baseline`)."""
    from .baseline import afe_class

    rescale, adjust = VARIANTS[variant]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the paper's classic calibration warns for epsilon >= 1
        return afe_class(impl)(t=cfg["t"], epsilon_per_release=cfg["epsilon"][kind], delta=DELTA, rescale=rescale,
                               adjust=adjust,
                               kl_weight=cfg["kl_weight"], contrastive_weight=cfg["contrastive_weight"],
                               confidence_threshold=cfg["confidence_threshold"][kind],
                               calibration=cfg["calibration"], seed=seed, **options)


def fit_split_model(data: SplitData, defense: Any, *, epochs: int, batch_size: int, lr: float, seed: int,
                    device: str):
    """A :class:`~vflsec.splitnn.SplitNNClassifier` with the benchmark's bottoms,
    fitted on ``data``'s training parts."""
    from ....splitnn import SplitNNClassifier

    # Defended inference: the committed Table 2 / Table 3 / rescale accuracies were measured with it (the
    # estimator's default became the deterministic "raw" inference, issue 27).
    return SplitNNClassifier(bottoms=_bottom_factory(data), defense=defense, epochs=epochs, batch_size=batch_size,
                             lr=lr, seed=seed, device=device, inference="defended").fit(data.train_parts,
                                                                                         data.y_train)
