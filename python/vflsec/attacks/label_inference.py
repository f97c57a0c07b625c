"""Label inference by a passive party in split learning.

Threat model (all four attacks): the attacker is an honest-but-curious
**passive party**. It sees its own features and bottom model, and what the
protocol sends it: per batch, the gradient ``g_i = dL/dh_i`` of the loss with
respect to each embedding row it sent (after the active party's defense,
e.g. noise or sparsification). It never sees the labels, the head or the
other parties' embeddings.

* :func:`direct_label_inference` (Fu et al. 2022, "direct label inference"):
  when the active party's head is a plain softmax over the sum of the
  parties' logits, ``g_i = (softmax(z_i) - onehot(y_i)) / b`` has exactly one
  negative entry, at the label. With one logit and a sigmoid,
  ``g_i = (sigmoid(z_i) - y_i) / b`` is negative exactly when ``y_i = 1``.
  Needs no auxiliary data.
* :func:`norm_scoring` (Li et al. 2022, binary tasks): with an imbalanced
  binary task the minority ("positive") class gets the larger gradient norms.
  Needs no auxiliary data (optionally the positive rate).
* :func:`direction_scoring` (Li et al. 2022, binary tasks): gradients of
  same-class samples in one batch point the same way (cosine > 0). Needs one
  gradient of a sample it knows is positive (its own auxiliary label), or it
  guesses with the largest-norm gradient.
* :func:`model_completion` (Fu et al. 2022, passive model completion): the
  passive party puts a small head on its own trained bottom model and
  fine-tunes it with a few auxiliary labeled samples (40 by default), then
  labels any sample it holds features for. Needs the auxiliary labels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np

from .._arrays import as_float_array, check_positive_int, check_real
from .._torch import require_torch

__all__ = [
    "LabelInference",
    "choose_auxiliary",
    "direct_label_inference",
    "direction_scoring",
    "model_completion",
    "norm_scoring",
]


@dataclass
class LabelInference:
    """Inferred labels (int, one per sample) and the per-sample attack score
    (higher = more likely the positive class; None where not meaningful)."""

    labels: np.ndarray
    scores: Optional[np.ndarray] = None


def _gradients(grads: Any, name: str = "grads") -> np.ndarray:
    g, _ = as_float_array(grads, name, dtype=np.float64)
    if g.ndim == 1:
        g = g[:, None]
    if g.ndim != 2:
        raise ValueError(f"{name} must be (n_samples, embedding_dim) or (n_samples,), got shape {g.shape}")
    return g


def direct_label_inference(grads: Any) -> LabelInference:
    """Labels from the signs of per-sample logit gradients.

    ``grads`` (n, C) with C >= 2: label = the column of the most negative
    entry. ``grads`` (n,) or (n, 1): label 1 where the gradient is negative.
    Valid when the passive party's output is (its share of) the logits and
    the head is softmax / sigmoid cross-entropy over their sum."""
    g = _gradients(grads)
    if g.shape[1] == 1:
        scores = -g[:, 0]
        return LabelInference((scores > 0).astype(np.int64), scores)
    return LabelInference(np.argmin(g, axis=1).astype(np.int64), -np.min(g, axis=1))


def _two_means_threshold(values: np.ndarray) -> float:
    """Threshold between the two groups of a 1-D 2-means split (exact: scan
    every cut of the sorted values for the least within-group variance)."""
    v = np.sort(values)
    n = v.size
    if n < 2 or v[0] == v[-1]:
        return float(v[-1])
    csum = np.cumsum(v)
    csq = np.cumsum(v * v)
    k = np.arange(1, n)
    left_sse = csq[:-1] - csum[:-1] ** 2 / k
    right_n = n - k
    right_sum = csum[-1] - csum[:-1]
    right_sse = (csq[-1] - csq[:-1]) - right_sum ** 2 / right_n
    cut = int(np.argmin(left_sse + right_sse))
    return float((v[cut] + v[cut + 1]) / 2.0)


def _binary_from_scores(scores: np.ndarray, positive_rate: Optional[float]) -> np.ndarray:
    if positive_rate is None:
        return (scores > _two_means_threshold(scores)).astype(np.int64)
    positive_rate = check_real(positive_rate, "positive_rate", low=0.0, high=1.0)
    n_pos = int(round(positive_rate * scores.size))
    labels = np.zeros(scores.size, dtype=np.int64)
    if n_pos:
        labels[np.argsort(-scores, kind="stable")[:n_pos]] = 1
    return labels


def norm_scoring(grads: Any, *, positive_rate: Optional[float] = None) -> LabelInference:
    """Binary labels from gradient norms: score ``||g_i||``; the high-norm
    group is labeled 1. With ``positive_rate`` (the attacker's prior on the
    positive fraction) the top ``positive_rate * n`` scores are labeled 1;
    without it a 2-means split of the norms decides. Evaluate the scores
    with AUC when the task is balanced (norms then separate the classes
    less)."""
    g = _gradients(grads)
    scores = np.sqrt(np.einsum("ij,ij->i", g, g))
    return LabelInference(_binary_from_scores(scores, positive_rate), scores)


def direction_scoring(grads: Any, *, reference: Optional[int] = None) -> LabelInference:
    """Binary labels from gradient directions within one batch: score
    ``cos(g_i, g_ref)``; label 1 where it is positive.

    ``reference`` is the row of a sample the attacker knows is positive;
    without one the largest-norm gradient serves (under class imbalance it
    most likely belongs to the minority, positive class)."""
    g = _gradients(grads)
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    if reference is None:
        ref = int(np.argmax(norms))
    else:
        if isinstance(reference, bool) or not isinstance(reference, (int, np.integer)):
            raise TypeError(f"reference must be a row index (int), got {type(reference).__name__}")
        ref = int(reference)
        if not 0 <= ref < g.shape[0]:
            raise ValueError(f"reference must be in [0, {g.shape[0]}), got {reference}")
    if norms[ref] == 0.0:
        raise ValueError("the reference gradient is zero: no direction to compare with")
    safe = np.where(norms > 0, norms, 1.0)
    scores = (g @ g[ref]) / (safe * norms[ref])
    scores[norms == 0] = 0.0
    return LabelInference((scores > 0).astype(np.int64), scores)


def choose_auxiliary(y: Any, n_aux: int = 40, *, seed: int = 0) -> np.ndarray:
    """Indices of ``n_aux`` auxiliary labeled samples, at least one per class
    when ``n_aux`` allows (Fu et al. and FedPass use 40), drawn from ``seed``.
    These are the only labels a model-completion attacker gets."""
    labels = np.asarray(y)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError("y must be a non-empty 1-D array of labels")
    n_aux = check_positive_int(n_aux, "n_aux")
    if n_aux > labels.size:
        raise ValueError(f"n_aux ({n_aux}) exceeds the number of samples ({labels.size})")
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    first = [rng.choice(np.flatnonzero(labels == c)) for c in classes][:n_aux]
    rest = np.setdiff1d(np.arange(labels.size), first)
    extra = rng.choice(rest, size=n_aux - len(first), replace=False)
    return np.sort(np.concatenate([np.asarray(first, dtype=np.int64), extra.astype(np.int64)]))


def model_completion(
    bottom_model: Any,
    X_aux: Any,
    y_aux: Any,
    X_target: Any,
    *,
    n_classes: Optional[int] = None,
    hidden: Sequence[int] = (64,),
    epochs: int = 200,
    lr: float = 1e-2,
    weight_decay: float = 1e-4,
    fine_tune_bottom: bool = False,
    seed: int = 0,
) -> LabelInference:
    """Passive model completion: train a head on ``bottom_model`` with the
    auxiliary labeled samples, predict labels of ``X_target``.

    ``bottom_model`` is the attacker's own trained bottom model (a torch
    ``nn.Module``; never modified: it is only evaluated, or deep-copied
    when ``fine_tune_bottom``).
    ``X_aux``/``X_target`` are the attacker's own feature rows. With
    ``fine_tune_bottom`` the copied bottom layers are trained too (Fu et al.'s
    fine-tuning variant); by default only the head learns. Scores are the
    head's class probabilities (n, C)."""
    torch = require_torch("this attack")
    import copy

    Xa, _ = as_float_array(X_aux, "X_aux", dtype=np.float32)
    Xt, _ = as_float_array(X_target, "X_target", dtype=np.float32)
    ya = np.asarray(y_aux)
    if ya.ndim != 1 or ya.shape[0] != Xa.shape[0]:
        raise ValueError(f"y_aux must be 1-D with one label per row of X_aux ({Xa.shape[0]})")
    if not np.issubdtype(ya.dtype, np.integer) or ya.min() < 0:
        raise ValueError("y_aux must hold non-negative integer class labels")
    if Xa.shape[1:] != Xt.shape[1:]:
        raise ValueError(f"X_aux rows have shape {Xa.shape[1:]} but X_target rows {Xt.shape[1:]}")
    n_classes = int(ya.max()) + 1 if n_classes is None else check_positive_int(n_classes, "n_classes", minimum=2)
    if ya.max() >= n_classes:
        raise ValueError(f"y_aux has label {ya.max()} but n_classes is {n_classes}")
    epochs = check_positive_int(epochs, "epochs")
    lr = check_real(lr, "lr", low=0.0, low_inclusive=False)
    if not isinstance(bottom_model, torch.nn.Module):
        raise TypeError(f"bottom_model must be a torch.nn.Module, got {type(bottom_model).__name__}")

    torch.manual_seed(seed)
    xa, xt = torch.from_numpy(Xa), torch.from_numpy(Xt)
    if fine_tune_bottom:
        try:
            bottom = copy.deepcopy(bottom_model)
        except TypeError as exc:  # e.g. a module holding a non-copyable noise generator
            raise TypeError(f"fine_tune_bottom=True needs a copy of bottom_model, which failed: {exc}") from exc
        bottom.train()
        frozen_a = frozen_t = None
    else:
        # The bottom stays fixed: embed once, in eval mode, and leave the caller's module as it was.
        bottom = bottom_model
        was_training = bottom.training
        bottom.eval()
        try:
            with torch.no_grad():
                frozen_a = bottom(xa).reshape(xa.shape[0], -1)
                frozen_t = bottom(xt).reshape(xt.shape[0], -1)
        finally:
            bottom.train(was_training)

    def embed(x, frozen):
        return frozen if frozen is not None else bottom(x).reshape(x.shape[0], -1)

    width = embed(xa, frozen_a).shape[1]
    layers, prev = [], width
    for h in hidden:
        layers += [torch.nn.Linear(prev, int(h)), torch.nn.ReLU()]
        prev = int(h)
    head = torch.nn.Sequential(*layers, torch.nn.Linear(prev, n_classes))
    params = list(head.parameters()) + (list(bottom.parameters()) if fine_tune_bottom else [])
    opt = torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    target = torch.from_numpy(ya.astype(np.int64))
    # Full-batch steps: the auxiliary set is tiny (tens of rows).
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(head(embed(xa, frozen_a)), target)
        loss.backward()
        opt.step()
    head.eval()
    if fine_tune_bottom:
        bottom.eval()
    with torch.no_grad():
        probs = torch.softmax(head(embed(xt, frozen_t)), dim=1).numpy().astype(np.float64)
    return LabelInference(np.argmax(probs, axis=1).astype(np.int64), probs)
