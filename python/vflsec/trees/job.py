"""The contract between a vertical boosting job and its party programs.

One :class:`TreeJob` (public parameters only) is agreed by every party; each
runs its role program ``program(endpoint, job, data) -> TreePartyResult`` with
its own :class:`TreePartyData` (its bin codes, the active party's labels).
A boosting round is one tree over every row, so the job's schedule is
``epochs = max_iter`` rounds of one batch of all ``n_samples`` rows.
The hyper-parameters are those of scikit-learn's
``HistGradientBoostingClassifier`` (and XGBoost's, by other names):
``learning_rate`` (shrinkage), ``max_leaf_nodes`` (best-first growth),
``max_depth``, ``min_samples_leaf``, ``l2_regularization`` (``lambda``),
``min_hessian`` (``min_child_weight`` per child), ``min_gain``
(``gamma``-like: a split must gain more).
The label-DP protections (:mod:`vflsec.trees.dp`) take ``epsilon`` (and, for
"dp", ``delta``): the guarantee of the whole run; ``noise_seed`` (None: the
OS-entropy CSPRNG) makes their noise reproducible, for tests and experiments only.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .._arrays import check_positive_int, check_real
from ..vfl.job import VFLJob
from ..vfl.result import PartyResult
from .histogram import BinLayout
from .tree import LookupTable, Tree
from .weights import ClassWeight, check_sample_weight, check_weights_for

__all__ = ["DP_PROTECTIONS", "PROTECTIONS", "TreeJob", "TreePartyData", "TreePartyResult"]

#: how the active party's gradients reach the passive parties (registered in :mod:`vflsec.trees.protection`)
PROTECTIONS = ("plain", "secureboost", "dp", "label_dp")
#: the protections with a label-DP guarantee (:mod:`vflsec.trees.dp`)
DP_PROTECTIONS = ("dp", "label_dp")


@dataclass(frozen=True)
class TreeJob(VFLJob):
    """Public parameters of one vertical gradient-boosting run (see the module docstring).

    ``n_bins``: each party's bins per feature, active first (public: the sizes of
    the histograms the parties exchange; the thresholds stay with their owner).
    ``missing_bins``: like ``n_bins``, whether each feature's last bin holds its
    missing values (it had NaN among the training rows); empty: no feature's does.
    Public too: the active party scores that bin apart, and its count shows anyway."""

    n_samples: int
    active: str
    passives: Tuple[str, ...]
    n_bins: Tuple[Tuple[int, ...], ...]
    protection: str = "plain"
    max_iter: int = 100
    learning_rate: float = 0.1
    max_leaf_nodes: Optional[int] = 31
    max_depth: Optional[int] = None
    min_samples_leaf: int = 20
    l2_regularization: float = 0.0
    min_hessian: float = 1e-3
    min_gain: float = 0.0
    key_bits: int = 2048
    seed: int = 0
    epsilon: Optional[float] = None
    delta: Optional[float] = None
    noise_seed: Optional[int] = None
    missing_bins: Tuple[Tuple[bool, ...], ...] = ()
    # The boosting schedule in VFLJob's terms: a round is one "epoch" of one batch of every row.
    epochs: int = field(init=False, default=1)
    batch_size: int = field(init=False, default=1)

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        set_("max_iter", check_positive_int(self.max_iter, "max_iter"))
        set_("epochs", self.max_iter)
        set_("batch_size", self.n_samples)
        self._check_common()
        if self.protection not in PROTECTIONS:
            raise ValueError(f"protection must be one of {PROTECTIONS}, got {self.protection!r}")
        set_("learning_rate", check_real(self.learning_rate, "learning_rate", low=0.0, low_inclusive=False))
        if self.max_leaf_nodes is not None:
            set_("max_leaf_nodes", check_positive_int(self.max_leaf_nodes, "max_leaf_nodes", minimum=2))
        if self.max_depth is not None:
            set_("max_depth", check_positive_int(self.max_depth, "max_depth"))
        set_("min_samples_leaf", check_positive_int(self.min_samples_leaf, "min_samples_leaf"))
        set_("l2_regularization", check_real(self.l2_regularization, "l2_regularization", low=0.0))
        set_("min_hessian", check_real(self.min_hessian, "min_hessian", low=0.0))
        set_("min_gain", check_real(self.min_gain, "min_gain", low=0.0))
        if self.protection == "secureboost":
            from ..he.paillier import check_key_bits

            set_("key_bits", check_key_bits(self.key_bits))
        self._check_privacy()
        if self.gradient_bits < 16:
            raise ValueError(f"{self.n_samples} rows leave {self.gradient_bits} fraction bits for the gradients' "
                             "exact sums (at least 16 needed): train on fewer rows per job")
        bins = self.n_bins
        if not isinstance(bins, (list, tuple)) or len(bins) != len(self.data_parties):
            raise ValueError(f"n_bins needs one tuple of bins per data party ({len(self.data_parties)}), "
                             f"got {bins!r}")
        checked = []
        for party, counts in zip(self.data_parties, bins):
            if not isinstance(counts, (list, tuple)) or not counts or any(
                    isinstance(c, bool) or not isinstance(c, numbers.Integral) or not 1 <= c <= 256 for c in counts):
                raise ValueError(f"n_bins of party {party!r} must be 1 to 256 bins per feature, got {counts!r}")
            checked.append(tuple(int(c) for c in counts))
        set_("n_bins", tuple(checked))
        set_("missing_bins", self._checked_missing())

    def _checked_missing(self) -> Tuple[Tuple[bool, ...], ...]:
        """``missing_bins`` normalised to one tuple of bools per party (every feature false when empty)."""
        flags = self.missing_bins
        if isinstance(flags, (list, tuple)) and len(flags) == 0:
            return tuple(tuple(False for _ in counts) for counts in self.n_bins)
        if not isinstance(flags, (list, tuple)) or len(flags) != len(self.n_bins):
            raise ValueError(f"missing_bins needs one tuple of flags per data party ({len(self.n_bins)}), got "
                             f"{flags!r}")
        checked = []
        for party, counts, party_flags in zip(self.data_parties, self.n_bins, flags):
            if not isinstance(party_flags, (list, tuple)) or len(party_flags) != len(counts) or any(
                    not isinstance(f, (bool, np.bool_)) for f in party_flags):
                raise ValueError(f"missing_bins of party {party!r} must be one bool per feature ({len(counts)}), "
                                 f"got {party_flags!r}")
            if any(f and c < 2 for f, c in zip(party_flags, counts)):
                raise ValueError(f"party {party!r}: a feature with a missing-value bin needs a value bin too "
                                 f"(n_bins >= 2), got {counts!r}")
            checked.append(tuple(bool(f) for f in party_flags))
        return tuple(checked)

    def _check_privacy(self) -> None:
        """epsilon (> 0) for the DP protections, delta in (0, 1) for "dp" only, a noise seed only with noise."""
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731
        if self.protection not in DP_PROTECTIONS:
            for name in ("epsilon", "delta", "noise_seed"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is a parameter of the DP protections {DP_PROTECTIONS}; protection "
                                     f"{self.protection!r} has no DP guarantee (leave {name} None)")
            return
        if self.epsilon is None:
            raise ValueError(f"protection {self.protection!r} needs epsilon (> 0): the guarantee of the whole run")
        set_("epsilon", check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False))
        if self.protection == "dp":
            if self.delta is None:
                raise ValueError("protection 'dp' needs delta in (0, 1), well below 1/n_samples (e.g. "
                                 "vflsec.dp.default_delta(n))")
            set_("delta", check_real(self.delta, "delta", low=0.0, low_inclusive=False, high=1.0,
                                     high_inclusive=False))
        elif self.delta is not None:
            raise ValueError("protection 'label_dp' is pure epsilon-label-DP: delta must be None")
        seed = self.noise_seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise TypeError(f"noise_seed must be None or a non-negative int, got {seed!r}")

    def layout(self, party: str) -> BinLayout:
        index = self.data_parties.index(party)
        return BinLayout(self.n_bins[index], self.missing_bins[index])

    @property
    def gradient_bits(self) -> int:
        """Fraction bits of the gradients' fixed-point grid: at most 40, and few enough that a
        sum of ``n_samples`` values of magnitude <= 1 stays below 2^53 (float64's integers), so
        every histogram sum is exact whatever the order of the additions."""
        return min(40, 52 - int(self.n_samples).bit_length())

    def quantize(self, values: np.ndarray) -> np.ndarray:
        """``values`` rounded to multiples of ``2^-gradient_bits`` (float64, exact)."""
        scale = float(2 ** self.gradient_bits)
        return np.rint(values * scale) / scale


@dataclass(frozen=True)
class TreePartyData:
    """One party's rows as bin codes (``(n, d)`` uint8, rows aligned), and the
    active party's 0/1 labels and row weights (``sample_weight``, ``class_weight``
    resolved for the 0/1 labels: :mod:`vflsec.trees.weights`; the job does not say them)."""

    codes: np.ndarray
    y: Optional[np.ndarray] = None
    sample_weight: Optional[np.ndarray] = None
    class_weight: ClassWeight = None

    def checked(self, job: TreeJob, party: str, *, needs_labels: bool) -> "TreePartyData":
        codes = self.codes
        if not isinstance(codes, np.ndarray) or codes.dtype != np.uint8 or codes.ndim != 2:
            raise TypeError(f"party {party!r}: codes must be a 2-D uint8 array")
        layout = job.layout(party)
        if codes.shape != (job.n_samples, len(layout.n_bins)):
            raise ValueError(f"party {party!r}: codes have shape {codes.shape}, the job expects "
                             f"({job.n_samples}, {len(layout.n_bins)})")
        if codes.size and np.any(codes.max(axis=0) >= np.asarray(layout.n_bins)):
            raise ValueError(f"party {party!r}: a code is beyond its feature's bins")
        if needs_labels:
            y = np.asarray(self.y)
            if y.shape != (job.n_samples,) or not np.isin(y, (0, 1)).all():
                raise ValueError(f"party {party!r}: labels must be {job.n_samples} values of 0 or 1")
            check_weights_for(job.protection, sample_weight=self.sample_weight is not None,
                              class_weight=self.class_weight is not None)
            return TreePartyData(np.ascontiguousarray(codes), y.astype(np.float64),
                                 check_sample_weight(self.sample_weight, job.n_samples), self.class_weight)
        return TreePartyData(np.ascontiguousarray(codes), None)


@dataclass
class TreePartyResult(PartyResult):
    """What a party trained: its lookup table (every party); the trees and the
    baseline raw score (the active party); ``history``: each tree's seconds, leaves and
    bytes sent and received (every party, :data:`vflsec.trees.progress.TREE_RECORD`) and
    the active party's ``train_loss``, one value per round; ``timings``; ``info``: message facts."""

    lookup: LookupTable
    trees: List[Tree] = field(default_factory=list)
    baseline: float = 0.0
    history: Dict[str, List[float]] = field(default_factory=dict)
    timings: Dict[str, float] = field(default_factory=dict)
    info: Dict[str, Any] = field(default_factory=dict)
