"""VFL-AFE's training losses: the KL regulariser of +R and the FCM contrastive term of +D.

They shape what the bottom model learns and release nothing: they act on the
clean (clipped, rescaled) embeddings before noise and on the gradients the
passive party received. :class:`AFETrainingLosses` is a mixin of
:class:`vflsec.splitnn.defenses.VFLAFE` (module docstring there: why the
contrastive term is built as it is, and the KL's moment estimate).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional

import numpy as np

from .base import BatchInfo
from .base import derived_seed as _derived_seed

__all__ = ["AFETrainingLosses"]

_EPS = 1e-12


class AFETrainingLosses:
    """The ``regularizer`` (KL) and ``adjust_loss`` (contrastive) hooks of VFL-AFE."""

    # Set by VFLAFE (annotations only: no class attributes).
    t: float
    rescale: bool
    adjust: bool
    kl_weight: float
    contrastive_weight: float
    margin: Optional[float]
    confidence_threshold: float
    fcm_m: float
    kl_max_pairs: int
    fcm_max_iter: int
    seed: Optional[int]
    n_clusters_: int
    timings_: Dict[str, float]
    last_kl_: Dict[str, float]
    last_kept_fraction_: Dict[str, float]
    _clean: Dict[str, Any]

    def kl_to_gaussian(self, h: Any, rng: Optional[np.random.Generator] = None) -> Any:
        """Differentiable moment estimate of KL(P(d) || N(mu_d, sigma_d^2)) for the
        pairwise distances ``d`` of the rows of ``h`` (at most ``kl_max_pairs`` pairs)."""
        import torch

        n = h.shape[0]
        n_pairs = n * (n - 1) // 2
        if n_pairs > self.kl_max_pairs:
            rng = rng if rng is not None else np.random.default_rng()
            i = rng.integers(0, n, size=self.kl_max_pairs)
            j = (i + rng.integers(1, n, size=self.kl_max_pairs)) % n   # j != i
        else:
            i, j = np.triu_indices(n, k=1)
        ti = torch.from_numpy(np.asarray(i, dtype=np.int64)).to(h.device)
        tj = torch.from_numpy(np.asarray(j, dtype=np.int64)).to(h.device)
        d = torch.sqrt(((h[ti] - h[tj]) ** 2).sum(dim=1) + _EPS)
        z = (d - d.mean()) / (d.std(unbiased=False) + _EPS)
        skew = (z ** 3).mean()
        excess_kurtosis = (z ** 4).mean() - 3.0
        return skew ** 2 / 12.0 + excess_kurtosis ** 2 / 48.0

    def regularizer(self, party: str, h_raw: Any, h_sent: Any, batch: BatchInfo) -> Optional[Any]:
        if not self.rescale or self.kl_weight == 0.0:
            return None
        h = self._clean.get(party)
        if h is None or h.shape[0] < 3:
            return None
        t0 = time.perf_counter()
        # Pair sampling for the KL estimate has no privacy role: derived from the step for reproducibility.
        rng = np.random.default_rng(
            _derived_seed(0 if self.seed is None else self.seed, "kl", party, batch.global_step))
        kl = self.kl_to_gaussian(h, rng)
        self.last_kl_[party] = float(kl.detach())
        self.timings_["kl"] += time.perf_counter() - t0
        return self.kl_weight * kl

    def normalised_gradients(self, grad: Any) -> Any:
        """``grad`` in float64 divided by its root-mean-square row norm: a numpy
        array for a CPU tensor, a tensor on the same device for a CUDA one."""
        import torch

        g = grad.detach().to(torch.float64)
        # FCM memberships are invariant to a global scale; normalising makes tol meaningful.
        if g.device.type == "cpu":
            g = g.numpy()
            rms = float(np.sqrt(np.mean(np.sum(g * g, axis=1))))
        else:
            rms = float(torch.sqrt(torch.mean(torch.sum(g * g, dim=1))))
        return g / rms if rms > 0 else g

    def cluster_gradients(self, grad: Any, seed: int):
        """``(labels, confidence)`` from fuzzy c-means on the rows of ``grad``:
        numpy arrays for a CPU ``grad``, tensors on its device for a CUDA one."""
        from ...kernels import fuzzy_cmeans

        g = self.normalised_gradients(grad)
        res = fuzzy_cmeans(g, self.n_clusters_, m=self.fcm_m, max_iter=self.fcm_max_iter, tol=1e-4, seed=seed)
        if isinstance(g, np.ndarray):
            return np.asarray(res.labels), np.asarray(res.confidence)
        return res.labels, res.confidence

    def contrastive_loss(self, h: Any, labels: Any) -> Optional[Any]:
        """``(mean_{same} d^2 + mean_{different} max(0, margin - d)^2) / margin^2`` over the
        rows of ``h`` (unweighted; None when there is no pair)."""
        import torch

        labels = torch.as_tensor(labels, device=h.device)
        if h.shape[0] < 2:
            return None
        d2 = ((h.unsqueeze(1) - h.unsqueeze(0)) ** 2).sum(dim=2)
        off = ~torch.eye(h.shape[0], dtype=torch.bool, device=h.device)
        same = (labels.unsqueeze(1) == labels.unsqueeze(0)) & off
        diff = (labels.unsqueeze(1) != labels.unsqueeze(0))
        margin = self.margin if self.margin is not None else 2.0 * self.t
        loss = None
        if bool(same.any()):
            loss = d2[same].mean()
        if bool(diff.any()):
            push = torch.relu(margin - torch.sqrt(d2[diff] + _EPS)) ** 2
            loss = push.mean() if loss is None else loss + push.mean()
        # In units of margin^2, so that beta means the same whatever the embedding scale t.
        return None if loss is None else loss / (margin * margin)

    def adjust_loss(self, party: str, h_sent: Any, grad: Any, batch: BatchInfo) -> Optional[Any]:
        if not self.adjust or self.contrastive_weight == 0.0:
            return None
        if grad.shape[0] < self.n_clusters_:
            return None
        t0 = time.perf_counter()
        labels, confidence = self.cluster_gradients(
            grad, _derived_seed(0 if self.seed is None else self.seed, "fcm", party, batch.global_step))
        self.timings_["fcm"] += time.perf_counter() - t0
        import torch

        # numpy (CPU) or device tensors (CUDA): the same selection on either.
        keep = torch.as_tensor(confidence) >= self.confidence_threshold
        self.last_kept_fraction_[party] = float(keep.to(torch.float64).mean())
        loss = None
        if int(keep.sum()) >= 2:
            h = self._clean.get(party, h_sent)
            kept = torch.nonzero(keep).flatten()
            loss = self.contrastive_loss(h[kept.to(h.device)], torch.as_tensor(labels)[kept.to(keep.device)])
        self.timings_["adjust"] += time.perf_counter() - t0
        return None if loss is None else self.contrastive_weight * loss

