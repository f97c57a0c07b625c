"""One encrypted-vector contract for Paillier and CKKS (vflsec.he.vector, issue 25 item 3).

Every test runs on both schemes through the same method names: the
symmetric wire form, the homomorphic arithmetic, scalar multiplication on
either side of ``*`` (issue 27 found ``EncryptedVector * 3.0`` a TypeError)
and the refusals.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("phe")
pytest.importorskip("gmpy2")
pytest.importorskip("tenseal")

from vflsec import he  # noqa: E402
from vflsec.he import ckks as C  # noqa: E402
from vflsec.he import paillier as P  # noqa: E402
from vflsec.he.vector import AbstractEncryptedVector  # noqa: E402

A = np.array([0.5, -1.25, 2.0, 0.0, 3.75])
B = np.array([-0.25, 1.5, 0.125, -2.0, 0.5])


class Scheme:
    """What a test needs of one scheme: public side, secret side, tolerance, level."""

    def __init__(self, name, public, secret, encrypt, atol, product_atol):
        self.name, self.public, self.secret = name, public, secret
        self.encrypt, self.atol, self.product_atol = encrypt, atol, product_atol

    def decrypt(self, vector):
        return vector.decrypt(self.secret)

    def depth(self, vector):
        """How many plaintext products deep ``vector`` is (Paillier: level - 1;
        CKKS: primes spent since a fresh encryption)."""
        if self.name == "paillier":
            return vector.level - 1
        return 1 - min(self.public.level(c) for c in vector.chunks)


@pytest.fixture(scope="module")
def paillier():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", P.WeakKeyWarning)
        pk, sk = P.generate_keypair(2048)
    return Scheme("paillier", pk, sk, lambda v: pk.encrypt(v, processes=1), 1e-11, 1e-10)


@pytest.fixture(scope="module")
def ckks():
    secret = C.CKKSSecretContext()
    public = secret.public_context()
    # CKKS is approximate: ~2^-30 on fresh values, ~2^-19 after a product (vflsec.he.ckks).
    return Scheme("ckks", public, secret, public.encrypt, 1e-6, 2.0 ** -16)


@pytest.fixture(params=["paillier", "ckks"])
def scheme(request):
    return request.getfixturevalue(request.param)


def test_both_vectors_share_the_base_and_the_old_names_still_work(paillier, ckks):
    for s, cls in ((paillier, P.PaillierEncryptedVector), (ckks, C.CKKSEncryptedVector)):
        v = s.encrypt(A)
        assert isinstance(v, AbstractEncryptedVector) and type(v) is cls
        assert v.scheme == s.name and v.size == len(v) == 5
    assert P.EncryptedVector is P.PaillierEncryptedVector is he.EncryptedVector
    assert he.PaillierEncryptedVector is P.PaillierEncryptedVector and he.CKKSEncryptedVector is C.CKKSEncryptedVector
    assert he.AbstractEncryptedVector is AbstractEncryptedVector


def test_round_trip_through_bytes_under_public_and_secret_side(scheme):
    v = scheme.encrypt(A)
    data = v.to_bytes()
    assert isinstance(data, bytes)
    for key_or_context in (scheme.public, scheme.secret):
        back = type(v).from_bytes(key_or_context, data)
        assert type(back) is type(v) and back.size == v.size
        np.testing.assert_allclose(scheme.decrypt(back), A, atol=scheme.atol)
    # A product (deeper level, CKKS: packed layout) survives the trip too.
    product = v.dot(np.eye(5)[:, :2])
    back = type(v).from_bytes(scheme.public, product.to_bytes())
    assert scheme.depth(back) == 1
    np.testing.assert_allclose(scheme.decrypt(back), A[:2], atol=scheme.product_atol)


def test_from_bytes_refuses_the_wrong_key_type_and_malformed_data(scheme, paillier, ckks):
    v = scheme.encrypt(A)
    data = v.to_bytes()
    other = ckks.public if scheme.name == "paillier" else paillier.public
    with pytest.raises(TypeError, match="key_or_context"):
        type(v).from_bytes(other, data)
    with pytest.raises(TypeError, match="bytes"):
        type(v).from_bytes(scheme.public, list(data))
    with pytest.raises(ValueError):
        type(v).from_bytes(scheme.public, data[:-1])
    with pytest.raises(ValueError):
        type(v).from_bytes(scheme.public, b"")
    # The other scheme's bytes are not this scheme's vector.
    with pytest.raises((ValueError, TypeError)):
        type(v).from_bytes(scheme.public, (ckks if scheme.name == "paillier" else paillier).encrypt(A).to_bytes())


def test_arithmetic_with_the_same_names(scheme):
    a, b = scheme.encrypt(A), scheme.encrypt(B)
    tol = scheme.atol
    np.testing.assert_allclose(scheme.decrypt(a.add(b)), A + B, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a + b), A + B, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a.sub(b)), A - B, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a - b), A - B, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(-a), -A, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a.neg()), -A, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a.add_plain(B)), A + B, atol=tol)
    np.testing.assert_allclose(scheme.decrypt(a.sub_plain(B)), A - B, atol=tol)
    product = a.mul_plain(B)
    assert scheme.depth(product) == 1
    np.testing.assert_allclose(scheme.decrypt(product), A * B, atol=scheme.product_atol)
    X = np.arange(15.0).reshape(5, 3) / 10
    np.testing.assert_allclose(scheme.decrypt(a.dot(X)), A @ X, atol=scheme.product_atol)
    np.testing.assert_allclose(scheme.decrypt(a.sum()), [A.sum()], atol=scheme.product_atol)
    # A product adds to a product, and to a plaintext at its depth.
    np.testing.assert_allclose(scheme.decrypt(product + b.mul_plain(A)), 2 * A * B, atol=2 * scheme.product_atol)
    np.testing.assert_allclose(scheme.decrypt(product.add_plain(A)), A * B + A, atol=scheme.product_atol)


@pytest.mark.parametrize("scalar", [3.0, -2, 0.5, np.float64(-1.5), np.int64(4), 0.0, np.array(2.5)])
def test_scalar_multiplication_on_both_sides(scheme, scalar):
    v = scheme.encrypt(A)
    expected = A * float(scalar)
    for result in (v * scalar, scalar * v, v.mul_scalar(scalar)):
        assert type(result) is type(v) and result.size == 5
        assert scheme.depth(result) == 1
        np.testing.assert_allclose(scheme.decrypt(result), expected, atol=scheme.product_atol)


def test_multiplication_by_a_plaintext_vector_on_both_sides(scheme):
    v = scheme.encrypt(A)
    for result in (v * B, B * v, v * B.tolist()):
        np.testing.assert_allclose(scheme.decrypt(result), A * B, atol=scheme.product_atol)


@pytest.mark.parametrize("bad, error", [
    (True, TypeError), (np.bool_(False), TypeError), (1 + 2j, TypeError),
    (float("nan"), ValueError), (float("inf"), ValueError), (-np.inf, ValueError),
])
def test_scalar_multiplication_refuses_what_is_not_a_finite_real(scheme, bad, error):
    v = scheme.encrypt(A)
    with pytest.raises(error):
        v * bad
    with pytest.raises(error):
        v.mul_scalar(bad)


def test_refusals(scheme, paillier, ckks):
    a, b = scheme.encrypt(A), scheme.encrypt(B)
    with pytest.raises(TypeError, match="two ciphertexts"):
        a * b
    with pytest.raises(TypeError, match="add_plain"):
        a + 1.0
    with pytest.raises(TypeError, match="add_plain"):
        a + B
    with pytest.raises(TypeError, match="sub_plain"):
        a - B
    other = (ckks if scheme.name == "paillier" else paillier).encrypt(A)
    with pytest.raises(TypeError):
        a + other
    with pytest.raises(ValueError):
        a + scheme.encrypt(A[:4])
    with pytest.raises(ValueError):
        a.add_plain(B[:4])
    with pytest.raises(ValueError):
        a.mul_plain(B[:4])
    with pytest.raises(ValueError):
        a * np.array([1.0, np.nan, 1.0, 1.0, 1.0])
    with pytest.raises(TypeError, match="PaillierPrivateKey|CKKSSecretContext"):
        a.decrypt(scheme.public)  # the public side cannot decrypt


def test_paillier_levels_must_match_for_addition(paillier):
    a = paillier.encrypt(A)
    with pytest.raises(ValueError, match="levels differ"):
        a * 2.0 + a
    assert (a * 2.0 + a * 3.0).level == 2


def test_ckks_product_needs_a_level_and_a_transparent_sum_is_refused(ckks):
    a = ckks.encrypt(A)
    with pytest.raises(ValueError, match="last level"):
        (a * 2.0) * 2.0
    # v - v.add_plain(x) leaves a ciphertext that holds -x in the clear: refused, never returned.
    with pytest.raises(ValueError, match="in the clear"):
        a - a.add_plain(B)
    # A zero factor gives a (fresh) encryption of zeros one level lower.
    zero = a * 0.0
    assert ckks.depth(zero) == 1
    np.testing.assert_allclose(ckks.decrypt(zero), np.zeros(5), atol=ckks.product_atol)


def test_paillier_negation_refuses_a_value_that_is_not_a_ciphertext(paillier):
    pk = paillier.public
    # n is in range (0, n^2) but shares n's factors: no inverse, so no Enc(-a).
    forged = P.PaillierEncryptedVector(pk, [pk.n], level=1)
    with pytest.raises(ValueError, match="not invertible"):
        _ = -forged
