"""Protocol "hdp": HDP-VFL (Algorithm 1), Gaussian noise on every released IR.

Every passive party releases ``X_B[s] w_B`` plus ``N(0, sigma_B^2)`` noise;
the active party releases ``IR_A`` plus ``N(0, sigma_A^2)`` (its own gradient
uses the un-noised ``IR_A``). Each release goes through
:func:`vflsec.kernels.add_gaussian_noise` (the lattice release: a float
``x + noise`` would leak ``x`` through its rounding). The sigmas protect the
whole sequence of IRs released during training: sensitivities from Lemmas 3
and 4 with ``T = epochs * ceil(n / b)`` steps, calibrated to one
``(epsilon, delta)`` by ``vflsec.dp.gaussian_sigma`` ("analytic" by default,
"classic" reproduces the paper and is valid only for epsilon < 1) with
``coordinates`` = every value one party releases in the run
(:func:`hdp_release_coordinates`).

Requirements enforced here because the guarantee depends on them: a finite
clip ``k``; every row of every party's block has ``||x_i||_2 <= 1``; labels
within the loss's bounds (least squares: ``|y| <= 3``; Poisson: the public
``job.y_max``); a non-expansive joint step of the P coupled data parties
(``lr <= 2 / (P beta_theta + lam)`` with the L2 penalty, ``2 / (P beta_theta)``
with L1 / elastic net; derivation in :mod:`vflsec.dp.sensitivity`). Each
passive party clips every received ``Sec[IR_A]`` entry to ``[-L, L]``
before its gradient (without the clip the noisy value is unbounded and so
is the per-step sensitivity of its next IRs), and the active party clips
``IR_A = h`` itself to ``[-L, L]`` (a no-op for the logistic loss and for
Poisson with its theta clip; for the L2-loss SVM and least squares
``|h| <= L`` is otherwise not guaranteed, and the lemmas assume it). For Poisson the active party clips ``theta`` to
``+-(number of parties) * k`` before the loss derivative, as the Poisson
constants require. ``job.noise=False`` is a testing aid that turns
the noise off (the run then equals "plain"); it gives no privacy.

Time spent sampling noise is reported as the "crypto" phase (the cost of
the protection mechanism).
"""
from __future__ import annotations

from typing import Dict, cast

import numpy as np

from ..dp.sensitivity import ROW_NORM_TOLERANCE  # re-exported (older imports)
from ..dp.sensitivity import check_row_norms as check_unit_rows
from . import ir_exchange
from .ir_exchange import active_program, passive_program
from .job import GLMJob, PhaseClock
from .registry import register_protocol

__all__ = [
    "PROTOCOL",
    "ROW_NORM_TOLERANCE",
    "check_labels",
    "check_row_norms",
    "hdp_noise_scales",
    "hdp_release_coordinates",
    "hdp_sensitivities_for",
    "noise_generator",
]



def hdp_sensitivities_for(job: GLMJob):
    """Lemma 3/4 sensitivities (``vflsec.dp.HDPSensitivities``) of ``job``'s
    IR sequences, after checking the conditions the lemmas assume."""
    from ..dp import hdp_sensitivities

    if job.k is None:
        raise ValueError("protocol 'hdp' needs a finite weight clip k > 0 (the sensitivity depends on it)")
    n_parties = 1 + len(job.passives)
    extra = {}
    if job.loss == "poisson":
        if job.y_max is None:
            raise ValueError("protocol 'hdp' with loss 'poisson' needs the public label bound y_max")
        extra = dict(y_max=job.y_max)
    # Refuses an lr above 2 / (n_parties * beta_theta [+ lam]): the coupled
    # joint step must be non-expansive (derivation in vflsec.dp.sensitivity).
    sens = hdp_sensitivities(
        loss=job.loss,
        lr=job.lr,
        epochs=job.epochs,
        steps=job.total_steps,
        batch_size=job.batch_size,
        k=job.k,
        n_parties=n_parties,
        penalty=job.penalty,
        lam=job.lam,
        **extra,
    )
    return sens


def hdp_release_coordinates(job: GLMJob) -> int:
    """How many released values of one party the sensitivity covers: every
    IR entry of the run, ``epochs * n_samples`` (each epoch releases one value
    per row, batches of ``batch_size`` and a smaller last one).

    The Lemma 3/4 bound is on the L2 distance of the *whole* IR sequence (one
    Gaussian mechanism for all of training), and once the changed row has been
    seen every later IR entry can differ, so all of them count towards the
    sampler's per-draw error bound (:mod:`vflsec.dp.lattice`), not just one
    batch."""
    return job.epochs * job.n_samples


def hdp_noise_scales(job: GLMJob) -> Dict[str, float]:
    """Public noise parameters of ``job``: ``sensitivity_active``,
    ``sensitivity_passive``, ``sigma_active``, ``sigma_passive`` (sigmas are
    reported even when ``job.noise`` is False) and ``coordinates`` (see
    :func:`hdp_release_coordinates`; the sigmas are calibrated for the
    lattice release of that many values)."""
    from ..dp import gaussian_sigma

    sens = hdp_sensitivities_for(job)
    d = hdp_release_coordinates(job)
    return {
        "sensitivity_active": float(sens.active),
        "sensitivity_passive": float(sens.passive),
        "sigma_active": float(gaussian_sigma(job.epsilon, job.delta, sens.active, method=job.calibration,
                                             coordinates=d)),
        "sigma_passive": float(gaussian_sigma(job.epsilon, job.delta, sens.passive, method=job.calibration,
                                              coordinates=d)),
        "coordinates": d,
    }


def check_labels(job: GLMJob, y: np.ndarray, constants) -> None:
    """ValueError unless the labels respect the bound the loss constants assume."""
    if job.loss == "least_squares" and float(np.max(np.abs(y))) > constants.k_y:
        raise ValueError(
            f"HDP-VFL least squares assumes standardized targets with |y| <= k_y = {constants.k_y:g}; "
            f"got max |y| = {float(np.max(np.abs(y))):.6g} (standardize and clip the targets)"
        )
    # hdp_sensitivities_for refuses loss "poisson" without y_max, so it is set here.
    if job.loss == "poisson" and float(np.max(y)) > cast(float, job.y_max):
        raise ValueError(f"labels exceed the public bound y_max={job.y_max:g} (max y = {float(np.max(y)):g})")


def check_row_norms(X: np.ndarray, party: str) -> None:
    """ValueError unless every row of ``X`` has L2 norm <= 1."""
    check_unit_rows(X, what="HDP-VFL", party=party, remedy="Scale each party's rows first")


def noise_generator(job: GLMJob, party: str):
    """The DP noise generator of ``party`` in ``job``: the OS-entropy CSPRNG, or
    with ``job.noise_seed`` a reproducible stream of its own (testing)."""
    from ..kernels import NoiseGenerator

    if job.noise_seed is None:
        return NoiseGenerator()  # OS-entropy CSPRNG
    # Distinct, reproducible stream per party from one public test seed.
    state = np.random.SeedSequence([int(job.noise_seed), job.parties.index(party)]).generate_state(1, np.uint64)
    return NoiseGenerator(int(state[0]) & ((1 << 63) - 1))


def _release(job: GLMJob, party: str, sigma: float, clock: PhaseClock):
    if not job.noise:
        return lambda ir: ir
    from ..kernels import add_gaussian_noise

    generator = noise_generator(job, party)

    def release(ir: np.ndarray) -> np.ndarray:
        # The lattice release (never ir + float noise: its rounding leaks ir).
        with clock.crypto():
            return add_gaussian_noise(ir, sigma, generator=generator)

    return release


def hdp_active(endpoint, job, data):
    clock = PhaseClock()
    X, y = data.checked(job, endpoint.name, needs_labels=True)
    check_row_norms(X, endpoint.name)
    constants = hdp_sensitivities_for(job).constants
    check_labels(job, y, constants)
    scales = hdp_noise_scales(job)
    release = _release(job, endpoint.name, scales["sigma_active"], clock)
    return active_program(
        endpoint, job, data, release=release, clock=clock, info=scales, X=X, y=y,
        theta_bound=constants.theta_bound, ir_bound=constants.L,
    )


def hdp_passive(endpoint, job, data):
    clock = PhaseClock()
    X, _ = data.checked(job, endpoint.name, needs_labels=False)
    check_row_norms(X, endpoint.name)
    scales = hdp_noise_scales(job)
    release = _release(job, endpoint.name, scales["sigma_passive"], clock)
    bound = hdp_sensitivities_for(job).constants.L
    return passive_program(endpoint, job, data, release=release, clock=clock, info=scales, X=X,
                           received_bound=bound)


PROTOCOL = {"active": hdp_active, "passive": hdp_passive}
# Resuming would re-run the interrupted epoch: its IRs were (partly) released
# already, so a second release of them is beyond the calibrated budget.
register_protocol("hdp", PROTOCOL, replace=True, tags=ir_exchange.TAGS,
                  resume_refusal="repeating the interrupted epoch would release more noisy values than the "
                                 "privacy budget covers; start the job again")
