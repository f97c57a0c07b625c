"""HE-VFL protocols "paillier" and "ckks" (vflsec.glm.paillier / vflsec.glm.ckks)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("phe")
ts = pytest.importorskip("tenseal")

from vflsec.data import load_breast, vertical_split  # noqa: E402
from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.glm import GLMJob, PartyData, VerticalLogisticRegression, he_vfl, run_job  # noqa: E402
from vflsec.he import WeakKeyWarning  # noqa: E402

N_ROWS = 200


@pytest.fixture(scope="module")
def breast():
    split = vertical_split(load_breast(), [10, 20], seed=0, scaling="standard")
    y = np.where(split.y_train[:N_ROWS] == 1, 1.0, -1.0)
    y_test = np.where(split.y_test == 1, 1.0, -1.0)
    return split.X_train[0][:N_ROWS], split.X_train[1][:N_ROWS], y, split.X_test[0], split.X_test[1], y_test


def accuracy(ws, blocks, y):
    return float(np.mean(np.where(sum(X @ w for X, w in zip(blocks, ws)) >= 0, 1.0, -1.0) == y))


def run(job, blocks, y, hub=None):
    data = {job.active: PartyData(blocks[0], y)}
    data.update({name: PartyData(X) for name, X in zip(job.passives, blocks[1:])})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        return run_job(job, data, hub=hub, timeout=600)


def payloads_by_tag(hub):
    out = {}
    for record, payload in hub.transcript:
        out.setdefault(record.tag, []).append((record, payload))
    return out


@pytest.mark.slow  # end to end: HE training
def test_paillier_matches_taylor_descent_and_sends_only_masked_bytes(breast, taylor_reference):
    Xa, Xb, y, Xa_test, Xb_test, y_test = breast
    job = GLMJob(protocol="paillier", n_samples=N_ROWS, batch_size=50, epochs=3, lr=2.0, k=1.0,
                 passives=("passive",), coordinator="coordinator", key_bits=2048)
    hub = InMemoryHub(keep_payloads=True)
    result = run(job, [Xa, Xb], y, hub)
    (wa_ref, wb_ref), loss_ref = taylor_reference(job, [Xa, Xb], y)
    np.testing.assert_allclose(result.results["active"].coef, wa_ref, atol=1e-6)
    np.testing.assert_allclose(result.results["passive"].coef, wb_ref, atol=1e-6)
    np.testing.assert_allclose(result.results["active"].history["loss"], loss_ref, atol=1e-6)
    ref_accuracy = accuracy([wa_ref, wb_ref], [Xa_test, Xb_test], y_test)
    assert ref_accuracy > 0.85
    he_accuracy = accuracy([result.results["active"].coef, result.results["passive"].coef], [Xa_test, Xb_test], y_test)
    assert abs(he_accuracy - ref_accuracy) <= 0.01

    tags = payloads_by_tag(hub)
    steps = job.total_steps
    assert len(tags[he_vfl.TAG_U_PASSIVE]) == len(tags[he_vfl.TAG_RESIDUAL]) == steps
    assert len(tags[he_vfl.TAG_MASKED_GRADIENT]) == len(tags[he_vfl.TAG_GRADIENT]) == 2 * steps
    key_payloads = tags[he_vfl.TAG_PUBLIC_KEY]
    assert len(key_payloads) == 2
    for _, payload in key_payloads:
        # The public key only: modulus and DJN fixed base, no factor of n.
        assert set(payload) == {"scheme", "n", "hs"} and isinstance(payload["n"], bytes)
        assert isinstance(payload["hs"], bytes)
    for tag, items in tags.items():
        for _record, payload in items:
            if tag == he_vfl.TAG_PUBLIC_KEY:
                continue
            if tag == he_vfl.TAG_LOSS_VALUE:
                assert isinstance(payload, np.ndarray) and payload.shape == (1,)
            elif tag == he_vfl.TAG_REGISTER:
                assert set(payload) == {"n_features"}
            elif tag in (he_vfl.TAG_MASKED_GRADIENT, he_vfl.TAG_LOSS):
                assert set(payload) == {"step", "purpose", "ciphertext"}
                assert isinstance(payload["ciphertext"], bytes)
            else:
                assert isinstance(payload, bytes), (tag, type(payload))
    n = int.from_bytes(key_payloads[0][1]["n"], "big")
    # What the coordinator returns is masked by uniform values in Z_n, so
    # essentially every returned integer is huge, while the true level-2
    # encodings of gradients are below 2^100.
    returned = [int.from_bytes(payload[i:i + 256], "big")
                for _, payload in tags[he_vfl.TAG_GRADIENT] for i in range(0, len(payload), 256)]
    assert len(returned) == steps * 30
    assert sum(v > n >> 32 for v in returned) >= len(returned) - 1
    # Residual ciphertexts are re-randomized: none equals a [[u_B]] ciphertext.
    u_bytes = {payload[13:] for _, payload in tags[he_vfl.TAG_U_PASSIVE]}
    assert all(payload[13:] not in u_bytes for _, payload in tags[he_vfl.TAG_RESIDUAL])

    timings = result.results["passive"].timings
    assert timings["crypto"] > 0 and timings["messaging"] > 0
    assert result.bytes_by_tag()[he_vfl.TAG_U_PASSIVE] > steps * 50 * 512


def test_paillier_two_passive_parties(breast, taylor_reference):
    Xa, Xb, y, *_ = breast
    blocks = [Xa[:60], Xb[:60, :8], Xb[:60, 8:]]
    job = GLMJob(protocol="paillier", n_samples=60, batch_size=30, epochs=1, lr=2.0, k=None, lam=0.01,
                 passives=("p1", "p2"), coordinator="c", key_bits=2048)
    result = run(job, blocks, y[:60])
    ref, _ = taylor_reference(job, blocks, y[:60])
    for name, w in zip(("active", "p1", "p2"), ref):
        np.testing.assert_allclose(result.results[name].coef, w, atol=1e-6)
    assert "loss" not in result.results["active"].history  # cross terms of theta^2: no encrypted loss


def test_ckks_matches_taylor_descent(breast, taylor_reference):
    from vflsec.he import ckks as he_ckks

    Xa, Xb, y, *_ = breast
    job = GLMJob(protocol="ckks", n_samples=N_ROWS, batch_size=50, epochs=1, lr=2.0, k=1.0,
                 passives=("passive",), coordinator="coordinator",
                 options={"flooding_bits": 2, "encrypted_loss": True})
    hub = InMemoryHub(keep_payloads=True)
    result = run(job, [Xa, Xb], y, hub)
    (wa_ref, wb_ref), loss_ref = taylor_reference(job, [Xa, Xb], y)
    np.testing.assert_allclose(result.results["active"].coef, wa_ref, atol=1e-3)
    np.testing.assert_allclose(result.results["passive"].coef, wb_ref, atol=1e-3)
    np.testing.assert_allclose(result.results["active"].history["loss"], loss_ref, atol=1e-3)
    assert result.results["coordinator"].info["flooding_sigma"] == 2.0 ** -14

    tags = payloads_by_tag(hub)
    for _record, payload in tags[he_vfl.TAG_PUBLIC_KEY]:
        assert isinstance(payload, bytes)
        public = he_ckks.CKKSPublicContext.from_bytes(payload)
        assert not public.tenseal.has_secret_key() and not public.tenseal.is_private()
        assert public.galois_keys.size() == len(he_ckks.galois_steps(public.params)) == 12
    for tag in (he_vfl.TAG_U_PASSIVE, he_vfl.TAG_RESIDUAL):
        assert all(isinstance(payload, bytes) for _, payload in tags[tag])
    for tag in (he_vfl.TAG_MASKED_GRADIENT, he_vfl.TAG_LOSS):
        assert all(isinstance(payload["ciphertext"], bytes) for _, payload in tags[tag])
    replies = [payload for _, payload in tags[he_vfl.TAG_GRADIENT]]
    assert all(isinstance(p, np.ndarray) and p.dtype == np.float64 for p in replies)
    # Masked: the coordinator's view is dominated by masks of size ~2^16, not gradients of size < 1.
    assert np.median(np.abs(np.concatenate(replies))) > 1000


@pytest.mark.slow  # end to end: HE training
def test_ckks_training_accuracy_close_to_taylor_descent(breast, taylor_reference):
    Xa, Xb, y, Xa_test, Xb_test, y_test = breast
    model = VerticalLogisticRegression(protection="ckks", batch_size=50, epochs=3, lr=2.0, k=1.0, timeout=600)
    model.fit([Xa, Xb], y)
    job = GLMJob(protocol="plain", n_samples=N_ROWS, batch_size=50, epochs=3, lr=2.0, k=1.0)
    ref, _ = taylor_reference(job, [Xa, Xb], y)
    ref_accuracy = accuracy(ref, [Xa_test, Xb_test], y_test)
    assert abs(model.score([Xa_test, Xb_test], y_test) - ref_accuracy) <= 0.03
    # Default flooding (sigma 2^-12 per gradient coordinate) moves the weights only slightly.
    for w, w_ref in zip(model.coef_, ref):
        np.testing.assert_allclose(w, w_ref, atol=2e-2)
    # One public context per data party: the public key and the 12 power-of-two Galois keys, seeded
    # (8.8 MB; 33.9 MB with TenSEAL's default keys).
    assert 2 * 8 * 10 ** 6 < model.history_["bytes_by_tag"][he_vfl.TAG_PUBLIC_KEY] < 2 * 10 ** 7
    # The encrypted loss is off by default for CKKS: no loss in the history, no scalar ciphertexts sent.
    assert "loss" not in model.history_
    assert he_vfl.TAG_U_SQUARED not in model.history_["bytes_by_tag"]
    assert he_vfl.TAG_LOSS not in model.history_["bytes_by_tag"]


@pytest.mark.slow  # end to end: HE training
def test_ckks_encrypted_loss_is_opt_in(breast):
    Xa, Xb, y, *_ = breast
    common = dict(protocol="ckks", n_samples=100, batch_size=50, epochs=1, lr=2.0, k=1.0, coordinator="c",
                  passives=("passive",))
    for options, with_loss in (({}, False), ({"encrypted_loss": False}, False), ({"encrypted_loss": True}, True)):
        hub = InMemoryHub()
        result = run(GLMJob(options=options, **common), [Xa[:100], Xb[:100]], y[:100], hub)
        sent = {record.tag for record in hub.records}
        assert (he_vfl.TAG_U_SQUARED in sent) == with_loss and (he_vfl.TAG_LOSS in sent) == with_loss, options
        assert ("loss" in result.results["active"].history) == with_loss
        assert ("loss_encrypted_part" in result.results["c"].history) == with_loss
    model = VerticalLogisticRegression(protection="ckks", batch_size=50, epochs=1, lr=2.0, k=1.0,
                                       he_options={"encrypted_loss": True})
    model.fit([Xa[:100], Xb[:100]], y[:100])
    assert len(model.history_["loss"]) == 1


def test_ckks_least_squares_is_exact(breast):
    Xa, Xb, y, *_ = breast
    target = Xa[:100, :3].sum(axis=1) / 3 - Xb[:100, :2].sum(axis=1) / 4
    common = dict(n_samples=100, batch_size=50, epochs=1, lr=0.2, k=None, loss="least_squares")
    plain = run(GLMJob(protocol="plain", **common), [Xa[:100], Xb[:100]], target)
    he = run(GLMJob(protocol="ckks", coordinator="c", options={"flooding_bits": 2}, **common),
             [Xa[:100], Xb[:100]], target)
    for name in ("active", "passive"):
        np.testing.assert_allclose(he.results[name].coef, plain.results[name].coef, atol=1e-3)
    assert he.results["active"].info["residual"] == "exact"


def test_key_size_policy_via_estimator(breast):
    Xa, Xb, y, *_ = breast
    model = VerticalLogisticRegression(protection="paillier", key_bits=1024, epochs=1, batch_size=50)
    with pytest.raises(ValueError, match="at least 2048"):
        model.fit([Xa[:50], Xb[:50]], y[:50])
    model = VerticalLogisticRegression(protection="paillier", key_bits=2048, epochs=1, batch_size=25,
                                       he_options={"encrypted_loss": False})
    with pytest.warns(WeakKeyWarning):
        model.fit([Xa[:25], Xb[:25]], y[:25])
    assert model.history_["party_time"]["coordinator"]["crypto"] > 0
    assert "loss" not in model.history_


def test_unsupported_settings_refused(breast):
    Xa, Xb, y, *_ = breast
    for protocol in ("paillier", "ckks"):
        job = GLMJob(protocol=protocol, n_samples=50, batch_size=25, loss="svm", coordinator="c", key_bits=2048)
        with pytest.raises(ValueError, match="supports losses"):
            run(job, [Xa[:50], Xb[:50]], y[:50])
    job = GLMJob(protocol="ckks", n_samples=50, batch_size=25, coordinator="c",
                 options={"ckks_coeff_mod_bit_sizes": [60, 60, 60, 60]})
    with pytest.raises(ValueError, match="128-bit security"):
        run(job, [Xa[:50], Xb[:50]], y[:50])
    job = GLMJob(protocol="ckks", n_samples=50, batch_size=25, coordinator="c")
    with pytest.raises(ValueError, match="norm"):
        run(job, [Xa[:50] * 3.0, Xb[:50]], y[:50])
    with pytest.raises(ValueError, match="coordinator"):
        run(GLMJob(protocol="paillier", n_samples=50, batch_size=25, key_bits=2048), [Xa[:50], Xb[:50]], y[:50])
