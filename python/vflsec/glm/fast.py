"""Fast training of many vertical GLMs at once, for experiments.

Cross-validating HDP-VFL over hyperparameter grids means thousands of fits
per dataset; :func:`vflsec.glm.run_job` runs one thread per party over an
in-memory channel and pays messaging and per-step overhead on every fit
(26k rows, two parties, 10 epochs: 100 threaded "hdp" runs take 7x, at
batch 3200, to 30x, at batch 256, the time of one 100-job grid).
:func:`fit_grid` computes the *same recursion* as the "plain" and "hdp"
protocols (Algorithm 1, the party programs of :mod:`vflsec.glm.ir_exchange`)
for G jobs at once, in one process and without messages:

* every job shares the data and the mini-batch schedule (``n_samples``,
  ``batch_size``, ``seed``), the loss, the penalty and the party layout;
* jobs may differ in ``lr``, ``k``, ``lam``, ``mu``, ``epochs``, the protocol
  ("plain" or "hdp"), the DP budget and calibration, ``noise`` and
  ``noise_seed``;
* each party's weights are one ``(G, d_P)`` matrix (row g = job g), so a
  step is a few matrix products over the whole grid. Jobs with fewer epochs
  are frozen at the end of their last epoch: the schedule of a shorter run
  is a prefix of a longer one's (it depends only on ``(seed, epoch)``).

Per step, exactly as the protocols (see :mod:`.ir_exchange`, :mod:`.hdp`):
passive IRs ``X_P[s] w_P`` (released with noise), ``theta = X_A[s] w_A + sum
received`` (clipped to ``theta_bound`` for the Poisson constants), ``IR_A =
loss_gradient(theta, y)`` (clipped to ``[-L, L]`` under "hdp"), released
``IR_A`` (with noise; each passive clips what it receives to ``[-L, L]`` under
"hdp"), gradients over the nominal
batch size ``b``, :func:`~.penalties.penalized_step`, the per-party norm clip.
Noise of an "hdp" job is released by the job's own DP mechanisms
(:func:`vflsec.glm.hdp.hdp_mechanisms`, as the protocol's). With an int
``noise_seed`` it comes from the protocol's own per-party generator with the
same draws in the same order, so it gives the protocol's weights; with
``noise_seed=None`` every job gets independent noise from the OS-entropy
CSPRNG (one fresh generator per party and call, drawn for all such jobs at
once), as the protocol's does.

Rounding. By default products are matrix-matrix (BLAS gemm) and row norms
an einsum, whose summation orders differ from the matrix-vector products
(gemv) and ``np.linalg.norm`` of the threaded programs: weights then agree
with :func:`run_job` to rounding (about 1e-16 relative, also after 90 steps
on 26k rows), since a non-expansive recursion -- every "hdp" job -- does not
amplify the differences (tests check <= 1e-12). ``exact=True`` uses per-job
gemv, dot products and norms on the protocols' contiguous vectors and
reproduces their weights bit for bit (1.5-3x slower than the default).
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np

from .._arrays import as_float_array, check_positive_int
from ..dp import loss_gradient
from ..vfl.schedule import batch_indices
from .job import GLMJob, PartyData
from .penalties import penalized_step

__all__ = ["FAST_PROTOCOLS", "GRID_SHARED_FIELDS", "GridFit", "fit_grid"]

FAST_PROTOCOLS = ("plain", "hdp")
# Fields every job of one grid must share (they fix the data layout and the
# batch schedule, or select code paths).
GRID_SHARED_FIELDS = ("n_samples", "batch_size", "seed", "shard_rows", "loss", "penalty", "active", "passives")


class GridFit(Sequence):
    """Weights of a grid of jobs: ``fit[g]`` is job g's list of per-party
    weight blocks (active first), like ``run_job``'s ``coef`` per party.

    Attributes
    ----------
    jobs : the jobs, in the order given to :func:`fit_grid`.
    blocks : one ``(G, d_P)`` array per party; row g holds job g's block.
    info : per job, the "hdp" noise parameters (``hdp_noise_scales``; empty
        for "plain").
    """

    def __init__(self, jobs: Tuple[GLMJob, ...], blocks: Tuple[np.ndarray, ...], info: Tuple[Dict[str, float], ...]):
        self.jobs = jobs
        self.blocks = blocks
        self.info = info

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, g):
        if isinstance(g, slice):
            return [self[i] for i in range(*g.indices(len(self)))]
        return [block[g].copy() for block in self.blocks]

    def decision_function(self, parts: Sequence[Any]) -> np.ndarray:
        """``theta`` of every job on rows ``parts`` (one block per party):
        an ``(n, G)`` array, column g = ``sum_P X_P w_P`` of job g."""
        arrays = _check_blocks(parts, [b.shape[1] for b in self.blocks], None)
        return sum(X @ W.T for X, W in zip(arrays, self.blocks))


def _check_blocks(parts: Any, widths: Optional[List[int]], n_parties: Optional[int]) -> List[np.ndarray]:
    """Per-party 2-D float64 arrays with aligned rows (and the given widths)."""
    if isinstance(parts, np.ndarray) or isinstance(parts, str) or not isinstance(parts, Sequence):
        raise TypeError(f"parts must be a list of per-party feature arrays (active first), got {type(parts).__name__}")
    expected = len(widths) if widths is not None else n_parties
    if expected is not None and len(parts) != expected:
        raise ValueError(f"expected {expected} party blocks (active first), got {len(parts)}")
    arrays = [as_float_array(X, f"parts[{i}]", ndim=2, dtype=np.float64)[0] for i, X in enumerate(parts)]
    rows = {X.shape[0] for X in arrays}
    if len(rows) != 1:
        raise ValueError(f"party blocks have different row counts {[X.shape[0] for X in arrays]}; rows must be aligned")
    if widths is not None:
        for i, (X, d) in enumerate(zip(arrays, widths)):
            if X.shape[1] != d:
                raise ValueError(f"parts[{i}] has {X.shape[1]} columns, the weights have {d}")
    return arrays


def _check_jobs(jobs: Any, shared: Sequence[str] = GRID_SHARED_FIELDS) -> Tuple[GLMJob, ...]:
    """A non-empty tuple of GLMJob the fast path can run, equal in ``shared``."""
    if isinstance(jobs, GLMJob):
        raise TypeError("jobs must be a sequence of GLMJob (wrap a single job in a list)")
    if not isinstance(jobs, Sequence) or isinstance(jobs, str):
        raise TypeError(f"jobs must be a sequence of GLMJob, got {type(jobs).__name__}")
    jobs = tuple(jobs)
    if not jobs:
        raise ValueError("jobs is empty; give at least one GLMJob")
    for g, job in enumerate(jobs):
        if not isinstance(job, GLMJob):
            raise TypeError(f"jobs[{g}] must be a GLMJob, got {type(job).__name__}")
        if job.protocol not in FAST_PROTOCOLS:
            raise ValueError(f"jobs[{g}] has protocol {job.protocol!r}; the fast path computes {FAST_PROTOCOLS} only")
        if job.coordinator is not None:
            raise ValueError(f"jobs[{g}] has a coordinator; protocols {FAST_PROTOCOLS} have none")
        if job.start_epoch != 0:
            raise ValueError(f"jobs[{g}] resumes at epoch {job.start_epoch}; the fast path trains from scratch only")
        for name in shared:
            if getattr(job, name) != getattr(jobs[0], name):
                raise ValueError(
                    f"these jobs must share {tuple(shared)}; jobs[{g}].{name}="
                    f"{getattr(job, name)!r} but jobs[0].{name}={getattr(jobs[0], name)!r}"
                )
    return jobs


class _Settings:
    """Per-job arrays (one entry per grid row) of what the step needs."""

    def __init__(self, jobs: Tuple[GLMJob, ...], X: List[np.ndarray], y: np.ndarray):
        from . import hdp

        G = len(jobs)
        parties = jobs[0].parties
        self.lr = np.array([j.lr for j in jobs])[:, None]
        self.lam = np.array([j.lam for j in jobs])[:, None]
        self.mu = np.array([j.mu for j in jobs])[:, None]
        self.k = np.array([math.inf if j.k is None else j.k for j in jobs])
        self.epochs = np.array([j.epochs for j in jobs])
        self.theta_bound = np.full(G, math.inf)
        self.ir_bound = np.full(G, math.inf)
        self.sigma = np.zeros((G, len(parties)))  # the mechanisms' sigmas (0: no noise), to group fresh rows
        # Per job, per party: the mechanism that releases that party's IRs (None: no noise).
        self.mechanisms: List[List[Any]] = [[None] * len(parties) for _ in jobs]
        self.seeded = np.zeros(G, dtype=bool)  # int noise_seed: the job's own per-party generators
        self.fresh = np.zeros(G, dtype=bool)  # noise_seed None: one OS-entropy generator per party
        self.info: List[Dict[str, float]] = [{} for _ in jobs]
        self.generators: List[List[Any]] = [[None] * len(parties) for _ in jobs]
        checked_rows = False
        for g, job in enumerate(jobs):
            if job.protocol != "hdp":
                continue
            # The hdp programs' own checks and constants (same errors).
            if not checked_rows:
                for name, block in zip(parties, X):
                    hdp.check_row_norms(block, name)
                checked_rows = True
            constants = hdp.hdp_sensitivities_for(job).constants
            hdp.check_labels(job, y, constants)
            mechanisms = hdp.hdp_mechanisms(job)
            self.info[g] = hdp.hdp_noise_scales(job)
            if constants.theta_bound is not None:
                self.theta_bound[g] = constants.theta_bound
            self.ir_bound[g] = constants.L
            if job.noise:
                self.mechanisms[g] = [mechanisms["active"]] + [mechanisms["passive"]] * (len(parties) - 1)
                self.sigma[g] = [m.sigma for m in self.mechanisms[g]]
                if job.noise_seed is None:
                    self.fresh[g] = True
                else:
                    self.seeded[g] = True
                    self.generators[g] = [hdp.noise_generator(job, party) for party in parties]
        self.fresh_generators: Optional[List[Any]] = None
        if self.fresh.any():
            from ..kernels import NoiseGenerator

            self.fresh_generators = [NoiseGenerator() for _ in parties]
        self.any_theta_bound = bool(np.isfinite(self.theta_bound).any())
        self.any_ir_bound = bool(np.isfinite(self.ir_bound).any())

    def keep(self, rows: np.ndarray) -> None:
        """Drop the grid rows not in ``rows`` (finished jobs)."""
        for name in ("lr", "lam", "mu", "k", "epochs", "theta_bound", "ir_bound", "sigma", "seeded", "fresh"):
            setattr(self, name, getattr(self, name)[rows])
        self.generators = [self.generators[g] for g in rows]
        self.mechanisms = [self.mechanisms[g] for g in rows]


def _release(settings: _Settings, party: int, values: np.ndarray) -> np.ndarray:
    """What ``party`` sends for one step: row g of the ``(G, m)`` ``values``
    released by job g's mechanism for that party (its lattice release; rows
    of noise-free jobs unchanged). A seeded job takes one ``(m,)`` release
    from its own generator, as its protocol program does (hence the same
    values); the unseeded ones are released together, one call per distinct
    sigma from the party's OS-entropy generator (independent rows: the same
    distribution, and there is no stream to match)."""
    if not (settings.seeded.any() or settings.fresh.any()):
        return values
    out = values.copy()
    for g in np.flatnonzero(settings.seeded):
        out[g] = settings.mechanisms[g][party].release(values[g], generator=settings.generators[g][party])
    fresh = np.flatnonzero(settings.fresh)
    sigmas = settings.sigma[fresh, party]
    for sigma in np.unique(sigmas):
        rows = fresh[sigmas == sigma]
        # cast: the generators exist whenever some job has fresh noise, the only case this loop runs.
        generator = cast(List[Any], settings.fresh_generators)[party]
        # Rows with one sigma: any of their mechanisms releases them alike (the release depends on sigma only).
        out[rows] = settings.mechanisms[rows[0]][party].release(values[rows], generator=generator)
    return out


def _forward(Xs: np.ndarray, W: np.ndarray, exact: bool) -> np.ndarray:
    """``(G, m)``: row g = ``Xs @ W[g]`` (what party programs compute)."""
    if exact:
        return np.stack([Xs @ w for w in W]) if len(W) else np.empty((0, Xs.shape[0]))
    return W @ Xs.T


def _backward(R: np.ndarray, Xs: np.ndarray, exact: bool) -> np.ndarray:
    """``(G, d)``: row g = ``R[g] @ Xs``."""
    if exact:
        return np.stack([r @ Xs for r in R]) if len(R) else np.empty((0, Xs.shape[1]))
    return R @ Xs


def _clip_rows(W: np.ndarray, k: np.ndarray, exact: bool) -> np.ndarray:
    """Per-row ``w / max(1, ||w|| / k)`` (``k = inf``: unchanged)."""
    if exact:
        norms = np.array([np.linalg.norm(w) for w in W])
    else:
        norms = np.sqrt(np.einsum("ij,ij->i", W, W))
    return W / np.maximum(1.0, norms / k)[:, None]


def _clip_entries(A: np.ndarray, bound: np.ndarray) -> np.ndarray:
    """Row g clipped to ``[-bound[g], bound[g]]`` (inf: unchanged)."""
    return np.clip(A, -bound[:, None], bound[:, None])


def fit_grid(parts: Sequence[Any], y: Any, jobs: Sequence[GLMJob], *, exact: bool = False,
             blas_threads: Optional[int] = 1) -> GridFit:
    """Train every job of ``jobs`` on the same data; returns a :class:`GridFit`
    (``fit[g]`` = job g's per-party weight blocks).

    Parameters
    ----------
    parts : one feature block per party, active first, rows aligned
        (``len(parts) == 1 + len(job.passives)``); no preprocessing is applied
        ("hdp" needs ``||x_i|| <= 1`` per party and refuses other rows, as the
        protocol does).
    y : labels of the active party (``{-1, +1}`` for "logistic" / "svm").
    jobs : GLMJob with protocol "plain" or "hdp" sharing
        :data:`GRID_SHARED_FIELDS`; ``n_samples`` must equal the row count.
        Other fields may differ per job (see the module docstring).
    exact : True reproduces the threaded protocols bit for bit (per-job
        matrix-vector products); False (default) uses matrix products over
        the grid (rounding-level differences, several times faster).
    blas_threads : BLAS threads during the fit (via threadpoolctl; the limit
        is process-wide while it runs). 1 by default: the products are small
        (``G x d x b``) and thread hand-offs cost more than they save; on a
        loaded machine spinning BLAS threads made fits 5x slower. None leaves
        the BLAS setting alone.

    Jobs with ``noise_seed=None`` get fresh OS-entropy noise, as the
    protocol's do; an int ``noise_seed`` gives the protocol's noise exactly.
    """
    jobs = _check_jobs(jobs)
    if not isinstance(exact, bool):
        raise TypeError(f"exact must be a bool, got {type(exact).__name__}")
    if blas_threads is not None:
        blas_threads = check_positive_int(blas_threads, "blas_threads")
    first = jobs[0]
    parties = first.parties
    blocks = _check_blocks(parts, None, len(parties))
    X: List[np.ndarray] = []
    for i, (name, block) in enumerate(zip(parties, blocks)):
        # PartyData.checked: the protocols' own validation (shapes, NaN, labels).
        Xp, yp = PartyData(block, y if i == 0 else None).checked(first, name, needs_labels=(i == 0))
        X.append(Xp)
        if i == 0:
            labels = yp
    assert labels is not None  # the active party's checked(needs_labels=True) raises rather than return none
    settings = _Settings(jobs, X, labels)
    if blas_threads is None:
        weights = _train(first, X, labels, settings, exact)
    else:
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=blas_threads, user_api="blas"):
            weights = _train(first, X, labels, settings, exact)
    return GridFit(jobs, weights, tuple(settings.info))


def _train(first: GLMJob, X: List[np.ndarray], labels: np.ndarray, settings: _Settings,
           exact: bool) -> Tuple[np.ndarray, ...]:
    """The grid recursion (see the module docstring); ``(G, d_P)`` per party."""
    b = first.batch_size
    G = len(settings.epochs)
    W = [np.zeros((G, Xp.shape[1])) for Xp in X]
    rows = np.arange(G)  # grid row -> job index, for the jobs still training
    final = [np.zeros((G, Xp.shape[1])) for Xp in X]
    for epoch in range(int(settings.epochs.max())):
        for idx in batch_indices(first.n_samples, b, first.seed, epoch, first.shard_rows):
            Xs = [Xp[idx] for Xp in X]
            theta = _forward(Xs[0], W[0], exact)
            for p in range(1, len(X)):
                theta = theta + _release(settings, p, _forward(Xs[p], W[p], exact))
            if settings.any_theta_bound:
                theta = _clip_entries(theta, settings.theta_bound)
            ys = np.broadcast_to(labels[idx], theta.shape)
            ir = loss_gradient(first.loss, theta, ys)
            # "hdp": |h| <= L, clipped by the active party before release and by
            # every passive party after the noise (see vflsec.dp.sensitivity).
            if settings.any_ir_bound:
                ir = _clip_entries(ir, settings.ir_bound)
            released = _release(settings, 0, ir)
            if settings.any_ir_bound:
                released = _clip_entries(released, settings.ir_bound)
            for p in range(len(X)):
                grad = _backward(ir if p == 0 else released, Xs[p], exact) / b
                step = penalized_step(first.penalty, W[p], grad, settings.lr, settings.lam, settings.mu)
                W[p] = _clip_rows(step, settings.k, exact)
        done = settings.epochs == epoch + 1
        if done.any():
            for p in range(len(X)):
                final[p][rows[done]] = W[p][done]
                W[p] = W[p][~done]
            rows = rows[~done]
            settings.keep(np.flatnonzero(~done))
    return tuple(final)
