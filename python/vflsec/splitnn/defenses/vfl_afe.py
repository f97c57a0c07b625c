"""VFL-AFE: differential privacy on released embeddings with adaptive feature embeddings.

Passive party, per batch of n rows (ALGORITHMS.md section 3; Alg. 1 of the paper)::

    h <- h / max(1, ||h|| / t)                          clip: one row moves by at most 2t
    +R: rescale to the estimated batch diameter (see below; "dp" by default)
    h <- h + N(0, sigma_D^2 I)                           Gaussian mechanism (lattice release)
    loss += alpha * KL(P(d) || N(mu_d, sigma_d^2))       +R: keeps the Gaussian fit honest
    loss += beta * contrastive(h, FCM(dL/dh))            +D: distribution adjusting

Every release goes through a :class:`vflsec.dp.GaussianMechanism`
(``mechanism_for(width, rows)``), lattice corrections included: the noise draws
that differ between neighbours are one row's ``D`` coordinates (D the
embedding width; the other rows are the same in both worlds). The release is
the lattice Gaussian (:func:`vflsec.kernels.add_gaussian_noise`, via
:func:`.base.gaussian_release`), never ``h + noise`` in floating point: that
would leak ``h`` through its rounding. Clipping is done in float64 to
``(1 - 2^-20) t`` so that rounding (the norm, the cast back to float32) cannot
carry a row past ``t``: the sensitivity the mechanism states is one the code
enforces.

What ``epsilon`` means. ``epsilon`` is the budget of the **whole training
run** (as DP-SGD's, and Opacus' ``target_epsilon``): every row is released
once per epoch, so each release's noise is the smallest whose ``epochs``
releases compose, by the defense's ``accountant`` (PLD by default, read off
the exact Gaussian curve), to at most (``epsilon``, ``delta``)
(:func:`vflsec.dp.accounting.noise_multiplier_for_epsilon`; a relative
tolerance of 1e-6, then each sigma rounded up to the release's grid, which
costs at most 0.4 %; a one-epoch run's single release is calibrated exactly,
as below). The paper's meaning -- a budget per release, composed
to more over the epochs -- is the explicit opt-in ``epsilon_per_release``:
each release is then calibrated to (``epsilon_per_release``, ``delta``) with
``calibration`` "analytic" (the default: exact, every epsilon) or "classic"
(the paper's ``sqrt(2 ln(1.25/delta)) / epsilon`` per unit; proved for
epsilon < 1 only, so beyond that its sigma is checked by exact accounting and
refused where it misses the target, e.g. epsilon 20 at delta 1e-2). Give one
of the two (neither: ``epsilon`` = 1). ``delta`` None (the default) is
:func:`vflsec.dp.default_delta` of the training rows, ``min(1e-5, 1/(10 n))``;
an explicit delta of at least ``1/n`` is kept with a
:class:`~vflsec.dp.PrivacyWarning` (:func:`vflsec.dp.check_delta_for_rows`).

Neighbours. ``neighbours="replace_one"`` (the default): VFL rows are fixed by
PSI, so a neighbouring dataset replaces one row's features; its clipped
embedding moves anywhere in the t-ball: distance ``2t``.
``neighbours="add_remove"`` (opt-in) is read as *zero-out*: the absent row's
embedding is the zero vector and the batch keeps its n rows (a per-row release
has no other meaning for a missing row). Without +R that halves the
sensitivity to ``t``; for +R "dp" see below.

+R, the paper's rule and why it has no guarantee. The paper rescales the
clipped batch by ``2t / (mu_d + 3 sigma_d)``, ``mu_d, sigma_d`` the mean and
std of the batch's pairwise distances. That factor is computed from the batch
it releases, so one changed row moves *every* row's release (an audit of that
rule measured a realized distance of 9x the calibrated ``2t`` and epsilon >=
6.51 for a claimed 5). It is kept as ``rescale_estimate="batch"`` to reproduce
the paper's Table 2, and its ``privacy_spent()`` reports **no** guarantee
(``epsilon=None``, caveat "the rescale factor reads the batch it releases").

+R "dp" (``rescale_estimate="dp"``, the default): the factor comes from DP
estimates whose cost is accounted, in one three-part mechanism
(``vfl_afe_rescale``) per batch of ``n >= 2`` rows:

1. *centre*: ``c~ = mean(h) + noise``; replacing one clipped row moves the
   mean by at most ``2t / n`` (D coordinates);
2. *stats*: ``u~ = (mean_d n / (4t), mean_d2 n / (8t^2)) + noise`` with
   ``mean_d`` / ``mean_d2`` the mean distance / squared distance over the
   ``n(n-1)/2`` pairs of the clipped batch. Replacing one row changes its
   ``n - 1`` pairs, each ``d`` in ``[0, 2t]`` (``d^2`` in ``[0, 4t^2]``), so
   each coordinate moves by at most 1: L2 sensitivity ``sqrt(2)`` (2 coordinates);
3. post-processing: ``mean_d = u0 4t / n`` and ``mean_d2 = u1 8t^2 / n``
   (clamped to their ranges ``[0, 2t]``, ``[0, 4t^2]``), ``std_d =
   sqrt(max(mean_d2 - mean_d^2, 0))``, ``estimate = mean_d + 3 std_d`` (or the
   ``quantile`` rule), floored at ``2t 10^-6``, ``s = 2t / estimate``
   (``rescale_shrink=False``: ``max(1, s)``);
4. *embedding*: every row becomes ``c~ + clip(s (h - c~), t)``: within ``t`` of
   the public centre whatever ``s`` is, and the rows other than the changed
   one are the same in both worlds given ``c~`` and ``s``, so the batch moves
   by at most ``2t`` (D coordinates). What is released is the deviation
   ``clip(s (h - c~), t)`` plus noise, then ``c~`` is added back
   (post-processing of released values).

``rescale_budget`` (default 0.1) is the share of the release's budget, in
Gaussian DP's ``mu^2``, that the centre and the statistics take (half each);
the embeddings get the rest, so each release as a whole is (``epsilon``,
``delta``)-DP. Under ``add_remove`` (zero-out) the centre's sensitivity is
``t / n``, the statistics' ``sqrt(13) / 4`` (a pair distance moves by at most
``t``, so ``u0`` by 1/2; a squared one by at most ``t (2t + t) = 3t^2``, so
``u1`` by 3/4), and the embeddings' stays ``2t``: the zero row, recentred
and clipped, can land anywhere in the t-ball around ``c~``. ``c~`` and ``s``
are constants for autograd. A batch of one row has no pair: it is released
without +R by the one-part ``vfl_afe_embedding`` mechanism (sensitivity
``2t``, ``t`` under add/remove) calibrated to the same epsilon, as every batch
is without +R.

``privacy_spent()`` gives the per-release epsilon and its composition over the
epochs (each row is released once per epoch: ``epochs`` releases of the
worst mechanism this defense was set up for or trained with, over embedding
widths and batch sizes), from the same mechanisms that calibrated the noise.
Its caveat: the guarantee is per release, for the bottom model of that step;
the bottom model's weights also depend on the data and are not covered.

Releases at prediction time. A batch released with ``BatchInfo.global_step <
0`` is an inference release (the estimator's ``inference="defended"`` or
``embed(defended=True)``, the runtime's held-out evaluation); a pass
numbers its batches from ``step`` 0. Each pass is one more release of every
row it holds (counted for every individual: the rows predicted may be training
rows), so ``privacy_spent()`` composes ``epochs`` training releases plus one
per pass (``inference_passes_[party]``, the most of any party) of the worst
mechanism. The default prediction (``inference="raw"``) releases nothing and
adds nothing.

Why ``rescale_shrink`` exists: once the bottom model learns to push its
embeddings out to the clip radius (it does: larger embeddings beat the fixed
noise), the batch distances are bounded by 2t but skewed, and ``mu_d + 3
sigma_d`` overestimates their maximum. With Table 2's settings (t = 10, 20
epochs) the estimate ended at 1.3x (MNIST halves) and 1.75x (Adult) the
batch's largest distance, so the paper's rule *shrank* every embedding by a
factor 0.77 / 0.57 while the noise stayed fixed, and +R lost 6.6 / 1.9
accuracy points to vanilla; ``rescale_shrink=False`` won back 5.2 / 1.6 of
them (2 seeds, measured with the paper's "batch" rule; ``vflsec bench splitnn
--sections rescale``, committed in ``benchmarks/results/splitnn_rescale/``).
``rescale_shrink=False`` keeps only the enlarging half of the rule; it does
not change the privacy argument of either estimate. The default
(True) stays the paper's.

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
``torch.cdist`` and a numpy FCM lives in :mod:`vflsec.bench.experiments.splitnn.baseline`.)

Every parameter is keyword-only (``VFLAFE(t=10.0, epsilon=5.0)``) and stored
as given; :meth:`VFLAFE.check_params` (called by ``setup()``) validates them.
"""
from __future__ import annotations

import math
import time
from collections import defaultdict
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..._arrays import check_positive_int, check_real
from ...dp.accountant import ACCOUNTANTS, DEFAULT_NEIGHBOURS, PrivacySpent, check_neighbours
from ...dp.mechanisms import GaussianMechanism, GaussianPart
from .afe_losses import AFETrainingLosses
from .base import BatchInfo, Defense, DefenseContext, check_seed, gaussian_release
from .base import derived_seed as _derived_seed
from .registry import register_defense

__all__ = ["BATCH_RESCALE_CAVEAT", "DEFAULT_EPSILON", "PER_RELEASE_CAVEAT", "RESCALE_ESTIMATES", "VFLAFE"]

DEFAULT_EPSILON = 1.0
"""The whole run's epsilon when neither ``epsilon`` nor ``epsilon_per_release`` is given."""

RESCALE_ESTIMATES = ("dp", "batch")
BATCH_RESCALE_CAVEAT = "the rescale factor reads the batch it releases"
PER_RELEASE_CAVEAT = ("per release, for the bottom model of that step; the bottom model's weights also depend on "
                      "the data and are not covered")
# Rows are clipped to (1 - 2^-20) t in float64: the float64 norm and the cast back to
# float32 (relative error <= 2^-24) cannot then carry a row past t.
_CLIP_MARGIN = 2.0 ** -20
# Smallest diameter estimate, relative to 2t: a noisy estimate at or below 0 still gives a finite factor.
_ESTIMATE_FLOOR = 1e-6
# Relative width of the noise-multiplier search for a whole-run epsilon (far below the grid's 0.4 %).
_CALIBRATION_TOLERANCE = 1e-6


def _check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _embedding_part(mechanism: GaussianMechanism) -> str:
    """The label of the part that releases the embeddings."""
    return "embedding" if mechanism.name == "vfl_afe_rescale" else "release"


class VFLAFE(AFETrainingLosses, Defense):
    """VFL-AFE defense of the passive parties' embeddings.

    Parameters
    ----------
    t : float > 0, embedding norm clip.
    epsilon : float > 0 or None; the privacy budget of the whole training run
        (``epochs`` releases of every row, composed by ``accountant``). None:
        1.0, unless ``epsilon_per_release`` is given.
    delta : float in (0, 1) or None (default: ``min(1e-5, 1/(10 n))`` for n
        training rows, :func:`vflsec.dp.default_delta`; the paper fixes 1e-2).
    epsilon_per_release : float > 0 or None; the paper's meaning, opt-in:
        the budget of one release (a batch), composed to more over the
        epochs (``privacy_spent().epsilon``). Not together with ``epsilon``.
    rescale : bool, +R (adaptive rescaling and the KL regulariser).
    rescale_estimate : "dp" (default: the factor from a DP estimate of the
        diameter, accounted; see the module docstring) or "batch" (the
        paper's exact rule: the factor reads the batch it releases, so
        ``privacy_spent()`` reports no guarantee; for reproducing Table 2).
    rescale_budget : share in (0, 1) of each release's budget (in Gaussian
        DP's mu^2) spent on the noisy centre and distance statistics of "dp".
    rescale_shrink : bool; True (the paper): the factor ``2t / estimate`` is
        used as is, also when below 1; False: ``max(1, factor)``.
    adjust : bool, +D (FCM on returned gradients and the contrastive loss).
    kl_weight : alpha >= 0 (used with rescale).
    contrastive_weight : beta >= 0 (used with adjust).
    margin : float > 0 or None (None: 2t, the rescaled batch diameter): the
        distance the contrastive loss pushes different-cluster pairs to.
    confidence_threshold : c in [0, 1]; FCM confidences below it are dropped.
    n_clusters : int >= 2 or None (None: the number of classes).
    fcm_m : fuzzifier m > 1.
    calibration : "analytic" (default; exact) or "classic" (the paper's per-release
        formula: with ``epsilon_per_release`` only, and refused where its sigma
        does not give that epsilon).
    quantile : None (``mu + 3 sigma`` as the paper) or p2 in (0.5, 1) for
        ``mu + sigma sqrt(2) erfinv(2 p2 - 1)``.
    neighbours : "replace_one" (default; sensitivity 2t) or "add_remove"
        (zero-out; see the module docstring for each part's sensitivity).
    accountant : "pld" (default) or "rdp" for the composed epsilon.
    seed : None (noise from the OS-entropy CSPRNG: the only setting with a
        privacy guarantee) or an int for reproducible noise (experiments only).

    ``mechanism_for(width, rows)`` is the :class:`vflsec.dp.GaussianMechanism`
    a batch of ``rows`` embeddings of ``width`` is released with (the
    guarantee it claims included). Set by ``setup()``: ``delta_`` (the delta in
    force), ``epsilon_`` (the whole run's epsilon; None with
    ``epsilon_per_release``), ``noise_multiplier_`` (sigma per unit of
    sensitivity for one coordinate of the one-part release);
    ``inference_passes_[party]`` counts the prediction passes released
    (module docstring). ``variant`` is "vanilla", "R", "D" or "full" from
    the switches.
    With rescale, ``last_scale_[party]`` is the last factor,
    ``last_release_[party]`` the last "dp" release's parts (``"centre"``,
    ``"stats"``, the released deviations ``"embedding"``; the output is
    ``embedding + centre``) with the ``"estimate"`` and ``"scale"`` derived
    from them, and ``rescale_trace_[party][epoch]`` holds the
    training batches' mean factor (``"factor"``) and mean ratio of the
    diameter estimate to the batch's largest distance
    (``"estimate_over_max"``; above 1 the estimate overshoots).
    """

    name = "vfl_afe"

    def __init__(self, *, t: float = 1.0, epsilon: Optional[float] = None, delta: Optional[float] = None,
                 epsilon_per_release: Optional[float] = None, rescale: bool = True,
                 adjust: bool = True, rescale_shrink: bool = True, rescale_estimate: str = "dp",
                 rescale_budget: float = 0.1, kl_weight: float = 0.01, contrastive_weight: float = 0.1,
                 margin: Optional[float] = None, confidence_threshold: float = 0.8, n_clusters: Optional[int] = None,
                 fcm_m: float = 2.0, calibration: str = "analytic", quantile: Optional[float] = None,
                 neighbours: str = DEFAULT_NEIGHBOURS, accountant: str = "pld", kl_max_pairs: int = 4096,
                 fcm_max_iter: int = 100, seed: Optional[int] = None):
        self.t = t
        self.epsilon = epsilon
        self.delta = delta
        self.epsilon_per_release = epsilon_per_release
        self.rescale = rescale
        self.adjust = adjust
        self.rescale_shrink = rescale_shrink
        self.rescale_estimate = rescale_estimate
        self.rescale_budget = rescale_budget
        self.kl_weight = kl_weight
        self.contrastive_weight = contrastive_weight
        self.margin = margin
        self.confidence_threshold = confidence_threshold
        self.n_clusters = n_clusters
        self.fcm_m = fcm_m
        self.calibration = calibration
        self.quantile = quantile
        self.neighbours = neighbours
        self.accountant = accountant
        self.kl_max_pairs = kl_max_pairs
        self.fcm_max_iter = fcm_max_iter
        self.seed = seed

    def check_params(self) -> None:
        from ...dp.gaussian import GAUSSIAN_METHODS

        check_real(self.t, "t", low=0.0, low_inclusive=False)
        if self.epsilon is not None:
            check_real(self.epsilon, "epsilon", low=0.0, low_inclusive=False)
        if self.epsilon_per_release is not None:
            check_real(self.epsilon_per_release, "epsilon_per_release", low=0.0, low_inclusive=False)
            if self.epsilon is not None:
                raise ValueError("give epsilon (the whole training run) or epsilon_per_release (one release, the "
                                 "paper's meaning), not both")
        if self.delta is not None:
            check_real(self.delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)
        _check_bool(self.rescale, "rescale")
        _check_bool(self.adjust, "adjust")
        _check_bool(self.rescale_shrink, "rescale_shrink")
        if self.rescale_estimate not in RESCALE_ESTIMATES:
            raise ValueError(f"rescale_estimate must be one of {RESCALE_ESTIMATES}, got {self.rescale_estimate!r}")
        check_real(self.rescale_budget, "rescale_budget", low=0.0, low_inclusive=False, high=1.0,
                   high_inclusive=False)
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
        if self.calibration == "classic" and self.epsilon_per_release is None:
            raise ValueError("calibration='classic' is the paper's formula for one release: use it with "
                             "epsilon_per_release=..., or calibration='analytic' (the default) with epsilon, the "
                             "whole run's budget")
        if self.quantile is not None:
            check_real(self.quantile, "quantile", low=0.5, low_inclusive=False, high=1.0, high_inclusive=False)
        check_neighbours(self.neighbours)
        if self.accountant not in ACCOUNTANTS:
            raise ValueError(f"accountant must be one of {tuple(ACCOUNTANTS)}, got {self.accountant!r}")
        check_positive_int(self.kl_max_pairs, "kl_max_pairs", minimum=3)
        check_positive_int(self.fcm_max_iter, "fcm_max_iter")
        check_seed(self.seed)

    # -- bookkeeping -------------------------------------------------------------------
    # Derived from rescale / adjust, so read-only here (Defense declares a plain class attribute).
    @property
    def variant(self) -> str:  # type: ignore[override]
        return {(False, False): "vanilla", (True, False): "R", (False, True): "D", (True, True): "full"}[
            (self.rescale, self.adjust)]

    @property
    def _dp_rescale(self) -> bool:
        return bool(self.rescale) and self.rescale_estimate == "dp"

    def part_sensitivities(self, rows: int) -> Dict[str, float]:
        """L2 sensitivity of each part of a +R "dp" release of ``rows`` rows
        under ``neighbours`` (module docstring), and of the one-part release
        (``"release"``)."""
        rows = check_positive_int(rows, "rows")
        t = float(self.t)
        if self.neighbours == "replace_one":
            return {"centre": 2.0 * t / rows, "stats": math.sqrt(2.0), "embedding": 2.0 * t, "release": 2.0 * t}
        return {"centre": t / rows, "stats": math.sqrt(13.0) / 4.0, "embedding": 2.0 * t, "release": t}

    def mechanism_key(self, width: int, rows: Optional[int] = None) -> Tuple[int, Optional[int]]:
        """``(width, rows)`` for a +R "dp" batch of two rows or more (its
        sensitivities depend on the rows), else ``(width, None)``: which
        mechanism of :meth:`mechanism_for` such a batch is released with."""
        width = check_positive_int(width, "width")
        if rows is not None:
            rows = check_positive_int(rows, "rows")
        rescaled = self._dp_rescale and rows is not None and rows >= 2
        return width, rows if rescaled else None

    def mechanism_for(self, width: int, rows: Optional[int] = None) -> GaussianMechanism:
        """The mechanism a batch of ``rows`` embeddings of ``width`` is released
        with: ``vfl_afe_rescale`` (centre, stats, embedding) for +R "dp" and
        ``rows >= 2``, else the one-part ``vfl_afe_embedding`` (``rows`` None:
        that one). Calibrated once per (width, rows): ``epochs`` releases
        compose to (epsilon, delta) (or one release is (epsilon_per_release,
        delta)-DP). RuntimeError before ``setup()``, unless ``epsilon_per_release``
        and ``delta`` are both given (a release's noise then does not depend on the run)."""
        key = self.mechanism_key(width, rows)
        cache = self.__dict__.setdefault("_mechanisms", {})  # emptied by setup()
        mechanism = cache.get(key)
        if mechanism is None:
            mechanism = cache[key] = self._calibrated(*key)
        return mechanism

    def _part_specs(self, width: int, rows: Optional[int]) -> Tuple[str, List[Tuple[str, float, int, float]]]:
        """The mechanism's name and its ``(label, sensitivity, coordinates, share)`` parts."""
        sens = self.part_sensitivities(rows if rows is not None else 1)
        if rows is None:
            return "vfl_afe_embedding", [("release", sens["release"], width, 1.0)]
        share = float(self.rescale_budget)
        return "vfl_afe_rescale", [("centre", sens["centre"], width, share / 2.0),
                                   ("stats", sens["stats"], 2, share / 2.0),
                                   ("embedding", sens["embedding"], width, 1.0 - share)]

    def _calibrated(self, width: int, rows: Optional[int]) -> GaussianMechanism:
        """The mechanism of ``mechanism_key`` ``(width, rows)``, calibrated (module docstring)."""
        return self._calibrate(*self._part_specs(width, rows))

    def _calibrate(self, name: str, specs: List[Tuple[str, float, int, float]]) -> GaussianMechanism:
        """Mechanism ``name`` with parts ``specs`` (``(label, sensitivity,
        coordinates, share)``): ``epochs`` releases compose to (``epsilon_``,
        ``delta_``), or one release is (``epsilon_per_release``, ``delta_``)-DP.
        Before ``setup()`` only the latter, with an explicit ``delta`` (it does
        not depend on the run)."""
        if hasattr(self, "delta_"):
            delta, epsilon = float(self.delta_), self.epsilon_
        elif self.epsilon_per_release is not None and self.delta is not None:
            self.check_params()
            delta, epsilon = float(self.delta), None
        else:
            raise RuntimeError("VFL-AFE's noise is calibrated to the run (its epochs and training rows): call "
                               "setup(context) first (the trainer does); only epsilon_per_release with an explicit "
                               "delta is calibrated without it")
        if epsilon is None or self.planned_releases() == 1:
            # One release at (epsilon_per_release, delta) -- the paper's meaning -- or a one-epoch
            # run, whose budget is its one release's: the exact (analytic) calibration of a release.
            per_release = epsilon if epsilon is not None else check_real(self.epsilon_per_release,
                                                                         "epsilon_per_release")
            try:
                if len(specs) == 1:
                    return GaussianMechanism.calibrated(
                        name, epsilon=per_release, delta=delta, sensitivity=specs[0][1], coordinates=specs[0][2],
                        method=self.calibration, neighbours=self.neighbours)
                return GaussianMechanism.calibrated(name, epsilon=per_release, delta=delta,
                                                    method=self.calibration, neighbours=self.neighbours, parts=specs)
            except ValueError as exc:  # vflsec.dp names its own parameter; VFLAFE's is `calibration`
                raise ValueError(str(exc).replace("use method='analytic'", "use calibration='analytic'")) from None
        from ...dp.accounting import noise_multiplier_for_epsilon
        from ...dp.lattice import sigma_for_multiplier

        draws = sum(coordinates for _, _, coordinates, _ in specs)
        # The whole release's multiplier (1 / mu, all parts) whose `epochs` releases compose to epsilon.
        z = noise_multiplier_for_epsilon(epsilon, delta, count=self.planned_releases(),
                                         accountant=self.accountant, tolerance=_CALIBRATION_TOLERANCE,
                                         coordinates=draws, neighbours=self.neighbours)
        # Part i gets share_i of mu^2; each sigma rounded up to the grid, so the release's mu stays <= 1 / z.
        parts = tuple(GaussianPart(label, float(sensitivity), sigma_for_multiplier(z / math.sqrt(share), sensitivity),
                                   int(coordinates)) for label, sensitivity, coordinates, share in specs)
        # No `target`: that is one release's (epsilon, delta); privacy_spent() passes delta_.
        return GaussianMechanism(name, parts, self.neighbours)

    def release_sigma(self, width: int, rows: Optional[int] = None) -> float:
        """Noise std per coordinate of the released embeddings of a batch of
        ``rows`` (None: the one-part release) rows of ``width``."""
        mechanism = self.mechanism_for(width, rows)
        return mechanism.part(_embedding_part(mechanism)).sigma

    def noise_multiplier_for(self, width: int, rows: Optional[int] = None) -> float:
        """The whole release's noise multiplier (``1 / mu``, all parts) at
        (``width``, ``rows``): what the accountant composes."""
        return self.mechanism_for(width, rows).noise_multiplier

    def _reset_state(self) -> None:
        self._generators: Dict[str, Any] = {}
        self._clean: Dict[str, Any] = {}
        self._mechanisms: Dict[Tuple[int, Optional[int]], GaussianMechanism] = {}
        self._spent_cache: Dict[Tuple[Any, ...], PrivacySpent] = {}
        self.timings_: Dict[str, float] = defaultdict(float)
        self.last_scale_: Dict[str, float] = {}
        self.last_release_: Dict[str, Dict[str, Any]] = {}
        self.last_kept_fraction_: Dict[str, float] = {}
        self.last_kl_: Dict[str, float] = {}
        self.rescale_trace_: Dict[str, Dict[int, Dict[str, float]]] = {}
        self.inference_passes_: Dict[str, int] = {}

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
        from ...dp.delta_rule import check_delta_for_rows, default_delta

        super().setup(context)
        self._reset_state()
        n, b = check_positive_int(context.n_samples, "n_samples"), int(context.batch_size)
        check_positive_int(context.epochs, "epochs")
        self.delta_ = default_delta(n) if self.delta is None else check_delta_for_rows(self.delta, n, who="delta")
        self.epsilon_: Optional[float] = None if self.epsilon_per_release is not None else float(
            DEFAULT_EPSILON if self.epsilon is None else self.epsilon)
        # sigma per unit of sensitivity (one coordinate) of the one-part release:
        # checks the budget here. The releases' own sigmas depend on the
        # embedding width and the batch rows: mechanism_for().
        self.noise_multiplier_ = self._calibrate("vfl_afe_embedding", [("release", 1.0, 1, 1.0)]).sigma
        # The training batches' row counts: full batches and the last one.
        batch_rows: List[Optional[int]] = [None]
        if n > 0 and b > 0:
            batch_rows = [r for r in sorted({min(b, n), n % b}) if r > 0]
        for width in context.extra.get("embedding_dims", {}).values():
            for rows in batch_rows:
                self.mechanism_for(width, rows)  # calibrated now, in the caller's thread
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

    # -- the transformation --------------------------------------------------------------
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
        """Rows of ``h`` scaled to norm at most ``t`` (exactly: to ``(1 - 2^-20) t``
        in float64, then cast back to ``h``'s dtype); rows inside are unchanged."""
        import torch

        x = h.to(torch.float64)
        norms = torch.linalg.vector_norm(x, dim=1, keepdim=True)
        radius = float(self.t) * (1.0 - _CLIP_MARGIN)
        return (x / torch.clamp(norms / radius, min=1.0)).to(h.dtype)

    @staticmethod
    def _check_embeddings(h: Any) -> None:
        import torch

        if not isinstance(h, torch.Tensor):
            raise TypeError(f"embeddings must be a torch tensor, got {type(h).__name__}")
        if h.ndim != 2:
            raise ValueError(f"embeddings must be 2-D (batch, width), got shape {tuple(h.shape)}")
        if h.shape[0] == 0 or h.shape[1] == 0:
            raise ValueError(f"embeddings must not be empty, got shape {tuple(h.shape)}")
        if not h.is_floating_point():
            raise TypeError(f"embeddings must be floating point, got {h.dtype}")
        if not bool(torch.isfinite(h.detach()).all()):
            raise ValueError("embeddings contain NaN or infinite values: the clip cannot bound them")

    def rescale_queries(self, h: Any) -> Tuple[Any, np.ndarray, float]:
        """The clean queries of +R "dp" on the clipped batch ``h`` (n >= 2 rows):
        ``(centre, stats, largest)``: the rows' mean (float64 tensor on ``h``'s
        device), ``(mean_d n / (4t), mean_d2 n / (8t^2))`` (float64 array;
        each coordinate moves by at most 1 when one row is replaced) and the
        largest pairwise distance (a local diagnostic, never released)."""
        import torch

        x = h.detach().to(torch.float64)
        rows = int(x.shape[0])
        if rows < 2:
            raise ValueError(f"the rescale statistics need at least 2 rows, got {rows}")
        mean, std, largest = self._distance_moments(x)
        t = float(self.t)
        mean_sq = std * std + mean * mean  # mean of the squared distances
        stats = np.array([mean * rows / (4.0 * t), mean_sq * rows / (8.0 * t * t)], dtype=np.float64)
        return x.mean(dim=0), stats, float(largest)

    def rescale_factor(self, stats: Any, rows: int) -> Tuple[float, float]:
        """``(s, estimate)`` from released statistics ``stats`` of a batch of
        ``rows`` (post-processing: module docstring, step 3)."""
        t = float(self.t)
        u = np.asarray(stats, dtype=np.float64)
        mean = min(max(float(u[0]) * 4.0 * t / rows, 0.0), 2.0 * t)
        mean_sq = min(max(float(u[1]) * 8.0 * t * t / rows, 0.0), 4.0 * t * t)
        std = math.sqrt(max(mean_sq - mean * mean, 0.0))
        estimate = max(self._estimate_from(mean, std), _ESTIMATE_FLOOR * 2.0 * t)
        scale = 2.0 * t / estimate
        if not self.rescale_shrink:
            scale = max(scale, 1.0)
        return scale, estimate

    def recentre(self, h: Any, centre: Any, scale: float) -> Any:
        """``clip(scale (h - centre), t)`` per row (``h``'s dtype): each row's
        deviation from the public centre, within ``t`` of it whatever ``scale``
        is; ``centre`` and ``scale`` are constants for autograd."""
        import torch

        c = torch.as_tensor(centre, dtype=torch.float64, device=h.device).detach()
        return self.clip((h.to(torch.float64) - c) * float(scale)).to(h.dtype)

    def release(self, party: str, h: Any) -> Any:
        """The Gaussian release of the (clipped, rescaled / recentred) ``(n, D)``
        rows ``h``: the embedding part of ``mechanism_for(D, n)`` (gradient passes through)."""
        if h.ndim != 2:
            raise ValueError(f"embeddings must be 2-D (batch, width), got shape {tuple(h.shape)}")
        mechanism = self.mechanism_for(int(h.shape[1]), int(h.shape[0]))
        return gaussian_release(h, mechanism, self._generator(party), part=_embedding_part(mechanism))

    def transform_embedding(self, party: str, h: Any, batch: BatchInfo) -> Any:
        self._check_embeddings(h)
        if batch.global_step < 0 and batch.step == 0:
            # A defended inference pass starts: one more release of each row it covers.
            passes = self.__dict__.setdefault("inference_passes_", {})
            passes[party] = passes.get(party, 0) + 1
        t0 = time.perf_counter()
        h = self.clip(h)
        t1 = time.perf_counter()
        self.timings_["clip"] += t1 - t0
        if self.rescale and h.shape[0] >= 2:
            if self.rescale_estimate == "dp":
                return self._dp_rescaled_release(party, h, batch)
            h = self._batch_rescale(party, h, batch)
            self.timings_["rescale"] += time.perf_counter() - t1
        self._clean[party] = h
        t2 = time.perf_counter()
        out = self.release(party, h)
        self.timings_["noise"] += time.perf_counter() - t2
        return out

    def _batch_rescale(self, party: str, h: Any, batch: BatchInfo) -> Any:
        """The paper's rule: ``h * 2t / (mu_d + 3 sigma_d)`` of this very batch (no guarantee)."""
        t0 = time.perf_counter()
        mean, std, largest = self._distance_moments(h)
        self.timings_["stats"] += time.perf_counter() - t0
        estimate = self._estimate_from(mean, std)
        scale = 2.0 * self.t / estimate if estimate > 0 else 1.0
        if not self.rescale_shrink:
            scale = max(scale, 1.0)
        self.last_scale_[party] = scale
        if batch.global_step >= 0:  # training batches only, not inference
            self._trace_rescale(party, batch.epoch, scale, estimate / largest if largest > 0 else 1.0)
        return h * scale

    def _dp_rescaled_release(self, party: str, h: Any, batch: BatchInfo) -> Any:
        """+R "dp" on the clipped batch ``h``: noisy centre and statistics, the
        factor from them, the recentred rows released (module docstring)."""
        t0 = time.perf_counter()
        rows, width = int(h.shape[0]), int(h.shape[1])
        mechanism = self.mechanism_for(width, rows)
        generator = self._generator(party)
        centre, stats, largest = self.rescale_queries(h)
        t1 = time.perf_counter()
        self.timings_["stats"] += t1 - t0
        noisy_centre = mechanism.release(centre, generator=generator, part="centre")
        noisy_stats = np.asarray(mechanism.release(stats, generator=generator, part="stats"), dtype=np.float64)
        scale, estimate = self.rescale_factor(noisy_stats, rows)
        deviation = self.recentre(h, noisy_centre, scale)
        self.last_scale_[party] = scale
        self.last_release_[party] = {"centre": noisy_centre, "stats": noisy_stats, "estimate": estimate,
                                     "scale": scale}
        if batch.global_step >= 0:  # training batches only, not inference
            self._trace_rescale(party, batch.epoch, scale, estimate / largest if largest > 0 else 1.0)
        centre_out = noisy_centre.to(h.dtype)
        self._clean[party] = deviation + centre_out
        t2 = time.perf_counter()
        self.timings_["rescale"] += t2 - t0
        # The deviations are released; adding the released centre back is post-processing.
        released = gaussian_release(deviation, mechanism, generator, part="embedding")
        self.last_release_[party]["embedding"] = released.detach()
        out = released + centre_out
        self.timings_["noise"] += time.perf_counter() - t2
        return out

    # -- reporting -----------------------------------------------------------------------
    def _delta(self) -> float:
        """The delta in force: ``delta_`` once set up, else an explicit ``delta``."""
        if hasattr(self, "delta_"):
            return float(self.delta_)
        if self.delta is None:
            raise RuntimeError("delta=None is resolved from the training rows by setup(context): call it first")
        return float(self.delta)

    def planned_releases(self) -> int:
        """Releases of each row the training run makes: one per epoch (1 before ``setup()``)."""
        context = getattr(self, "context_", None)
        return int(context.epochs) if context is not None else 1

    def releases(self) -> int:
        """Releases of a row so far: the training run's plus every defended
        inference pass (``inference_passes_``, the most of any party)."""
        passes = getattr(self, "inference_passes_", {})
        return self.planned_releases() + max(passes.values(), default=0)

    def privacy_spent(self) -> PrivacySpent:
        """The guarantee over the training run (one release of each row per
        epoch) plus the defended inference passes made so far, the worst over
        the mechanisms this defense was set up for or has released with
        (embedding widths, batch rows), from those mechanisms; caveat: per
        release, for the bottom model of that step. With
        ``rescale_estimate="batch"`` (and rescale) ``epsilon`` is None: that
        factor reads the batch it releases. RuntimeError before any width is known."""
        count = self.releases()
        delta = self._delta()
        if self.rescale and self.rescale_estimate == "batch":
            return PrivacySpent(None, delta, count, None, self.accountant, self.neighbours, BATCH_RESCALE_CAVEAT)
        mechanisms = getattr(self, "_mechanisms", {})
        if not mechanisms:
            raise RuntimeError("VFL-AFE's release is calibrated per embedding width: call setup() with "
                               "extra['embedding_dims'] (the trainer does) or release a batch first")
        cache = self.__dict__.setdefault("_spent_cache", {})
        worst: Optional[PrivacySpent] = None
        for key, mechanism in list(mechanisms.items()):
            spent = cache.get((key, count, self.accountant))
            if spent is None:
                spent = cache[(key, count, self.accountant)] = mechanism.privacy_spent(
                    delta, count=count, accountant=self.accountant, caveat=PER_RELEASE_CAVEAT)
            if worst is None or (float(spent.epsilon or 0.0), float(spent.epsilon_per_release or 0.0)) > (
                    float(worst.epsilon or 0.0), float(worst.epsilon_per_release or 0.0)):
                worst = spent
        assert worst is not None
        return worst


register_defense("vfl_afe", VFLAFE)
