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

Row weights (``class_weight``, ``sample_weight``) are scikit-learn's
(:mod:`vflsec.trees.weights`), where the protection can take them; a fitted model
saves to one JSON file (:meth:`~VerticalGradientBoostingClassifier.save`,
:mod:`vflsec.trees.persistence`); a DP model that predicts one class for every
training row warns (:class:`vflsec.dp.PrivacyWarning`).
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Sequence, cast

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import NotFittedError

from ..dp.gaussian import PrivacyWarning
from ..glm.party_input import read_parties, read_parties_for
from ..vfl.runner import run_programs
from .binning import MAX_BINS, FeatureBins
from .dp import privacy_spent
from .job import DP_PROTECTIONS, PROTECTIONS, TreeJob, TreePartyData, TreePartyResult
from .persistence import load_model, save_model
from .protocol import _sigmoid, active_program, passive_program
from .tree import LookupTable, Tree, lookup_walker, tree_output
from .weights import check_sample_weight, check_weights_for, resolve_class_weight

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
    class_weight : None, "balanced" or dict ``{class label: weight}``
        As scikit-learn's ``HistGradientBoostingClassifier``: each row's gradient and
        hessian times its class's weight ("balanced": ``n_samples / (2 * bincount(y))``;
        a class the dict leaves out: 1), times its ``sample_weight`` (:meth:`fit`).
        The protections: "plain" and "secureboost" take both (SecureBoost packs each
        round's gradients divided by a power of two and opens the same histograms: the
        trees are plain's with the same weights); "label_dp" takes ``class_weight``
        only and computes it from the labels it released by randomized response
        (post-processing: the guarantee holds; the weights are the released labels'
        classes'), and refuses ``sample_weight`` (a row weight would reach training
        without that release); "dp" refuses both (its release is calibrated to a
        sensitivity of 1 per label at unit weight and releases the hessians, which a
        weight would scale; class weights read the labels it protects). A refusal is a
        ValueError in :meth:`fit` naming the protection and why
        (:data:`vflsec.trees.weights.WEIGHT_REFUSALS`).
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
    bytes_per_tree_ : the bytes the parties exchanged for each tree (one line per tree is logged on the
        ``vflsec.trees`` logger at INFO while fitting: :mod:`vflsec.trees.progress`).
    protection_seconds_ : each party's seconds per protection step (SecureBoost: keygen, encrypt,
        decrypt at the active party; aggregate, pack at a passive party; "dp": noise;
        "label_dp": randomized_response, the prior model's fit included).
    privacy_spent_ : :class:`vflsec.dp.PrivacySpent` of the fit for "dp" and "label_dp" (epsilon,
        delta, neighbours "replace_one_label", the accountant; ``caveat``: what it does not
        cover), never above ``epsilon``; None for the protections without a guarantee.

    A "dp" or "label_dp" model that predicts one class for every training row warns
    (:class:`vflsec.dp.PrivacyWarning`), saying whether that class is the label's
    majority (an unprotected model may predict it for everyone too on a rare label:
    try ``class_weight="balanced"``, under "label_dp") or its minority (the noise,
    not the imbalance: raise ``epsilon``). ``save(path)`` / ``load(path)`` keep a
    fitted model as one JSON file (:mod:`vflsec.trees.persistence`).
    """

    def __init__(self, protection: str = "plain", *, party_columns: Any = None, class_weight: Any = None,
                 max_iter: int = 100,
                 learning_rate: float = 0.1, max_leaf_nodes: Optional[int] = 31, max_depth: Optional[int] = None,
                 min_samples_leaf: int = 20, l2_regularization: float = 0.0, max_bins: int = MAX_BINS,
                 min_hessian: float = 1e-3, key_bits: int = 2048, epsilon: Optional[float] = None,
                 delta: Optional[float] = None, noise_seed: Optional[int] = None):
        self.protection = protection
        self.party_columns = party_columns
        self.class_weight = class_weight
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

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> "VerticalGradientBoostingClassifier":
        """Fit on ``X`` (per-party blocks, or one table with ``party_columns``) and the labels ``y``
        (two classes); ``sample_weight``: one weight >= 0 per row, or None (see ``class_weight``)."""
        if self.protection not in PROTECTIONS:
            raise ValueError(f"protection must be one of {PROTECTIONS}, got {self.protection!r}")
        check_weights_for(self.protection, sample_weight=sample_weight is not None,
                          class_weight=self.class_weight is not None)
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
        class_weight = resolve_class_weight(self.class_weight, classes)
        weights = check_sample_weight(sample_weight, n)
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
        data = {name: TreePartyData(c, y01.astype(np.float64), weights, class_weight) if i == 0 else TreePartyData(c)
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
        # Every message of a tree goes to or from the active party: its bytes sent and received are the tree's.
        self.bytes_per_tree_ = [int(s + r) for s, r in zip(active.history["tree_bytes_sent"],
                                                        active.history["tree_bytes_received"])]
        self.protection_seconds_ = {name: dict(results[name].info.get("seconds", {})) for name in names}
        self.privacy_spent_ = privacy_spent(job)
        if self.protection in DP_PROTECTIONS:
            predicted = (self._raw_scores(codes) > 0).astype(np.int64)
            _warn_single_class(self, predicted, y01)
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
        return self._raw_scores([b.transform(P) for b, P in zip(self.bins_, parts)])

    def _raw_scores(self, codes: Sequence[np.ndarray]) -> np.ndarray:
        """The raw score of each row from every party's bin codes."""
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

    # -- persistence ---------------------------------------------------------
    def save(self, path: Any) -> None:
        """Write the fitted model to ``path`` as JSON (0600, atomic; no pickle): the parameters,
        the trees, every party's bins and lookup table, ``privacy_spent_``
        (:mod:`vflsec.trees.persistence`). Not saved: the noise seed (saved as None), the run's
        timings and bytes."""
        self._check_fitted()
        save_model(self, path)

    @classmethod
    def load(cls, path: Any) -> "VerticalGradientBoostingClassifier":
        """A model written by :meth:`save`; it predicts exactly as the saved one (ValueError
        naming the file and the field for anything else)."""
        return cast("VerticalGradientBoostingClassifier", load_model(cls, path))


def _warn_single_class(model: VerticalGradientBoostingClassifier, predicted: np.ndarray, y01: np.ndarray) -> None:
    """A PrivacyWarning when a DP model predicts one class (``predicted``: 0/1) for every training row, saying
    whether it is the label's majority class (an unprotected model may do the same on a rare label) or not."""
    values = np.unique(predicted)
    if values.size != 1:
        return
    code = int(values[0])
    label = model.classes_[code]
    label = label.item() if isinstance(label, np.generic) else label
    share = float(np.mean(y01 == code))  # the accuracy on the training rows
    head = (f"{type(model).__name__} with protection {model.protection!r} at epsilon={model.epsilon} predicts the "
            f"single class {label!r} for every training row (accuracy {share:.3f})")
    if share >= 0.5:
        if model.class_weight == "balanced":
            fix = "raise epsilon or train on more rows"
        elif model.protection == "label_dp":
            fix = "try class_weight='balanced' or a larger epsilon"
        else:
            fix = "try protection 'label_dp' with class_weight='balanced', or a larger epsilon"
        why = (f"{label!r} is the majority class ({share:.1%} of the rows), so an unprotected model may predict it "
               "for every row too on a label this imbalanced")
    else:
        fix = "raise epsilon or train on more rows"
        why = (f"{label!r} is the minority class ({share:.1%} of the rows), which an unprotected model, starting from "
               "the majority's log-odds, does not predict for everyone: the DP noise has drowned the signal")
    warnings.warn(f"{head}: {why} -- {fix}", PrivacyWarning, stacklevel=3)
