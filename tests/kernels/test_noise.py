"""Secure Gaussian noise: ChaCha20 correctness, the normal transform, the
stream's semantics (seeding, threads, ISA paths, fork, concurrency) and
argument validation.

Statistical thresholds. Tests on seeded streams are deterministic (they either
always pass or always fail for a given implementation) and use p > 1e-3. Tests
on secure streams are random: under a correct generator their p-value is
uniform, so a threshold of 1e-6 fails spuriously once per million runs, while a
wrong transform (for example a variance off by 1%) gives p ~ 0 at 10^6 samples.
"""
from __future__ import annotations

import copy
import hashlib
import math
import os
import pickle
import struct
import threading
import warnings

import numpy as np
import pytest
from scipy import stats

import vflsec
from vflsec import NoiseGenerator, _core, kernels

N_STAT = 10**6


# ---------------------------------------------------------------------------
# an independent ChaCha20 (RFC 8439 section 2.3), written from the RFC text
# ---------------------------------------------------------------------------

def _rotl(v, n):
    return ((v << n) | (v >> (32 - n))) & 0xFFFFFFFF


def _quarter(s, a, b, c, d):
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF
    s[d] = _rotl(s[d] ^ s[a], 16)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF
    s[b] = _rotl(s[b] ^ s[c], 12)
    s[a] = (s[a] + s[b]) & 0xFFFFFFFF
    s[d] = _rotl(s[d] ^ s[a], 8)
    s[c] = (s[c] + s[d]) & 0xFFFFFFFF
    s[b] = _rotl(s[b] ^ s[c], 7)


def ref_block(key: bytes, words12_15) -> bytes:
    state = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    state += list(struct.unpack("<8I", key)) + list(words12_15)
    s = list(state)
    for _ in range(10):
        for a, b, c, d in ((0, 4, 8, 12), (1, 5, 9, 13), (2, 6, 10, 14), (3, 7, 11, 15),  # columns
                           (0, 5, 10, 15), (1, 6, 11, 12), (2, 7, 8, 13), (3, 4, 9, 14)):  # diagonals
            _quarter(s, a, b, c, d)
    return struct.pack("<16I", *[(x + y) & 0xFFFFFFFF for x, y in zip(s, state)])


def ref_stream_words(key: bytes, first_block: int, nblocks: int) -> np.ndarray:
    """The generator's documented stream: 64-bit counter in words 12-13, stream id 0."""
    out = b"".join(
        ref_block(key, (c & 0xFFFFFFFF, c >> 32, 0, 0)) for c in range(first_block, first_block + nblocks)
    )
    return np.frombuffer(out, dtype="<u8").astype(np.uint64)


def seed_key(seed) -> bytes:
    """The documented seed -> key derivation."""
    if isinstance(seed, bytes):
        payload = b"bytes:" + seed
    else:
        payload = b"int:" + seed.to_bytes(max(1, (seed.bit_length() + 7) // 8), "big")
    return hashlib.sha256(b"vflsec.NoiseGenerator.v1/" + payload).digest()


RFC_KEY = bytes(range(32))
RFC_NONCE = bytes.fromhex("000000090000004a00000000")


def test_rfc8439_block_function_vector():
    # RFC 8439 section 2.3.2: key 00..1f, nonce 00:00:00:09:00:00:00:4a:00:00:00:00, counter 1.
    expected = bytes.fromhex(
        "10f1e7e4d13b5915500fdd1fa32071c4"
        "c7d1f4c733c068030422aa9ac3d46c4e"
        "d2826446079faa0914c2d705d98b02a2"
        "b5129cd1de164eb9cbd083e8a2503c4e"
    )
    assert _core.chacha20_block(RFC_KEY, 1, RFC_NONCE) == expected
    assert ref_block(RFC_KEY, (1,) + struct.unpack("<3I", RFC_NONCE)) == expected


def test_rfc8439_appendix_a1_zero_key_vector():
    expected = bytes.fromhex(
        "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
        "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
    )
    assert _core.chacha20_block(bytes(32), 0, bytes(12)) == expected


def test_block_function_matches_reference_on_random_inputs():
    rng = np.random.default_rng(1)
    for _ in range(20):
        key = rng.bytes(32)
        nonce = rng.bytes(12)
        counter = int(rng.integers(0, 2**32))
        assert _core.chacha20_block(key, counter, nonce) == ref_block(key, (counter,) + struct.unpack("<3I", nonce))


def test_seeded_raw_stream_is_documented_chacha20_keystream():
    for seed in (0, 12345, 2**70 + 3, b"", b"experiment-7"):
        words = NoiseGenerator(seed=seed).random_raw(8 * 37)
        np.testing.assert_array_equal(words, ref_stream_words(seed_key(seed), 0, 37))


def test_raw_stream_against_openssl_chacha20():
    cryptography = pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    key = seed_key(99)
    first = 1000
    # OpenSSL's 16-byte IV is state words 12..15: our counter (low, high) and stream id 0.
    iv = first.to_bytes(8, "little") + bytes(8)
    keystream = Cipher(algorithms.ChaCha20(key, iv), mode=None).encryptor().update(bytes(64 * 50))
    gen = _core.ChaCha20Generator.from_key(key, first)
    out = np.empty(8 * 50, dtype=np.uint64)
    gen.fill_raw(out)
    assert out.astype("<u8").tobytes() == keystream
    assert cryptography is not None


def test_block_counter_carries_into_high_word():
    key = seed_key(5)
    gen = _core.ChaCha20Generator.from_key(key, 2**32 - 21)
    out = np.empty(8 * 45, dtype=np.uint64)
    gen.fill_raw(out)  # one call spans the 2^32 boundary inside a SIMD group
    np.testing.assert_array_equal(out, ref_stream_words(key, 2**32 - 21, 45))


def test_counter_exhaustion_is_an_error_not_a_wrap():
    # Blocks 0 .. 2^64 - 2 are usable (the next-block counter itself is 64-bit).
    gen = _core.ChaCha20Generator.from_key(seed_key(5), 2**64 - 4)
    out = np.empty(8 * 3, dtype=np.uint64)
    gen.fill_raw(out)
    np.testing.assert_array_equal(out[:8], ref_stream_words(seed_key(5), 2**64 - 4, 1))
    with pytest.raises(OverflowError):
        gen.fill_raw(np.empty(1, dtype=np.uint64))


# ---------------------------------------------------------------------------
# the transform's math
# ---------------------------------------------------------------------------

def test_polynomial_log_matches_libm():
    rng = np.random.default_rng(2)
    u = np.concatenate([
        np.geomspace(2.0**-53, 1.0, 20001),
        rng.random(20000),
        1.0 - np.geomspace(2.0**-53, 0.5, 5000),
        math.sqrt(0.5) * (1.0 + np.linspace(-1e-6, 1e-6, 1001)),  # the range-reduction switch
    ])
    u = u[(u > 0) & (u < 1)]
    got = _core._noise_log(u)
    want = np.array([math.log(v) for v in u])
    assert np.max(np.abs(got - want) / np.abs(want)) < 1e-15
    assert _core._noise_log(np.array([1.0]))[0] == 0.0


def test_polynomial_sincos_matches_libm():
    x = np.concatenate([np.linspace(-math.pi / 4, math.pi / 4, 40001), [-math.pi / 4, math.pi / 4, 1e-300]])
    s, c = _core._noise_sincos(x)
    want_s = np.array([math.sin(v) for v in x])
    want_c = np.array([math.cos(v) for v in x])
    nz = want_s != 0
    assert np.max(np.abs(s - want_s)[nz] / np.abs(want_s[nz])) < 1e-15
    assert np.max(np.abs(c - want_c) / np.abs(want_c)) < 1e-15


def _reference_normals(words: np.ndarray, n: int) -> np.ndarray:
    """Box-Muller as documented, with libm, from the raw words."""
    w1 = words[0::2]
    w2 = words[1::2]
    u1 = ((w1 >> np.uint64(11)).astype(np.float64) + 1.0) * 2.0**-53
    u2 = (w2 >> np.uint64(11)).astype(np.float64) * 2.0**-53
    r = np.sqrt(-2.0 * np.log(u1))
    theta = 2.0 * np.pi * u2 - np.pi / 4
    z = np.empty(2 * w1.size)
    z[0::2] = r * np.cos(theta)
    z[1::2] = r * np.sin(theta)
    return z[:n]


@pytest.mark.parametrize("n", [1, 7, 8, 9, 1000, 4099])
def test_normals_are_box_muller_of_the_raw_stream(n):
    z = NoiseGenerator(seed=3).standard_normal(n)
    words = NoiseGenerator(seed=3).random_raw(8 * math.ceil(n / 8))
    np.testing.assert_allclose(z, _reference_normals(words, n), rtol=0, atol=1e-13)


def test_normal_is_sigma_times_standard_normal():
    z = NoiseGenerator(seed=4).standard_normal(1001)
    x = NoiseGenerator(seed=4).normal(1001, sigma=2.5)
    np.testing.assert_array_equal(x, z * 2.5)


# ---------------------------------------------------------------------------
# distribution
# ---------------------------------------------------------------------------

def _moment_checks(x: np.ndarray, sigma: float = 1.0) -> None:
    n = x.size
    x = x.astype(np.float64) / sigma
    # 5-standard-error bounds: mean (sd 1/sqrt n), variance (sd sqrt(2/n)),
    # fourth moment (sd sqrt(96/n)).
    assert abs(x.mean()) < 5 / math.sqrt(n)
    assert abs(x.var() - 1) < 5 * math.sqrt(2 / n)
    assert abs(np.mean(x**4) - 3) < 5 * math.sqrt(96 / n)


def test_seeded_normals_pass_ks_and_moments():
    x = NoiseGenerator(seed=2024).standard_normal(N_STAT)
    assert stats.kstest(x, "norm").pvalue > 1e-3
    _moment_checks(x)


def test_secure_normals_pass_ks_and_moments():
    x = kernels.gaussian_noise(N_STAT, 3.0)
    assert stats.kstest(x / 3.0, "norm").pvalue > 1e-6
    _moment_checks(x, 3.0)


def test_tails_match_normal_probabilities():
    x = NoiseGenerator(seed=77).standard_normal(N_STAT)
    for k in (2.0, 3.0, 4.0):
        p = 2 * stats.norm.sf(k)
        count = np.count_nonzero(np.abs(x) > k)
        assert abs(count - N_STAT * p) < 5 * math.sqrt(N_STAT * p * (1 - p))
    assert np.abs(x).max() < math.sqrt(-2 * math.log(2.0**-53)) + 1e-12


def test_float32_output():
    x = NoiseGenerator(seed=8).standard_normal((500, 400), dtype="float32")
    assert x.dtype == np.float32 and x.shape == (500, 400) and x.flags.c_contiguous
    ref = NoiseGenerator(seed=8).standard_normal((500, 400))
    np.testing.assert_array_equal(x, ref.astype(np.float32))  # float64 then rounded once
    assert stats.kstest(x.ravel().astype(np.float64), "norm").pvalue > 1e-3
    y = kernels.gaussian_noise(10, 2.0, dtype=np.float32)
    assert y.dtype == np.float32


# ---------------------------------------------------------------------------
# stream semantics
# ---------------------------------------------------------------------------

def test_seeded_reproducible_and_seeds_differ():
    a = NoiseGenerator(seed=42).standard_normal(1000)
    b = NoiseGenerator(seed=42).standard_normal(1000)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(NoiseGenerator(seed=np.int64(42)).standard_normal(1000), a)
    assert not np.array_equal(NoiseGenerator(seed=43).standard_normal(1000), a)
    # int and bytes seeds are domain-separated
    assert not np.array_equal(NoiseGenerator(seed=b"\x2a").standard_normal(1000), a)
    np.testing.assert_array_equal(NoiseGenerator(seed=b"k").random_raw(5),
                                  NoiseGenerator(seed=bytearray(b"k")).random_raw(5))


def test_unseeded_generators_and_calls_differ():
    a = kernels.gaussian_noise(64)
    b = kernels.gaussian_noise(64)
    assert not np.array_equal(a, b)
    g1, g2 = NoiseGenerator(), NoiseGenerator()
    assert g1.is_secure and g2.is_secure
    assert not np.array_equal(g1.random_raw(8), g2.random_raw(8))


def test_each_call_takes_whole_fresh_blocks():
    gen = NoiseGenerator(seed=11)
    first = gen.random_raw(5)     # block 0 (8 words), 5 returned
    second = gen.random_raw(16)   # blocks 1, 2
    third = gen.standard_normal(3)  # block 3
    assert gen.blocks_used == 4
    stream = NoiseGenerator(seed=11).random_raw(32)
    np.testing.assert_array_equal(first, stream[:5])
    np.testing.assert_array_equal(second, stream[8:24])
    np.testing.assert_allclose(third, _reference_normals(stream[24:32], 3), rtol=0, atol=1e-13)
    assert not np.isin(second, first).any()


def test_thread_count_does_not_change_seeded_output():
    before = vflsec.get_num_threads()
    try:
        outs = []
        for threads in (1, 2, 3):
            vflsec.set_num_threads(threads)
            gen = NoiseGenerator(seed=5)
            outs.append((gen.standard_normal(100_003), gen.random_raw(40_001),
                         gen.normal((301, 170), 0.5, dtype="float32")))
        for other in outs[1:]:
            for x, y in zip(outs[0], other):
                np.testing.assert_array_equal(x, y)
    finally:
        vflsec.set_num_threads(before)


def test_every_isa_path_gives_identical_streams():
    paths = kernels.supported_isas()["noise"]
    x = np.linspace(-3, 3, 50_001)
    outs = {}
    for path in paths:
        with kernels.force_isa("noise", path):
            assert kernels.kernel_isa()["noise"] == path
            gen = NoiseGenerator(seed=9)
            outs[path] = (gen.standard_normal(50_001), gen.random_raw(1003),
                          gen.normal(999, 3.0, dtype="float32"), kernels.add_gaussian_noise(x, 0.1, generator=gen),
                          kernels.add_gaussian_noise(x.astype(np.float32), 0.1, generator=gen))
    for path in paths[1:]:
        for a, b in zip(outs["default"], outs[path]):
            np.testing.assert_array_equal(a, b)


def test_concurrent_threads_never_share_blocks():
    gen = NoiseGenerator(seed=21)
    calls_per_thread, words_per_call, nthreads = 50, 8 * 40, 4
    results = [[] for _ in range(nthreads)]
    barrier = threading.Barrier(nthreads)

    def worker(i):
        barrier.wait()
        for _ in range(calls_per_thread):
            results[i].append(gen.random_raw(words_per_call))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = np.concatenate([w for r in results for w in r]).reshape(-1, 8)
    total_blocks = nthreads * calls_per_thread * words_per_call // 8
    assert gen.blocks_used == total_blocks
    expected = NoiseGenerator(seed=21).random_raw(8 * total_blocks).reshape(-1, 8)
    # Exactly the first total_blocks blocks, each handed out once.
    assert {tuple(b) for b in got} == {tuple(b) for b in expected}
    assert len({tuple(b) for b in got}) == total_blocks


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_repeat_parent_secure_stream():
    secure = NoiseGenerator()
    secure.random_raw(8)  # keyed and used before the fork
    kernels.gaussian_noise(8)  # the default generator too
    seeded = NoiseGenerator(seed=31)
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # child: small draws only (no OpenMP region), then leave at once
        try:
            payload = (secure.random_raw(8).tobytes() + kernels.gaussian_noise(8).tobytes()
                       + seeded.random_raw(8).tobytes())
            os.write(write_fd, payload)
        finally:
            os._exit(0)
    os.close(write_fd)
    data = b""
    while len(data) < 192:
        chunk = os.read(read_fd, 192 - len(data))
        if not chunk:
            break
        data += chunk
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert len(data) == 192
    child_secure = np.frombuffer(data[:64], dtype=np.uint64)
    child_default = np.frombuffer(data[64:128], dtype=np.float64)
    child_seeded = np.frombuffer(data[128:], dtype=np.uint64)
    assert not np.array_equal(child_secure, secure.random_raw(8))
    assert not np.array_equal(child_default, kernels.gaussian_noise(8))
    # Seeded generators are deterministic by design: the child continues the parent's stream.
    np.testing.assert_array_equal(child_seeded, seeded.random_raw(8))


# ---------------------------------------------------------------------------
# public functions
# ---------------------------------------------------------------------------

def test_gaussian_noise_shapes():
    assert kernels.gaussian_noise(5).shape == (5,)
    assert kernels.gaussian_noise((2, 3)).shape == (2, 3)
    assert kernels.gaussian_noise(()).shape == ()
    empty = kernels.gaussian_noise((0, 4))
    assert empty.shape == (0, 4) and empty.dtype == np.float64
    assert kernels.gaussian_noise([np.int64(3)]).shape == (3,)
    zeros = kernels.gaussian_noise((4, 2), 0.0)
    assert zeros.shape == (4, 2) and not zeros.any()


def test_sigma_zero_consumes_nothing():
    gen = NoiseGenerator(seed=1)
    kernels.gaussian_noise(100, 0.0, generator=gen)
    assert gen.blocks_used == 0


def test_add_gaussian_noise_numpy_seeded_exact():
    # The release is g * (rint(x / g) + Z) with Z the integer noise of
    # lattice_gaussian from the same stream (float32: that integer times g,
    # rounded to float32 once).
    x = np.random.default_rng(0).normal(size=(300, 7))
    x_before = x.copy()
    g = kernels.lattice_spacing(0.7)
    assert g == 2.0**-21
    y = kernels.add_gaussian_noise(x, 0.7, generator=NoiseGenerator(seed=6))
    z = kernels.lattice_gaussian((300, 7), 0.7, generator=NoiseGenerator(seed=6))
    assert z.dtype == np.int64 and z.shape == (300, 7)
    np.testing.assert_array_equal(y, (np.rint(x / g).astype(np.int64) + z) * g)
    np.testing.assert_array_equal(x, x_before)
    assert 0.6 < np.std(y - x) < 0.8
    x32 = x.astype(np.float32)
    y32 = kernels.add_gaussian_noise(x32, 0.7, generator=NoiseGenerator(seed=6))
    assert y32.dtype == np.float32
    exact = (np.rint(x32.astype(np.float64) / g).astype(np.int64) + z) * g
    np.testing.assert_array_equal(y32, exact.astype(np.float32))


def test_add_gaussian_noise_types():
    ints = kernels.add_gaussian_noise(np.arange(10), 1.0)
    assert ints.dtype == np.float64
    lst = kernels.add_gaussian_noise([1.0, 2.0], 0.5)
    assert isinstance(lst, np.ndarray) and lst.shape == (2,)
    empty = kernels.add_gaussian_noise(np.empty((0, 3), np.float32), 1.0)
    assert empty.shape == (0, 3) and empty.dtype == np.float32
    x = np.arange(6.0).reshape(2, 3)
    same = kernels.add_gaussian_noise(x, 0.0)
    np.testing.assert_array_equal(same, x)
    assert same is not x and not np.shares_memory(same, x)
    strided = np.arange(20.0)[::2]
    np.testing.assert_array_equal(
        kernels.add_gaussian_noise(strided, 1.0, generator=NoiseGenerator(seed=2)),
        kernels.add_gaussian_noise(np.ascontiguousarray(strided), 1.0, generator=NoiseGenerator(seed=2)))


def test_add_gaussian_noise_torch():
    torch = pytest.importorskip("torch")
    for dtype in (torch.float32, torch.float64):
        t = torch.arange(1000, dtype=dtype).reshape(10, 100)
        before = t.clone()
        out = kernels.add_gaussian_noise(t, 2.0, generator=NoiseGenerator(seed=3))
        assert isinstance(out, torch.Tensor) and out.dtype == dtype and out.shape == t.shape
        assert torch.equal(t, before)
        ref = kernels.add_gaussian_noise(t.numpy(), 2.0, generator=NoiseGenerator(seed=3))
        np.testing.assert_array_equal(out.numpy(), ref)
    grad = torch.ones(5, requires_grad=True)
    assert kernels.add_gaussian_noise(grad, 1.0).shape == (5,)


def test_overflowing_sum_is_an_error():
    # In the lattice's range (|x| / g ~ 2^25) but x + noise overflows float32.
    big = np.full(100, np.finfo(np.float32).max, dtype=np.float32)
    with pytest.raises(ValueError, match="too large to release.*finite in float32"):
        kernels.add_gaussian_noise(big, 1e37)


def test_generator_repr_and_no_copies():
    gen = NoiseGenerator()
    assert "secure" in repr(gen) and "OS entropy" in repr(gen)
    seeded = NoiseGenerator(seed=7)
    assert "seed=7" in repr(seeded) and "NOT secure" in repr(seeded)
    assert not seeded.is_secure
    for g in (gen, seeded):
        with pytest.raises(TypeError):
            pickle.dumps(g)
        with pytest.raises(TypeError):
            copy.deepcopy(g)


def test_uniform_helpers():
    gen = NoiseGenerator(seed=12)
    u = gen.random((1000, 10))
    assert u.dtype == np.float64 and u.min() >= 0 and u.max() < 1
    u32 = gen.random(10**5, dtype="float32")
    assert u32.dtype == np.float32 and u32.min() >= 0 and u32.max() < 1
    assert stats.kstest(u.ravel(), "uniform").pvalue > 1e-3
    k = gen.integers_below(10, size=50_000)
    assert k.dtype == np.int64 and k.min() >= 0 and k.max() <= 9
    assert stats.chisquare(np.bincount(k, minlength=10)).pvalue > 1e-3
    big = gen.integers_below(10**40)
    assert isinstance(big, int) and 0 <= big < 10**40
    assert gen.integers_below(1) == 0


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("sigma, exc", [
    (-1.0, ValueError), (float("nan"), ValueError), (float("inf"), ValueError), (1e308, ValueError),
    ("1", TypeError), (True, TypeError), (1j, TypeError), (None, TypeError), (np.array([1.0, 2.0]), TypeError),
])
def test_gaussian_noise_rejects_bad_sigma(sigma, exc):
    with pytest.raises(exc, match="sigma"):
        kernels.gaussian_noise(3, sigma)
    with pytest.raises(exc, match="sigma"):
        kernels.add_gaussian_noise(np.zeros(3), sigma)


def test_float32_sigma_limit():
    with pytest.raises(ValueError, match="sigma"):
        kernels.gaussian_noise(3, 1e38, dtype="float32")
    assert np.isfinite(kernels.gaussian_noise(1000, 1e36, dtype="float32")).all()


@pytest.mark.parametrize("shape, exc", [
    (-1, ValueError), ((2, -3), ValueError), (2.5, TypeError), ((2, 1.0), TypeError), (None, TypeError),
    ("ab", TypeError), ((True, 2), TypeError),
])
def test_rejects_bad_shape(shape, exc):
    with pytest.raises(exc, match="shape"):
        kernels.gaussian_noise(shape)
    with pytest.raises(exc, match="shape"):
        kernels.discrete_gaussian(shape, 1.0)


@pytest.mark.parametrize("dtype", ["float16", "int32", np.complex128, None, "nonsense", object])
def test_rejects_bad_dtype(dtype):
    with pytest.raises(TypeError, match="dtype"):
        kernels.gaussian_noise(3, dtype=dtype)


@pytest.mark.parametrize("x, exc", [
    (np.array([1.0, np.nan]), ValueError), (np.array([np.inf]), ValueError),
    (np.array([True, False]), TypeError), (np.array([1 + 2j]), TypeError),
    (np.array(["a"]), TypeError), (np.array([object()]), TypeError), (None, TypeError),
])
def test_add_gaussian_noise_rejects_bad_x(x, exc):
    with pytest.raises(exc, match="x"):
        kernels.add_gaussian_noise(x, 1.0)


@pytest.mark.parametrize("generator", [np.random.default_rng(0), 42, "secure", _core.ChaCha20Generator()])
def test_rejects_foreign_generator(generator):
    with pytest.raises(TypeError, match="generator"):
        kernels.gaussian_noise(3, generator=generator)
    with pytest.raises(TypeError, match="generator"):
        kernels.add_gaussian_noise(np.zeros(3), 1.0, generator=generator)
    with pytest.raises(TypeError, match="generator"):
        kernels.discrete_gaussian(3, 1.0, generator=generator)


@pytest.mark.parametrize("seed, exc", [(-1, ValueError), (1.5, TypeError), ("abc", TypeError), (True, TypeError),
                                       ([1, 2], TypeError)])
def test_rejects_bad_seed(seed, exc):
    with pytest.raises(exc, match="seed"):
        NoiseGenerator(seed=seed)


def test_rejects_bad_counts():
    gen = NoiseGenerator(seed=0)
    with pytest.raises(ValueError, match="n"):
        gen.random_raw(-1)
    with pytest.raises(TypeError, match="n"):
        gen.random_raw(2.0)
    assert gen.random_raw(0).shape == (0,)
    with pytest.raises(ValueError, match="n"):
        gen.integers_below(0)
    with pytest.raises(ValueError, match="n"):
        gen.integers_below(2**64, size=3)
    with pytest.raises(ValueError, match="size"):
        gen.integers_below(5, size=-2)


def test_core_refuses_mismatched_out_arrays():
    gen = _core.ChaCha20Generator.from_key(bytes(32))
    with pytest.raises(TypeError):
        gen.fill_normal(np.empty(8, dtype=np.int64), 1.0)
    with pytest.raises(TypeError):
        gen.fill_normal(np.empty((4, 4))[:, 0], 1.0)  # not contiguous: would be copied
    with pytest.raises(ValueError):
        _core.ChaCha20Generator.from_key(b"short")
