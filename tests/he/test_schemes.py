"""Paillier and CKKS primitives (vflsec.he)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("phe")
pytest.importorskip("gmpy2")
ts = pytest.importorskip("tenseal")

from vflsec.he import ckks as C  # noqa: E402
from vflsec.he import paillier as P  # noqa: E402


@pytest.fixture(scope="module")
def keys():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.WeakKeyWarning)
        return P.generate_keypair(2048)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(20240611)


def quantized(x, level=1):
    scale = 2.0 ** (P.SCALE_BITS * level)
    return np.rint(np.asarray(x, dtype=np.float64) * scale) / scale


# ---------------------------------------------------------------- Paillier


def test_roundtrip_uses_one_fixed_exponent(keys, rng):
    pk, sk = keys
    x = np.concatenate([rng.normal(size=6) * 10.0 ** rng.integers(-6, 6, size=6), [0.0, -0.0, 1e-13]])
    ev = pk.encrypt(x, processes=1)
    assert ev.level == 1 and ev.exponent == P.PHE_EXPONENT == -10
    np.testing.assert_array_equal(sk.decrypt(ev, processes=1), quantized(x))
    # The same ciphertexts read by python-paillier: one exponent for all, same values.
    numbers = ev.to_phe()
    assert {e.exponent for e in numbers} == {-10}
    np.testing.assert_array_equal([sk.phe.decrypt(e) for e in numbers], quantized(x))
    # Sums need no exponent alignment: phe adds them directly.
    total = sum(numbers[1:], numbers[0])
    assert total.exponent == -10
    assert sk.phe.decrypt(total) == pytest.approx(quantized(x).sum(), abs=1e-9)


def test_homomorphic_sum_and_plain_products(keys, rng):
    pk, sk = keys
    a, b = rng.normal(size=12), rng.normal(size=12)
    X = rng.normal(size=(12, 5))
    ea, eb = pk.encrypt(a, processes=1), pk.encrypt(b, processes=1)
    np.testing.assert_allclose(sk.decrypt(ea + eb), a + b, atol=1e-11)
    np.testing.assert_allclose(sk.decrypt(ea.add_plain(b)), a + b, atol=1e-11)
    np.testing.assert_allclose(sk.decrypt(ea.sum()), [a.sum()], atol=1e-10)
    prod = ea.mul_plain(X[:, 0], processes=1)
    assert prod.level == 2
    np.testing.assert_allclose(sk.decrypt(prod), a * X[:, 0], atol=1e-11)
    g = ea.dot(X, processes=1)
    assert g.level == 2 and len(g) == 5
    np.testing.assert_allclose(sk.decrypt(g), a @ X, atol=1e-10)
    # Level-2 values add to level-2 plaintexts, not to level-1 ciphertexts.
    np.testing.assert_allclose(sk.decrypt(g.add_plain(np.ones(5))), a @ X + 1.0, atol=1e-10)
    with pytest.raises(ValueError, match="levels differ"):
        _ = prod + ea


def test_masked_decryption_hides_and_unmasks(keys, rng):
    pk, sk = keys
    a = rng.normal(size=8)
    X = rng.normal(size=(8, 3))
    g = pk.encrypt(a, processes=1).dot(X, processes=1)
    mask = pk.random_mask(3)
    raw = sk.decrypt_raw(g.add_encoded(mask), processes=1)
    exact = [int(v) % pk.n for v in np.rint((a @ X) * 2.0 ** 80)]
    assert all(r != e for r, e in zip(raw, exact))
    # What the key holder returns travels as bytes and unmasks to the gradient.
    wire = pk.plaintexts_to_bytes(raw)
    assert len(wire) == 3 * pk.plaintext_bytes
    np.testing.assert_allclose(pk.unmask(pk.plaintexts_from_bytes(wire), mask, level=2), a @ X, atol=1e-10)


def test_serialization_roundtrip_and_validation(keys, rng):
    pk, sk = keys
    a = rng.normal(size=7)
    ev = pk.encrypt(a, processes=1)
    data = ev.to_bytes()
    assert isinstance(data, bytes)
    assert len(data) == 13 + 7 * pk.ciphertext_bytes and pk.ciphertext_bytes == 512
    back = P.EncryptedVector.from_bytes(pk, data)
    assert back.ciphertexts == ev.ciphertexts and back.level == 1
    np.testing.assert_array_equal(sk.decrypt(back), quantized(a))
    level2 = P.EncryptedVector.from_bytes(pk, ev.mul_plain(a).to_bytes())
    assert level2.level == 2
    np.testing.assert_allclose(sk.decrypt(level2), a * a, atol=1e-11)

    key_back = P.PaillierPublicKey.from_dict(pk.to_dict())
    assert key_back == pk and key_back.key_bits == 2048
    assert set(pk.to_dict()) == {"scheme", "n", "hs"} and isinstance(pk.to_dict()["n"], bytes)
    assert key_back.hs == pk.hs

    with pytest.raises(ValueError, match="header"):
        P.EncryptedVector.from_bytes(pk, data[:5])
    with pytest.raises(ValueError, match="expected 7 ciphertexts"):
        P.EncryptedVector.from_bytes(pk, data[:-1])
    with pytest.raises(ValueError, match="not an encrypted"):
        P.EncryptedVector.from_bytes(pk, b"XXX" + data[3:])
    too_big = data[:13] + (pk.nsquare + 1).to_bytes(pk.ciphertext_bytes, "big") + data[13 + pk.ciphertext_bytes:]
    with pytest.raises(ValueError, match="out of range"):
        P.EncryptedVector.from_bytes(pk, too_big)
    with pytest.raises(TypeError):
        P.EncryptedVector.from_bytes(pk, list(data))
    with pytest.raises(ValueError):
        P.PaillierPublicKey.from_dict({"scheme": "paillier", "n": (2 ** 1023 + 1).to_bytes(128, "big")})


def test_obfuscation_changes_ciphertext_not_plaintext(keys, rng):
    pk, sk = keys
    a = rng.normal(size=5)
    ev = pk.encrypt(a, processes=1)
    fresh = ev.obfuscate(processes=1)
    assert fresh.rerandomized
    assert all(c1 != c2 for c1, c2 in zip(ev.ciphertexts, fresh.ciphertexts))
    np.testing.assert_array_equal(sk.decrypt(fresh), sk.decrypt(ev))
    # A homomorphic result is re-randomized when serialized: the receiver cannot
    # divide out a ciphertext it sent to read the plaintext that was added.
    summed = ev.add_plain(a)
    assert not summed.rerandomized
    sent = P.EncryptedVector.from_bytes(pk, summed.to_bytes())
    assert all(c1 != c2 for c1, c2 in zip(summed.ciphertexts, sent.ciphertexts))
    np.testing.assert_allclose(sk.decrypt(sent), 2 * a, atol=1e-11)
    # Encryption itself is randomized.
    assert pk.encrypt(a, processes=1).ciphertexts != ev.ciphertexts


def test_key_size_policy():
    with pytest.raises(ValueError, match="at least 2048"):
        P.generate_keypair(1024)
    with pytest.raises(ValueError, match="at least 2048"):
        P.check_key_bits(2047)
    with pytest.raises(TypeError):
        P.check_key_bits(2048.0)
    with pytest.warns(P.WeakKeyWarning, match="112-bit"):
        P.check_key_bits(2048)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert P.check_key_bits(3072) == 3072


@pytest.mark.slow  # 3072-bit key generation
def test_3072_bit_key_roundtrip():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pk, sk = P.generate_keypair()
    assert pk.key_bits == 3072 and pk.ciphertext_bytes == 768
    a = np.array([0.25, -3.5, 7.0])
    ev = P.EncryptedVector.from_bytes(pk, pk.encrypt(a, processes=1).to_bytes())
    np.testing.assert_allclose(sk.decrypt(ev.dot(np.eye(3)), processes=1), a, atol=1e-11)


@pytest.mark.slow  # a process pool
def test_parallel_equals_sequential(keys, rng):
    pk, sk = keys
    a = rng.normal(size=24)
    X = rng.normal(size=(24, 6))
    seq = pk.encrypt(a, processes=1)
    par = pk.encrypt(a, processes=2)
    assert par.ciphertexts != seq.ciphertexts
    np.testing.assert_array_equal(sk.decrypt(par, processes=2), sk.decrypt(seq, processes=1))
    assert sk.decrypt_raw(par, processes=2) == sk.decrypt_raw(par, processes=1)
    # Products and sums are deterministic: identical ciphertexts either way.
    assert seq.dot(X, processes=2).ciphertexts == seq.dot(X, processes=1).ciphertexts
    assert seq.mul_plain(X[:, 1], processes=2).ciphertexts == seq.mul_plain(X[:, 1], processes=1).ciphertexts
    np.testing.assert_allclose(sk.decrypt(seq.dot(X, processes=2)), a @ X, atol=1e-10)
    obf = seq.obfuscate(processes=2)
    np.testing.assert_array_equal(sk.decrypt(obf, processes=2), sk.decrypt(seq, processes=1))


def test_bad_inputs_raise(keys):
    pk, sk = keys
    ev = pk.encrypt([1.0, 2.0], processes=1)
    with pytest.raises(ValueError, match="NaN|finite"):
        pk.encrypt([1.0, np.nan])
    with pytest.raises(ValueError, match="too large|range"):
        pk.encrypt([1e300])
    with pytest.raises(ValueError, match="shape"):
        ev.dot(np.ones((3, 2)))
    with pytest.raises(ValueError, match="sizes differ"):
        _ = ev + pk.encrypt([1.0], processes=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.WeakKeyWarning)
        other_pk, other_sk = P.generate_keypair(2048)
    with pytest.raises(ValueError, match="different public key"):
        other_sk.decrypt(ev)
    with pytest.raises(ValueError, match="entries"):
        pk.unmask([1, 2], [1], level=1)


# -------------------------------------------------------------------- CKKS


@pytest.fixture(scope="module")
def ckks_contexts():
    secret = C.CKKSSecretContext()
    public_bytes = secret.public_context_bytes()
    return secret, public_bytes, C.CKKSPublicContext.from_bytes(public_bytes)


def test_ckks_parameters_respect_security_bound():
    params = C.CKKSParameters()
    assert params.poly_modulus_degree == 8192 and sum(params.coeff_mod_bit_sizes) == 200
    assert params.slot_count == 4096
    with pytest.raises(ValueError, match="128-bit security"):
        C.CKKSParameters(coeff_mod_bit_sizes=(60, 40, 40, 40, 60))
    with pytest.raises(ValueError, match="poly_modulus_degree"):
        C.CKKSParameters(poly_modulus_degree=6000)
    with pytest.raises(ValueError, match="scale_bits"):
        C.CKKSParameters(scale_bits=50)


def test_ckks_public_context_has_no_secret_key(ckks_contexts):
    secret, public_bytes, public = ckks_contexts
    assert isinstance(public_bytes, bytes)
    assert secret.tenseal.has_secret_key()
    assert not public.tenseal.has_secret_key() and not public.tenseal.is_private()
    assert not hasattr(public, "decrypt")
    assert public.galois_keys.size() == len(C.galois_steps(public.params))
    # A TenSEAL context with the secret key, framed as a public context, is refused.
    private_bytes = secret.tenseal.serialize(save_secret_key=True, save_galois_keys=False)
    galois = public_bytes[C._PUBLIC_HEADER.size + C._PUBLIC_HEADER.unpack_from(public_bytes)[1]:]
    framed = C._PUBLIC_HEADER.pack(C._PUBLIC_MAGIC, len(private_bytes), len(galois)) + private_bytes + galois
    with pytest.raises(ValueError, match="secret key"):
        C.CKKSPublicContext.from_bytes(framed)
    with pytest.raises(ValueError, match="not a serialized"):
        C.CKKSPublicContext.from_bytes(b"not a context")
    with pytest.raises(ValueError, match="not a serialized"):
        C.CKKSPublicContext.from_bytes(secret.tenseal.serialize())  # a bare TenSEAL context
    # A context with other parameters than agreed is refused.
    with pytest.raises(ValueError, match="agreed"):
        C.CKKSPublicContext.from_bytes(public_bytes, C.CKKSParameters(coeff_mod_bit_sizes=(60, 40, 40, 40, 30)))


def test_phe_uses_gmpy2():
    import phe.util

    assert phe.util.HAVE_GMP


def test_ckks_vector_matrix_product_accuracy(ckks_contexts, rng):
    secret, _, public = ckks_contexts
    b, p = 300, 7
    d = rng.uniform(-2, 2, size=b)
    X = rng.uniform(-1, 1, size=(b, p)) / b
    enc = public.encrypt(d, full_slots=True)
    data = enc.dot(X).to_bytes()
    got = secret.decrypt(secret.vector_from_bytes(data))
    assert got.shape == (p,)
    np.testing.assert_allclose(got, d @ X, atol=1e-3)
    assert np.abs(got - d @ X).max() < 2.0 ** -(C.CKKSParameters().scale_bits - C.ERROR_BITS_ABOVE_SCALE)
    with pytest.raises(ValueError, match="packed product"):
        enc.dot(X).dot(np.ones((p, 1)))
    with pytest.raises(ValueError, match="rows"):
        enc.dot(X[:-1])


def test_ckks_batches_longer_than_one_ciphertext(ckks_contexts, rng):
    secret, _, public = ckks_contexts
    b, p = 4096 + 500, 3
    d = rng.uniform(-1, 1, size=b)
    X = rng.uniform(-1, 1, size=(b, p)) / b
    enc = public.encrypt(d, full_slots=True)
    assert len(enc.chunks) == 2
    np.testing.assert_allclose(secret.decrypt(enc.dot(X)), d @ X, atol=1e-3)


def test_ckks_masking_and_flooding(ckks_contexts, rng):
    secret, _, public = ckks_contexts
    g = rng.uniform(-1, 1, size=4096)
    mask = C.secure_uniform(4096, C.DEFAULT_MASK_BOUND)
    assert np.abs(mask).max() <= C.DEFAULT_MASK_BOUND and np.abs(mask).max() > C.DEFAULT_MASK_BOUND / 2
    masked = public.encrypt(g).add_fresh(mask)
    exact = secret.decrypt(masked)
    np.testing.assert_allclose(exact - mask, g, atol=1e-4)
    flooded = secret.decrypt_flooded(masked)
    sigma = C.flooding_sigma(secret.params, C.DEFAULT_FLOODING_BITS)
    assert sigma == 2.0 ** -10
    noise = flooded - exact
    assert np.std(noise) == pytest.approx(sigma, rel=0.1)
    assert abs(np.mean(noise)) < 5 * sigma / np.sqrt(noise.size)
    np.testing.assert_array_equal(secret.decrypt_flooded(masked, flooding_bits=None), exact)
