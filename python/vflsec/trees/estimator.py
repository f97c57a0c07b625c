"""``VerticalGradientBoostingClassifier``: vertical gradient-boosted trees with scikit-learn's contract.

The estimator runs the parties of a job in one process (one thread each over an
in-memory channel, :func:`vflsec.vfl.runner.run_programs`), each on its own
columns: every party bins its own features (:class:`~vflsec.trees.binning.FeatureBins`),
then the programs of :mod:`vflsec.trees.protocol` grow the trees. The fitted model
holds what all parties hold together: the trees (the active party's), every
party's bins and lookup table. Prediction bins each party's rows with its own
bins and walks the trees; the bytes the parties exchanged are ``bytes_``.

Missing values (NaN) are read as such, as scikit-learn's histogram booster reads
them: each split learns which child they go to (:mod:`vflsec.trees.histogram`).
Infinite values are refused.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from ..glm.party_input import read_parties, read_parties_for
from ..vfl.runner import run_programs
from .binning import MAX_BINS, FeatureBins
from .dp import privacy_spent
from .job import PROTECTIONS, TreeJob, TreePartyData, TreePartyResult
from .protocol import _sigmoid, active_program, passive_program
from .tree import LookupTable, Tree, lookup_walker, tree_output

__all__ = ["VerticalGradientBoostingClassifier"]


class VerticalGradientBoostingClassifier(ClassifierMixin, BaseEstimator):
    """Vertical gradient-boosted trees (binary classification, log loss).

    Parameters
    ----------
    protection : "plain", "secureboost", "dp" or "label_dp"
        How the active party's gradients reach the passive parties
        (:mod:`vflsec.trees.protection`). "plain": in the clear, the baseline;
        "secureboost": under Paillier (:mod:`vflsec.trees.secureboost`), the same trees;
        "dp": Gaussian noise on the gradients, the trees grown from the noisy ones;
        "label_dp": randomized response with a prior on the labels, then plain
        (both label-DP: :mod:`vflsec.trees.dp`).
    party_columns : dict or None
        With one 2-D table ``X``: ``{party: columns}``, active party first (as
        :class:`~vflsec.glm.VerticalLogisticRegression`); None: ``X`` is a list
        of per-party blocks, active party first.
    max_iter, learning_rate, max_leaf_nodes, max_depth, min_samples_leaf,
    l2_regularization, max_bins :
        As scikit-learn's ``HistGradientBoostingClassifier`` (defaults too;
        no early stopping here).
    min_hessian : float
        Least hessian sum in each child (XGBoost's ``min_child_weight``; scikit-learn's 1e-3).
    key_bits : int
        Paillier modulus bits for "secureboost" (2048 by default).
    epsilon, delta : the label-DP guarantee of the whole fit, keyword-only: "dp" needs
        ``epsilon > 0`` and ``0 < delta < 1`` (well below ``1 / n``; there is no default);
        "label_dp" is pure: ``epsilon > 0`` and no delta. Other protections refuse them.
        With "dp", ``l2_regularization > 0`` keeps a leaf of few rows from following its noise.
    noise_seed : None (default): noise from the OS-entropy CSPRNG; an int: a reproducible
        stream (tests and experiments only: whoever knows it knows the noise; the
        guarantee's caveat says so).

    Attributes
    ----------
    classes_, n_features_in_, feature_names_in_ (when named) : as scikit-learn's.
    trees_ : list of :class:`~vflsec.trees.tree.Tree`; baseline_ : raw score before the trees.
    bins_ : each party's :class:`~vflsec.trees.binning.FeatureBins`; lookups_ : each party's lookup table.
    train_loss_ : log loss on the training rows after each tree.
    timings_ : each party's seconds (compute, crypto, messaging, total); bytes_ : bytes exchanged.
    protection_seconds_ : each party's seconds per protection step (SecureBoost: keygen, encrypt,
        decrypt at the active party; aggregate, pack at a passive party; "dp": noise;
        "label_dp": randomized_response, the prior model's fit included).
    privacy_spent_ : :class:`vflsec.dp.PrivacySpent` of the fit for "dp" and "label_dp" (epsilon,
        delta, neighbours "replace_one_label", the accountant; ``caveat``: what it does not
        cover), never above ``epsilon``; None for the protections without a guarantee.
    """

    def __init__(self, protection: str = "plain", *, party_columns: Any = None, max_iter: int = 100,
                 learning_rate: float = 0.1, max_leaf_nodes: Optional[int] = 31, max_depth: Optional[int] = None,
                 min_samples_leaf: int = 20, l2_regularization: float = 0.0, max_bins: int = MAX_BINS,
                 min_hessian: float = 1e-3, key_bits: int = 2048, epsilon: Optional[float] = None,
                 delta: Optional[float] = None, noise_seed: Optional[int] = None):
        self.protection = protection
        self.party_columns = party_columns
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_bins = max_bins
        self.min_hessian = min_hessian
        self.key_bits = key_bits
        self.epsilon = epsilon
        self.delta = delta
        self.noise_seed = noise_seed

    def __sklearn_tags__(self) -> Any:
        """NaN is a missing value here (as for scikit-learn's histogram booster)."""
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags

    def fit(self, X: Any, y: Any) -> "VerticalGradientBoostingClassifier":
        if self.protection not in PROTECTIONS:
            raise ValueError(f"protection must be one of {PROTECTIONS}, got {self.protection!r}")
        inputs = read_parties(X, self.party_columns, allow_nan=True)  # NaN: a missing value (binning.py)
        parts = inputs.parts
        n = parts[0].shape[0]
        y_arr = np.asarray(y)
        if y_arr.ndim != 1 or len(y_arr) != n:
            raise ValueError(f"y must be 1-D with one label per row ({n}), got shape {y_arr.shape}")
        if y_arr.dtype.kind == "f" and not np.isfinite(y_arr).all():
            row = int(np.flatnonzero(~np.isfinite(y_arr))[0])
            raise ValueError(f"y has a missing or infinite label (first at row {row}) -- drop those rows: a label "
                             "cannot be missing")
        classes, y01 = np.unique(y_arr, return_inverse=True)
        if len(classes) != 2:
            raise ValueError(f"VerticalGradientBoostingClassifier is binary: y must have 2 classes, got "
                             f"{len(classes)}")
        bins = [FeatureBins(self.max_bins).fit(P) for P in parts]
        codes = [b.transform(P) for b, P in zip(bins, parts)]
        names = inputs.party_names
        job = TreeJob(n_samples=n, active=names[0], passives=tuple(names[1:]),
                      n_bins=tuple(tuple(int(c) for c in b.n_bins_) for b in bins),
                      missing_bins=tuple(tuple(bool(m) for m in b.has_missing_) for b in bins),
                      protection=self.protection,
                      max_iter=self.max_iter, learning_rate=self.learning_rate, max_leaf_nodes=self.max_leaf_nodes,
                      max_depth=self.max_depth, min_samples_leaf=self.min_samples_leaf,
                      l2_regularization=self.l2_regularization, min_hessian=self.min_hessian,
                      key_bits=self.key_bits, epsilon=self.epsilon, delta=self.delta, noise_seed=self.noise_seed)
        data = {name: TreePartyData(c, y01.astype(np.float64) if i == 0 else None)
                for i, (name, c) in enumerate(zip(names, codes))}
        run = run_programs(job, {"active": active_program, "passive": passive_program}, data, label="trees")
        results = {name: cast(TreePartyResult, run.results[name]) for name in names}
        active = results[names[0]]
        self.classes_ = classes
        self.n_features_in_ = inputs.n_features
        if inputs.feature_names is not None:
            self.feature_names_in_ = inputs.feature_names
        self.party_columns_ = inputs.party_columns
        self.party_names_ = names
        self.bins_ = bins
        self.trees_: List[Tree] = active.trees
        self.baseline_ = active.baseline
        self.lookups_: List[LookupTable] = [results[name].lookup for name in names]
        self.train_loss_ = list(active.history["train_loss"])
        self.timings_: Dict[str, Dict[str, float]] = {name: results[name].timings for name in names}
        self.bytes_ = run.total_bytes()
        self.protection_seconds_ = {name: dict(results[name].info.get("seconds", {})) for name in names}
        self.privacy_spent_ = privacy_spent(job)
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "trees_"):
            raise NotFittedError("this VerticalGradientBoostingClassifier is not fitted yet; call fit first")

    def decision_function(self, X: Any) -> np.ndarray:
        """The raw score (log-odds of ``classes_[1]``) of each row."""
        self._check_fitted()
        parts = read_parties_for(X, [b.n_features_in_ for b in self.bins_],
                                 feature_names=getattr(self, "feature_names_in_", None),
                                 party_columns=self.party_columns_, who=type(self).__name__, allow_nan=True)
        codes = [b.transform(P) for b, P in zip(self.bins_, parts)]
        n = codes[0].shape[0]
        walk = lookup_walker(self.lookups_, codes)
        raw = np.full(n, self.baseline_)
        for tree in self.trees_:
            raw += tree_output(tree, n, walk)
        return raw

    def predict_proba(self, X: Any) -> np.ndarray:
        p1 = _sigmoid(self.decision_function(X))
        return np.column_stack([1.0 - p1, p1])

    def predict(self, X: Any) -> np.ndarray:
        raw = self.decision_function(X)  # checks the model is fitted
        return self.classes_[(raw > 0).astype(np.int64)]
