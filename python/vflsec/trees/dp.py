"""Label-DP vertical boosting (issue 29): the passive parties learn the labels only through DP releases.

What is protected: the active party's labels, against the passive parties (and
whoever sees the fitted model): neighbouring datasets have the same rows and
features and differ in **one row's label** (``LABEL_NEIGHBOURS``, replace-one).
The features are not protected (each party sees what vertical boosting shows it
of the others' features: node partitions, a passive party's bin sums).

``"dp"`` -- Gaussian gradient release (mechanism ``trees_gradient``). Each
round the active party computes ``g = q - y`` with ``q`` the predictions ``p``
on the job's fixed-point grid (exact in float64: replacing one label moves one
``g_i`` by exactly 1, the L2 sensitivity; :func:`label_gradients` checks the
labels are 0/1 and the subtraction exact) and ``h = q (1 - q)``, and releases
``g~ = g + N(0, sigma^2)`` per row through the lattice Gaussian
(:meth:`vflsec.dp.GaussianMechanism.release`), ``h`` as it is. The active
party then grows the tree (its own histograms, node totals, split choices,
leaf values, the partitions it announces) from ``g~`` and ``h`` only
(:meth:`DPGradientRelease.grown_from`). The baseline score is the log-odds of
a released positive count (the number of labels 1 plus the same Gaussian
noise: one more release of sensitivity 1; without it a model the noise leaves
without splits predicts one class for every row, even the minority one). So
``p`` of every round is a function of earlier releases (and the features),
``h`` reads no label, and each round is one Gaussian mechanism of sensitivity
1 on the ``n``-vector ``g``, chosen adaptively; the accountant (PLD: adaptive
Gaussians compose as one with ``mu^2`` summed) composes the count and the
``max_iter`` rounds (:func:`releases`), and sigma is calibrated so the whole
run is (``epsilon``, ``delta``)-DP (:func:`gradient_mechanism`). Everything else is
post-processing. Not covered: the active party's ``train_loss`` history, its
own figure on the exact labels.

``"label_dp"`` -- randomized response with a prior (mechanism
``trees_label_rr``; Ghazi et al., NeurIPS 2021, RRWithPrior, two stages):
before training the active party releases every label once. Stage one (half the
rows, drawn from the job's public ``seed``): plain randomized response. Stage
two: a prior for each remaining row from a model on the active party's own
features fitted to stage one's released labels (scikit-learn's
``HistGradientBoostingClassifier`` with the job's hyper-parameters), its
probabilities debiased for the known flip rate, then RRWithPrior
(:class:`vflsec.dp.randomized_response.RandomizedResponseMechanism`). A row's
prior never reads its own label, so the release is pure ``epsilon``-label-DP;
the boosting that follows (the plain protocol on the released labels) is
post-processing: the passive parties may see those labels in the clear.

Noise comes from the OS-entropy CSPRNG; ``job.noise_seed`` opts into a seeded
stream, and the reported guarantee then says so in its caveat.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..dp.accountant import PrivacySpent
from ..dp.randomized_response import RandomizedResponseMechanism, check_binary_labels
from .protection import PlainRelease, register_protection
from .weights import WEIGHT_REFUSALS

__all__ = ["GRADIENT_MECHANISM", "LABEL_MECHANISM", "LABEL_NEIGHBOURS", "DPGradientRelease", "LabelDPRelease",
           "gradient_mechanism", "gradient_release_limit", "label_gradients", "label_mechanism", "label_prior",
           "noise_generator", "privacy_spent", "releases", "rr_with_prior_labels", "stage_rows"]

GRADIENT_MECHANISM = "trees_gradient"
LABEL_MECHANISM = "trees_label_rr"
LABEL_NEIGHBOURS = "replace_one_label"
"""The neighbour relation of both guarantees: the same rows, one row's label replaced."""

STAGE_ONE_SHARE = 0.5
"""Share of the rows whose labels get plain randomized response (label_dp's first stage)."""
PRIOR_FLOOR = 1e-6
"""A stage-two prior stays in [PRIOR_FLOOR, 1 - PRIOR_FLOOR]: a model's probability is never
certainty, and at a large epsilon the row keeps randomized response's (nearly exact) answer."""

#: what each guarantee does not cover (``PrivacySpent.caveat``; printed after "not covered:")
_NOT_COVERED = {
    "dp": "the features (label-DP: neighbours differ in one row's label), and train_loss_, the active party's "
          "own figure on the exact labels",
    "label_dp": "the features (label-DP: neighbours differ in one row's label; the labels are released once by "
                "randomized response, all training after it is post-processing)",
}


def noise_generator(job: Any) -> Any:
    """The active party's noise source: the OS-entropy CSPRNG, or a stream of ``job.noise_seed``'s own."""
    from ..kernels import NoiseGenerator

    if job.noise_seed is None:
        return NoiseGenerator()
    return NoiseGenerator(f"vflsec.trees.dp/{int(job.noise_seed)}".encode())


def _seeded_caveat(job: Any) -> Optional[str]:
    if job.noise_seed is None:
        return None
    return (f"secrecy of the noise: it comes from a seeded generator (noise_seed={job.noise_seed}), reproducible "
            "by whoever knows the seed (tests and experiments only)")


# -- "dp": the Gaussian gradient release ------------------------------------------------------------
def releases(job: Any) -> int:
    """The Gaussian releases of a "dp" run: the positive count (the baseline), then one per round."""
    return job.max_iter + 1


def gradient_mechanism(job: Any) -> Any:
    """The ``trees_gradient`` mechanism of ``job``: one release per round of the ``n_samples``-vector ``g``
    (L2 sensitivity 1) and one of the positive count (sensitivity 1; counted with the vector's
    coordinates, which only makes the lattice correction larger), sigma calibrated so that all
    :func:`releases` are (``epsilon``, ``delta``)-DP."""
    from ..dp.accounting import noise_multiplier_for_epsilon
    from ..dp.mechanisms import GaussianMechanism

    z = noise_multiplier_for_epsilon(job.epsilon, job.delta, count=releases(job), coordinates=job.n_samples)
    return GaussianMechanism.with_multiplier(GRADIENT_MECHANISM, noise_multiplier=z, sensitivity=1.0,
                                             coordinates=job.n_samples)


def label_gradients(p: np.ndarray, y: Any, job: Any) -> Tuple[np.ndarray, np.ndarray]:
    """``g = q - y`` and ``h = q (1 - q)`` on the job's grid (``q``: ``p`` on the grid), refusing what
    would break the sensitivity bound: labels other than 0/1, a subtraction that is not exact."""
    labels = check_binary_labels(y, "the active party's labels").astype(np.float64)
    q = job.quantize(np.asarray(p, dtype=np.float64))
    if q.shape != labels.shape or not ((q >= 0.0) & (q <= 1.0)).all():
        raise ValueError(f"predictions must be {labels.shape} values in [0, 1]")
    g = q - labels
    if not np.array_equal(g + labels, q):  # pragma: no cover - q has <= 40 fraction bits, |g| <= 1
        raise RuntimeError("g = q - y was rounded: a replaced label would not move g by exactly 1")
    return g, job.quantize(q * (1.0 - q))


def _refuse_weight(weight: Optional[np.ndarray]) -> None:
    """"dp" weighs every row 1: its release is calibrated to it (:data:`vflsec.trees.weights.WEIGHT_REFUSALS`)."""
    if weight is not None:
        raise ValueError(f"protection 'dp' does not take row weights: {WEIGHT_REFUSALS['dp']['sample_weight']}")


@register_protection
class DPGradientRelease(PlainRelease):
    """``"dp"``: noisy gradients in the clear (module docstring); a passive party is plain's."""

    name = "dp"

    def start(self, endpoint: Any, job: Any, role: str) -> None:
        if role != "active":
            return
        from ..dp.delta_rule import check_delta_for_rows

        check_delta_for_rows(job.delta, job.n_samples)
        self.job = job
        self.mechanism = gradient_mechanism(job)
        self.generator = noise_generator(job)

    def baseline(self, y: np.ndarray, weight: Optional[np.ndarray] = None) -> float:
        """The log-odds of the released positive count (module docstring), its rate kept within
        [1 / (n + 1), n / (n + 1)]; the count itself is ``self.released_count``. No row weights."""
        _refuse_weight(weight)
        n = len(y)
        clock = time.perf_counter()
        noisy = self.mechanism.release(np.array([float(np.sum(y))]), generator=self.generator)
        self.seconds["noise"] += time.perf_counter() - clock
        self.released_count = float(noisy[0])
        rate = min(max(self.released_count / n, 1.0 / (n + 1)), n / (n + 1.0))
        return float(np.log(rate / (1.0 - rate)))

    def gradients(self, p: np.ndarray, y: np.ndarray, job: Any,
                  weight: Optional[np.ndarray] = None) -> Tuple[np.ndarray, np.ndarray]:
        _refuse_weight(weight)
        return label_gradients(p, y, job)

    def release(self, g: np.ndarray, h: np.ndarray) -> Any:
        clock = time.perf_counter()
        noisy = self.mechanism.release(g, generator=self.generator)
        self.seconds["noise"] += time.perf_counter() - clock
        return {"g": noisy, "h": h}

    def grown_from(self, g: np.ndarray, h: np.ndarray, released: Any) -> Tuple[np.ndarray, np.ndarray]:
        return released["g"], released["h"]  # what the passive parties received, never the exact g

    def received_bounds(self, job: Any) -> Tuple[Optional[float], Optional[float]]:
        """An honest release: ``|g~| <=`` :func:`gradient_release_limit`, ``0 <= h = q (1 - q) <= 1/4``
        (no row weights: :func:`_refuse_weight`)."""
        return gradient_release_limit(job), 0.25


def gradient_release_limit(job: Any) -> float:
    """The largest ``|g~|`` an honest "dp" release has: ``|g| = |q - y| <= 1`` plus the lattice noise's
    support, below ``(SUPPORT_SIGMAS + 1) sigma`` (:data:`vflsec.kernels.noise.SUPPORT_SIGMAS`; the bound
    :func:`vflsec.glm.ir_exchange.release_limit` gives an HDP release), with a relative slack of 1e-6 on 1."""
    from ..kernels.noise import SUPPORT_SIGMAS, lattice_sigma

    return 1.0 + 1e-6 + (SUPPORT_SIGMAS + 1.0) * lattice_sigma(gradient_mechanism(job).sigma)


# -- "label_dp": randomized response with a prior --------------------------------------------------
def label_mechanism(job: Any) -> RandomizedResponseMechanism:
    return RandomizedResponseMechanism(LABEL_MECHANISM, job.epsilon)


def stage_rows(n: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """The rows of stage one and of stage two (sorted), drawn from the public ``seed``: no label is read."""
    order = np.random.default_rng(seed).permutation(n)
    cut = int(np.ceil(STAGE_ONE_SHARE * n))
    return np.sort(order[:cut]), np.sort(order[cut:])


def label_prior(codes_fit: np.ndarray, released_fit: np.ndarray, codes_new: np.ndarray, keep: float,
                job: Any) -> np.ndarray:
    """Each new row's prior probability of label 1: a model of the released labels on the active party's
    codes, debiased for randomized response (``P(released 1) = (1 - keep) + (2 keep - 1) P(1)``)."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    if not keep > 0.5 or len(codes_new) == 0:
        return np.full(len(codes_new), 0.5)  # the released labels say nothing: a uniform prior
    if np.unique(released_fit).size < 2:
        released_one = np.full(len(codes_new), float(np.mean(released_fit)))
    else:
        model = HistGradientBoostingClassifier(
            max_iter=job.max_iter, learning_rate=job.learning_rate, max_leaf_nodes=job.max_leaf_nodes,
            max_depth=job.max_depth, min_samples_leaf=job.min_samples_leaf,
            l2_regularization=job.l2_regularization, early_stopping=False)
        # One OpenMP thread: a small fit, and the other parties' threads share the cores (spinning
        # OpenMP workers made it 30x slower on 2 busy cores).
        with threadpool_limits(limits=1, user_api="openmp"):
            model.fit(codes_fit.astype(np.float64), released_fit)
            released_one = model.predict_proba(codes_new.astype(np.float64))[:, 1]
    prior = (released_one - (1.0 - keep)) / (2.0 * keep - 1.0)
    return np.clip(prior, PRIOR_FLOOR, 1.0 - PRIOR_FLOOR)


def rr_with_prior_labels(y: Any, codes: np.ndarray, job: Any, mechanism: RandomizedResponseMechanism,
                         generator: Any) -> Tuple[np.ndarray, Dict[str, Any]]:
    """Every label released once (two stages, module docstring): the released labels (float64) and
    facts that read no label (``stage_one_rows``, ``answered_by_prior``: stage-two rows given their
    prior's top label)."""
    labels = check_binary_labels(y, "the active party's labels")
    first, second = stage_rows(len(labels), job.seed)
    released = np.empty(len(labels), dtype=np.int64)
    released[first] = mechanism.release(labels[first], generator=generator)
    prior = label_prior(codes[first], released[first], codes[second], mechanism.keep_probability, job)
    released[second] = mechanism.release(labels[second], prior, generator=generator)
    facts = {"stage_one_rows": int(len(first)), "answered_by_prior": int(mechanism.answers_top(prior).sum())}
    return released.astype(np.float64), facts


@register_protection
class LabelDPRelease(PlainRelease):
    """``"label_dp"``: the plain protocol on labels released by RRWithPrior (module docstring)."""

    name = "label_dp"

    def start(self, endpoint: Any, job: Any, role: str) -> None:
        self.facts: Dict[str, Any] = {}
        if role == "active":
            self.mechanism = label_mechanism(job)
            self.generator = noise_generator(job)

    def training_labels(self, y: np.ndarray, codes: np.ndarray, job: Any) -> np.ndarray:
        clock = time.perf_counter()
        released, self.facts = rr_with_prior_labels(y, codes, job, self.mechanism, self.generator)
        self.seconds["randomized_response"] += time.perf_counter() - clock
        return released


# -- the guarantee --------------------------------------------------------------------------------
def privacy_spent(job: Any) -> Optional[PrivacySpent]:
    """The guarantee of a whole run of ``job`` (None for a protection without one): epsilon,
    delta, neighbours ``LABEL_NEIGHBOURS``, the accountant; the caveat says what it does not cover
    (and whether the noise was seeded)."""
    if job.protection == "dp":
        spent = gradient_mechanism(job).privacy_spent(job.delta, count=releases(job))
        if spent.epsilon is None or not spent.epsilon <= job.epsilon:  # pragma: no cover - a calibration bug
            raise RuntimeError(f"the trees_gradient calibration reports {spent}, above epsilon={job.epsilon}")
    elif job.protection == "label_dp":
        spent = label_mechanism(job).privacy_spent()
    else:
        return None
    caveat = "; ".join(c for c in (_NOT_COVERED[job.protection], _seeded_caveat(job)) if c)
    return PrivacySpent(spent.epsilon, spent.delta, spent.releases, spent.epsilon_per_release, spent.accountant,
                        LABEL_NEIGHBOURS, caveat)
