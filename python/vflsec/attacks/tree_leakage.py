"""Label leakage of vertical boosting to a passive party (SecureBoost's known leak).

Threat model: an honest-but-curious passive party of a vertical boosting job
(:mod:`vflsec.trees.protocol`) infers the active party's training labels from
what it receives, and nothing else: the announcement of every node's partition
(which of the node's rows go left; every SecureBoost variant shows a passive
party each node's "instance space") and, where the protection sends them in a
readable form, the round's gradients ("plain": exact; "dp": noisy; under
"secureboost" ciphertexts only). :func:`passive_tree_view` reads exactly those
messages from a transcript (``InMemoryHub(keep_payloads=True)``).

Two attacks, each scoring every row (higher: more likely the positive label):

* :func:`instance_space_attack` (Cheng et al. 2021, Sec. "reduced-leakage
  SecureBoost", name the leak; known-label attacks as Fu et al. 2022 assume
  a few labelled rows, 40 by default): rows that share leaves share gradients,
  so share labels; a row's score is the mean over trees of the known labels'
  mean in its leaf (leave-one-out for a known row; the known rows' mean where
  its leaf holds none). The first trees, grown from gradients of one constant
  prediction, split rows almost by label.
* :func:`gradient_attack`: ``-mean(g)`` over the rounds: with
  ``g = p - y`` a positive row's gradient is negative in every round; noise of
  a DP release averages out over rounds as far as the privacy budget allows.

:func:`label_leakage` runs both (what the view allows) and scores them on the
rows the attacker did not know: AUC and accuracy.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .label_inference import choose_auxiliary

__all__ = ["TreeView", "gradient_attack", "instance_space_attack", "label_leakage", "passive_tree_view"]


@dataclass(frozen=True)
class TreeView:
    """A passive party's view of a boosting run: ``leaves`` (one int array per tree: each
    row's leaf, as the node ids the protocol numbers) and ``gradients`` (one float array
    per tree, where they arrived readable; empty otherwise)."""

    n_samples: int
    leaves: List[np.ndarray]
    gradients: List[np.ndarray]


def _unpack(mask: Any, count: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(bytes(mask), dtype=np.uint8), count=count).astype(bool)


def passive_tree_view(transcript: Sequence[Tuple[Any, Any]], job: Any, passive: Optional[str] = None) -> TreeView:
    """What ``passive`` (default: the first passive party) received during ``job``, from a transcript."""
    from ..trees.protocol import TAG_GRADIENTS, TAG_SPLIT, TAG_STEP

    passive = job.passives[0] if passive is None else passive
    # Its own split replies too: the active party does not send a split's rows back to the party that made it.
    messages = [(r.tag, p) for r, p in transcript if (r.receiver == passive and r.sender == job.active
                                                      and r.tag in (TAG_STEP, TAG_GRADIENTS))
                or (r.sender == passive and r.receiver == job.active and r.tag == TAG_SPLIT)]
    if not messages:
        raise ValueError(f"the transcript holds no boosting message to {passive!r} (was the hub created with "
                         "keep_payloads=True?)")
    n = job.n_samples
    leaves: List[np.ndarray] = []
    gradients: List[np.ndarray] = []
    rows: Dict[int, np.ndarray] = {}
    next_node = 0
    own_mask: Any = None
    for tag, payload in messages:
        if tag == TAG_SPLIT:
            own_mask = payload.get("mask") if isinstance(payload, dict) else None
            continue
        if tag == TAG_GRADIENTS:
            g = payload.get("g") if isinstance(payload, dict) else None
            if isinstance(g, np.ndarray) and g.shape == (n,):
                gradients.append(g.astype(np.float64))
            continue
        op = payload.get("op")
        if op == "tree":
            rows, next_node = {0: np.arange(n)}, 1
        elif op == "children":
            parent = rows.pop(payload["node"])
            left = _unpack(payload["mask"] if "mask" in payload else own_mask, len(parent))
            rows[next_node], rows[next_node + 1] = parent[left], parent[~left]
            next_node += 2
        elif op == "end_tree":
            leaf = np.empty(n, dtype=np.int64)
            for node, members in rows.items():
                leaf[members] = node
            leaves.append(leaf)
    return TreeView(n, leaves, gradients)


def instance_space_attack(view: TreeView, known_rows: np.ndarray, known_labels: np.ndarray) -> np.ndarray:
    """Each row's score: the mean over trees of the known labels' mean in its leaf (see the module)."""
    known_rows = np.asarray(known_rows, dtype=np.int64)
    labels = np.asarray(known_labels, dtype=np.float64)
    if known_rows.shape != labels.shape or known_rows.size == 0:
        raise ValueError("known_rows and known_labels must be equal-length, non-empty")
    prior = float(labels.mean())
    scores = np.zeros(view.n_samples)
    for leaf in view.leaves:
        ids, where = np.unique(leaf, return_inverse=True)
        known_leaf = where[known_rows]
        total = np.bincount(known_leaf, weights=labels, minlength=len(ids))
        count = np.bincount(known_leaf, minlength=len(ids)).astype(np.float64)
        row_total, row_count = total[where], count[where]
        row_total[known_rows] -= labels  # leave one out: a known row's own label is not evidence
        row_count[known_rows] -= 1
        scores += np.where(row_count > 0, row_total / np.maximum(row_count, 1), prior)
    return scores / max(1, len(view.leaves))


def gradient_attack(view: TreeView) -> np.ndarray:
    """``-mean(g)`` over the rounds whose gradients arrived readable."""
    if not view.gradients:
        raise ValueError("this view holds no readable gradients")
    return -np.mean(view.gradients, axis=0)


def _scores(y: np.ndarray, score: np.ndarray, threshold: float) -> Dict[str, float]:
    from sklearn.metrics import roc_auc_score

    return {"auc": float(roc_auc_score(y, score)), "accuracy": float(np.mean((score > threshold) == (y == 1)))}


def label_leakage(view: TreeView, y: Any, *, n_known: int = 40, seed: int = 0,
                  features: Any = None) -> Dict[str, Dict[str, float]]:
    """Both attacks (what ``view`` allows) scored on the rows the attacker did not know
    (``n_known`` known labels chosen by :func:`~vflsec.attacks.label_inference.choose_auxiliary`):
    ``{attack: {"auc", "accuracy"}}``; the instance-space scores are thresholded at 0.5,
    the gradients' at 0. ``features`` (the passive party's own rows): adds the reference
    ``"own_features"``, what the attacker infers without the protocol (a logistic regression
    on its own features fitted to the known labels, thresholded at 0.5): the leak is the gain over it."""
    labels = np.asarray(y)
    if labels.shape != (view.n_samples,) or not np.isin(labels, (0, 1)).all():
        raise ValueError(f"y must be {view.n_samples} labels of 0 or 1")
    known = choose_auxiliary(labels, n_known, seed=seed)
    unknown = np.setdiff1d(np.arange(view.n_samples), known)
    out = {"instance_space": _scores(labels[unknown], instance_space_attack(view, known, labels[known])[unknown], 0.5)}
    if view.gradients:
        out["gradients"] = _scores(labels[unknown], gradient_attack(view)[unknown], 0.0)
    if features is not None:
        from sklearn.linear_model import LogisticRegression

        X = np.asarray(features, dtype=np.float64)
        if X.ndim != 2 or X.shape[0] != view.n_samples:
            raise ValueError(f"features must be the passive party's {view.n_samples} rows, got shape {X.shape}")
        model = LogisticRegression(max_iter=1000).fit(X[known], labels[known])
        out["own_features"] = _scores(labels[unknown], model.predict_proba(X[unknown])[:, 1], 0.5)
    return out
