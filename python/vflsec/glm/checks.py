"""The checks both GLM estimators make around a fit.

* ``sample_weight``: accepted by ``fit`` only as None. The DP analyses and the
  vertical protocols weight every row equally (a weight would scale a row's
  influence and with it the sensitivity), so a weight is refused instead of
  being ignored.
* ``delta``: None (the default) is :func:`vflsec.dp.default_delta` of the
  training rows, ``min(1e-5, 1/(10 n))``; an explicit delta of at least ``1/n``
  is honoured with a :class:`~vflsec.dp.PrivacyWarning`
  (:func:`vflsec.dp.check_delta_for_rows`).
* A DP model that predicts one class for every training row gets a
  :class:`~vflsec.dp.PrivacyWarning`: at a small epsilon the noise can drown
  the signal entirely (HDP-VFL at epsilon 1 on Adult predicted the majority
  class for everyone, silently), and an accuracy equal to the majority rate
  then looks like a result.
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from ..dp.delta_rule import check_delta_for_rows, default_delta
from ..dp.gaussian import PrivacyWarning

__all__ = ["refuse_sample_weight", "resolve_delta", "warn_single_class"]


def refuse_sample_weight(sample_weight: Any, who: str) -> None:
    """ValueError unless ``sample_weight`` is None (module docstring)."""
    if sample_weight is not None:
        raise ValueError(f"{who}.fit does not take sample_weight: the vertical protocols and the DP analyses weight "
                         "every row equally (a row weight would change the sensitivity) -- pass sample_weight=None, "
                         "or repeat or drop rows instead")


def resolve_delta(delta: Optional[float], n: int, *, warn: bool) -> float:
    """The delta of a fit on ``n`` rows: ``default_delta(n)`` for None; an explicit one as
    given, with a PrivacyWarning when ``warn`` (the fit releases under DP) and it is at
    least ``1/n``. Its range is checked by the mechanism that uses it."""
    if delta is None:
        return default_delta(n)
    if warn and isinstance(delta, (int, float, np.floating)) and not isinstance(delta, bool) and 0 < delta < 1:
        check_delta_for_rows(delta, n)
    return delta  # type: ignore[return-value]  # validated (TypeError/ValueError) where it is used


def warn_single_class(predicted: np.ndarray, who: str, epsilon: Any) -> None:
    """A PrivacyWarning when a DP model's predictions on its training rows are all one class."""
    values = np.unique(predicted)
    if values.size == 1:
        label = values[0].item() if isinstance(values[0], np.generic) else values[0]
        warnings.warn(f"{who} predicts the single class {label!r} for every training row: at epsilon={epsilon} "
                      "the DP noise has drowned the signal (its accuracy is the majority rate) -- raise epsilon, "
                      "use more rows, or take fewer steps (fewer epochs, larger batches)", PrivacyWarning, stacklevel=3)
