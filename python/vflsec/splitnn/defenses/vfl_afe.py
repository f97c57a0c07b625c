"""VFL-AFE: differential privacy on released embeddings with adaptive feature embeddings.

Passive party, per batch (ALGORITHMS.md section 3; Alg. 1 of the paper)::

    h <- h / max(1, ||h|| / t)                          clip: sensitivity 2t
    +R: h <- h * 2t / (mu_d + 3 sigma_d)                 rescale to the estimated diameter
        (mu_d, sigma_d: mean and std of the batch's pairwise distances; the
        factor is computed on the detached batch and is a constant for autograd;
        ``rescale_shrink=False`` uses max(1, factor), see below)
    h <- h + N(0, sigma_D^2 I)                           Gaussian mechanism (lattice release)
    loss += alpha * KL(P(d) || N(mu_d, sigma_d^2))       +R: keeps the Gaussian fit honest
    loss += beta * contrastive(h, FCM(dL/dh))            +D: distribution adjusting

The noise is calibrated by :func:`vflsec.dp.gaussian_sigma` for sensitivity
``2t``, with the classic formula ``sqrt(2 ln(1.25/delta)) / epsilon`` per unit
the paper uses (``calibration="classic"``; proved for epsilon < 1, and
``gaussian_sigma`` warns beyond) or the exact analytic one
(``calibration="analytic"``), for the lattice release
(:func:`vflsec.kernels.add_gaussian_noise`, via :func:`.base.gaussian_release`)
of one sample's embedding row: ``coordinates = D``, the embedding width, so
``sigma_D`` exceeds ``2t sigma`` by a relative ``2^-20 sqrt(D) sigma`` or so.
Never ``h + noise`` in floating point: that would leak ``h``
through its rounding. ``privacy_spent()`` gives the per-release epsilon and
its composition over the epochs (each sample's embedding is released once per
epoch) from :mod:`vflsec.dp.accounting`, with the lattice release's effective
noise multiplier. With +R the sensitivity bound 2t
holds with the probability ``p2`` of the Gaussian quantile (Thm. 3.6 of the
paper folds that into delta); that caveat is the paper's, not removed here.

Why ``rescale_shrink`` exists: once the bottom model learns to push its
embeddings out to the clip radius (it does: larger embeddings beat the fixed
noise), the batch distances are bounded by 2t but skewed, and ``mu_d + 3
sigma_d`` overestimates their maximum. With Table 2's settings (t = 10, 20
epochs) the estimate ended at 1.3x (MNIST halves) and 1.75x (Adult) the
batch's largest distance, so the paper's rule *shrank* every embedding by a
factor 0.77 / 0.57 while the noise stayed fixed, and +R lost 6.6 / 1.9
accuracy points to vanilla; ``rescale_shrink=False`` won back 5.2 / 1.6 of
them (2 seeds; ``vflsec bench splitnn --sections rescale``, committed in
``benchmarks/results/splitnn_rescale/``). After clipping no factor below 1 is
needed for the 2t bound, so ``rescale_shrink=False`` keeps only the enlarging
half of the rule; the privacy argument is unchanged (a factor of 1 meets the
bound deterministically). The default stays the paper's rule.

KL term: the KL divergence from a distribution to the Gaussian with its own
mean and variance is its negentropy; it is estimated from the standardised
third and fourth moments of the distances (``skew^2 / 12 + excess_kurtosis^2
/ 48``, Hyvarinen's moment approximation), differentiable in torch, on at
most ``kl_max_pairs`` randomly chosen pairs.

Contrastive term (the paper's Eq. 8 as extracted would *shrink* distances
between clusters when minimised; this builds the intended effect): fuzzy
c-means on the returned gradients (C = number of classes) gives each sample a
cluster and a confidence; among samples with confidence >= the threshold,
``beta * (mean_{same} d_jk^2 + mean_{different} max(0, margin - d_jk)^2) / margin^2``
on the clipped / rescaled embeddings *before* noise (the noise is a constant
for autograd and would dominate the distances).

The pairwise-distance statistics and the FCM are vflsec's kernels
(:func:`vflsec.kernels.pairwise_distance_stats`,
:func:`vflsec.kernels.fuzzy_cmeans`), which take CUDA tensors as they are:
embeddings and gradients on a GPU stay there. (The benchmark's baseline with
``torch.cdist`` and a numpy FCM lives in :mod:`vflsec.bench.splitnn_afe`.)

Every parameter is keyword-only (``VFLAFE(t=10.0, epsilon=5.0)``) and stored
as given; :meth:`VFLAFE.check_params` (called by ``setup()``) validates them.
"""
from __future__ import annotations

import hashlib
import math
import time
from collections import defaultdict
from typing import Any, Dict, Optional

import numpy as np

from ..._arrays import check_positive_int, check_real
from .base import BatchInfo, Defense, DefenseContext, check_seed, gaussian_release
from .registry import register_defense

__all__ = ["VFLAFE"]

_EPS = 1e-12


def _derived_seed(seed: int, *parts: Any) -> int:
    text = "/".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(b"vflsec.splitnn/" + text).digest()[:8], "little") >> 1


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


class VFLAFE(Defense):
    """VFL-AFE defense of the passive parties' embeddings.

    Parameters
    ----------
    t : float > 0, embedding norm clip (sensitivity estimate 2t).
    epsilon : float > 0, finite; per-release privacy budget.
    delta : float in (0, 1); the paper fixes 1e-2.
    rescale : bool, +R (adaptive rescaling and the KL regulariser).
    rescale_shrink : bool; True (the paper): the factor ``2t / (mu_d + 3
        sigma_d)`` is used as is, also when below 1; False: ``max(1, factor)``
        (see the module docstring for why).
    adjust : bool, +D (FCM on returned gradients and the contrastive loss).
    kl_weight : alpha >= 0 (used with rescale).
    contrastive_weight : beta >= 0 (used with adjust).
    margin : float > 0 or None (None: 2t, the rescaled batch diameter): the
        distance the contrastive loss pushes different-cluster pairs to.
    confidence_threshold : c in [0, 1]; FCM confidences below it are dropped.
    n_clusters : int >= 2 or None (None: the number of classes).
    fcm_m : fuzzifier m > 1.
    calibration : "classic" (the paper's) or "analytic".
    quantile : None (``mu + 3 sigma`` as the paper) or p2 in (0.5, 1) for
        ``mu + sigma sqrt(2) erfinv(2 p2 - 1)``.
    accountant : "rdp" or "pld" for the composed epsilon.
    seed : None (noise from the OS-entropy CSPRNG: the only setting with a
        privacy guarantee) or an int for reproducible noise (experiments only).

    ``noise_multiplier_`` (set by ``setup()``) is sigma per unit of
    sensitivity for one coordinate. ``variant`` is "vanilla", "R", "D" or
    "full" from the switches. With
    rescale, ``rescale_trace_[party][epoch]`` holds the training batches'
    mean factor (``"factor"``) and mean ratio of the diameter estimate to the
    batch's largest distance (``"estimate_over_max"``; above 1 the estimate
    overshoots).
    """

    name = "vfl_afe"

    def __init__(self, *, t: float = 1.0, epsilon: float = 1.0, delta: float = 1e-2, rescale: bool = True,
                 adjust: bool = True, rescale_shrink: bool = True, kl_weight: float = 0.01,
                 contrastive_weight: float = 0.1,
                 margin: Optional[float] = None, confidence_threshold: float = 0.8, n_clusters: Optional[int] = None,
                 fcm_m: float = 2.0, calibration: str = "classic", quantile: Optional[float] = None,
                 accountant: str = "rdp", kl_max_pairs: int = 4096, fcm_max_iter: int = 100,
                 seed: Optional[int] = None):
        self.t = t
        self.epsilon = epsilon
        self.delta = delta
        self.rescale = rescale
        self.adjust = adjust
        self.rescale_shrink = rescale_shrink
        self.kl_weight = kl_weight
        self.contrastive_weight = contrastive_weight
        self.margin = margin
        self.confidence_threshold = confidence_threshold
        self.n_clusters = n_clusters
        self.fcm_m = fcm_m
        self.calibration = calibration
        self.quantile = quantile
        self.accountant = accountant
        self.kl_max_pairs = kl_max_pairs
        self.fcm_max_iter = fcm_max_iter
        self.seed = seed

    def check_params(self) -> None:
        from ...dp.accounting import ACCOUNTANTS
        from ...dp.gaussian import GAUSSIAN_METHODS

        check_real(self.t, "t", low=0.0, low_inclusive=False)
        check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False)
        check_real(self.delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)
        _check_bool(self.rescale, "rescale")
        _check_bool(self.adjust, "adjust")
        _check_bool(self.rescale_shrink, "rescale_shrink")
        check_real(self.kl_weight, "kl_weight", low=0.0)
        check_real(self.contrastive_weight, "contrastive_weight", low=0.0)
        if self.margin is not None:
            check_real(self.margin, "margin", low=0.0, low_inclusive=False)
        check_real(self.confidence_threshold, "confidence_threshold", low=0.0, high=1.0)
        if self.n_clusters is not None:
            n_clusters = check_positive_int(self.n_clusters, "n_clusters")
            if n_clusters < 2:
                raise ValueError(f"n_clusters must be >= 2, got {n_clusters}")
        check_real(self.fcm_m, "fcm_m", low=1.0, low_inclusive=False)
        if self.calibration not in GAUSSIAN_METHODS:
            raise ValueError(f"calibration must be one of {GAUSSIAN_METHODS}, got {self.calibration!r}")
        if self.quantile is not None:
            check_real(self.quantile, "quantile", low=0.5, low_inclusive=False, high=1.0, high_inclusive=False)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {ACCOUNTANTS}, got {self.accountant!r}")
        check_positive_int(self.kl_max_pairs, "kl_max_pairs", minimum=3)
        check_positive_int(self.fcm_max_iter, "fcm_max_iter")
        check_seed(self.seed)

    # -- bookkeeping -------------------------------------------------------------------
    # Derived from rescale / adjust, so read-only here (Defense declares a plain class attribute).
    @property
    def variant(self) -> str:  # type: ignore[override]
        return {(False, False): "vanilla", (True, False): "R", (False, True): "D", (True, True): "full"}[
            (self.rescale, self.adjust)]

    def release_sigma(self, width: int) -> float:
        """Noise std per coordinate of a release of ``width``-wide embeddings:
        ``gaussian_sigma(epsilon, delta, 2t, coordinates=width)`` (one sample's
        row is what differs between neighbours)."""
        from ...dp import gaussian_sigma

        width = check_positive_int(width, "width")
        sigmas = self.__dict__.setdefault("_sigmas", {})  # per width; emptied by setup()
        sigma = sigmas.get(width)
        if sigma is None:
            sigma = sigmas[width] = gaussian_sigma(self.epsilon, self.delta, 2.0 * self.t,
                                                   method=self.calibration, coordinates=width)
        return sigma

    def noise_multiplier_for(self, width: int) -> float:
        """The lattice release's effective noise multiplier at ``width``
        (:func:`vflsec.dp.lattice.lattice_noise_multiplier`), what the accountant composes."""
        from ...dp.lattice import lattice_noise_multiplier

        return lattice_noise_multiplier(self.release_sigma(width), 2.0 * self.t)

    def _reset_state(self) -> None:
        self._generators: Dict[str, Any] = {}
        self._clean: Dict[str, Any] = {}
        self.timings_: Dict[str, float] = defaultdict(float)
        self.last_scale_: Dict[str, float] = {}
        self.last_kept_fraction_: Dict[str, float] = {}
        self.last_kl_: Dict[str, float] = {}
        self.rescale_trace_: Dict[str, Dict[int, Dict[str, float]]] = {}

    def _trace_rescale(self, party: str, epoch: int, scale: float, estimate_over_max: float) -> None:
        """Running per-epoch means of the rescale factor and of the diameter
        estimate over the batch's true largest distance (>1: overestimate)."""
        row = self.rescale_trace_.setdefault(party, {}).setdefault(
            int(epoch), {"batches": 0, "factor": 0.0, "estimate_over_max": 0.0})
        row["batches"] += 1
        k = row["batches"]
        row["factor"] += (scale - row["factor"]) / k
        row["estimate_over_max"] += (estimate_over_max - row["estimate_over_max"]) / k

    def __getstate__(self):
        # Noise generators cannot (and must not) be copied: every copy starts its own.
        state = dict(self.__dict__)
        state["_generators"] = {}
        state["_clean"] = {}
        return state

    def setup(self, context: DefenseContext) -> None:
        from ...dp import gaussian_sigma

        super().setup(context)
        self._reset_state()
        # sigma per unit of sensitivity (one coordinate): checks the budget and
        # warns here. The release's own std depends on the embedding width (the
        # sampler's per-draw error bound): release_sigma().
        self.noise_multiplier_ = gaussian_sigma(self.epsilon, self.delta, 1.0, method=self.calibration)
        self._sigmas: Dict[int, float] = {}
        for width in context.extra.get("embedding_dims", {}).values():
            self.release_sigma(width)  # calibrated now, in the caller's thread
        if self.adjust:
            c = self.n_clusters if self.n_clusters is not None else context.n_classes
            if c is None:
                raise ValueError("VFL-AFE with adjust=True needs n_clusters for a regression task "
                                 "(there are no classes to count)")
            if c < 2:
                raise ValueError(f"n_clusters must be >= 2, got {c}")
            self.n_clusters_ = int(c)

    def _generator(self, party: str):
        generators = self.__dict__.setdefault("_generators", {})
        gen = generators.get(party)
        if gen is None:
            from ...kernels import NoiseGenerator

            gen = NoiseGenerator() if self.seed is None else NoiseGenerator(_derived_seed(self.seed, "noise", party))
            generators[party] = gen
        return gen

    # -- the mechanism -------------------------------------------------------------------
    def _distance_moments(self, h: Any):
        """(mean, std, max) of the pairwise distances of the rows of ``h`` (on ``h``'s device)."""
        from ...kernels import pairwise_distance_stats

        stats = pairwise_distance_stats(h.detach())
        return stats.mean, stats.std, stats.max

    def _estimate_from(self, mean: float, std: float) -> float:
        if self.quantile is None:
            return mean + 3.0 * std
        from scipy.special import erfinv

        return mean + std * math.sqrt(2.0) * float(erfinv(2.0 * self.quantile - 1.0))

    def max_distance_estimate(self, h: Any) -> float:
        """``mu_d + 3 sigma_d`` (or the ``quantile``) of the rows' pairwise distances."""
        mean, std, _ = self._distance_moments(h)
        return self._estimate_from(mean, std)

    def clip(self, h: Any) -> Any:
        import torch

        norms = torch.linalg.vector_norm(h, dim=1, keepdim=True)
        return h / torch.clamp(norms / self.t, min=1.0)

    def release(self, party: str, h: Any) -> Any:
        """The Gaussian mechanism on the (clipped, rescaled) ``(n, D)`` embeddings
        ``h``: the lattice release with ``release_sigma(D)`` (gradient passes through)."""
        if h.ndim != 2:
            raise ValueError(f"embeddings must be 2-D (batch, width), got shape {tuple(h.shape)}")
        return gaussian_release(h, self.release_sigma(int(h.shape[1])), self._generator(party))

    def transform_embedding(self, party: str, h: Any, batch: BatchInfo) -> Any:
        t0 = time.perf_counter()
        h = self.clip(h)
        t1 = time.perf_counter()
        self.timings_["clip"] += t1 - t0
        if self.rescale and h.shape[0] >= 2:
            mean, std, largest = self._distance_moments(h)
            estimate = self._estimate_from(mean, std)
            scale = 2.0 * self.t / estimate if estimate > 0 else 1.0
            if not self.rescale_shrink:
                scale = max(scale, 1.0)
            self.last_scale_[party] = scale
            if batch.global_step >= 0:  # training batches only, not inference
                self._trace_rescale(party, batch.epoch, scale, estimate / largest if largest > 0 else 1.0)
            h = h * scale
            self.timings_["rescale"] += time.perf_counter() - t1
        self._clean[party] = h
        t2 = time.perf_counter()
        out = self.release(party, h)
        self.timings_["noise"] += time.perf_counter() - t2
        return out

    # -- training losses -------------------------------------------------------------------
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

    # -- reporting -----------------------------------------------------------------------
    def privacy_spent(self):
        """Per-release epsilon (one lattice Gaussian release of a sample's
        embedding row, effective multiplier ``noise_multiplier_for(D)``) and its
        composition over the epochs; the worst over the embedding widths this
        defense was set up for or has released (RuntimeError before any is known)."""
        from ...dp.accounting import composed_gaussian

        sigmas = getattr(self, "_sigmas", {})
        if not sigmas:
            raise RuntimeError("VFL-AFE's release is calibrated per embedding width: call setup() with "
                               "extra['embedding_dims'] (the trainer does) or release a batch first")
        z = min(self.noise_multiplier_for(width) for width in sigmas)
        context = getattr(self, "context_", None)
        epochs = context.epochs if context is not None else 1
        return composed_gaussian(z, epochs, self.delta, accountant=self.accountant, coordinates=max(sigmas))


register_defense("vfl_afe", VFLAFE)
