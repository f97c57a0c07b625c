"""Bounds on receipt in vertical GLM with HE (issue 39, item 6).

Every array a party of HE-VFL receives has the bound an honest sender's values
satisfy, and the receiver refuses a value outside it naming the sender
(:mod:`vflsec.glm.he_dp`, "Bounds on receipt"). Here the deviating party runs
its real program with one message replaced (a tampered channel) or with its
scheme changed (a deviating mask or residual); every other party runs its real
program over the real in-memory hub, and the job must fail with a refusal that
names the deviating party:

* "taylor" / "taylor_dp": the values in the clear (partial scores, residual,
  request, the key holder's answer) are float64, finite and never cast, and
  under DP within ``|u_P| <= rho k``, ``|r| <= R``, the request's and the
  gradient's bounds (a NaN from the active party used to be blamed on the key
  holder's next answer);
* "paillier_dp" / "ckks_dp": an active party that inflates its encrypted
  residual shows up only in the unmasked gradients, so the refusal names the
  key holder and the active party; the key holder refuses a masked value
  beyond the range of an honest request, naming the requesting party.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Optional

import numpy as np
import pytest

from vflsec.federation.channel import InMemoryHub
from vflsec.glm import GLMJob, PartyData, he_vfl, run_job
from vflsec.glm.registry import get_protocol
from vflsec.vfl import PeerMessageRefused
from vflsec.vfl.runner import PartyError, run_programs

N, BATCH, K = 40, 20, 2.0
WIDTHS = {"active": 3, "passive": 2}
# R = P k + s_max for two data parties, k = 2 and the logistic Taylor residual (s_max = 2), before tolerances.
RESIDUAL_BOUND = 2 * K + 2.0
# What the key holder's refusal of a request beyond an honest one's range says besides the requesting party.
HOLDER_NAMES_THE_RESIDUAL = ("the requesting party deviated, or the encrypted residual its request multiplies "
                             "exceeded R = 6.00001 (the active party 'active' forms it")


def _with(value: float) -> Callable[[np.ndarray], np.ndarray]:
    def make(a: np.ndarray) -> np.ndarray:
        out = np.array(a, copy=True)
        out.flat[out.size // 2] = value
        return out
    return make


def _request_with(value: float) -> Callable[[Dict[str, Any]], Dict[str, Any]]:
    """A decryption request of "taylor" whose plaintext "ciphertext" has one value replaced."""
    return lambda request: {**request, "ciphertext": _with(value)(request["ciphertext"])}


# -- jobs and data ---------------------------------------------------------------------------

def _data(seed: int = 5) -> Dict[str, PartyData]:
    rng = np.random.default_rng(seed)
    blocks = {}
    for party, width in WIDTHS.items():
        X = rng.normal(size=(N, width))
        blocks[party] = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    y = np.where(blocks["active"][:, 0] + blocks["passive"][:, 1] > 0, 1.0, -1.0)
    return {"active": PartyData(blocks["active"], y), "passive": PartyData(blocks["passive"])}


def _job(protocol: str, **fields) -> GLMJob:
    base: Dict[str, Any] = dict(protocol=protocol, n_samples=N, batch_size=BATCH, epochs=1, lr=0.5, lam=0.0, k=K,
                                passives=("passive",), coordinator="coordinator", key_bits=2048, widths=WIDTHS,
                                options={"encrypted_loss": False})
    if protocol.endswith("_dp"):
        base.update(epsilon=10.0, delta=1e-5, noise_seed=3)
    base.update(fields)
    return GLMJob(**base)


def _run(job: GLMJob, hub: Optional[InMemoryHub] = None, roles: Optional[Dict[str, Callable]] = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # 2048-bit Paillier keys keep the tests short
        if roles is None:
            return run_job(job, _data(), hub, timeout=300)
        return run_programs(job, roles, _data(), hub or InMemoryHub(default_timeout=120.0), timeout=300)


def _failure(job: GLMJob, hub: Optional[InMemoryHub] = None, roles: Optional[Dict[str, Callable]] = None):
    with pytest.raises(PartyError) as info:
        _run(job, hub, roles)
    return info.value


def _peer_refusal(failure: PartyError, exception_chain, *, receiver: str, sender: str, tag: str,
                  step: int) -> PeerMessageRefused:
    """The receiver's refusal the job failed with, naming the sender, the tag and the step."""
    assert failure.party == receiver, repr(failure)
    refusals = [e for e in exception_chain(failure) if isinstance(e, PeerMessageRefused)]
    assert refusals, repr(failure)
    refusal = refusals[0]
    assert (refusal.receiver, refusal.sender, refusal.tag, refusal.step) == (receiver, sender, tag, step), refusal
    assert f"peer {sender!r}" in str(failure) and repr(tag) in str(failure), str(failure)
    return refusal


def _key_holder_refusal(failure: PartyError, exception_chain, *, party: str, step: int) -> he_vfl.DecryptionRefused:
    """The key holder's refusal of ``party``'s gradient request, which the job failed with."""
    assert failure.party == "coordinator", repr(failure)
    refusals = [e for e in exception_chain(failure) if isinstance(e, he_vfl.DecryptionRefused)]
    assert refusals, repr(failure)
    refusal = refusals[0]
    assert (refusal.party, refusal.step, refusal.purpose) == (party, step, he_vfl.PURPOSE_GRADIENT), refusal
    assert f"request of {party!r} at step {step}" in str(failure), str(failure)
    return refusal


# -- "taylor": the values in the clear -----------------------------------------------------------

PLAIN_CASES = {
    "nan": _with(np.nan),
    "+inf": _with(np.inf),
    "int64": lambda a: np.round(a).astype(np.int64),
    "bool": lambda a: a > 0,
    "float32": lambda a: a.astype(np.float32),
    "list": lambda a: [a.tobytes()],  # lists on the wire hold bytes only
    "one-value-fewer": lambda a: a[:-1],
}


@pytest.mark.parametrize("protocol", ["taylor", "taylor_dp"])
@pytest.mark.parametrize("case", sorted(PLAIN_CASES))
@pytest.mark.parametrize("sender,receiver,tag", [("passive", "active", he_vfl.TAG_U_PASSIVE),
                                                 ("active", "passive", he_vfl.TAG_RESIDUAL)])
def test_a_hostile_vector_in_the_clear_is_refused_naming_its_sender(hostile_hub, protocol, case, sender, receiver, tag,
                                                                    exception_chain):
    hub = hostile_hub(sender, receiver, tag, PLAIN_CASES[case])
    failure = _failure(_job(protocol), hub)
    assert hub.tampered.sent is not None
    _peer_refusal(failure, exception_chain, receiver=receiver, sender=sender, tag=tag, step=1)


def test_a_nan_residual_is_blamed_on_the_active_party_not_on_the_key_holders_answer(hostile_hub, exception_chain):
    hub = hostile_hub("active", "passive", he_vfl.TAG_RESIDUAL, _with(np.nan), at=0)
    refusal = _peer_refusal(_failure(_job("taylor"), hub), exception_chain, receiver="passive", sender="active",
                            tag=he_vfl.TAG_RESIDUAL, step=0)
    assert "non-finite" in refusal.reason
    # the key holder never saw the NaN: the passive party refused before its request
    assert not [r for r in hub.records if r.tag == he_vfl.TAG_MASKED_GRADIENT and r.sender == "passive"]


@pytest.mark.parametrize("case", ["nan", "int64", "list"])
def test_the_taylor_key_holder_refuses_a_request_that_is_no_finite_float64_vector(hostile_hub, case, exception_chain):
    hostile = {"nan": _request_with(np.nan), "int64": lambda r: {**r, "ciphertext": r["ciphertext"].astype(np.int64)},
               "list": lambda r: {**r, "ciphertext": [r["ciphertext"].tobytes()]}}[case]
    hub = hostile_hub("passive", "coordinator", he_vfl.TAG_MASKED_GRADIENT, hostile)
    _key_holder_refusal(_failure(_job("taylor"), hub), exception_chain, party="passive", step=1)


@pytest.mark.parametrize("case", ["nan", "list", "int64"])
def test_a_taylor_answer_that_is_no_finite_float64_vector_names_the_key_holder(hostile_hub, case, exception_chain):
    hub = hostile_hub("coordinator", "passive", he_vfl.TAG_GRADIENT, PLAIN_CASES[case])
    _peer_refusal(_failure(_job("taylor"), hub), exception_chain, receiver="passive", sender="coordinator",
                  tag=he_vfl.TAG_GRADIENT, step=1)


# -- "taylor_dp": the bounds of the DP derivation ---------------------------------------------

def test_taylor_dp_refuses_a_partial_score_beyond_k(hostile_hub, exception_chain):
    hub = hostile_hub("passive", "active", he_vfl.TAG_U_PASSIVE, _with(1.01 * K))
    refusal = _peer_refusal(_failure(_job("taylor_dp"), hub), exception_chain, receiver="active", sender="passive",
                            tag=he_vfl.TAG_U_PASSIVE, step=1)
    assert "partial score: |value| up to 2.02, beyond the bound 2 " in refusal.reason, refusal.reason


def test_taylor_dp_refuses_a_residual_beyond_r(hostile_hub, exception_chain):
    hub = hostile_hub("active", "passive", he_vfl.TAG_RESIDUAL, _with(-1.01 * RESIDUAL_BOUND))
    refusal = _peer_refusal(_failure(_job("taylor_dp"), hub), exception_chain, receiver="passive", sender="active",
                            tag=he_vfl.TAG_RESIDUAL, step=1)
    assert "residual: |value| up to 6.06, beyond the bound 6.00001 " in refusal.reason, refusal.reason


def test_taylor_dp_takes_the_largest_values_an_honest_sender_can_send(hostile_hub):
    """u = k and r = P k + s_max exactly (what clipped weights and unit rows allow) pass."""
    for hub in (hostile_hub("passive", "active", he_vfl.TAG_U_PASSIVE, _with(-K)),
                hostile_hub("active", "passive", he_vfl.TAG_RESIDUAL, _with(RESIDUAL_BOUND))):
        result = _run(_job("taylor_dp"), hub)
        assert hub.tampered.sent is not None
        assert all(np.all(np.isfinite(result.results[p].coef)) for p in WIDTHS)


def test_the_taylor_dp_key_holder_refuses_a_request_beyond_the_bound_its_noise_is_calibrated_for(
        hostile_hub, exception_chain):
    # an honest request sums |S| < 2b = 40 rows of features <= 1 times residuals <= R = 6: |x_j| <= 240
    hub = hostile_hub("passive", "coordinator", he_vfl.TAG_MASKED_GRADIENT, _request_with(241.0))
    refusal = _key_holder_refusal(_failure(_job("taylor_dp"), hub), exception_chain, party="passive", step=1)
    message = str(refusal)
    assert "a requested value of 241, beyond the bound 240 of an honest request" in message, message
    assert HOLDER_NAMES_THE_RESIDUAL in message, message
    # just inside the bound is answered (the job completes)
    result = _run(_job("taylor_dp"), hostile_hub("passive", "coordinator", he_vfl.TAG_MASKED_GRADIENT,
                                                _request_with(239.0)))
    assert np.all(np.isfinite(result.results["passive"].coef))


def test_a_taylor_dp_answer_beyond_the_gradient_bound_names_the_key_holder_and_the_active_party(
        hostile_hub, exception_chain):
    hub = hostile_hub("coordinator", "passive", he_vfl.TAG_GRADIENT, _with(1e6))
    refusal = _peer_refusal(_failure(_job("taylor_dp"), hub), exception_chain, receiver="passive",
                            sender="coordinator", tag=he_vfl.TAG_GRADIENT, step=1)
    assert "unmasked gradient: |value| up to" in refusal.reason
    assert "the key holder 'coordinator' deviated, or the active party 'active' sent an encrypted residual" \
        in refusal.reason, refusal.reason


# -- "paillier_dp" / "ckks_dp": the encrypted residual and the key holder's range -------------------

INFLATION = {"paillier_dp": 1e8, "ckks_dp": 1e4}  # ckks_dp: the packed value stays below CKKS's range (2^19)


def _scheme_module(protocol: str):
    pytest.importorskip("phe" if protocol == "paillier_dp" else "tenseal")
    import importlib

    return importlib.import_module(f"vflsec.glm.{protocol}")


def _roles_with(protocol: str, role: str, make_scheme) -> Dict[str, Callable]:
    """The protocol's roles with ``role`` running its real program on ``make_scheme``."""
    roles = dict(get_protocol(protocol).roles)
    program = he_vfl.active_program if role == "active" else he_vfl.passive_program
    roles[role] = lambda endpoint, job, data: program(endpoint, job, data, make_scheme)
    return roles


def _inflating_scheme(protocol: str):
    """The active party's scheme, adding ``INFLATION`` to its part of every residual (past its own
    residual check) and keeping its own gradient unchecked."""
    module = _scheme_module(protocol)
    base = module.PaillierDPScheme if protocol == "paillier_dp" else module.CKKSDPScheme
    inflation = INFLATION[protocol]

    class Inflating(base):
        check_gradient = None

        def add_plain(self, enc, values):
            return super(base, self).add_plain(enc, values + inflation)

    return Inflating


@pytest.mark.slow  # HE key generation per run
def test_an_inflated_encrypted_residual_is_refused_naming_the_key_holder_and_the_active_party(exception_chain):
    protocol = "paillier_dp"
    failure = _failure(_job(protocol), roles=_roles_with(protocol, "active", _inflating_scheme(protocol)))
    refusal = _peer_refusal(failure, exception_chain, receiver="passive", sender="coordinator",
                            tag=he_vfl.TAG_GRADIENT, step=0)
    assert "unmasked gradient: |value| up to" in refusal.reason
    assert "the key holder 'coordinator' deviated, or the active party 'active' sent an encrypted residual [[r]] " \
           "beyond its bound" in refusal.reason, refusal.reason


@pytest.mark.slow  # CKKS key generation
def test_an_inflated_encrypted_residual_under_ckks_dp_is_refused_naming_the_active_party(exception_chain):
    """The inflated packed gradient (about 700) lands beyond the key holder's range only with the
    mask near its edge (about 1% of runs): then the key holder refuses, naming the active party too."""
    protocol = "ckks_dp"
    failure = _failure(_job(protocol), roles=_roles_with(protocol, "active", _inflating_scheme(protocol)))
    if failure.party == "coordinator":
        refusal: Any = [e for e in exception_chain(failure) if isinstance(e, he_vfl.DecryptionRefused)][0]
        assert refusal.step == 0
    else:
        refusal = _peer_refusal(failure, exception_chain, receiver="passive", sender="coordinator",
                                tag=he_vfl.TAG_GRADIENT, step=0)
        assert "the key holder 'coordinator' deviated" in refusal.reason
    assert "the active party 'active' sent an encrypted residual [[r]] beyond its bound R" in str(refusal) \
        or HOLDER_NAMES_THE_RESIDUAL in str(refusal), str(refusal)


def _paillier_wide_mask(offset: str):
    """The passive party's Paillier scheme with every mask value fixed at ``offset``'s value."""
    module = _scheme_module("paillier_dp")

    class WideMask(module.PaillierDPScheme):
        def masked_dot(self, enc, X, factor):
            product = enc.dot(X)
            top = 1 << self._mask_bits
            value = {"mask-range-and-a-half": top + top // 2, "half-the-modulus": self.public_key.n // 2}[offset]
            mask = [value] * len(product)
            return product.add_encoded(mask).to_bytes(), (mask, product.level, factor)

    return WideMask


@pytest.mark.slow  # Paillier key generation per run
@pytest.mark.parametrize("offset", ["mask-range-and-a-half", "half-the-modulus"])
def test_the_paillier_dp_key_holder_refuses_a_masked_value_outside_an_honest_requests_range(offset,
                                                                                             exception_chain):
    """An honest masked value lies in [-X, 2^(key_bits - 8) + X) (mask plus the largest gradient);
    "half-the-modulus" is the mask range of protocol "paillier", which the lattice rounding cannot take."""
    roles = _roles_with("paillier_dp", "passive", _paillier_wide_mask(offset))
    refusal = _key_holder_refusal(_failure(_job("paillier_dp"), roles=roles), exception_chain, party="passive",
                                  step=0)
    message = str(refusal)
    assert "), the range of an honest request (its mask plus the largest gradient): " in message, message
    assert HOLDER_NAMES_THE_RESIDUAL in message, message


@pytest.mark.slow  # CKKS key generation
def test_the_ckks_dp_key_holder_refuses_a_masked_value_beyond_an_honest_requests_range(exception_chain):
    module = _scheme_module("ckks_dp")
    from vflsec.glm.ckks import OUTPUT_SCALE
    from vflsec.he.ckks import DEFAULT_MASK_BOUND

    class WideMask(module.CKKSDPScheme):
        def masked_dot(self, enc, X, factor):
            product = enc.dot(X * (factor * OUTPUT_SCALE))
            # 1.5 2^18 in all: within CKKS's range 2^19, beyond the mask's (SEAL encodes at most 2^18 here: two parts)
            parts = [np.full(X.shape[1], DEFAULT_MASK_BOUND), np.full(X.shape[1], 0.5 * DEFAULT_MASK_BOUND)]
            return product.add_fresh(parts[0]).add_fresh(parts[1]).to_bytes(), parts[0] + parts[1]

    roles = _roles_with("ckks_dp", "passive", WideMask)
    refusal = _key_holder_refusal(_failure(_job("ckks_dp"), roles=roles), exception_chain, party="passive", step=0)
    message = str(refusal)
    assert "a masked value of 3932" in message and "of an honest request" in message, message
    assert HOLDER_NAMES_THE_RESIDUAL in message, message


@pytest.mark.slow  # HE key generation per run
@pytest.mark.parametrize("protocol", ["paillier_dp", "ckks_dp"])
def test_honest_he_dp_runs_pass_every_receipt_bound(protocol):
    _scheme_module(protocol)
    result = _run(_job(protocol, epochs=2))
    assert all(np.all(np.isfinite(result.results[p].coef)) for p in WIDTHS)


# -- an honest run at the bounds ---------------------------------------------------------------------

def _oscillating_run(protocol: str, hub: Optional[InMemoryHub] = None):
    """Every row e_1 in both blocks, every label +1, lr 100: the weights swing between the clip's +k and
    -k, so at step 2 every residual is theta + s = -2k - 2 = -R and the gradient's first coordinate
    (alpha / b) |S| R -- the largest values the derivation allows, reached by an honest run."""
    blocks = {party: np.eye(1, width).repeat(N, axis=0) for party, width in WIDTHS.items()}
    data = {"active": PartyData(blocks["active"], np.ones(N)), "passive": PartyData(blocks["passive"])}
    job = _job(protocol, lr=100.0, epochs=2, noise=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return job, run_job(job, data, hub, timeout=300)


def test_an_honest_run_that_reaches_every_bound_is_not_refused():
    hub = InMemoryHub(keep_payloads=True)
    job, result = _oscillating_run("taylor_dp", hub)
    answers = [payload for record, payload in hub.transcript if record.tag == he_vfl.TAG_GRADIENT]
    residuals = [payload for record, payload in hub.transcript if record.tag == he_vfl.TAG_RESIDUAL]
    alpha = 0.25  # the logistic Taylor residual
    assert max(float(np.max(np.abs(r))) for r in residuals) == RESIDUAL_BOUND
    assert max(float(np.max(np.abs(a))) for a in answers) * alpha / BATCH == alpha * RESIDUAL_BOUND  # |S| = b
    assert all(np.linalg.norm(result.results[p].coef) == pytest.approx(K) for p in WIDTHS)


@pytest.mark.slow  # HE key generation per run
@pytest.mark.parametrize("protocol", ["paillier_dp", "ckks_dp"])
def test_an_honest_he_run_that_reaches_every_bound_is_not_refused(protocol):
    _scheme_module(protocol)
    _, result = _oscillating_run(protocol)
    assert all(np.linalg.norm(result.results[p].coef) == pytest.approx(K, rel=1e-3) for p in WIDTHS)
