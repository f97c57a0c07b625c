"""HE-VFL's key holder is not a decryption oracle (issue 18, item 5).

A malicious active party that forwards the passive party's encrypted
[[u_B]] as its own "masked gradient" (relabelled to the gradient's level or
length) must get a refusal that fails the job, as must a request for another
step or purpose; an honest run is unchanged (tests/glm/test_he_protocols.py
compares it with the plaintext reference). The malicious active party is the
``forwarding_attack`` fixture (tests/conftest.py), which the loopback version
of this attack in tests/federation/test_hostile_peers.py runs too.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("phe")

from vflsec.glm import GLMJob, PartyData, he_vfl  # noqa: E402
from vflsec.glm.registry import get_protocol  # noqa: E402
from vflsec.he import WeakKeyWarning  # noqa: E402
from vflsec.vfl.runner import run_programs  # noqa: E402

# Paillier ciphertexts are one per value: d_A of [[u_B]]'s ciphertexts relabelled to
# the product level pass as a gradient, the d_A values per step the threat model
# concedes; CKKS's packed layout refuses even that ("truncate").
CASES = [(p, m) for p in ("paillier", "ckks") for m in ("whole", "truncate", "as_loss", "wrong_step")
         if (p, m) != ("paillier", "truncate")]


@pytest.mark.parametrize("protocol,mode", CASES)
def test_forwarded_passive_ciphertext_is_refused(protocol, mode, forwarding_attack, exception_chain):
    if protocol == "ckks":
        pytest.importorskip("tenseal")
    attack = forwarding_attack
    Xa, Xb, y = attack.data()
    job = GLMJob(protocol=protocol, n_samples=attack.n, batch_size=attack.batch, epochs=1, lr=0.5,
                 passives=("passive",), coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False},
                 widths=attack.widths)
    roles = dict(get_protocol(protocol).roles)
    leaked: list = []
    roles["active"] = attack.malicious_active(protocol, mode, leaked)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        with pytest.raises(Exception) as info:
            run_programs(job, roles, {"active": PartyData(Xa, y), "passive": PartyData(Xb)}, timeout=300)
    assert not leaked, "the key holder decrypted the passive party's [[u_B]] for the active party"
    refusals = [e for e in exception_chain(info.value) if isinstance(e, he_vfl.DecryptionRefused)]
    assert refusals, f"expected a DecryptionRefused, got {info.value!r}"
    message = str(refusals[0])
    assert "'active'" in message and "refused" in message and "step 0" in message


# A passive party with at least as many features as a batch has rows would
# solve X_P^T d = g for the residuals d (and so the labels).
@pytest.mark.parametrize("n,batch,width", [(40, 2, 2), (40, 3, 5), (10, 10, 10), (41, 20, 20)])
def test_passive_wider_than_a_batch_is_refused(n, batch, width):
    job = GLMJob(protocol="paillier", n_samples=n, batch_size=batch, epochs=1, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048)
    assert he_vfl.smallest_batch(job) <= width
    with pytest.raises(ValueError, match=r"party 'passive' has \d+ features but .* reveal the residuals"):
        he_vfl.check_block_width(job, "passive", width)
    he_vfl.check_block_width(job, "passive", he_vfl.smallest_batch(job) - 1)  # narrower: accepted


# The partial last chunk of an epoch joins the batch before it, so no batch is
# smaller than min(b, n): n = 41, b = 20 gives batches of 20 and 21 rows, not 20, 20, 1.
@pytest.mark.parametrize("n,batch", [(41, 20), (40, 20), (59, 20), (20, 20), (455, 32)])
def test_he_batches_have_at_least_min_b_n_rows(n, batch):
    job = GLMJob(protocol="paillier", n_samples=n, batch_size=batch, epochs=3, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048)
    seen = {}
    for epoch, step, idx in he_vfl.he_batches(job):
        assert batch <= len(idx) < 2 * batch
        seen.setdefault(epoch, []).append(idx)
        assert step < he_vfl.steps_per_epoch(job)
    for chunks in seen.values():
        assert len(chunks) == he_vfl.steps_per_epoch(job) == max(1, n // batch)
        assert sorted(np.concatenate(chunks).tolist()) == list(range(n))  # every row once per epoch
    # What a party's scheme is told to prepare: the same sizes, without drawing the batches.
    assert list(he_vfl.he_batch_sizes(job)) == [len(idx) for chunks in seen.values() for idx in chunks]


def _lying_passive(width):
    """A passive party that skips its own width check and registers ``width``."""
    def program(endpoint, job, data):
        endpoint.send(job.coordinator, he_vfl.TAG_REGISTER, {"n_features": width})
        endpoint.recv(job.coordinator, he_vfl.TAG_PUBLIC_KEY)
        endpoint.recv(job.coordinator, he_vfl.TAG_GRADIENT)
        raise AssertionError("the key holder accepted a passive block as wide as a batch")
    return program


def test_key_holder_refuses_a_passive_as_wide_as_a_batch(forwarding_attack, exception_chain):
    # The job agrees a passive block as wide as a batch; the passive party skips its own check.
    attack = forwarding_attack
    Xa, Xb, y = attack.data()
    job = GLMJob(protocol="paillier", n_samples=attack.n, batch_size=attack.batch, epochs=1, lr=0.5,
                 passives=("passive",), coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False},
                 widths={"active": attack.d_a, "passive": attack.batch})
    roles = dict(get_protocol("paillier").roles)
    roles["passive"] = _lying_passive(attack.batch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        with pytest.raises(Exception) as info:
            run_programs(job, roles, {"active": PartyData(Xa, y), "passive": PartyData(Xb)}, timeout=300)
    refusals = [e for e in exception_chain(info.value) if isinstance(e, he_vfl.DecryptionRefused)]
    assert refusals, f"expected a DecryptionRefused, got {info.value!r}"
    assert "'passive'" in str(refusals[0]) and "reveal the residuals" in str(refusals[0])


def test_honest_passive_refuses_before_any_crypto(forwarding_attack, exception_chain):
    attack = forwarding_attack
    Xa, Xb, y = attack.data()
    job = GLMJob(protocol="paillier", n_samples=attack.n, batch_size=2, epochs=1, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False}, widths=attack.widths)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        with pytest.raises(Exception) as info:
            run_programs(job, get_protocol("paillier").roles,
                         {"active": PartyData(Xa, y), "passive": PartyData(Xb)}, timeout=300)
    chain = exception_chain(info.value)
    assert any("reveal the residuals" in str(e) for e in chain), chain
