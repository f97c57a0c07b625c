"""HE-VFL with a DP model: protocols "paillier_dp", "ckks_dp" and "taylor_dp".

The flow is :mod:`.he_vfl`'s (the transcript hidden by encryption) with one
change: the key holder C adds Gaussian noise to every gradient it decrypts,
for every data party's block, the active party's included. A data party P
sends ``[[x_P + R_P]]``, ``x_P = c X_P[S]^T (theta + s(y))`` (``c`` the
scheme's scale, :class:`DecryptedUnits`) with its mask ``R_P``; C decrypts
``x_P + R_P``, rounds it to the lattice ``g Z`` of the noise and adds the
lattice Gaussian ``g Z_P`` of the job's mechanism (``"he_dp_gradient"``,
:func:`gradient_mechanism`); P removes its mask and keeps ``x_P`` plus that
noise (plus a rounding error below ``g / 2 <= sigma 2^-21``). The mask cancels,
the noise stays: no party ever holds a gradient without noise in the clear.

What each party sees
--------------------
* A data party P: ciphertexts ([[u_k]] at the active party, [[theta + s(y)]] at
  the passive ones), its own noisy gradient of every step and the weights it
  computes from them. Nothing else in the clear (the encrypted loss, decrypted
  without noise, is refused: ``encrypted_loss`` must stay False).
* The key holder C: each gradient without noise, but only masked --
  ``x_P + R_P`` -- and the noise it drew. Paillier's mask here is uniform on
  ``[0, 2^(key_bits - 8))`` (not all of Z_n: the rounding to the noise lattice
  needs the masked value as an integer without wrap-around), so C's view is
  within statistical distance ``|x_P| 2^-(key_bits - 8 - 80)`` (fixed point
  2^-80) of one that does not depend on the data: below 2^-1900 at 2048 bits.
  CKKS keeps its mask uniform on ``[-2^18, 2^18]`` (statistical hiding
  ``|x| / 2^19`` per value, as for "ckks"). The DP guarantee does not cover C:
  what protects the data from C is the mask, not the noise.
* A data party colluding with C learns its gradients without noise (C knows
  the noise); like HE-VFL itself, the protocol assumes C colludes with nobody.
  ``taylor_dp`` is the same flow in the clear (a reference for accuracy, as
  "taylor" is): there every party sees the residuals and partial scores, and
  the guarantee covers the trained weights only.

Sensitivity (replace-one: one row's features at every party and its label
change; the rows are fixed by PSI). With ``P`` data parties, every block's
rows of norm ``<= 1`` (the row normalisation of :mod:`.model`; checked) and
every weight block clipped to ``||w_P|| <= k`` after each step (``job.k``,
required), the encrypted residual of row ``i`` is ``r_i = theta_i + s(y_i)``
with ``|theta_i| <= sum_P ||x_iP|| ||w_P|| <= P k`` and ``|s(y)| <= s_max``
(the Taylor-approximated logistic loss: ``s = -2y``, ``s_max = 2``; least
squares: ``s = -y``, ``|y| <= 3`` after the design's clip), so
``|r_i| <= P k + s_max`` (:func:`residual_bound`). Every data party checks its
own part of that bound on what it encrypts or adds (``|u_P| <= k`` for a
passive party's partial scores, ``|u_A + s(y)| <= k + s_max`` for the active
party's), so a job whose rows or weights break the derivation fails.

Row ``i`` adds ``c_i = x_i r_i`` to the joint batch sum ``X[S]^T r`` of every
block (``x_i`` the row's features at every party, ``||x_i||^2 <= P``). The
triangle inequality gives ``||c_i - c_i'|| <= 2 sqrt(P) (P k + s_max)``. Tighter,
with ``theta_i = w . x_i``: ``c_i = x_i x_i^T w + s_i x_i``, and ``x x^T - x'
x'^T`` has eigenvalues in ``[-||x'||^2, ||x||^2]``, so ``||(x x^T - x' x'^T) w||
<= P ||w|| <= P sqrt(P) k``; with ``||s x - s' x'|| <= 2 s_max sqrt(P)``:

    Delta = sqrt(P) (P k + 2 s_max)        (in units of X^T r)

(:func:`base_sensitivity`; 14 sqrt(2) against the triangle inequality's 24
sqrt(2) at P = 2, k = 5). It is nearly tight: two rows with the same
component ``-a`` along the weights in every block, opposite orthogonal parts
and label +1 move the sum by ``2 sqrt(P) (P k a + 2) sqrt(1 - a^2)``, 92% of
it at P = 2, k = 5 for the best ``a`` (the largest change a numerical search
over pairs of rows finds; tests/glm/test_he_dp.py, and the audit's pair).
Added to it: the row-norm tolerance and the clip's float rounding
(relative 1e-9 each), the float64 rounding of the partial scores and of the
residual, Paillier's fixed-point rounding of every
encrypted value and feature (2^-41 each), CKKS's decryption error (the bound
``2^-(scale_bits - 24)`` of :mod:`vflsec.he.ckks`, measured there, not proved)
and its flooding lattice, ``taylor_dp``'s float64 rounding, and the rounding of
the decrypted value to the noise lattice (``g`` per value). The mechanism's
sensitivity (:func:`gradient_mechanism`) is all of it, in the units C decrypts.

Accounting. Every step releases one vector: the noisy gradients of every block
(``sum_P d_P`` values, one sigma). Batches are the HE job's fixed, shuffled
partition of each epoch (:func:`.he_vfl.he_batches`; every row in exactly one
batch per epoch), not a Poisson sample: every data party must know which rows
a batch holds to compute its part, so the sample is known to every party, and
amplification by subsampling (which needs the sample hidden from the
adversary) does not hold against any of them. What does hold: by adaptive
composition a step whose batch lacks the row costs it nothing (given the
outputs so far, its release has the same law in both worlds), so a row's
privacy loss is the composition of ``epochs`` Gaussian releases of
sensitivity ``Delta`` -- the PLD accountant's exact Gaussian composition over
all steps (:meth:`vflsec.dp.GaussianMechanism.privacy_spent` with ``count =
epochs``). The noise multiplier is calibrated for that by
:func:`vflsec.dp.accounting.noise_multiplier_for_epsilon` (same accountant path,
so the reported epsilon never exceeds the target).

The guarantee (:func:`he_dp_privacy_spent`, the estimator's ``privacy_spent_``
for every data party): the whole sequence of every block's noisy gradients is
(epsilon, delta)-DP under replace-one, so every party's weights, the final
model (all blocks) and everything a data party sees in the clear are, against
every other data party and anyone reading the model. Ciphertexts are covered
by the encryption (semantic security), not by DP.

Threat model: semi-honest data parties. A data party that deviates is not covered, and one
deviation undoes the guarantee against it without anyone noticing (measured:
``tests/glm/test_he_dp_deviation.py``): raising its masked product to a plaintext power ``M``
before adding its mask (honest width and header), it gets ``M x_P + noise`` decrypted and
divides by ``M`` -- its gradient with noise ``sigma / M`` (at ``M = 2^60`` the fixed point's
exact value), from which a passive party reads the residuals (the labels) and the active
party the other parties' partial scores. The key holder cannot tell: an honest masked value is
uniform on a range far wider than any gradient (the mask must hide it), so a scaled one looks
the same; its range check ("Bounds on receipt") bounds what an honest request can be, and a
scaled one stays within it. Closing it needs the request's form proved (a zero-knowledge proof
that it is ``X_P^T [[r]] + R_P`` with ``X_P`` of unit rows) or noise the requesting party cannot
rescale; neither is implemented.

Bounds on receipt
-----------------
With ``R`` = :func:`residual_bound`, ``rho = 1 + ROW_NORM_TOLERANCE`` (``|x_ij| <= ||x_iP|| <=
rho``), ``|S| < 2b`` the batch's rows (``b = job.batch_size``), ``alpha`` the residual model's
factor (1/4 for the logistic Taylor residual, 2 for least squares: :mod:`.he_vfl`'s ``g = alpha
X^T r / b``) and ``c`` the scheme's scale (:class:`DecryptedUnits`), an honest request decrypts to
``x_j = c sum_{i in S} X_ij r_i`` plus the mask, so ``|x_j| <= c |S| rho R`` plus the scheme's
value error (:meth:`ReceiptBounds.decrypted`). Every receiver checks the bound the honest sender's
values satisfy, each times ``1 + RECEIPT_SLACK`` (``1e-6``, for rounding), and refuses a value
beyond it, naming the sender (:func:`vflsec.vfl.check_received_array`,
:class:`.he_vfl.DecryptionRefused`):

* ``taylor_dp``'s values in the clear: the active party takes a passive party's partial scores
  only with ``|u_P| <= rho k`` (the clip tolerance included), a passive party the residual only
  with ``|r_i| <= R``;
* the key holder answers a request only within the range of an honest one: ``|x_j| <= 2b rho c
  R`` plus the value error (``taylor_dp``: the request is ``x_j`` itself), plus the mask's range
  (Paillier: ``[0, 2^(key_bits - 8))``, every value in fixed point 2^-80; CKKS: ``|R_P| <=
  2^18``, :data:`vflsec.he.ckks.DEFAULT_MASK_BOUND`) and, for CKKS, the flooding's support;
* a data party keeps its unmasked gradient only with ``|g_j| <= (alpha / b) |S| rho R`` plus
  ``alpha / (b c)`` times the value error, CKKS's flooding and the DP noise: a lattice release
  moves a value by less than ``(SUPPORT_SIGMAS + 1) lattice_sigma(sigma)`` (:func:`release_support`).

The encrypted residual is checked by no one: the active party forms it from the passive
parties' ``[[u_k]]``, which it cannot read, and no data party can read it. A residual beyond
``R`` shows up in the decrypted gradients only, so the refusal of a request (at the key holder)
or of an unmasked gradient (at a data party) names, besides the sender of the message, the party
whose encrypted values may have been inflated (:func:`residual_senders`,
:meth:`ReceiptBounds.request_refusal`). The noise support makes the gradient bound loose (about
131 sigma on the gradient): it stops a value no honest release can have, not a smaller deviation.

Where this differs from the designs the issue names (from their abstracts):
Xu, Yuan and Wu (IEEE BigData 2021) perturb the coefficients of the
polynomial (Taylor) objective once -- the functional mechanism -- with secure
aggregation, and release the minimiser; SQM (ICDE 2025) adds Skellam noise
shared among the parties, so that no party is trusted with the noise. Here the
noise is on every step's gradient of the same Taylor polynomial HE-VFL
descends, and the key holder draws it: the guarantee needs the key holder not
to collude with a data party (which HE-VFL assumes anyway), and it has no
subsampling amplification (above). The noise is the lattice Gaussian
(:func:`vflsec.kernels.add_gaussian_noise`), never a float sum.

Jobs: ``job.k`` finite, ``job.calibration`` "analytic" (the PLD calibration;
"classic" is HDP-VFL's formula and does not apply), ``job.epsilon`` /
``job.delta`` the whole run's budget (refused where no noise multiplier up
to 1e6 reaches it, or delta is below the PLD accountant's floor), no resume
(the repeated epochs' releases would not be counted), ``encrypted_loss``
off. ``job.noise=False`` is a testing aid (no noise, no guarantee);
``job.noise_seed`` makes the key holder's noise reproducible (testing only;
None draws it from the OS-entropy CSPRNG).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

import numpy as np

from ..dp.sensitivity import ROW_NORM_TOLERANCE, check_row_norms
from ..he.scheme import KeyHolderFactory, SchemeFactory
from . import he_vfl
from .job import GLMJob
from .model import LSQ_TARGET_CLIP
from .registry import register_protocol
from .weights import DP_WEIGHT_REFUSAL

__all__ = [
    "MECHANISM",
    "RESUME_REFUSAL",
    "DecryptedUnits",
    "GradientNoise",
    "RECEIPT_SLACK",
    "ReceiptBounds",
    "ResidualCheck",
    "base_sensitivity",
    "check_dp_job",
    "dp_info",
    "gradient_mechanism",
    "he_dp_privacy_spent",
    "is_he_dp_protocol",
    "register_dp_protocol",
    "release_support",
    "residual_bound",
    "residual_senders",
    "shift_bound",
]

MECHANISM = "he_dp_gradient"
RESUME_REFUSAL = ("the noisy gradients of the repeated epochs would be released again, and the job's "
                  "guarantee counts one release of each epoch")
# clip_norm's ||w|| <= k holds up to float rounding: allowed relative excess (the row norms get ROW_NORM_TOLERANCE).
WEIGHT_CLIP_SLACK = 1e-9
# |s(y)| of the losses the HE flow supports (.he_vfl's residual models): logistic s = -2y, least squares s = -y
# with |y| <= LSQ_TARGET_CLIP (the design's clip of the standardised targets).
_SHIFT_BOUNDS = {"logistic": 2.0, "least_squares": LSQ_TARGET_CLIP}
_COLLUSION = "a data party colluding with the key holder (which draws the noise)"
_UNIT_ROUNDOFF = 2.0 ** -53  # float64
# Fixed-point iterations for the lattice rounding term (it grows with sigma, which grows with it).
_MAX_LATTICE_ITERATIONS = 16
#: Relative slack of every bound checked on receipt (:class:`ReceiptBounds`): it covers the rounding of the values
#: (float64 sums, Paillier's 2^-41 fixed point, the 1e-9 row and clip tolerances: below 1e-9 of the bound, whose
#: residual term is at least s_max >= 2), never an honest value.
RECEIPT_SLACK = 1e-6


@dataclass(frozen=True)
class DecryptedUnits:
    """What a scheme's key holder decrypts for a data party: ``scale *
    X_P[S]^T (theta + s(y))`` plus the mask. ``encoding_error``: the absolute
    rounding of every encrypted residual term and feature (Paillier's fixed
    point, 2^-41; 0 where none). ``value_error``: a bound on the
    data-dependent error of each decrypted value, in its own units (CKKS's
    approximate decryption and flooding lattice; float64 rounding). ``caveat``:
    what the sensitivity assumes beyond the derivation (None: nothing)."""

    scale: float
    encoding_error: float = 0.0
    value_error: float = 0.0
    caveat: Optional[str] = None


def shift_bound(job: GLMJob) -> float:
    """``max |s(y)|`` of the job's loss (2 for the logistic loss's Taylor residual, 3 for least squares)."""
    try:
        return _SHIFT_BOUNDS[job.loss]
    except KeyError:
        raise ValueError(f"protocol {job.protocol!r} supports losses {sorted(_SHIFT_BOUNDS)}, got {job.loss!r}") \
            from None


def _clip(job: GLMJob) -> float:
    if job.k is None:
        raise ValueError(f"protocol {job.protocol!r} needs a finite weight clip k > 0: the DP sensitivity bounds "
                         "|theta| <= (number of parties) * k")
    return float(job.k)


def _score_bound(job: GLMJob) -> float:
    """``|u_P| <= ||x_iP|| ||w_P||`` for every row: one party's partial score bound."""
    return (1.0 + ROW_NORM_TOLERANCE) * _clip(job) * (1.0 + WEIGHT_CLIP_SLACK)


def residual_bound(job: GLMJob) -> float:
    """Bound on the encrypted residual ``|theta_i + s(y_i)| <= P k + s_max``
    (row and clip tolerances included), P the job's data parties."""
    return len(job.data_parties) * _score_bound(job) + shift_bound(job)


def base_sensitivity(job: GLMJob, units: DecryptedUnits) -> float:
    """The L2 distance between the noiseless values C decrypts at one step of
    two neighbouring datasets, every block together, before the rounding to
    the noise lattice: ``scale sqrt(P) (P k + 2 s_max)`` plus the schemes'
    errors (module docstring)."""
    parties = len(job.data_parties)
    rho = 1.0 + ROW_NORM_TOLERANCE
    kappa = _clip(job) * (1.0 + WEIGHT_CLIP_SLACK)
    s_max = shift_bound(job)
    widths = [he_vfl.agreed_width(job, party) for party in job.data_parties]
    core = math.sqrt(parties) * rho * (parties * rho * kappa + 2.0 * s_max)
    eps = units.encoding_error
    # The residual as encrypted: float64 dot products u_P = X_P w_P and the active party's u_A + s(y) (at most
    # M = max d_P + P + 2 terms on a path, error gamma_M times the terms' magnitudes), each rounded by eps.
    terms = max(widths) + parties + 2
    gamma = terms * _UNIT_ROUNDOFF / (1.0 - terms * _UNIT_ROUNDOFF)
    residual_error = parties * eps + gamma * (parties * rho * kappa + s_max)
    # Rounded features x~ (||x~ - x|| <= sqrt(sum d_P) eps) times the residual r~ (|r~ - r| <= residual_error):
    # ||x~ r~ - x r|| <= ||x~ - x|| |r~| + ||x|| |r~ - r|, once per world.
    drift = (math.sqrt(sum(widths)) * eps * (residual_bound(job) + residual_error)
             + math.sqrt(parties) * rho * residual_error)
    return units.scale * (core + 2.0 * drift) + math.sqrt(sum(widths)) * 2.0 * units.value_error


@functools.lru_cache(maxsize=256)
def _mechanism(epsilon: float, delta: float, epochs: int, coordinates: int, base: float) -> Any:
    from ..dp.accounting import noise_multiplier_for_epsilon
    from ..dp.mechanisms import GaussianMechanism
    from ..kernels.noise import lattice_spacing

    z = noise_multiplier_for_epsilon(epsilon, delta, count=epochs, coordinates=coordinates,
                                     neighbours="replace_one", accountant="pld")
    # Rounding to the lattice g Z moves each value by < g / 2, so the lattice points of two neighbours are up to
    # ||x - x'|| + g sqrt(d) apart: g is a function of sigma, which grows with that term (a fixed point).
    spacing = lattice_spacing(z * base)
    for _ in range(_MAX_LATTICE_ITERATIONS):
        mechanism = GaussianMechanism.with_multiplier(MECHANISM, noise_multiplier=z,
                                                      sensitivity=base + math.sqrt(coordinates) * spacing,
                                                      coordinates=coordinates, neighbours="replace_one")
        used = lattice_spacing(mechanism.sigma)
        if used <= spacing:
            return mechanism
        spacing = used
    raise ValueError(f"the lattice rounding of {coordinates} values per step does not converge at noise multiplier "
                     f"{z:.4g} (sigma / lattice step >= 2^20 per value); use fewer feature columns or a larger epsilon")


def gradient_mechanism(job: GLMJob, units: DecryptedUnits) -> Any:
    """The job's :class:`vflsec.dp.GaussianMechanism` ``"he_dp_gradient"`` in
    the units C decrypts: one release per step of every block's gradient
    (``sum_P d_P`` coordinates), sensitivity :func:`base_sensitivity` plus the
    lattice rounding, noise multiplier the smallest whose ``job.epochs``
    releases are (``job.epsilon``, ``job.delta``)-DP under replace-one (PLD).
    ValueError for a budget that cannot be honoured."""
    coordinates = sum(he_vfl.agreed_width(job, party) for party in job.data_parties)
    return _mechanism(float(job.epsilon), float(job.delta), int(job.epochs), int(coordinates),
                      float(base_sensitivity(job, units)))


def gradient_sigma(job: GLMJob, mechanism: Any, units: DecryptedUnits) -> float:
    """The noise std on a party's gradient ``g_P = alpha X_P[S]^T (theta + s) / b``."""
    return he_vfl.residual_model(job).alpha * mechanism.sigma / (units.scale * job.batch_size)


def _caveat(job: GLMJob, units: DecryptedUnits) -> str:
    parts = [_COLLUSION]
    if units.caveat:
        parts.append(units.caveat)
    return "; ".join(parts)


def is_he_dp_protocol(name: str) -> bool:
    """True when protocol ``name`` is an HE protocol with a DP model (registered by
    :func:`register_dp_protocol`): its runs spend ``(job.epsilon, job.delta)``."""
    from .registry import get_protocol

    get_protocol(name)  # imports the protocol's module, which registers its units
    return name in _UNITS


def he_dp_privacy_spent(job: GLMJob) -> Any:
    """The guarantee of a job of an HE-DP protocol: its mechanism's
    ``privacy_spent`` over ``job.epochs`` releases at ``job.delta`` (the same
    for every data party: it covers every block's weights and the final model).
    None for any other protocol and for ``job.noise=False``."""
    from .registry import get_protocol

    get_protocol(job.protocol)  # imports the protocol's module, which registers its units
    units_of = _UNITS.get(job.protocol)
    if units_of is None or not job.noise:
        return None
    units = units_of(job)
    return gradient_mechanism(job, units).privacy_spent(job.delta, count=job.epochs, caveat=_caveat(job, units))


def dp_info(job: GLMJob, units: DecryptedUnits) -> Dict[str, Any]:
    """Public facts of the job's DP noise for a party's ``info``."""
    if not job.noise:
        return {"dp_noise": False}
    mechanism = gradient_mechanism(job, units)
    spent = mechanism.privacy_spent(job.delta, count=job.epochs)
    return {"dp_mechanism": MECHANISM, "dp_noise_multiplier": float(mechanism.noise_multiplier),
            "dp_sigma_gradient": float(gradient_sigma(job, mechanism, units)),
            "dp_sensitivity_gradient": float(he_vfl.residual_model(job).alpha * mechanism.sensitivity
                                             / units.scale / job.batch_size),
            "dp_releases_per_row": int(job.epochs), "epsilon_spent": float(spent.epsilon)}


class ResidualCheck:
    """A data party's check of its own part of :func:`residual_bound` on what it
    encrypts (a passive party's partial scores) or adds in the clear (the
    active party's ``u_A + s(y)``): a value beyond the bound means the rows or
    weights break the sensitivity's derivation, and fails the job."""

    def __init__(self, job: GLMJob):
        self.score = _score_bound(job)
        self.residual = self.score + shift_bound(job)

    @staticmethod
    def _check(values: np.ndarray, bound: float, what: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        worst = float(np.max(np.abs(values))) if values.size else 0.0
        if not worst <= bound:
            raise ValueError(f"{what} reaches {worst:.6g}, beyond the bound {bound:.6g} the DP sensitivity assumes "
                             "(rows of norm <= 1 and weights clipped to norm <= k)")
        return values

    def scores(self, values: np.ndarray) -> np.ndarray:
        return self._check(values, self.score, "a partial score X_P w_P")

    def active_part(self, values: np.ndarray) -> np.ndarray:
        return self._check(values, self.residual, "the active party's part u_A + s(y) of the residual")


def release_support(sigma: float) -> float:
    """The largest ``|y - x|`` of the lattice release ``y`` of ``x`` at ``sigma``, the rounding to
    its lattice included: ``(SUPPORT_SIGMAS + 1) lattice_sigma(sigma)`` (the sampler's finite
    support; derivation in :func:`vflsec.glm.ir_exchange.release_limit`). It also covers the key
    holder's rounding to the lattice before the release (a further ``g / 2 <= sigma' 2^-21``)."""
    from ..kernels.noise import SUPPORT_SIGMAS, lattice_sigma

    return (SUPPORT_SIGMAS + 1.0) * lattice_sigma(sigma)


class ReceiptBounds:
    """The bounds an honest sender's values satisfy in a job of an HE-DP protocol, which the
    receivers check (module docstring, "Bounds on receipt"); ``units``: what the scheme's key
    holder decrypts; ``flooding_sigma``: the sigma of noise the key holder adds before the DP
    release (CKKS's flooding; None: none)."""

    def __init__(self, job: GLMJob, units: DecryptedUnits, flooding_sigma: Optional[float] = None):
        self.job, self.units = job, units
        self.score = _score_bound(job) * (1.0 + RECEIPT_SLACK)
        self.residual = residual_bound(job) * (1.0 + RECEIPT_SLACK)
        self.batch_size = job.batch_size
        self.flooding = release_support(flooding_sigma) if flooding_sigma is not None else 0.0
        self.noise = release_support(gradient_mechanism(job, units).sigma) if job.noise else 0.0
        self.to_gradient = he_vfl.residual_model(job).alpha / (units.scale * job.batch_size)

    def decrypted(self, rows: int) -> float:
        """``|x_j|`` of an honest request of ``rows`` batch rows before its mask, in the key
        holder's units: ``scale |S| (1 + tol) R`` plus the scheme's value error."""
        return (self.units.scale * rows * (1.0 + ROW_NORM_TOLERANCE) * self.residual
                + self.units.value_error * (1.0 + RECEIPT_SLACK))

    def request(self) -> float:
        """``|x_j|`` of any honest request, flooded where the scheme floods: a batch has ``|S| < 2b`` rows."""
        return self.decrypted(2 * self.batch_size) + self.flooding

    def gradient(self, rows: int) -> float:
        """``|g_j|`` of the gradient a data party unmasks from an honest answer to its request of
        ``rows`` batch rows: ``(alpha / b) |S| (1 + tol) R`` plus the value error, the flooding and
        the DP release's support, each divided by the scale."""
        return self.to_gradient * (self.decrypted(rows) + self.flooding + self.noise) * (1.0 + RECEIPT_SLACK)

    def check_gradient(self, values: np.ndarray, rows: int, receiver: str) -> None:
        """ValueError unless every ``|g_j| <= gradient(rows)``: beyond it the key holder's answer
        is no honest one, or the encrypted residual behind it exceeded ``R`` (:func:`residual_senders`)."""
        bound = self.gradient(rows)
        largest = float(np.max(np.abs(values))) if values.size else 0.0
        if largest > bound:
            raise ValueError(f"|value| up to {largest:.6g}, beyond the bound {bound:.6g} of an honest answer: the key "
                             f"holder {self.job.coordinator!r} deviated, or {residual_senders(self.job, receiver)}")

    def request_refusal(self, found: str) -> str:
        """The key holder's reason to refuse a request whose value is ``found`` beyond the range of
        an honest one (it does not know who the request is from: the refusal names that party)."""
        return (f"{found}: the requesting party deviated, or the encrypted residual its request multiplies exceeded "
                f"R = {self.residual:.6g} (the active party {self.job.active!r} forms it from the passive parties' "
                "[[u_k]], which no data party can read)")


def residual_senders(job: GLMJob, party: str) -> str:
    """Who else can have made ``party``'s gradient exceed its bound: the encrypted residual, which
    the active party forms from the passive parties' [[u_k]] and no data party can read."""
    if party == job.active:
        return (f"a passive party ({', '.join(map(repr, job.passives))}) sent encrypted partial scores [[u_k]] beyond "
                "their bound (the active party sums them into the residual unread)")
    others = [p for p in job.passives if p != party]
    via = (f" (or a passive party it sums in, {', '.join(map(repr, others))}, sent [[u_k]] beyond their bound)"
           if others else "")
    return f"the active party {job.active!r} sent an encrypted residual [[r]] beyond its bound R{via}"


class GradientNoise:
    """The key holder's noise: the job's mechanism in its units, the lattice
    step ``spacing`` and its generator (OS-entropy CSPRNG, or the job's
    ``noise_seed``). ``mechanism`` is None for ``job.noise=False``."""

    def __init__(self, job: GLMJob, units: DecryptedUnits):
        from ..kernels.noise import lattice_spacing
        from .hdp import noise_generator

        self.mechanism = gradient_mechanism(job, units) if job.noise else None
        self.spacing = lattice_spacing(self.mechanism.sigma) if self.mechanism is not None else None
        assert job.coordinator is not None, "an HE job has a key holder"
        self.generator = noise_generator(job, job.coordinator) if job.noise else None

    @property
    def active(self) -> bool:
        return self.mechanism is not None

    def release(self, values: np.ndarray) -> np.ndarray:
        """Float values rounded to the lattice ``g Z``, then the mechanism's
        lattice release (``g (K + Z)``: for a lattice point exactly ``round(K +
        s N)``, post-processing of the Gaussian mechanism on ``K``)."""
        assert self.mechanism is not None and self.spacing is not None
        values = np.asarray(values, dtype=np.float64)
        return self.mechanism.release(self.spacing * np.rint(values / self.spacing), generator=self.generator)

    def steps(self, size: int) -> np.ndarray:
        """The lattice noise ``Z`` (int64, in units of the lattice step) of
        ``size`` values: the mechanism's release of zeros over the step."""
        assert self.mechanism is not None and self.spacing is not None
        noise = self.mechanism.release(np.zeros(size), generator=self.generator)
        steps = np.rint(noise / self.spacing)
        if not np.array_equal(steps * self.spacing, noise):  # pragma: no cover - the release is on the lattice
            raise AssertionError("the lattice release left the lattice")
        return steps.astype(np.int64)

    def info(self) -> Dict[str, Any]:
        if self.mechanism is None or self.spacing is None:
            return {"dp_noise": False}
        return {"dp_mechanism": MECHANISM, "dp_sigma": float(self.mechanism.sigma),
                "dp_sensitivity": float(self.mechanism.sensitivity), "dp_lattice_step": float(self.spacing)}


UnitsOf = Callable[[GLMJob], DecryptedUnits]
_UNITS: Dict[str, UnitsOf] = {}


def check_dp_job(job: GLMJob, units_of: UnitsOf, scheme_check: Optional[Callable[[GLMJob], Any]] = None) -> None:
    """Every check an HE-DP job gets before training: the scheme's own, the
    loss, a finite ``k``, no resume, no encrypted loss, the "analytic"
    calibration, and (with noise and agreed widths) a budget the mechanism can
    honour."""
    if scheme_check is not None:
        scheme_check(job)
    he_vfl.residual_model(job)
    shift_bound(job)
    _clip(job)
    if job.start_epoch:
        raise ValueError(f"protocol {job.protocol!r} cannot resume (start_epoch={job.start_epoch}): {RESUME_REFUSAL}")
    if job.options.get("encrypted_loss", False) is not False:
        raise ValueError(f"protocol {job.protocol!r} refuses options['encrypted_loss']: the loss is decrypted "
                         "without noise, outside the DP guarantee")
    if job.calibration != "analytic":
        raise ValueError(f"protocol {job.protocol!r} calibrates its noise by PLD accounting; calibration="
                         f"{job.calibration!r} (HDP-VFL's Gaussian formula) does not apply: use 'analytic'")
    if job.noise and job.widths is not None:
        gradient_mechanism(job, units_of(job))


def check_party_rows(job: GLMJob, party: str, X: Any, y: Any) -> None:
    """A data party's own rows before training: norm <= 1 (the sensitivity's
    row bound) and, for the active party, labels within ``s_max``."""
    check_row_norms(X, what=f"protocol {job.protocol!r}", party=party,
                    reason=" (the DP sensitivity's row bound)")
    if y is not None:
        labels = np.asarray(y, dtype=np.float64)
        limit = 1.0 if job.loss == "logistic" else shift_bound(job)
        if labels.size and float(np.max(np.abs(labels))) > limit:
            raise ValueError(f"protocol {job.protocol!r} needs labels |y| <= {limit:g} (the DP sensitivity's bound); "
                             f"party {party!r} has {float(np.max(np.abs(labels))):.6g}")


def register_dp_protocol(name: str, make_scheme: SchemeFactory, make_key_holder: KeyHolderFactory,
                         units_of: UnitsOf, scheme_check: Optional[Callable[[GLMJob], Any]] = None) -> Dict[str, Any]:
    """Register protocol ``name``: :mod:`.he_vfl`'s roles with the DP scheme and
    key holder, the checks of :func:`check_dp_job`, no resume, and ``units_of``
    for its privacy report (:func:`he_dp_privacy_spent`)."""

    def check(job: GLMJob) -> None:
        check_dp_job(job, units_of, scheme_check)

    roles = he_vfl.protocol_roles(make_scheme, make_key_holder, check, option_defaults={"encrypted_loss": False})
    _UNITS[name] = units_of
    register_protocol(name, roles, replace=True, tags=he_vfl.TAGS, check=check, check_rows=check_party_rows,
                      resume_refusal=RESUME_REFUSAL, weight_refusal=DP_WEIGHT_REFUSAL)
    return roles
