"""Hyperparameter selection for vertical GLMs, and what it costs in privacy.

The HDP-VFL paper tuned epochs and the clip ``k`` by 5-fold cross-validation
on the training set and did not count that search in epsilon. This module
gives the pieces to report it honestly:

* :func:`cv_select` -- k-fold cross-validation over a grid of jobs with the
  fast trainer (:func:`vflsec.glm.fast.fit_grid`). The selection itself reads
  validation rows in the clear: it is *not* a DP procedure.
* :func:`search_privacy` -- the composed epsilon of the Gaussian mechanisms
  the search ran on each record (every HDP fit whose training folds hold it,
  plus the final refit), composed by the DP layer's PLD accountant
  (:func:`compose_gaussian_epsilon`). It covers the noisy training runs
  only: the argmax over validation scores read in the clear is not a DP
  step, so no finite epsilon covers the search and this figure is what its
  Gaussian mechanisms alone cost (a lower bound, reported beside results).
* :func:`private_select` -- private hyperparameter selection (Papernot &
  Steinke, ICLR 2022): a random number K of runs, each on a random
  candidate, each scored by a noisy validation count (the
  ``"selection_score"`` mechanism); only the best run is released, and the
  whole procedure has the accounted (epsilon, delta) of Theorem 2 (truncated
  negative binomial K) or Theorem 6 (Poisson K) -- for whoever sees only
  that result; the parties, who exchanged the IRs of every run, are charged
  the composition over the K runs (see there). The repetition theorems and
  their RDP accounting live in the DP layer, :mod:`vflsec.dp.selection`
  (re-exported here: :class:`PoissonRepetitions`,
  :class:`TruncatedNegativeBinomialRepetitions`, :func:`selection_epsilon`,
  :func:`rdp_to_epsilon`, ``RDP_ORDERS``).

Randomness: fold assignment is public (``fold_seed``, data-independent);
every privacy-relevant draw (K, candidates, score noise, training noise)
comes from the OS-entropy ChaCha20 generator unless ``seed`` is given
explicitly for an experiment.
"""
from __future__ import annotations

import collections
import dataclasses
import itertools
import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from .._arrays import check_positive_int, check_real
from ..dp import loss_value
from ..dp.selection import (
    RDP_ORDERS,
    PoissonRepetitions,
    TruncatedNegativeBinomialRepetitions,
    check_repetitions,
    rdp_to_epsilon,
    repetition_theorem,
    score_mechanism,
    selection_epsilon,
)
from .fast import GRID_SHARED_FIELDS, _check_blocks, _check_jobs, fit_grid
from .job import SIGNED_LABEL_LOSSES, GLMJob

__all__ = [
    "RDP_ORDERS",
    "CVResult",
    "PoissonRepetitions",
    "PrivateSelection",
    "SearchPrivacy",
    "SelectionPrivacy",
    "TruncatedNegativeBinomialRepetitions",
    "compose_gaussian_epsilon",
    "cv_select",
    "grid_jobs",
    "private_select",
    "rdp_to_epsilon",
    "release_scores",
    "score_mechanism",
    "search_privacy",
    "selection_epsilon",
]

# Candidates of one search may differ in anything else (batch size, seed,
# penalty, ...): they are trained in groups sharing GRID_SHARED_FIELDS.
_CANDIDATE_SHARED = ("n_samples", "loss", "active", "passives")


# -- grids ---------------------------------------------------------------------
def grid_jobs(base: GLMJob, **axes: Sequence[Any]) -> List[GLMJob]:
    """The Cartesian product of ``axes`` (field name -> values) applied to
    ``base``, first axis slowest: ``grid_jobs(job, epochs=[5, 10], k=[0.1, 1])``."""
    if not isinstance(base, GLMJob):
        raise TypeError(f"base must be a GLMJob, got {type(base).__name__}")
    fields = {f.name for f in dataclasses.fields(GLMJob)}
    for name, values in axes.items():
        if name not in fields:
            raise ValueError(f"{name!r} is not a GLMJob field")
        if isinstance(values, str) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"axis {name!r} must be a non-empty sequence of values")
    names = list(axes)
    return [dataclasses.replace(base, **dict(zip(names, combo))) for combo in itertools.product(*axes.values())]


def _fit_all(parts: List[np.ndarray], y: np.ndarray, jobs: Sequence[GLMJob], exact: bool,
             blas_threads: Optional[int]) -> List[List[np.ndarray]]:
    """Weights of every job, one :func:`fit_grid` call per group of jobs that
    share :data:`GRID_SHARED_FIELDS` (order of ``jobs`` kept)."""
    groups: Dict[Tuple, List[int]] = {}
    for g, job in enumerate(jobs):
        groups.setdefault(tuple(getattr(job, f) for f in GRID_SHARED_FIELDS), []).append(g)
    out: List[Optional[List[np.ndarray]]] = [None] * len(jobs)
    for members in groups.values():
        fit = fit_grid(parts, y, [jobs[g] for g in members], exact=exact, blas_threads=blas_threads)
        for i, g in enumerate(members):
            out[g] = fit[i]
    return out  # type: ignore[return-value]


def _thetas(parts: List[np.ndarray], coefs: Sequence[List[np.ndarray]]) -> np.ndarray:
    """``(n, G)`` linear predictors of every model on rows ``parts``."""
    return sum(X @ np.stack([c[p] for c in coefs]).T for p, X in enumerate(parts))


def _derived_seed(*entropy: int) -> int:
    state = np.random.SeedSequence([int(e) for e in entropy]).generate_state(1, np.uint64)
    return int(state[0]) & ((1 << 63) - 1)


def _check_data(parts: Any, y: Any, jobs: Tuple[GLMJob, ...]) -> Tuple[List[np.ndarray], np.ndarray]:
    arrays = _check_blocks(parts, None, 1 + len(jobs[0].passives))
    y_arr = np.asarray(y, dtype=np.float64)
    if y_arr.ndim != 1 or y_arr.shape[0] != arrays[0].shape[0]:
        raise ValueError(f"y must be 1-D with one label per row ({arrays[0].shape[0]}), got shape {y_arr.shape}")
    if not np.isfinite(y_arr).all():
        raise ValueError("y contains NaN or infinite values")
    for g, job in enumerate(jobs):
        if job.n_samples != len(y_arr):
            raise ValueError(f"candidates[{g}].n_samples={job.n_samples} must equal the number of rows ({len(y_arr)})")
    return arrays, y_arr


def _is_private(job: GLMJob) -> bool:
    return job.protocol == "hdp" and job.noise


def _noise_multipliers(job: GLMJob) -> np.ndarray:
    """Per data party noise multiplier of an "hdp" run (NaN: not private): its
    mechanism's (:func:`vflsec.glm.hdp.hdp_mechanisms`) ``sigma / sensitivity``
    with sigma on the release's grid, which is what the composition must use."""
    from .hdp import hdp_mechanisms

    if not _is_private(job):
        return np.full(1 + len(job.passives), math.nan)
    mechanisms = hdp_mechanisms(job)
    return np.array([mechanisms["active"].noise_multiplier]
                    + [mechanisms["passive"].noise_multiplier] * len(job.passives))


def _release_coordinates(job: GLMJob) -> int:
    """Noise draws of one party's mechanism in an "hdp" run (0: not private)."""
    from .hdp import hdp_release_coordinates

    return hdp_release_coordinates(job) if _is_private(job) else 0


# -- cross-validation ------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class CVResult:
    """Outcome of :func:`cv_select`.

    ``fold_scores[f, g]``: score of candidate g trained without fold f and
    evaluated on fold f (accuracy for classification losses, otherwise minus
    the mean loss); ``mean_scores``: their mean over folds; ``best_index``:
    the first argmax. ``fold_noise_multipliers[f, g, p]``: the noise
    multiplier of party p's Gaussian mechanism in that fit (the lattice
    release's effective one, see ``_noise_multipliers``; NaN for a
    non-private fit); ``fold_coordinates[f, g]``: its noise draws (0 for a
    non-private fit). ``n_private_fits``: HDP fits with noise that ran (each
    is one Gaussian mechanism per data party); ``n_fits``: all fits.
    """

    candidates: Tuple[GLMJob, ...]
    fold_scores: np.ndarray
    mean_scores: np.ndarray
    best_index: int
    score_name: str
    fold_noise_multipliers: np.ndarray
    n_fits: int
    n_private_fits: int
    fold_coordinates: Optional[np.ndarray] = None

    @property
    def best_job(self) -> GLMJob:
        return self.candidates[self.best_index]

    @property
    def n_folds(self) -> int:
        return self.fold_scores.shape[0]


def _fold_job(job: GLMJob, n_train: int, fold: int) -> GLMJob:
    seed = None if job.noise_seed is None else _derived_seed(job.noise_seed, fold)
    return dataclasses.replace(job, n_samples=n_train, noise_seed=seed)


def _scores(theta: np.ndarray, y: np.ndarray, loss: str) -> np.ndarray:
    if loss in SIGNED_LABEL_LOSSES:
        return np.mean(np.where(theta > 0, 1.0, -1.0) == y[:, None], axis=0)
    return -np.mean(loss_value(loss, theta, np.broadcast_to(y[:, None], theta.shape)), axis=0)


def cv_select(parts: Sequence[Any], y: Any, candidates: Sequence[GLMJob], *, n_folds: int = 5,
              fold_seed: int = 0, exact: bool = False, blas_threads: Optional[int] = 1) -> CVResult:
    """k-fold cross-validation of ``candidates`` on ``(parts, y)``.

    ``candidates`` are jobs for the whole set (``n_samples == len(y)``); fold
    f trains each with ``n_samples`` = its training-fold size (so an "hdp"
    job's sigma is calibrated to that run, as a real run would be) and an int
    ``noise_seed`` replaced by one derived from ``(noise_seed, f)`` (folds get
    independent noise). All candidates sharing :data:`GRID_SHARED_FIELDS`
    train as one grid per fold. Rows are assigned to folds by a public
    permutation from ``fold_seed``. See :func:`search_privacy` for the cost.
    """
    jobs = _check_jobs(candidates, _CANDIDATE_SHARED)
    arrays, y_arr = _check_data(parts, y, jobs)
    n = len(y_arr)
    n_folds = check_positive_int(n_folds, "n_folds", minimum=2)
    if n_folds > n:
        raise ValueError(f"n_folds={n_folds} exceeds the number of rows ({n})")
    if isinstance(fold_seed, bool) or not isinstance(fold_seed, numbers.Integral) or fold_seed < 0:
        raise TypeError(f"fold_seed must be a non-negative int, got {fold_seed!r}")
    folds = np.array_split(np.random.default_rng(int(fold_seed)).permutation(n), n_folds)
    G = len(jobs)
    scores = np.empty((n_folds, G))
    multipliers = np.full((n_folds, G, len(arrays)), math.nan)
    coordinates = np.zeros((n_folds, G), dtype=np.int64)
    for f, val in enumerate(folds):
        train = np.sort(np.concatenate([folds[i] for i in range(n_folds) if i != f]))
        try:
            fold_jobs = [_fold_job(job, len(train), f) for job in jobs]
        except ValueError as exc:
            raise ValueError(f"fold {f} has {len(train)} training rows: {exc}") from None
        coefs = _fit_all([X[train] for X in arrays], y_arr[train], fold_jobs, exact, blas_threads)
        scores[f] = _scores(_thetas([X[val] for X in arrays], coefs), y_arr[val], jobs[0].loss)
        multipliers[f] = np.stack([_noise_multipliers(job) for job in fold_jobs])
        coordinates[f] = [_release_coordinates(job) for job in fold_jobs]
    mean = scores.mean(axis=0)
    n_private = n_folds * sum(_is_private(job) for job in jobs)
    return CVResult(
        candidates=jobs, fold_scores=scores, mean_scores=mean, best_index=int(np.argmax(mean)),
        score_name="accuracy" if jobs[0].loss in SIGNED_LABEL_LOSSES else "neg_mean_loss",
        fold_noise_multipliers=multipliers, n_fits=n_folds * G, n_private_fits=n_private,
        fold_coordinates=coordinates,
    )


# -- composition -------------------------------------------------------------------
def _check_delta(delta: Any) -> float:
    return check_real(delta, "delta", low=0.0, low_inclusive=False, high=1.0, high_inclusive=False)


def compose_gaussian_epsilon(noise_multipliers: Union[Sequence[float], np.ndarray], delta: float, *,
                             coordinates: Union[int, Sequence[int], np.ndarray] = 1) -> float:
    """Epsilon at ``delta`` of composing Gaussian mechanisms (adaptively, on one
    record) with noise multipliers ``z_i = sigma_i / sensitivity_i``, each a
    lattice release of ``coordinates`` noise draws (one int for all, or one
    per mechanism).

    Composed by the DP layer's PLD accountant
    (:func:`vflsec.dp.make_accountant`, the one place that composes): the
    Gaussians' privacy loss distributions (pessimistic discretization, so at
    least the exact Gaussian-DP value ``mu = sqrt(sum z_i^-2)`` of Dong, Roth
    & Su 2019 and within about 1e-3 of it) plus the lattice release's
    corrections. ``z_i = inf`` adds nothing (0.0 when every one is inf);
    ``delta`` must be at least the PLD accountant's floor (1e-15).
    """
    from ..dp import make_accountant
    from ..dp.accountant import Release

    if isinstance(noise_multipliers, (str, bytes)) or not isinstance(noise_multipliers, (Sequence, np.ndarray)):
        raise TypeError("noise_multipliers must be a sequence of positive numbers")
    z = np.asarray(noise_multipliers, dtype=np.float64).reshape(-1)
    if z.size == 0:
        raise ValueError("noise_multipliers is empty")
    if np.isnan(z).any() or (z <= 0).any():
        raise ValueError("every noise multiplier must be > 0 (inf: a mechanism that adds nothing)")
    delta = _check_delta(delta)
    if isinstance(coordinates, numbers.Integral) and not isinstance(coordinates, bool):
        draws = [check_positive_int(coordinates, "coordinates")] * z.size
    else:
        if isinstance(coordinates, (str, bytes)) or not isinstance(coordinates, (Sequence, np.ndarray)):
            raise TypeError("coordinates must be a positive int or one positive int per noise multiplier")
        draws = [check_positive_int(c, "coordinates") for c in np.asarray(coordinates).reshape(-1).tolist()]
        if len(draws) != z.size:
            raise ValueError(f"coordinates has {len(draws)} entries for {z.size} noise multipliers")
    accountant = make_accountant("pld")
    # Equal mechanisms composed as one entry (a Gaussian composed with itself is a Gaussian, exactly).
    groups = collections.Counter((float(v), c) for v, c in zip(z, draws) if math.isfinite(v))
    for (v, c), count in sorted(groups.items()):
        accountant.step(Release(v, 1.0, c, count))
    return accountant.get_epsilon(delta)


@dataclass(frozen=True)
class SearchPrivacy:
    """Composed cost of a search's Gaussian mechanisms on one record.

    ``epsilon_by_party[name]`` protects that party's data (its own IR
    sequences are the mechanisms); ``epsilon`` is the worst party.
    ``runs_per_record``: runs whose training set holds a given record
    (``(n_folds - 1) x`` private candidates, ``+ 1`` for the refit).
    ``inf`` when a non-private fit (plain, or noise off) touched the data.
    """

    epsilon: float
    delta: float
    epsilon_by_party: Dict[str, float]
    runs_per_record: int


def search_privacy(cv: CVResult, delta: float, *, include_refit: bool = True) -> SearchPrivacy:
    """Epsilon at ``delta`` of everything :func:`cv_select` ran, per party.

    A record lies in the training folds of every fold but its own; for each
    choice of its own fold the mechanisms of those fits (and of the final
    refit of ``cv.best_job`` on the whole set, if ``include_refit``) are
    composed with :func:`compose_gaussian_epsilon`; the worst fold is kept.
    This does not cover the (non-private) argmax over validation scores.
    """
    if not isinstance(cv, CVResult):
        raise TypeError(f"cv must be a CVResult, got {type(cv).__name__}")
    delta = _check_delta(delta)
    if not isinstance(include_refit, bool):
        raise TypeError("include_refit must be a bool")
    names = cv.candidates[0].parties
    z = cv.fold_noise_multipliers
    draws = cv.fold_coordinates
    if draws is None:  # a CVResult built by hand: one draw per fit (the lattice corrections' least)
        draws = np.ones(z.shape[:2], dtype=np.int64)
    refit = _noise_multipliers(cv.best_job) if include_refit else None
    runs = (cv.n_folds - 1) * len(cv.candidates) + int(include_refit)
    non_private = np.isnan(z).any() or (refit is not None and np.isnan(refit).any())
    by_party = {}
    for p, name in enumerate(names):
        if non_private:
            by_party[name] = math.inf
            continue
        worst = 0.0
        for own in range(cv.n_folds):
            zs = [z[f, :, p] for f in range(cv.n_folds) if f != own]
            cs = [draws[f] for f in range(cv.n_folds) if f != own]
            if refit is not None:
                zs.append(refit[p:p + 1])
                cs.append(np.array([_release_coordinates(cv.best_job)]))
            worst = max(worst, compose_gaussian_epsilon(np.concatenate(zs), delta, coordinates=np.concatenate(cs)))
        by_party[name] = worst
    return SearchPrivacy(max(by_party.values()), delta, by_party, runs)


# -- private selection ---------------------------------------------------------------
def release_scores(counts: Any, mechanism: Any, generator: Any) -> np.ndarray:
    """The runs' noisy validation scores: each run's count of correct
    predictions is its own one-coordinate release of ``mechanism``, the
    ``"selection_score"`` mechanism of sensitivity 1
    (:func:`vflsec.dp.selection.score_mechanism`), drawn from ``generator``."""
    from ..dp import GaussianMechanism

    if not isinstance(mechanism, GaussianMechanism) or mechanism.name != "selection_score":
        raise TypeError("mechanism must be the 'selection_score' GaussianMechanism "
                        "(vflsec.dp.selection.score_mechanism)")
    if mechanism.sensitivity != 1.0:
        raise ValueError(f"a count of correct predictions has sensitivity 1, the mechanism states "
                         f"{mechanism.sensitivity:g}")
    return mechanism.release(np.asarray(counts, dtype=np.float64), generator=generator)


@dataclass(frozen=True)
class SelectionPrivacy:
    """Guarantee of :func:`private_select`, per party and worst (``epsilon``).

    ``noise_multiplier_by_party``: the smallest multiplier a record of that
    party meets in one run (training mechanism or score noise);
    ``transcript_epsilon_by_party``: composition over the K runs actually
    performed -- what a *participating* party's view of all training
    transcripts costs (the repetition theorems assume the losing runs stay
    hidden, which holds for the released result, not for the parties that
    exchanged the IRs).
    """

    epsilon: float
    delta: float
    epsilon_by_party: Dict[str, float]
    noise_multiplier_by_party: Dict[str, float]
    theorem: str
    transcript_epsilon_by_party: Dict[str, float]


@dataclass(frozen=True, eq=False)
class PrivateSelection:
    """Outcome of :func:`private_select`: the best run (``index`` into the
    candidates, its ``job`` as given, weights ``coef`` trained on the
    training split, ``noisy_accuracy`` on the validation split), ``n_runs``
    = K with the candidate index of each run in ``drawn``; ``None`` fields
    when K = 0."""

    index: Optional[int]
    job: Optional[GLMJob]
    coef: Optional[List[np.ndarray]]
    noisy_accuracy: Optional[float]
    n_runs: int
    drawn: Tuple[int, ...]
    privacy: SelectionPrivacy


def private_select(parts: Sequence[Any], y: Any, candidates: Sequence[GLMJob], repetitions, *, delta: float,
                   validation_fraction: float = 0.2, score_noise_multiplier: Optional[float] = None,
                   seed: Optional[int] = None, exact: bool = False,
                   blas_threads: Optional[int] = 1) -> PrivateSelection:
    """Private hyperparameter selection (Papernot & Steinke, ICLR 2022).

    The rows are split once, uniformly at random, into a training part T and
    a validation part V (``validation_fraction``). K is drawn from
    ``repetitions``; each of the K runs picks a candidate uniformly, trains
    it with HDP on T (fresh noise) and scores it by the number of correctly
    classified rows of V plus Gaussian noise (a count, sensitivity 1, released
    by the ``"selection_score"`` mechanism,
    :func:`vflsec.dp.selection.score_mechanism`, with noise multiplier
    ``score_noise_multiplier``). The run with the best noisy score is released.

    Privacy: T and V are disjoint, so one run meets a record either as a
    training row (the HDP Gaussian mechanism of its party, the lattice
    release's multiplier ``z = sigma / sensitivity``) or as a
    validation row (the noisy count,
    multiplier ``score_noise_multiplier``; default: the smallest training
    multiplier, so scoring never dominates). A run is therefore a Gaussian
    mechanism with ``z_eff = min`` of both (the worst candidate counts: a
    uniform mixture is no worse than its worst member), and
    :func:`vflsec.dp.selection.selection_epsilon` gives the selection's
    (epsilon, delta) at ``delta`` via Theorem 6 (Poisson K) or Theorem 2 (truncated negative
    binomial K). This takes HDP-VFL's premise that a training run, model
    included, is as private as its released IR sequences (the sensitivity
    lemmas bound the IR sequences; each party's own weight block also reads
    its raw rows, so the premise is the paper's, not proved here). Against
    the parties, who exchanged the IRs of all K runs, the losing runs are
    not hidden and the cost is ``transcript_epsilon_by_party`` instead
    (composition over the K runs; K is data-independent).

    ``candidates``: "hdp" jobs with noise, for the whole set
    (``n_samples == len(y)``); their ``noise_seed`` is replaced per run.
    Classification losses only (the score is an accuracy count).
    ``seed``: None (default) draws K, candidates, split and all noise from
    the OS-entropy CSPRNG; an int makes the whole procedure reproducible
    (experiments only: whoever knows it knows the noise).
    """
    from ..kernels import NoiseGenerator

    jobs = _check_jobs(candidates, _CANDIDATE_SHARED)
    arrays, y_arr = _check_data(parts, y, jobs)
    if jobs[0].loss not in SIGNED_LABEL_LOSSES:
        raise ValueError(f"private_select scores by accuracy; loss {jobs[0].loss!r} is not a classification loss")
    for g, job in enumerate(jobs):
        if not _is_private(job):
            raise ValueError(f"candidates[{g}] is not a private run (protocol 'hdp' with noise=True required)")
    check_repetitions(repetitions)
    delta = _check_delta(delta)
    frac = check_real(validation_fraction, "validation_fraction", low=0.0, low_inclusive=False,
                      high=1.0, high_inclusive=False)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
        raise TypeError(f"seed must be None or a non-negative int, got {seed!r}")
    n = len(y_arr)
    n_val = int(round(frac * n))
    if not 1 <= n_val < n:
        raise ValueError(f"validation_fraction={frac} leaves {n_val} of {n} rows for validation")
    train_jobs = [dataclasses.replace(job, n_samples=n - n_val, noise_seed=None) for job in jobs]
    z_train = np.stack([_noise_multipliers(job) for job in train_jobs]).min(axis=0)
    z_score = float(z_train.min()) if score_noise_multiplier is None else check_real(
        score_noise_multiplier, "score_noise_multiplier", low=0.0, low_inclusive=False)

    generator = NoiseGenerator(None if seed is None else _derived_seed(seed, 0))
    order = np.argsort(generator.random_raw(n), kind="stable")
    val, train = np.sort(order[:n_val]), np.sort(order[n_val:])
    k = repetitions.sample(generator)
    drawn = tuple(int(generator.integers_below(len(jobs))) for _ in range(k))
    runs = [dataclasses.replace(train_jobs[g], noise_seed=None if seed is None else _derived_seed(seed, 1, r))
            for r, g in enumerate(drawn)]

    names = jobs[0].parties
    z_eff = {name: min(float(z_train[p]), z_score) for p, name in enumerate(names)}
    eps = {name: selection_epsilon(z, repetitions, delta)[0] for name, z in z_eff.items()}
    transcript = {name: (compose_gaussian_epsilon([_noise_multipliers(r)[p] for r in runs], delta,
                                                  coordinates=[_release_coordinates(r) for r in runs])
                         if runs else 0.0)
                  for p, name in enumerate(names)}
    privacy = SelectionPrivacy(max(eps.values()), delta, eps, z_eff, repetition_theorem(repetitions), transcript)
    if k == 0:
        return PrivateSelection(None, None, None, None, 0, (), privacy)

    coefs = _fit_all([X[train] for X in arrays], y_arr[train], runs, exact, blas_threads)
    theta = _thetas([X[val] for X in arrays], coefs)
    correct = np.sum(np.where(theta > 0, 1.0, -1.0) == y_arr[val][:, None], axis=0)
    # Each run's count (sensitivity 1) is its own one-coordinate release of the "selection_score"
    # mechanism, whose sigma is z_score rounded up to the release's grid (accounted at z_score).
    noisy = release_scores(correct, score_mechanism(z_score), generator)
    best = int(np.argmax(noisy))
    return PrivateSelection(drawn[best], jobs[drawn[best]], coefs[best], float(noisy[best]) / n_val, k, drawn,
                            privacy)
