"""Gradient histograms of one party's binned features and the best split they allow.

A party's bins are laid out flat (:class:`BinLayout`: feature ``j``'s bins at
``offsets[j]:offsets[j + 1]``), so a histogram is three vectors over all of its
bins: the sums of the rows' gradients ``G``, hessians ``H`` and the row counts
``C`` (:func:`build_histogram`). Flat and unpadded because under SecureBoost
every bin sum is a ciphertext. A child's histogram is its parent's minus its
sibling's (:func:`subtract`), so only the smaller child is ever built.

:func:`best_split` scores every "code <= b" of every feature with XGBoost's
gain (the loss decrease of the second-order approximation),
``G_L^2 / (H_L + lam) + G_R^2 / (H_R + lam) - G^2 / (H + lam)``, among the
splits whose children keep ``min_samples_leaf`` rows and ``min_hessian``
hessian each, and returns the first best one (features in order, then bins),
or None when no split gains more than ``min_gain``. The leaf weight is
``-G / (H + lam)`` (:func:`leaf_value`).

Missing values: a feature that had NaN among the training rows has a last bin
for them (``BinLayout.missing``); its splits are scored twice, as XGBoost's
sparsity-aware split finding and scikit-learn do: missing values to the right
(thresholds ascending, the last one "every value left, missing right"
included), then to the left (thresholds descending), the second kept only when
it gains strictly more. For a feature without missing training values, a
missing value at prediction goes to the child with more training rows. These
are the rules, ties included, of scikit-learn's ``HistGradientBoostingClassifier``
on numerical features.

A party that scores its own splits sends only each node's best one
(:func:`encode_choices`: a few numbers per node, however many bins), which the
receiver checks against the sender's layout and the node's rows (:func:`decode_choices`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["BinLayout", "Histogram", "SplitChoice", "best_split", "build_histogram", "decode_choices",
           "encode_choices", "leaf_value", "split_codes", "subtract"]


@dataclass(frozen=True)
class BinLayout:
    """Where each feature's bins sit in a party's flat histogram; ``missing``: whether each
    feature's last bin is its missing-value bin (empty: none is)."""

    n_bins: Tuple[int, ...]
    missing: Tuple[bool, ...] = ()

    def has_missing(self) -> np.ndarray:
        """``missing`` as a bool array, one per feature."""
        if not self.missing:
            return np.zeros(len(self.n_bins), dtype=bool)
        return np.asarray(self.missing, dtype=bool)

    @property
    def value_bins(self) -> np.ndarray:
        """Each feature's value bins (its bins but the missing one)."""
        return np.asarray(self.n_bins, dtype=np.int64) - self.has_missing()

    @property
    def offsets(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(np.asarray(self.n_bins, dtype=np.int64))])

    @property
    def total(self) -> int:
        return int(sum(self.n_bins))

    @property
    def feature_of_bin(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.n_bins)), self.n_bins)


@dataclass(frozen=True)
class Histogram:
    """A node's sums per bin: gradients, hessians (float64) and rows (int64)."""

    G: np.ndarray
    H: np.ndarray
    C: np.ndarray


@dataclass(frozen=True)
class SplitChoice:
    """The best split of a node among one party's features: "code <= ``code``" of
    ``feature`` (the party's own index), missing values to the left child when
    ``missing_left``; its gain and the left child's sums (missing values included
    when they go left)."""

    gain: float
    feature: int
    code: int
    G_left: float
    H_left: float
    n_left: int
    missing_left: bool = False


#: rows per chunk when a histogram is built (bounds the flat index temporary)
_CHUNK_ROWS = 65536


def build_histogram(codes: np.ndarray, rows: np.ndarray, g: np.ndarray, h: np.ndarray,
                    layout: BinLayout) -> Histogram:
    """The histogram of the rows ``rows`` (indices into ``codes``, ``(n, d)`` uint8)
    with per-row gradients ``g`` and hessians ``h`` (indexed like ``codes``' rows)."""
    offsets = layout.offsets[:-1]
    d = codes.shape[1]
    G = np.zeros(layout.total)
    H = np.zeros(layout.total)
    C = np.zeros(layout.total, dtype=np.int64)
    for start in range(0, len(rows), _CHUNK_ROWS):
        part = rows[start:start + _CHUNK_ROWS]
        flat = (codes[part].astype(np.int64) + offsets).ravel()  # row-major: a row's d bins together
        G += np.bincount(flat, weights=np.repeat(g[part], d), minlength=layout.total)
        H += np.bincount(flat, weights=np.repeat(h[part], d), minlength=layout.total)
        C += np.bincount(flat, minlength=layout.total)
    return Histogram(G, H, C)


def subtract(parent: Histogram, child: Histogram) -> Histogram:
    """The sibling's histogram: ``parent - child``."""
    return Histogram(parent.G - child.G, parent.H - child.H, parent.C - child.C)


def leaf_value(G: float, H: float, l2: float) -> float:
    """The weight minimising the second-order loss of a leaf: ``-G / (H + lam)`` (plus 1e-15 in the
    denominator, as scikit-learn's ``compute_node_value``: a leaf whose hessians all rounded to 0 with
    ``lam = 0`` gets a finite weight)."""
    return -G / (H + l2 + 1e-15)


def best_split(hist: Histogram, layout: BinLayout, totals: Tuple[float, float, int], *, l2: float,
               min_samples_leaf: int, min_hessian: float, min_gain: float = 0.0) -> Optional[SplitChoice]:
    """The first best split of a node among this party's features (see the module
    docstring), scored against the node's totals ``(G, H, n)``."""
    G, H, n = totals
    # Left sums at each value bin: cumulative sums along each feature's own row of a (features, bins) grid, so
    # a sum never carries the earlier features' totals and their rounding; padding bins are never valid.
    widths = layout.value_bins
    missing = layout.has_missing()
    width = int(widths.max())
    inside = np.arange(width) < widths[:, None]
    where = np.minimum(layout.offsets[:-1, None] + np.arange(width), layout.total - 1)
    GL = np.cumsum(np.where(inside, hist.G[where], 0.0), axis=1)
    HL = np.cumsum(np.where(inside, hist.H[where], 0.0), axis=1)
    CL = np.cumsum(np.where(inside, hist.C[where], 0), axis=1)
    # Missing values to the right: a feature's last value bin leaves nothing on the right unless it has missing
    # values (then it is the split "every value left, missing right").
    ltr = np.arange(width) < (widths - 1 + missing)[:, None]
    grids = [(GL, HL, CL, ltr)]
    down = width - 1 - np.arange(width)
    if missing.any():
        # Missing values to the left, thresholds in descending order (column i is threshold width - 1 - i).
        last = layout.offsets[1:] - 1
        Gm = np.where(missing, hist.G[last], 0.0)[:, None]
        Hm = np.where(missing, hist.H[last], 0.0)[:, None]
        Cm = np.where(missing, hist.C[last], 0)[:, None]
        rtl = missing[:, None] & (down < (widths - 1)[:, None])
        grids.append((GL[:, down] + Gm, HL[:, down] + Hm, CL[:, down] + Cm, rtl))
    GLs, HLs, CLs, valid = grids[0] if len(grids) == 1 else (np.concatenate(parts, axis=1) for parts in zip(*grids))
    GR, HR, CR = G - GLs, H - HLs, n - CLs
    valid = valid & (CLs >= min_samples_leaf) & (CR >= min_samples_leaf) & (HLs >= min_hessian) & (HR >= min_hessian)
    if not valid.any():
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = GLs * GLs / (HLs + l2) + GR * GR / (HR + l2) - G * G / (H + l2)
    gain = np.where(valid, gain, -np.inf)
    # Row-major: the first feature, then missing right before missing left, then the scan's order, among equal gains.
    best = int(np.argmax(gain))
    f, column = divmod(best, gain.shape[1])
    if not gain[f, column] > min_gain:
        return None
    to_left = column >= width
    code = int(down[column - width]) if to_left else int(column)
    n_left = int(CLs[f, column])
    # Without missing training values, a missing value goes where more training rows went (scikit-learn's rule).
    missing_left = bool(to_left) if missing[f] else n_left > n - n_left
    return SplitChoice(gain=float(gain[f, column]), feature=int(f), code=code, G_left=float(GLs[f, column]),
                       H_left=float(HLs[f, column]), n_left=n_left, missing_left=missing_left)


def split_codes(layout: BinLayout, feature: int, missing_left: bool) -> int:
    """How many thresholds ``feature`` can split at: below its last value bin, and at it too when its
    training missing values go right (the split "every value left, missing right")."""
    values = int(layout.value_bins[feature])
    has_missing = bool(layout.has_missing()[feature])
    return values - 1 + int(has_missing and not missing_left)


def encode_choices(nodes: Sequence[int], choices: Sequence[Optional[SplitChoice]]) -> Any:
    """Each node's best split as sent: ``{"split": int64 (k, 5): node, feature (-1: no split), code,
    n_left, missing_left; "gain": float64 (k, 3): gain, G_left, H_left}``."""
    split = np.zeros((len(nodes), 5), dtype=np.int64)
    gain = np.zeros((len(nodes), 3), dtype=np.float64)
    for i, (node, choice) in enumerate(zip(nodes, choices)):
        if choice is None:
            split[i] = (node, -1, 0, 0, 0)
        else:
            split[i] = (node, choice.feature, choice.code, choice.n_left, int(choice.missing_left))
            gain[i] = (choice.gain, choice.G_left, choice.H_left)
    return {"split": split, "gain": gain}


def decode_choices(payload: Any, nodes: Sequence[int], counts: Sequence[int], layout: BinLayout, *,
                   min_samples_leaf: int, min_gain: float, who: str) -> List[Optional[SplitChoice]]:
    """:func:`encode_choices`'s splits of ``nodes`` (of ``counts`` rows each) by a party of ``layout``,
    each a split that party can make, keeping ``min_samples_leaf`` rows per child and gaining more than
    ``min_gain`` (else ValueError naming ``who``)."""
    k = len(nodes)
    split = payload.get("split") if isinstance(payload, dict) else None
    gain = payload.get("gain") if isinstance(payload, dict) else None
    if not isinstance(split, np.ndarray) or split.dtype != np.int64 or split.shape != (k, 5) \
            or not isinstance(gain, np.ndarray) or gain.dtype != np.float64 or gain.shape != (k, 3):
        raise ValueError(f"{who} sent best splits that are not {{split: int64 ({k}, 5), gain: float64 ({k}, 3)}}")
    if split[:, 0].tolist() != list(nodes):
        raise ValueError(f"{who} sent the best splits of nodes {split[:, 0].tolist()}, not of {list(nodes)}")
    choices: List[Optional[SplitChoice]] = []
    for (_, feature, code, n_left, missing), (value, G_left, H_left), count in zip(split.tolist(), gain.tolist(),
                                                                                   counts):
        if feature == -1:
            choices.append(None)
            continue
        if not 0 <= feature < len(layout.n_bins) or missing not in (0, 1) \
                or not 0 <= code < split_codes(layout, feature, bool(missing)) \
                or not min_samples_leaf <= n_left <= count - min_samples_leaf \
                or not np.isfinite((value, G_left, H_left)).all() or not value > min_gain:
            raise ValueError(f"{who} sent a best split it cannot have found: feature {feature}, code {code}, "
                             f"{n_left} of {count} rows left, gain {value}")
        choices.append(SplitChoice(gain=value, feature=feature, code=code, G_left=G_left, H_left=H_left,
                                   n_left=n_left, missing_left=bool(missing)))
    return choices
