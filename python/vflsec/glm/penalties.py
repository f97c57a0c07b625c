"""Penalized gradient steps and weight-norm clipping (Algorithm 1, steps 11-12)."""
from __future__ import annotations

from typing import Optional, Union

import numpy as np

__all__ = ["clip_norm", "penalized_step"]


def _soft_threshold(v: np.ndarray, threshold: Union[float, np.ndarray]) -> np.ndarray:
    return np.sign(v) * np.maximum(0.0, np.abs(v) - threshold)


def penalized_step(
    penalty: str, w: np.ndarray, g: np.ndarray, lr: Union[float, np.ndarray], lam: Union[float, np.ndarray],
    mu: Union[float, np.ndarray] = 1.0,
) -> np.ndarray:
    """One update ``Pen(w, g, lr, lam)``.

    * ``"l2"``: ``w - lr (g + lam w)``
    * ``"l1"``: proximal step ``soft(w - lr g, lr lam)``
    * ``"elasticnet"``: ``soft(w - lr g, lr lam) / (1 + lr lam mu)``
    """
    if penalty == "l2":
        return w - lr * (g + lam * w)
    v = w - lr * g
    if penalty == "l1":
        return _soft_threshold(v, lr * lam)
    if penalty == "elasticnet":
        return _soft_threshold(v, lr * lam) / (1.0 + lr * lam * mu)
    raise ValueError(f"unknown penalty {penalty!r}")


def clip_norm(w: np.ndarray, k: Optional[float]) -> np.ndarray:
    """``w / max(1, ||w||_2 / k)``; ``k=None`` leaves ``w`` unchanged."""
    if k is None:
        return w
    norm = float(np.linalg.norm(w))
    return w / max(1.0, norm / k)
