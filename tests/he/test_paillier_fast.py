"""DJN fixed-base encryption and Pippenger products (vflsec.he._paillier_math)."""
import random

import gmpy2
import numpy as np
import phe
import pytest

from vflsec.he import _paillier_math as pm
from vflsec.he import paillier


def test_generated_key_is_admissible_and_carries_a_fixed_base(keypair):
    pk, sk = keypair
    p, q = sk.p, sk.q
    assert p % 4 == 3 and q % 4 == 3 and gmpy2.gcd(p - 1, q - 1) == 2
    assert pk.n.bit_length() == 2048 and pk.hs is not None
    # hs is an n-th residue: it decrypts to 0, so it never disturbs a plaintext.
    assert sk.phe.raw_decrypt(pk.hs) == 0


def test_djn_ciphertexts_decrypt_with_phe_private_keys(keypair):
    pk, sk = keypair
    values = np.random.default_rng(0).standard_normal(20)
    enc = pk.encrypt(values, processes=1)
    phe_private = phe.PaillierPrivateKey(phe.PaillierPublicKey(pk.n), sk.p, sk.q)
    np.testing.assert_allclose([phe_private.decrypt(x) for x in enc.to_phe()], values, atol=1e-12)
    # Re-randomization keeps the plaintext and changes every ciphertext.
    again = enc.obfuscate(processes=1)
    assert all(a != b for a, b in zip(again.ciphertexts, enc.ciphertexts))
    np.testing.assert_allclose(sk.decrypt(again, processes=1), values, atol=1e-12)


def test_fresh_encryptions_of_the_same_value_differ(keypair):
    pk, _ = keypair
    cts = pm.encrypt_chunk(pk.n, [5] * 8, pk.hs)
    assert len(set(cts)) == 8


def test_key_without_fixed_base_uses_classic_encryption(keypair):
    pk, sk = keypair
    bare = paillier.PaillierPublicKey(pk.n)  # e.g. a phe key: no hs
    assert bare.hs is None
    enc = bare.encrypt([1.5, -2.25], processes=1)
    np.testing.assert_allclose(sk.decrypt(enc, processes=1), [1.5, -2.25])


def test_public_key_round_trip_keeps_the_fixed_base(keypair):
    pk, _ = keypair
    again = paillier.PaillierPublicKey.from_dict(pk.to_dict())
    assert again == pk and again.hs == pk.hs
    with pytest.raises(ValueError, match="unit"):
        paillier.PaillierPublicKey(pk.n, pk.n)


def test_fixed_base_power_matches_powmod(keypair):
    pk, _ = keypair
    table = pm.fixed_base_table(pk.n, pk.hs)
    rng = random.Random(1)
    for alpha in [0, 1, 255, 256, rng.getrandbits(pm.short_exponent_bits(pk.n))]:
        assert pm._short_power(table, alpha, pk.nsquare) == gmpy2.powmod(pk.hs, alpha, pk.nsquare)


@pytest.mark.parametrize("count", [1, 3, 40, 300])
def test_pippenger_equals_the_naive_product_exactly(keypair, count):
    pk, _ = keypair
    rng = random.Random(count)
    bases = [rng.randrange(1, pk.nsquare) for _ in range(count)]
    # Signed 44-bit scalars, zeros and a few wide ones.
    exps = [rng.randrange(-2**43, 2**43) for _ in range(count)]
    exps[0] = 0
    if count > 2:
        exps[1] = 2**90 + 12345
    naive = 1
    for b, e in zip(bases, exps):
        naive = naive * int(pm._signed_power(gmpy2.mpz(b), e, pk.nsquare)) % pk.nsquare
    assert pm.dot_columns_chunk(pk.n, bases, [exps]) == [naive]


def test_encrypted_dot_matches_plaintext(keypair):
    pk, sk = keypair
    rng = np.random.default_rng(3)
    v, X = rng.standard_normal(64), rng.standard_normal((64, 5))
    out = pk.encrypt(v, processes=1).dot(X, processes=1)
    np.testing.assert_allclose(sk.decrypt(out, processes=1), v @ X, atol=1e-9)


# -- offline randomness -----------------------------------------------------------

def test_precomputed_randomness_encrypts_correctly_and_is_used_once():
    import pickle

    import phe

    from vflsec.he import RandomnessPool, generate_keypair

    pk, sk = generate_keypair(2048)
    pool = pk.precompute_randomness(10, processes=1)
    assert isinstance(pool, RandomnessPool) and len(pool) == 10
    x = np.array([0.5, -1.25, 3.0, 0.0])
    first = pk.encrypt(x, randomness=pool)
    assert len(pool) == 6
    np.testing.assert_allclose(sk.decrypt(first), x, atol=1e-9)
    second = pk.encrypt(x, randomness=pool)
    assert len(pool) == 2
    assert not set(first.ciphertexts) & set(second.ciphertexts)  # fresh randomness each time
    # interop: phe's private key of the same pair decrypts them
    phe_sk = phe.PaillierPrivateKey(phe.PaillierPublicKey(pk.n), sk.p, sk.q)
    assert [phe_sk.raw_decrypt(c) for c in first.ciphertexts] == pk.encode(x)
    with pytest.raises(ValueError, match="2 randomizers left, 4 are needed"):
        pk.encrypt(x, randomness=pool)
    other, _ = generate_keypair(2048)
    with pytest.raises(ValueError, match="another public key"):
        other.encrypt(x[:1], randomness=pool)
    with pytest.raises(TypeError, match="must not leave its process"):
        pickle.dumps(pool)
