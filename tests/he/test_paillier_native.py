"""The native (C++, AVX-512 IFMA) Paillier fixed-base kernel: vflsec._core.PaillierFixedBase
and its use by vflsec.he._paillier_math."""
import random
import warnings
from concurrent.futures import ThreadPoolExecutor

import gmpy2
import numpy as np
import phe
import pytest

from vflsec import _core
from vflsec.he import _paillier_math as pm
from vflsec.he import paillier

pytestmark = pytest.mark.skipif(
    not pm.native_available(),
    reason="native Paillier kernel not available here: it needs an x86-64 CPU with AVX-512F and AVX-512 IFMA "
           "(vflsec._core.paillier_native_available() is False); the gmpy2 path runs instead")


@pytest.fixture(scope="module", params=[2048, pytest.param(3072, marks=pytest.mark.slow)])  # slow: 3072-bit keys
def keypair(request):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", paillier.WeakKeyWarning)
        return paillier.generate_keypair(request.param)


def _le(value, size):
    return value.to_bytes(size, "little")


def _ints(data, size):
    return [int.from_bytes(data[i:i + size], "little") for i in range(0, len(data), size)]


def _table(n, hs, bits=None, window=8):
    k = n.bit_length()
    return _core.PaillierFixedBase(_le(n, -(-k // 8)), _le(hs, -(-2 * k // 8)),
                                   pm.short_exponent_bits(n) if bits is None else bits, window)


def _edge_alphas(bits, rng):
    top = (1 << bits) - 1
    alternating = int.from_bytes(bytes([0xFF, 0x00] * (bits // 16 + 1)), "little") & top
    return [0, 1, 2, 255, 256, top, top - 1, 1 << (bits - 1), alternating, top ^ alternating] + [
        rng.getrandbits(bits) for _ in range(13)]


def test_table_shape_and_sizes(keypair):
    pk, _ = keypair
    table = pm.native_fixed_base_table(pk.n, pk.hs)
    bits = pm.short_exponent_bits(pk.n)
    assert table.modulus_bits == pk.key_bits and table.exponent_bits == bits and table.window == 8
    assert table.rows == -(-bits // 8) and table.entries == table.rows * 256
    assert table.plaintext_bytes == pk.plaintext_bytes and table.ciphertext_bytes == pk.ciphertext_bytes
    digits = -(-(pk.nsquare.bit_length() + 2) // 52)
    assert table.table_bytes == table.entries * digits * 8


def test_native_power_equals_powmod_for_edge_and_random_exponents(keypair):
    pk, _ = keypair
    table = pm.native_fixed_base_table(pk.n, pk.hs)
    alphas = _edge_alphas(table.exponent_bits, random.Random(pk.key_bits))
    out = _ints(table.powers(b"".join(_le(a, table.exponent_bytes) for a in alphas)), table.ciphertext_bytes)
    assert out == [int(gmpy2.powmod(pk.hs, a, pk.nsquare)) for a in alphas]


def test_native_encrypt_and_rerandomize_are_the_djn_formulas(keypair):
    pk, _ = keypair
    n, nsq, hs = pk.n, pk.nsquare, pk.hs
    table = pm.native_fixed_base_table(n, hs)
    rng = random.Random(7)
    count = 19  # two full groups of eight lanes and a partial one
    alphas = [rng.getrandbits(table.exponent_bits) for _ in range(count)]
    ms = [0, 1, n - 1] + [rng.randrange(n) for _ in range(count - 3)]
    cs = [1, nsq - 1] + [rng.randrange(1, nsq) for _ in range(count - 2)]
    a_bytes = b"".join(_le(a, table.exponent_bytes) for a in alphas)
    enc = _ints(table.encrypt(b"".join(_le(m, table.plaintext_bytes) for m in ms), a_bytes), table.ciphertext_bytes)
    assert enc == [(1 + n * m) * pow(hs, a, nsq) % nsq for m, a in zip(ms, alphas)]
    rer = _ints(table.rerandomize(b"".join(_le(c, table.ciphertext_bytes) for c in cs), a_bytes),
                table.ciphertext_bytes)
    assert rer == [c * pow(hs, a, nsq) % nsq for c, a in zip(cs, alphas)]


def test_native_encryption_decrypts_with_vflsec_and_phe_private_keys(keypair):
    pk, sk = keypair
    values = np.random.default_rng(pk.key_bits).standard_normal(21)
    enc = pk.encrypt(values, processes=1)
    np.testing.assert_allclose(sk.decrypt(enc, processes=1), values, atol=1e-12)
    phe_private = phe.PaillierPrivateKey(phe.PaillierPublicKey(pk.n), sk.p, sk.q)
    assert [phe_private.raw_decrypt(c) for c in enc.ciphertexts] == pk.encode(values)
    np.testing.assert_allclose([phe_private.decrypt(x) for x in enc.to_phe()], values, atol=1e-12)
    assert len(set(pm.encrypt_chunk(pk.n, [5] * 9, pk.hs))) == 9  # fresh randomness per value


def test_native_rerandomization_keeps_the_plaintext(keypair):
    pk, sk = keypair
    values = np.array([0.0, -1.5, 2.25, 1e-9, -3.0, 7.5, 0.125, -0.5, 4.0])
    enc = pk.encrypt(values, processes=1)
    again = enc.obfuscate(processes=1)
    assert all(a != b for a, b in zip(again.ciphertexts, enc.ciphertexts))
    assert sk.decrypt_raw(again, processes=1) == pk.encode(values)
    # the wire form re-randomizes homomorphic results through the same path
    back = paillier.EncryptedVector.from_bytes(pk, (enc + enc).to_bytes(processes=1))
    np.testing.assert_allclose(sk.decrypt(back, processes=1), 2 * values, atol=1e-12)


def test_native_randomizers_are_hs_powers_for_the_online_encryption(keypair):
    pk, sk = keypair
    pool = pk.precompute_randomness(9, processes=1)
    rho = list(pool._values)
    assert all(sk.phe.raw_decrypt(r) == 0 for r in rho)  # n-th residues: they encrypt 0
    x = np.array([0.5, -1.25, 3.0])
    np.testing.assert_allclose(sk.decrypt(pk.encrypt(x, randomness=pool), processes=1), x, atol=1e-12)


def test_native_and_gmpy2_paths_agree_on_decryption(keypair):
    pk, sk = keypair
    values = np.linspace(-2, 2, 12)
    with pm.gmpy2_only():
        assert pm._native_table(pk.n, pk.hs) is None
        old = pk.encrypt(values, processes=1)
    new = pk.encrypt(values, processes=1)
    assert sk.decrypt_raw(old, processes=1) == sk.decrypt_raw(new, processes=1) == pk.encode(values)


@pytest.mark.slow  # a process pool
def test_native_path_in_the_process_pool(keypair):
    pk, sk = keypair
    values = np.random.default_rng(1).standard_normal(40)
    enc = pk.encrypt(values, processes=2)
    np.testing.assert_allclose(sk.decrypt(enc.obfuscate(processes=2), processes=2), values, atol=1e-12)


@pytest.mark.slow  # concurrency stress on one table
def test_concurrent_batches_on_one_table(keypair):
    pk, _ = keypair
    table = pm.native_fixed_base_table(pk.n, pk.hs)
    rng = random.Random(3)
    batches = [[rng.getrandbits(table.exponent_bits) for _ in range(10)] for _ in range(4)]

    def run(alphas):
        return _ints(table.powers(b"".join(_le(a, table.exponent_bytes) for a in alphas)), table.ciphertext_bytes)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, batches))
    assert results == [[pow(pk.hs, a, pk.nsquare) for a in alphas] for alphas in batches]


@pytest.mark.slow  # key generation per modulus size
@pytest.mark.parametrize("k, bits, window", [(61, 31, 1), (521, 100, 5), (1001, 501, 8), (1536, 768, 3), (256, 128, 12),
                                             (2050, 1025, 7)])
def test_general_moduli_exponent_lengths_and_windows(k, bits, window):
    rng = random.Random(k)
    n = rng.getrandbits(k) | (1 << (k - 1)) | 1
    nsq = n * n
    hs = rng.randrange(2, nsq)
    table = _table(n, hs, bits, window)
    assert table.rows == -(-bits // window) and table.exponent_bytes == -(-bits // 8)
    alphas = _edge_alphas(bits, rng)
    out = _ints(table.powers(b"".join(_le(a, table.exponent_bytes) for a in alphas)), table.ciphertext_bytes)
    assert out == [pow(hs, a, nsq) for a in alphas]
    ms = [rng.randrange(n) for _ in alphas]
    enc = table.encrypt(b"".join(_le(m, table.plaintext_bytes) for m in ms),
                        b"".join(_le(a, table.exponent_bytes) for a in alphas))
    assert _ints(enc, table.ciphertext_bytes) == [(1 + n * m) * pow(hs, a, nsq) % nsq for m, a in zip(ms, alphas)]
    assert table.powers(b"") == b""


def test_bad_inputs_raise_value_error():
    rng = random.Random(5)
    k = 1024
    n = rng.getrandbits(k) | (1 << (k - 1)) | 1
    nsq = n * n
    hs = rng.randrange(2, nsq)
    nb, cb = k // 8, 2 * k // 8
    table = _table(n, hs, 509, 8)  # 509 bits: 3 spare bits in each exponent's top byte
    eb = table.exponent_bytes
    bad_tables = [
        (_le(n, nb) + b"\0", _le(hs, cb), 512, 8),          # n with a leading zero byte
        (_le(n - 1, nb), _le(hs, cb), 512, 8),              # even n
        (b"\x01", b"\x01\x00", 8, 8),                        # n = 1
        (b"", _le(hs, cb), 512, 8),                          # empty n
        (_le(n, nb), _le(hs, cb)[:-1], 512, 8),             # hs of the wrong length
        (_le(n, nb), _le(0, cb), 512, 8),                   # hs = 0
        (_le(n, nb), _le(nsq, cb), 512, 8),                 # hs = n^2
        (_le(n, nb), _le(hs, cb), 0, 8),                    # no exponent bits
        (_le(n, nb), _le(hs, cb), 512, 0),                  # window 0
        (_le(n, nb), _le(hs, cb), 512, 13),                 # window too wide
    ]
    for args in bad_tables:
        with pytest.raises(ValueError):
            _core.PaillierFixedBase(*args)
    ok_alpha = _le(3, eb)
    with pytest.raises(ValueError, match="multiple"):
        table.powers(ok_alpha + b"\0")
    with pytest.raises(ValueError, match="exponent_bits"):
        table.powers(ok_alpha + _le(1 << 509, eb))
    with pytest.raises(ValueError, match="below n"):
        table.encrypt(_le(n, nb), ok_alpha)
    with pytest.raises(ValueError, match="below n\\^2"):
        table.rerandomize(_le(nsq, cb), ok_alpha)
    with pytest.raises(ValueError, match="one exponent per entry"):
        table.encrypt(_le(1, nb) * 2, ok_alpha)
    with pytest.raises(ValueError, match="multiple"):
        table.rerandomize(_le(1, cb)[:-1], ok_alpha)
    with pytest.raises(ValueError, match="contiguous"):
        table.powers(memoryview(ok_alpha * 2)[::2])
    with pytest.raises(TypeError):
        table.powers("not bytes")
    with pytest.raises(ValueError, match="reduced modulo n"):
        pm.encrypt_chunk(n, [n], hs)
    # the table still works after every refusal
    assert _ints(table.powers(ok_alpha), cb) == [pow(hs, 3, nsq)]
