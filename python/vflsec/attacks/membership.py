"""Membership inference with shadow models (Shokri et al. 2017).

Threat model: the attacker observes, for a candidate record, what the
trained VFL system releases about it -- the passive party's embedding
``f(x)`` (what the active party receives; VFL-AFE Table 1) or the model's
output probabilities -- and wants to know whether the record was in the
training set. It holds *shadow data* from the same distribution (disjoint
from the target's training set) and knows the training procedure (model
architecture, defense, hyper-parameters), so it can train shadow models that
mimic the target. It never sees the target's training set.

Attack: train ``n_shadow`` shadow models, each on a random half of the
shadow data ("in") with the other half held out ("out"); label the shadow
models' outputs on in/out records 1/0 and fit an attack classifier on them
(one per class when labels are given, as in Shokri et al.; a shared one for
classes with too few records). The attack classifier then scores the
target's outputs on candidate records.

The caller supplies ``train_shadow(X_in, y_in, seed) -> release`` where
``release(X, y) -> outputs (n, k)`` returns what the attacker would observe
for those records from a model trained like the target.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np

from .._arrays import as_float_array, check_positive_int

__all__ = ["ShadowModelAttack", "attack_features"]

Release = Callable[[np.ndarray, np.ndarray], Any]


def attack_features(outputs: Any, *, sort_outputs: bool) -> np.ndarray:
    """Attack-classifier inputs from released outputs: the rows as they are
    (embeddings), or sorted in decreasing order (class probabilities, so the
    attack keys on confidence rather than on which class)."""
    out, _ = as_float_array(outputs, "outputs", dtype=np.float64)
    out = out.reshape(out.shape[0], -1) if out.ndim > 1 else out[:, None]
    return -np.sort(-out, axis=1) if sort_outputs else out


class ShadowModelAttack:
    """Shokri et al.'s shadow-model membership inference.

    Parameters
    ----------
    train_shadow : ``(X_in, y_in, seed) -> release``; trains one shadow model.
    n_shadow : number of shadow models.
    sort_outputs : sort each output row (True for probability vectors).
    per_class : one attack classifier per label (needs labels at fit and
        predict time); classes with fewer than ``min_class_records`` records
        fall back to the shared classifier.
    seed : seed of the in/out splits and of the attack classifiers.
    """

    def __init__(self, train_shadow: Callable[[np.ndarray, np.ndarray, int], Release], *, n_shadow: int = 4,
                 sort_outputs: bool = False, per_class: bool = True, min_class_records: int = 20,
                 seed: int = 0):
        self.train_shadow = train_shadow
        self.n_shadow = n_shadow
        self.sort_outputs = sort_outputs
        self.per_class = per_class
        self.min_class_records = min_class_records
        self.seed = seed

    def _classifier(self, seed: int):
        from sklearn.ensemble import HistGradientBoostingClassifier

        return HistGradientBoostingClassifier(max_iter=100, learning_rate=0.1, random_state=seed)

    def fit(self, X_shadow: Any, y_shadow: Any) -> "ShadowModelAttack":
        """Train the shadow models on the attacker's shadow data and the attack
        classifier(s) on their in/out outputs."""
        if not callable(self.train_shadow):
            raise TypeError("train_shadow must be callable (X_in, y_in, seed) -> release")
        n_shadow = check_positive_int(self.n_shadow, "n_shadow")
        X = np.asarray(X_shadow)
        y = np.asarray(y_shadow)
        if X.shape[0] != y.shape[0] or y.ndim != 1:
            raise ValueError("y_shadow must be 1-D with one label per row of X_shadow")
        if X.shape[0] < 4:
            raise ValueError("need at least 4 shadow records")
        rng = np.random.default_rng(self.seed)
        feats, member, labels = [], [], []
        for k in range(n_shadow):
            order = rng.permutation(X.shape[0])
            half = X.shape[0] // 2
            inside, outside = order[:half], order[half:2 * half]
            release = self.train_shadow(X[inside], y[inside], int(self.seed * 1000 + k))
            for rows, flag in ((inside, 1), (outside, 0)):
                feats.append(attack_features(release(X[rows], y[rows]), sort_outputs=self.sort_outputs))
                member.append(np.full(rows.size, flag))
                labels.append(y[rows])
        F, M, L = np.concatenate(feats), np.concatenate(member), np.concatenate(labels)
        self.shared_ = self._classifier(self.seed).fit(F, M)
        self.by_class_: Dict[Any, Any] = {}
        if self.per_class:
            for c in np.unique(L):
                mask = L == c
                if mask.sum() >= self.min_class_records and np.unique(M[mask]).size == 2:
                    self.by_class_[c] = self._classifier(self.seed + 1).fit(F[mask], M[mask])
        self.n_features_ = F.shape[1]
        return self

    def predict_proba(self, outputs: Any, labels: Optional[Any] = None) -> np.ndarray:
        """Membership probability for each released output row (labels select
        the per-class classifier; None uses the shared one)."""
        if not hasattr(self, "shared_"):
            raise RuntimeError("call fit() before predict_proba()")
        F = attack_features(outputs, sort_outputs=self.sort_outputs)
        if F.shape[1] != self.n_features_:
            raise ValueError(f"outputs have {F.shape[1]} features, the shadow outputs had {self.n_features_}")
        scores = self.shared_.predict_proba(F)[:, 1]
        if labels is not None and self.by_class_:
            lab = np.asarray(labels)
            if lab.shape != (F.shape[0],):
                raise ValueError(f"labels must have shape ({F.shape[0]},), got {lab.shape}")
            for c, clf in self.by_class_.items():
                mask = lab == c
                if mask.any():
                    scores[mask] = clf.predict_proba(F[mask])[:, 1]
        return np.ascontiguousarray(scores, dtype=np.float64)
