"""HE-VFL: vertical GLM training under additively homomorphic encryption
(Hardy et al. 2017, the scheme FATE's HeteroLR uses), with the encryption
scheme pluggable: a scheme implements :class:`vflsec.he.scheme.PartyScheme`
and :class:`vflsec.he.scheme.KeyHolder` (:mod:`.paillier`, :mod:`.ckks`
register the protocols; ``PartyScheme`` and ``KeyHolder`` are also
importable from here, as before).

Parties: active A (features X_A, labels y), passive parties B_1..B_m
(features), coordinator C (key holder, no data). With the linear residual
d = alpha (theta + s(y)) -- the Taylor expansion of the logistic loss at 0
(alpha = 1/4, s = -2y: d = theta/4 - y/2) or the exact least-squares
residual (alpha = 2, s = -y) -- each step on batch rows S (b <= |S| < 2b, see
:func:`he_batches`) is:

In a weighted job (``job.weighted``, :mod:`vflsec.glm.weights`) A multiplies
[[d / alpha]] elementwise by its private row weights v before step 3 (a
ciphertext times its own plaintext): the residual of the weighted Taylor loss
v (ln 2 - y theta / 2 + theta^2 / 8) is v d; no other party learns v.

1. Every data party P confirms to C the block width d_P the job agreed on
   (``job.widths``); C checks every width, then makes the keys and sends
   its public key to every party once.
2. B_k sends [[u_k]], u_k = X_k[S] w_k, to A.
3. A forms [[d / alpha]] = sum_k [[u_k]] + (u_A + s(y)), re-randomized, and
   sends it to every B_k.
4. Every data party P computes [[G_P]] = [[d / alpha]]^T X_P[S] (ciphertext
   times plaintext), adds an encrypted random mask R_P and sends
   [[G_P + R_P]] to C; C decrypts and returns G_P + R_P (CKKS: with noise
   flooding); P unmasks and takes g_P = alpha G_P / b (nominal b, as in
   :mod:`.ir_exchange`), then the penalized step and norm clip of
   :mod:`.penalties`.

No party sees another's features, u_k, d or gradient in the clear; C sees
only masked values. Optional encrypted loss (one passive party only: with
more, theta^2 has cross terms no party can form): B also sends
[[c2 sum u_B^2 / n]]; A accumulates [[sum_i (c1_i + 2 c2 u_A,i) u_B,i / n]]
plus that over the epoch and C decrypts one scalar per epoch, which C and A
learn (A adds its own plaintext part; FATE's arbiter likewise sees the loss).
The logistic loss recorded is the Taylor approximation ln 2 - y theta/2 +
theta^2/8. No per-sample accuracy is recorded: it would need sign(theta_i).

Every data party checks what it receives before use: a ciphertext must
decode (the scheme's format, sizes and ranges) to a vector of the batch's
rows (one value for the loss term), a value returned in the clear
(CKKS's decrypted gradient, the loss) must be a finite float64 array of the
expected shape (:func:`vflsec.vfl.check_received_array`); anything else is
:class:`vflsec.vfl.PeerMessageRefused`, which fails the job naming the
sender, the tag and the step. So is every vector of a scheme in the clear
("taylor": ``plaintext_bound``, its bound per tag), and a DP scheme bounds the
unmasked gradient (``check_gradient``) as its key holder bounds a request
(:mod:`.he_dp`, "Bounds on receipt").

Every data party tells its scheme the batch sizes to come (``prepare_fresh``, from
:func:`he_batch_sizes`): the vector it makes fresh at each step (B's [[u_k]], A's
re-randomized [[d / alpha]]) can then take randomness made ahead of time (Paillier:
:class:`vflsec.he.RandomnessStream`), the same values either way.

Timings: ``crypto`` covers encryption, decryption, homomorphic operations and
(de)serialization of ciphertexts; ``messaging`` the channel; ``compute`` the
rest. Bytes per tag come from the channel.

Threat model. Every party, the key holder C included, is assumed
semi-honest (it follows the protocol and tries to learn from what it sees),
and C does not collude with a data party: C holds the secret key, so C and
any data party together can decrypt every ciphertext of the job. Under that
assumption no party learns another's features, u_k, d or gradient, and C
sees only masked values. The transport (mutual TLS, :mod:`vflsec.federation`)
authenticates who sent each message and under which tag.

A *malicious* data party is not defended against in general: the active
party A forms [[d]] and can put into it anything it received. An honest run
reveals d^T X_P[S] to P, d_P linear combinations of the batch's residuals
(inherent in the protocol); with d_P >= |S| they determine d (for a passive
party the labels, for A the sum of the passive parties' u_k). So an HE job
joins a partial last chunk of an epoch to the batch before it
(:func:`he_batches`: every batch has at least b rows), every data party
refuses a block of its own of d_P >= b columns and C refuses a job that
gives any data party, the active one included, d_P >= b
(:func:`check_block_width`). What C enforces, so that C is not a free
decryption oracle (a malicious A forwarding the passive party's [[u_B]] as a
"gradient" and reading u_B back, item 5 of issue 18; or claiming a wider
block than it has, issue 24):

* every width d_P comes from the job every party agreed on (``job.widths``;
  ``vflsec party`` agrees them in its handshake, :mod:`vflsec.runtime.handshake`),
  never from the party itself. Each data party checks its own block against
  it and confirms it to C (``he_register``) before any key is made; a
  confirmation of another width fails the job. Every decryption request of P
  must be for exactly d_P values (Paillier: at the product fixed-point level;
  CKKS: in the packed layout of a vector-matrix product of d_P columns, so a
  fresh batch-vector ciphertext such as [[u_B]] is refused whatever length
  its header claims);
* a request names its purpose ("gradient" or "loss") and the global step
  index, and must match C's schedule: exactly one gradient request per data
  party per step (a second one is read as the next step's and refused for
  its step index), one loss request from A at the last step of an epoch;
* requests arrive over the authenticated transport, so they are bound to
  their sender; a request of P is answered only to P.

Anything else is refused with :class:`DecryptionRefused`, which fails the
job naming the party, the step and the purpose. What remains possible for a
malicious A is what the honest protocol's outputs allow: one vector of d_A
(the agreed width, < b) linear combinations of values it holds encrypted per
step, in place of its own gradient. The agreed widths themselves are only as
true as each party's word where no party can check them: ``vflsec party``
takes every data party's announcement unless the job file pins ``widths``
(see :mod:`vflsec.runtime.handshake`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, cast

import numpy as np

from ..dp.sensitivity import check_row_norms
from ..federation.channel import Channel
from ..he.scheme import KeyHolder, KeyHolderFactory, PartyScheme, SchemeFactory
from ..vfl.received import PeerMessageRefused, check_received_array
from ..vfl.schedule import batch_indices
from .job import GLMJob, PartyData, PartyResult, PhaseClock
from .penalties import clip_norm, penalized_step

__all__ = [
    "DecryptionRefused",
    "KeyHolder",
    "protocol_roles",
    "PartyScheme",
    "TAGS",
    "active_program",
    "agreed_width",
    "check_block_width",
    "coordinator_program",
    "passive_program",
    "residual_model",
]

TAG_PUBLIC_KEY = "he_public_key"
TAG_U_PASSIVE = "he_u_passive"
TAG_U_SQUARED = "he_u_passive_sq"
TAG_RESIDUAL = "he_residual"
TAG_MASKED_GRADIENT = "he_masked_gradient"
TAG_GRADIENT = "he_gradient"
TAG_LOSS = "he_loss"
TAG_LOSS_VALUE = "he_loss_value"
TAG_REGISTER = "he_register"
TAGS = (TAG_PUBLIC_KEY, TAG_REGISTER, TAG_U_PASSIVE, TAG_U_SQUARED, TAG_RESIDUAL, TAG_MASKED_GRADIENT,
        TAG_GRADIENT, TAG_LOSS, TAG_LOSS_VALUE)

# What a vector in the clear is, by tag (a plaintext scheme's refusals name it).
_PLAINTEXT_NAMES = {TAG_U_PASSIVE: "partial score", TAG_U_SQUARED: "loss term", TAG_RESIDUAL: "residual"}

PURPOSE_GRADIENT = "gradient"
PURPOSE_LOSS = "loss"
# What the key holder refuses before any key is made (step -1).
PURPOSE_REGISTRATION = "registration"
PURPOSE_WIDTH = "agreed block width"


class DecryptionRefused(ValueError):
    """The key holder refused a decryption request (wrong sender, step,
    purpose, length or level), a party's registration (another width than
    the job agreed on) or the job's width of a party (step -1: before any
    key is made): a protocol violation that fails the job."""

    def __init__(self, party: str, step: int, purpose: str, reason: str):
        self.party, self.step, self.purpose = party, step, purpose
        what = f"{purpose} decryption request" if purpose in (PURPOSE_GRADIENT, PURPOSE_LOSS) else purpose
        when = f"at step {step}" if step >= 0 else "before any key is made"
        super().__init__(f"the key holder refused the {what} of {party!r} {when}: {reason}")


class ResidualModel:
    """d(theta, y) = alpha (theta + shift(y)); loss c0(y) + c1(y) theta + c2 theta^2."""

    def __init__(self, name: str, alpha: float, shift: Callable, c0: Callable, c1: Callable, c2: float):
        self.name, self.alpha, self.shift, self.c0, self.c1, self.c2 = name, alpha, shift, c0, c1, c2


_RESIDUALS = {
    # Taylor expansion of log(1 + exp(-y theta)) at theta = 0 (Hardy et al.).
    "logistic": ResidualModel("taylor", 0.25, lambda y: -2.0 * y,
                              lambda y: np.full_like(y, math.log(2.0)), lambda y: -0.5 * y, 0.125),
    # (y - theta)^2: the residual 2 (theta - y) is already linear, so exact.
    "least_squares": ResidualModel("exact", 2.0, lambda y: -y, lambda y: y * y, lambda y: -2.0 * y, 1.0),
}


def residual_model(job: GLMJob) -> ResidualModel:
    try:
        return _RESIDUALS[job.loss]
    except KeyError:
        raise ValueError(
            f"protocol {job.protocol!r} supports losses {sorted(_RESIDUALS)} (a residual linear in theta); "
            f"got {job.loss!r}"
        ) from None


def encrypted_loss_enabled(job: GLMJob) -> bool:
    """Whether the run computes the encrypted loss: ``options["encrypted_loss"]`` (default on,
    off for a weighted job), one passive party only. A weighted job refuses it: the passive
    party's term ``c2 |u_B|^2`` would need the active party's private weights."""
    flag = job.options.get("encrypted_loss", not job.weighted)
    if not isinstance(flag, bool):
        raise TypeError(f"options['encrypted_loss'] must be a bool, got {type(flag).__name__}")
    if flag and job.weighted:
        raise ValueError(f"protocol {job.protocol!r} cannot compute the encrypted loss of a weighted fit (the passive "
                         "party's term c2 |u_B|^2 would need the active party's private row weights) -- set "
                         "encrypted_loss to false or leave it out")
    return flag and len(job.passives) == 1


def _check_rows(make_scheme: SchemeFactory, X: np.ndarray, party: str) -> None:
    if not getattr(make_scheme, "requires_unit_rows", False):
        return
    # cast: a factory that declares requires_unit_rows also has a name (PaillierScheme, CKKSScheme, ...).
    check_row_norms(X, what=f"scheme {cast(Any, make_scheme).name!r}", party=party,
                    reason=" (its encrypted values must stay in range)")


def steps_per_epoch(job: GLMJob) -> int:
    """Batches per epoch of an HE job: ``max(1, floor(n / b))``."""
    return max(1, job.n_samples // job.batch_size)


def he_batches(job: GLMJob) -> Iterator[Tuple[int, int, np.ndarray]]:
    """``(epoch, step, rows)`` of an HE job: the job's schedule
    (:func:`vflsec.vfl.batch_indices`) with a partial last chunk joined to the
    batch before it, so that every batch has at least ``b`` rows (a
    small last batch would let a passive party solve its gradient for the
    residuals of those rows; see :func:`check_block_width`)."""
    for epoch in range(job.start_epoch, job.epochs):
        chunks = batch_indices(job.n_samples, job.batch_size, job.seed, epoch)
        if len(chunks) > 1 and len(chunks[-1]) < job.batch_size:
            tail = chunks.pop()
            chunks[-1] = np.concatenate([chunks[-1], tail])
        for step, idx in enumerate(chunks):
            yield epoch, step, idx


def he_batch_sizes(job: GLMJob) -> Iterator[int]:
    """The rows of each batch :func:`he_batches` yields, in order, without drawing the
    batches (what a party's scheme is told to prepare: :meth:`PartyScheme.prepare_fresh`)."""
    n, b = job.n_samples, job.batch_size
    chunks = -(-n // b)
    sizes = [b] * (chunks - 1) + [n - (chunks - 1) * b]
    if len(sizes) > 1 and sizes[-1] < b:
        sizes[-2:] = [sizes[-2] + sizes[-1]]
    for _ in range(job.start_epoch, job.epochs):
        yield from sizes


def smallest_batch(job: GLMJob) -> int:
    """Rows of the smallest batch of :func:`he_batches` (a job has b <= n)."""
    return job.batch_size


def check_block_width(job: GLMJob, party: str, width: int) -> None:
    """Refuse a data party's block of at least as many columns as a batch has rows.

    A data party P learns its gradient, d_P linear combinations X_P[S]^T d
    of the batch's residuals; with d_P >= |S| (and rows of X_P in general
    position) they determine d: for a passive party the active party's
    labels, for the active party the sum of the passive parties' partial
    scores u_k.
    """
    rows = smallest_batch(job)
    if width < rows:
        return
    fix = f"use batch_size={width + 1} or larger" if width < job.n_samples else "use more samples than features"
    learns = "the labels" if party != job.active else "the passive parties' partial scores"
    raise ValueError(
        f"party {party!r} has {width} features but a batch has only {rows} rows: its gradient "
        f"X_P^T d would reveal the residuals d (and {learns}) of those rows; {fix}, "
        f"or give the party fewer than {rows} features"
    )


def agreed_width(job: GLMJob, party: str) -> int:
    """Data party ``party``'s block width as the job agreed it (``job.widths``).

    Never a party's own claim: the key holder answers each party for exactly
    this many values, so an HE job without agreed widths is refused.
    """
    if job.widths is None:
        raise ValueError(
            f"protocol {job.protocol!r} needs every data party's block width in the job (job.widths: party -> "
            f"number of feature columns, agreed by every party); the key holder decrypts exactly that many "
            f"values per party and step. vflsec.glm.run_job and the estimator fill it in from the data, "
            f"`vflsec party` from the handshake"
        )
    return job.widths[party]


def _key_holder(job: GLMJob) -> str:
    """The coordinator's name: an HE job always has one (the protocol's roles include it)."""
    assert job.coordinator is not None, "an HE job has a coordinator"
    return job.coordinator


def _receive_scheme(endpoint: Channel, job: GLMJob, make_scheme: SchemeFactory, clock: PhaseClock) -> PartyScheme:
    payload = endpoint.recv(_key_holder(job), TAG_PUBLIC_KEY)
    with clock.crypto():
        try:
            return make_scheme(payload, job)
        except (ValueError, TypeError) as exc:
            raise PeerMessageRefused(endpoint.name, _key_holder(job), TAG_PUBLIC_KEY, "the key exchange",
                                     f"public key: {exc}") from None


def _load_ciphertext(endpoint: Channel, scheme: PartyScheme, clock: PhaseClock, payload: Any, sender: str,
                     tag: str, step: int, length: int) -> Any:
    """``payload`` decoded as an encrypted vector of ``length`` values, or
    :class:`PeerMessageRefused` naming ``sender`` (the scheme's decoder checks
    the format, sizes and ranges)."""
    plaintext_bound = getattr(scheme, "plaintext_bound", None)
    if plaintext_bound is not None:  # the values themselves ("taylor"): every one checked, none cast
        check_received_array(payload, receiver=endpoint.name, sender=sender, tag=tag, step=step, dtype=np.float64,
                             shape=(length,), bound=plaintext_bound(tag), what=_PLAINTEXT_NAMES.get(tag, "vector"))
    with clock.crypto():
        try:
            enc = scheme.loads(payload)
        except (ValueError, TypeError) as exc:
            raise PeerMessageRefused(endpoint.name, sender, tag, step, f"ciphertext: {exc}") from None
    if len(enc) != length:
        raise PeerMessageRefused(endpoint.name, sender, tag, step,
                                 f"ciphertext: an encrypted vector of {len(enc)} values, expected {length}")
    return enc


def _weigh(scheme: PartyScheme, enc: Any, weights: np.ndarray) -> Any:
    """Enc(weights * a) from Enc(a): the scheme's elementwise product with a plaintext vector
    (``mul_plain``; Paillier: one fixed-point level deeper, the level the key holder of a
    weighted job expects)."""
    multiply = getattr(scheme, "mul_plain", None)
    if multiply is None:
        raise ValueError(f"scheme {scheme.name!r} has no product with a plaintext vector: it cannot weight rows")
    return multiply(enc, weights)


def _global_step(job: GLMJob, epoch: int, step: int) -> int:
    return epoch * steps_per_epoch(job) + step


def _request(step: int, purpose: str, ciphertext: Any) -> Dict[str, Any]:
    """A decryption request: the ciphertext bound to its step and purpose."""
    return {"step": int(step), "purpose": purpose, "ciphertext": ciphertext}


def _register(endpoint: Channel, job: GLMJob, X: np.ndarray) -> None:
    """Check this party's block against the agreed width (before any key is
    made) and confirm the width to the key holder."""
    width = agreed_width(job, endpoint.name)
    if X.shape[1] != width:  # PartyData.checked refuses this already; the key holder relies on it
        raise ValueError(f"party {endpoint.name!r} holds {X.shape[1]} feature columns, the job agreed on {width}")
    check_block_width(job, endpoint.name, width)
    endpoint.send(_key_holder(job), TAG_REGISTER, {"n_features": int(width)})


def _masked_gradient(endpoint: Channel, job: GLMJob, scheme: PartyScheme, enc_residual: Any,
                     Xs: np.ndarray, factor: float, clock: PhaseClock, step: int) -> np.ndarray:
    with clock.crypto():
        payload, state = scheme.masked_dot(enc_residual, Xs, factor)
    holder, width = _key_holder(job), Xs.shape[1]
    endpoint.send(holder, TAG_MASKED_GRADIENT, _request(step, PURPOSE_GRADIENT, payload))
    reply = endpoint.recv(holder, TAG_GRADIENT)

    def checked(values: Any, what: str) -> np.ndarray:
        return check_received_array(values, receiver=endpoint.name, sender=holder, tag=TAG_GRADIENT, step=step,
                                    dtype=np.float64, shape=(width,), what=what)

    if isinstance(reply, np.ndarray):  # values in the clear (CKKS: decrypted, flooded)
        checked(reply, "masked gradient")
    with clock.crypto():
        try:
            gradient = scheme.unmask(reply, state, width)
        except (ValueError, TypeError, OverflowError) as exc:
            raise PeerMessageRefused(endpoint.name, holder, TAG_GRADIENT, step, f"masked gradient: {exc}") from None
    gradient = checked(gradient, "unmasked gradient")
    check_bound = getattr(scheme, "check_gradient", None)  # a DP scheme: the bound of an honest answer
    if check_bound is not None:
        try:
            check_bound(gradient, Xs.shape[0], endpoint.name)
        except ValueError as exc:
            raise PeerMessageRefused(endpoint.name, holder, TAG_GRADIENT, step, f"unmasked gradient: {exc}") from None
    return gradient


def active_program(endpoint: Channel, job: GLMJob, data: PartyData, make_scheme: SchemeFactory) -> PartyResult:
    clock = PhaseClock()
    model = residual_model(job)
    X, y = data.checked(job, endpoint.name, needs_labels=True)
    assert y is not None  # needs_labels=True: checked() raises rather than return no labels
    _check_rows(make_scheme, X, endpoint.name)
    with_loss = encrypted_loss_enabled(job)
    _register(endpoint, job, X)
    scheme = _receive_scheme(endpoint, job, make_scheme, clock)
    with clock.crypto():
        scheme.prepare_fresh(he_batch_sizes(job))  # the residual it re-randomizes at every step
    factor = model.alpha / job.batch_size
    n = job.n_samples
    history: Dict[str, List[float]] = {"loss": []} if with_loss else {}
    w = data.initial_coef(job, X.shape[1], history)
    epoch_enc = None
    epoch_plain = 0.0
    for epoch, step, idx in he_batches(job):
        Xs, ys = X[idx], y[idx]
        u_A = Xs @ w
        t = _global_step(job, epoch, step)
        encs = [_load_ciphertext(endpoint, scheme, clock, endpoint.recv(p, TAG_U_PASSIVE), p, TAG_U_PASSIVE, t,
                                 len(idx)) for p in job.passives]
        extra = _load_ciphertext(endpoint, scheme, clock, endpoint.recv(job.passives[0], TAG_U_SQUARED),
                                 job.passives[0], TAG_U_SQUARED, t, 1) if with_loss else None
        weights = data.batch_weights(job, endpoint.name, idx, ys)
        with clock.crypto():
            enc_u = encs[0]
            for enc in encs[1:]:
                enc_u = scheme.add(enc_u, enc)
            if weights is None:
                enc_residual = scheme.add_plain(enc_u, u_A + model.shift(ys))
            else:  # [[v (theta + s(y))]]: the weighted loss's residual (vflsec.glm.weights)
                enc_residual = scheme.add_plain(_weigh(scheme, enc_u, weights), weights * (u_A + model.shift(ys)))
            residual_bytes = scheme.dumps(enc_residual)
        for passive in job.passives:
            endpoint.send(passive, TAG_RESIDUAL, residual_bytes)
        if with_loss:
            # loss = c0 + c1 theta + c2 theta^2 with theta = u_A + u_B; A's part
            # in the clear, the part involving u_B under encryption. Its encrypted product
            # comes before the step's gradient: the executor runs it beside the passive
            # parties' products instead of after them, when this party would wait for it
            # with the next step's residual (Ray: behind the next steps' randomizers).
            epoch_plain += float(np.sum(model.c0(ys) + model.c1(ys) * u_A + model.c2 * u_A ** 2)) / n
            with clock.crypto():
                term = scheme.loss_term(enc_u, (model.c1(ys) + 2.0 * model.c2 * u_A) / n, extra)
                epoch_enc = term if epoch_enc is None else scheme.add(epoch_enc, term)
        g = _masked_gradient(endpoint, job, scheme, enc_residual, Xs, factor, clock, t)
        w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        if with_loss:
            if step == steps_per_epoch(job) - 1:
                with clock.crypto():
                    loss_bytes = scheme.dumps(epoch_enc)
                endpoint.send(_key_holder(job), TAG_LOSS, _request(t, PURPOSE_LOSS, loss_bytes))
                value = check_received_array(endpoint.recv(_key_holder(job), TAG_LOSS_VALUE), receiver=endpoint.name,
                                             sender=_key_holder(job), tag=TAG_LOSS_VALUE, step=t, dtype=np.float64,
                                             shape=(1,), what="loss")
                history["loss"].append(epoch_plain + float(value[0]))
                epoch_enc, epoch_plain = None, 0.0
        if step == steps_per_epoch(job) - 1:
            data.end_epoch(epoch, w, history)
    info = {**scheme.info(), "residual": model.name}
    return PartyResult(endpoint.name, "active", w, history=history, timings=clock.timings(endpoint), info=info)


def passive_program(endpoint: Channel, job: GLMJob, data: PartyData, make_scheme: SchemeFactory) -> PartyResult:
    clock = PhaseClock()
    model = residual_model(job)
    X, _ = data.checked(job, endpoint.name, needs_labels=False)
    _check_rows(make_scheme, X, endpoint.name)
    with_loss = encrypted_loss_enabled(job)
    _register(endpoint, job, X)  # the width checks, before any key is made; C checks them again
    scheme = _receive_scheme(endpoint, job, make_scheme, clock)
    with clock.crypto():
        scheme.prepare_fresh(he_batch_sizes(job))  # the u it encrypts at every step
    w = data.initial_coef(job, X.shape[1], {})
    factor = model.alpha / job.batch_size
    for epoch, step, idx in he_batches(job):
        Xs = X[idx]
        u = Xs @ w
        with clock.crypto():
            u_bytes = scheme.dumps(scheme.encrypt(u))
            extra = scheme.dumps(scheme.encrypt_scalar_for_loss(model.c2 * float(u @ u) / job.n_samples)) \
                if with_loss else None
        endpoint.send(job.active, TAG_U_PASSIVE, u_bytes)
        if with_loss:
            endpoint.send(job.active, TAG_U_SQUARED, extra)
        t = _global_step(job, epoch, step)
        enc_residual = _load_ciphertext(endpoint, scheme, clock, endpoint.recv(job.active, TAG_RESIDUAL), job.active,
                                        TAG_RESIDUAL, t, len(idx))
        g = _masked_gradient(endpoint, job, scheme, enc_residual, Xs, factor, clock, t)
        w = clip_norm(penalized_step(job.penalty, w, g, job.lr, job.lam, job.mu), job.k)
        if step == steps_per_epoch(job) - 1:
            data.end_epoch(epoch, w, {})
    info = {**scheme.info(), "residual": model.name}
    return PartyResult(endpoint.name, "passive", w, timings=clock.timings(endpoint), info=info)


def _checked_registration(job: GLMJob, party: str, payload: Any) -> None:
    """Refuse a registration of ``party`` that is not the job's agreed width."""
    agreed = agreed_width(job, party)
    width = payload.get("n_features") if isinstance(payload, dict) and set(payload) == {"n_features"} else None
    if isinstance(width, bool) or not isinstance(width, int):
        raise DecryptionRefused(party, -1, PURPOSE_REGISTRATION,
                                f"expected {{'n_features': {agreed}}}, got {_short(payload)}")
    if width != agreed:
        raise DecryptionRefused(party, -1, PURPOSE_REGISTRATION,
                                f"it registered {width} feature columns, the job agreed on {agreed} "
                                f"(job.widths); a request is answered for the agreed width only")


def _short(payload: Any, limit: int = 120) -> str:
    text = repr(payload)
    return text if len(text) <= limit else text[:limit] + "..."


def _checked_request(party: str, payload: Any, step: int, purpose: str) -> Any:
    """The ciphertext of ``party``'s request if it is for this ``step`` and ``purpose``."""
    if not isinstance(payload, dict) or set(payload) != {"step", "purpose", "ciphertext"}:
        raise DecryptionRefused(party, step, purpose, "not a request {step, purpose, ciphertext}")
    if payload["purpose"] != purpose:
        raise DecryptionRefused(party, step, purpose, f"the request is for {payload['purpose']!r}")
    got = payload["step"]
    if isinstance(got, bool) or not isinstance(got, int) or got != step:
        raise DecryptionRefused(party, step, purpose,
                                f"the request is for step {got!r} (one request per party and step)")
    return payload["ciphertext"]


def coordinator_program(endpoint: Channel, job: GLMJob, data: Optional[PartyData],
                        make_key_holder: KeyHolderFactory) -> PartyResult:
    clock = PhaseClock()
    if data is not None:
        raise ValueError("the coordinator holds no data")
    model = residual_model(job)
    with_loss = encrypted_loss_enabled(job)
    data_parties = job.data_parties
    # Every width from the agreed job, none from the party it describes; the
    # width rule for every data party, the active one included.
    widths = {party: agreed_width(job, party) for party in data_parties}
    for party in data_parties:
        try:
            check_block_width(job, party, widths[party])
        except ValueError as exc:
            raise DecryptionRefused(party, -1, PURPOSE_WIDTH, str(exc)) from None
    for party in data_parties:
        _checked_registration(job, party, endpoint.recv(party, TAG_REGISTER))
    with clock.crypto():
        holder = make_key_holder(job)
        public = holder.public_payload()
    for party in data_parties:
        endpoint.send(party, TAG_PUBLIC_KEY, public)
    history: Dict[str, List[float]] = {"loss_encrypted_part": []} if with_loss else {}
    for epoch, step, _idx in he_batches(job):
        t = _global_step(job, epoch, step)
        for party in data_parties:
            masked = _checked_request(party, endpoint.recv(party, TAG_MASKED_GRADIENT), t, PURPOSE_GRADIENT)
            with clock.crypto():
                try:
                    reply = holder.answer_gradient(masked, widths[party])
                except (ValueError, TypeError) as exc:
                    raise DecryptionRefused(party, t, PURPOSE_GRADIENT, str(exc)) from None
            endpoint.send(party, TAG_GRADIENT, reply)
        if with_loss and step == steps_per_epoch(job) - 1:
            loss_bytes = _checked_request(job.active, endpoint.recv(job.active, TAG_LOSS), t, PURPOSE_LOSS)
            with clock.crypto():
                try:
                    value = holder.decrypt_loss(loss_bytes)
                except (ValueError, TypeError) as exc:
                    raise DecryptionRefused(job.active, t, PURPOSE_LOSS, str(exc)) from None
            history["loss_encrypted_part"].append(value)
            endpoint.send(job.active, TAG_LOSS_VALUE, np.array([value]))
    info = {**holder.info(), "residual": model.name}
    return PartyResult(endpoint.name, "coordinator", None, history=history, timings=clock.timings(endpoint),
                       info=info)


def protocol_roles(make_scheme: SchemeFactory, make_key_holder: KeyHolderFactory,
                   check_job: Callable[[GLMJob], Any] = residual_model, *,
                   option_defaults: Optional[Dict[str, Any]] = None) -> Dict[str, Callable]:
    """The three role programs of an HE-VFL protocol for one scheme, each
    validating the job with ``check_job`` before it starts (the dict
    ``register_protocol`` takes). ``option_defaults``: this scheme's defaults
    for ``job.options`` keys the job leaves out (e.g. CKKS's
    ``encrypted_loss=False``), filled in before anything else."""
    defaults = dict(option_defaults or {})

    def prepared(job: GLMJob) -> GLMJob:
        missing = {key: value for key, value in defaults.items() if key not in job.options}
        if missing:
            job = dataclasses.replace(job, options={**job.options, **missing})
        check_job(job)
        return job

    def active(endpoint: Channel, job: GLMJob, data: PartyData) -> PartyResult:
        return active_program(endpoint, prepared(job), data, make_scheme)

    def passive(endpoint: Channel, job: GLMJob, data: PartyData) -> PartyResult:
        return passive_program(endpoint, prepared(job), data, make_scheme)

    def coordinator(endpoint: Channel, job: GLMJob, data: Optional[PartyData] = None) -> PartyResult:
        return coordinator_program(endpoint, prepared(job), data, make_key_holder)

    return {"active": active, "passive": passive, "coordinator": coordinator}
