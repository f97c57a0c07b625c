"""Per-party row scaling to ``||x_i^P||_2 <= 1``, shared by
:func:`vflsec.data.vertical_split` and :class:`vflsec.data.PartyPreprocessor`.

HDP-VFL's sensitivity bounds need every party's part of every row inside the
unit ball. Two pieces do it, both from one party's own rows only:

* :func:`project_rows` -- ``x / max(1, ||x||)`` per row: data-independent.
* :class:`ZScoreClip` -- ``"zscore_clip"``: z-scores with the mean and
  standard deviation of the party's *training* rows, winsorized at
  ``+-ZSCORE_CLIP``, 0/1 columns kept, every row divided by
  ``sqrt(number of attributes)`` and projected. Its statistics are not
  covered by the DP epsilon (see ``vertical_split``'s ``scaling``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["NORM_SAFETY", "ZSCORE_CLIP", "ZScoreClip", "project_rows", "unit_rows"]

# "zscore_clip" winsorizes z-scores at +-ZSCORE_CLIP standard deviations.
ZSCORE_CLIP = 3.0

# Float rounding in the divisions below could leave a norm at 1 + 1 ulp.
NORM_SAFETY = 1.0 + 8.0 * np.finfo(np.float64).eps


def project_rows(X: np.ndarray) -> np.ndarray:
    """``x / max(1, ||x||)`` per row, with a safety factor so a projected row
    is <= 1 also after float rounding (rows already inside are untouched)."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X)) * NORM_SAFETY
    return X / np.maximum(1.0, norms)[:, None]


def unit_rows(Z: np.ndarray, n_attributes: int) -> np.ndarray:
    """Rows of per-attribute values of typical size 1 (at most 1 for a 0/1
    or bounded attribute) divided by ``sqrt(n_attributes)`` and projected:
    a typical row ends with norm about 1, only outlying rows are shrunk."""
    return project_rows(Z / np.sqrt(n_attributes))


@dataclass(frozen=True, eq=False)
class ZScoreClip:
    """The ``"zscore_clip"`` scaling of one party's columns, fitted on its
    training rows (:meth:`fit`) and applied to any rows (:meth:`transform`).

    ``mean``/``std``: per column (``std`` 1 where ``constant``: such a column
    becomes 0); ``keep``: the 0/1 columns (one-hot, missing indicators) left
    as they are; ``n_attributes``: the row divisor's count (a one-hot
    attribute counts once).
    """

    mean: np.ndarray
    std: np.ndarray
    constant: np.ndarray
    keep: np.ndarray
    n_attributes: int

    @classmethod
    def fit(cls, train: np.ndarray, keep: np.ndarray, n_attributes: int) -> "ZScoreClip":
        """Fitted on the training rows ``train``."""
        return cls.from_stats(train.mean(axis=0), train.std(axis=0), keep, n_attributes)

    @classmethod
    def from_stats(cls, mean: np.ndarray, std: np.ndarray, keep: np.ndarray, n_attributes: int) -> "ZScoreClip":
        """From the training rows' per-column mean and standard deviation (as
        ``fit`` computes them; a zero standard deviation marks a constant column)."""
        constant = ~(std > 0)
        return cls(mean=mean, std=np.where(constant, 1.0, std), constant=constant,
                   keep=np.asarray(keep, dtype=bool), n_attributes=int(n_attributes))

    def transform(self, block: np.ndarray) -> np.ndarray:
        z = np.clip((block - self.mean) / self.std, -ZSCORE_CLIP, ZSCORE_CLIP)
        z[:, self.constant] = 0.0  # constant column: carries no information
        z[:, self.keep] = block[:, self.keep]  # indicator columns stay 0/1
        # A one-hot attribute adds at most 1 to ||x||^2 and a numeric one
        # about 1 on average (at most 9), so this makes a typical row's
        # norm about 1; the projection then only touches outlying rows.
        return unit_rows(z, self.n_attributes)
