"""SecureBoost (issue 29): the trees under Paillier are the plain protocol's, bit for bit; the slot
packing round-trips at its extremes; what a passive party receives is ciphertexts only; a packed
histogram of the wrong size is refused."""
from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification

pytest.importorskip("gmpy2")
pytest.importorskip("phe")

from vflsec.he.paillier import PaillierEncryptedVector, generate_keypair  # noqa: E402
from vflsec.trees.histogram import BinLayout, build_histogram  # noqa: E402
from vflsec.trees.secureboost import SlotFormat, aggregate_bins, pack_bins  # noqa: E402


@pytest.fixture(scope="module")
def keys():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return generate_keypair(2048)


def _parts(n=500, seed=0):
    X, y = make_classification(n_samples=n, n_features=8, n_informative=5, random_state=seed)
    return [X[:, :3], X[:, 3:6], X[:, 6:]], y


def test_secureboost_grows_the_plain_trees_bit_for_bit(plain_and_secureboost, caplog):
    parts, y = _parts()
    caplog.set_level(logging.INFO, logger="vflsec.trees")
    plain, secure = plain_and_secureboost(parts, y, max_iter=3, max_bins=16, max_leaf_nodes=6)
    # One line per tree and party, each fit (plain, then SecureBoost): the same leaves, SecureBoost's bytes.
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("party 'active': tree ")]
    assert [line.split(":")[1] for line in lines] == [f" tree {k}/3" for k in (1, 2, 3)] * 2
    assert secure.bytes_per_tree_[0] > 10 * plain.bytes_per_tree_[0]
    for a, b in zip(plain.trees_, secure.trees_):
        for key in ("owner", "record", "left", "right", "value"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))
    assert [t.to_dict() for t in plain.lookups_] == [t.to_dict() for t in secure.lookups_]
    seconds = secure.protection_seconds_
    assert seconds["active"]["encrypt"] > 0 and seconds["active"]["decrypt"] > 0
    assert seconds["passive_0"]["aggregate"] > 0 and seconds["passive_1"]["pack"] > 0
    assert secure.bytes_ > plain.bytes_ / 10  # ciphertexts, not free


def test_a_packed_histogram_decrypts_to_the_exact_sums(keys):
    public, private = keys
    rng = np.random.default_rng(1)
    n = 300
    scale = 2.0 ** 40
    # The extremes of the ranges: g = -1 and +1, h = 0 and 1/4, on the grid.
    g = np.rint(rng.uniform(-1, 1, n) * scale) / scale
    h = np.rint(rng.uniform(0, 0.25, n) * scale) / scale
    g[:3], h[:3] = [-1.0, 1.0, 1.0], [0.0, 0.25, 0.25]
    codes = np.stack([rng.integers(0, 5, n), rng.integers(0, 9, n)], axis=1).astype(np.uint8)
    layout = BinLayout((5, 9))
    fmt = SlotFormat.for_job(n, 40, public.key_bits)
    assert fmt.slots >= 10 and fmt.slots * fmt.width < public.key_bits
    cts = public.encrypt_encoded(fmt.encode(g, h)).ciphertexts
    import gmpy2

    nsq = gmpy2.mpz(public.nsquare)
    rows = rng.permutation(n)[:200]
    bins = aggregate_bins([gmpy2.mpz(c) for c in cts], codes, rows, layout, nsq)
    packed = PaillierEncryptedVector(public, pack_bins(bins, fmt.slots, fmt.width, nsq))
    assert len(packed) == -(-layout.total // fmt.slots)
    opened = fmt.decode(private.decrypt_raw(packed), layout.total)
    expected = build_histogram(codes, rows, g, h, layout)
    np.testing.assert_array_equal(opened.G, expected.G)
    np.testing.assert_array_equal(opened.H, expected.H)
    np.testing.assert_array_equal(opened.C, expected.C)


def test_values_outside_the_log_loss_ranges_are_refused():
    fmt = SlotFormat.for_job(10, 40, 2048)
    with pytest.raises(ValueError, match="log-loss"):
        fmt.encode(np.array([1.5]), np.array([0.1]))
    with pytest.raises(ValueError, match="log-loss"):
        fmt.encode(np.array([0.5]), np.array([0.3]))


def test_a_passive_party_receives_ciphertexts_only():
    from vflsec.trees import FeatureBins, TreeJob, TreePartyData
    from vflsec.trees.protocol import active_program, passive_program
    from vflsec.vfl.runner import run_programs

    parts, y = _parts(n=200)
    parts = parts[:2]
    bins = [FeatureBins(max_bins=8).fit(P) for P in parts]
    data = {"a": TreePartyData(bins[0].transform(parts[0]), y), "b": TreePartyData(bins[1].transform(parts[1]))}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 2048-bit key's strength warning
        job = TreeJob(n_samples=200, active="a", passives=("b",), n_bins=tuple(tuple(b.n_bins_) for b in bins),
                      protection="secureboost", max_iter=1, max_leaf_nodes=3)
        run = run_programs(job, {"active": active_program, "passive": passive_program}, data)
    to_passive = [r for r in run.records if r.receiver == "b"]
    assert {r.tag for r in to_passive} == {"trees_public_key", "trees_step", "trees_gradients"}
    gradients = [r for r in to_passive if r.tag == "trees_gradients"]
    assert len(gradients) == 1 and gradients[0].nbytes > 200 * 512  # one 4096-bit ciphertext per row


def test_open_refuses_a_histogram_of_the_wrong_size(keys):
    from vflsec.trees.secureboost import SecureBoost

    public, private = keys
    protection = SecureBoost()
    protection.public, protection.private = public, private
    protection.format = SlotFormat.for_job(100, 40, public.key_bits)
    one = PaillierEncryptedVector(public, public.encrypt_encoded([1]).ciphertexts, rerandomized=True).to_bytes()
    with pytest.raises(ValueError, match="packed ciphertexts"):
        protection.open({"ciphertexts": one}, BinLayout((200, 200)), "b")


def test_the_native_kernel_multiplies_each_bin_as_gmpy2_does(keys):
    import gmpy2

    from vflsec.he._paillier_math import native_in_use
    from vflsec.trees.secureboost import NativeRows

    if not native_in_use():
        pytest.skip("the native Paillier kernel needs AVX-512 IFMA")
    public, _ = keys
    rng = np.random.default_rng(3)
    n = 137  # not a multiple of the 8 lanes
    cts = public.encrypt_encoded([int(v) for v in rng.integers(0, 2 ** 50, n)]).ciphertexts
    cts[5] = public.nsquare - 1  # the largest ciphertext
    for widths in [(3,), (4, 9, 2, 7, 5, 3, 6, 8, 2, 4, 3)]:  # one short lane group; two groups, the last short
        layout = BinLayout(widths)
        codes = np.stack([rng.integers(0, w, n) for w in widths], axis=1).astype(np.uint8)
        rows = np.sort(rng.permutation(n)[:100])
        native = NativeRows(public, cts).histogram(codes, rows, layout)
        expected = aggregate_bins([gmpy2.mpz(c) for c in cts], codes, rows, layout, gmpy2.mpz(public.nsquare))
        assert [int(v) for v in native] == [int(v) for v in expected]
        assert int(native[layout.total - 1]) == 1 or np.any(codes[rows, -1] == widths[-1] - 1)


def test_the_native_kernel_refuses_bad_input(keys):
    from vflsec import _core
    from vflsec.he._paillier_math import native_in_use

    if not native_in_use():
        pytest.skip("the native Paillier kernel needs AVX-512 IFMA")
    public, _ = keys
    size = public.ciphertext_bytes
    n_le = public.n.to_bytes(public.plaintext_bytes, "little")
    with pytest.raises(ValueError, match="not a multiple"):
        _core.PaillierCiphertextRows(n_le, b"\x01" * (size + 1))
    with pytest.raises(ValueError, match=r"\(0, n\^2\)"):
        _core.PaillierCiphertextRows(n_le, public.nsquare.to_bytes(size, "little"))
    rows = _core.PaillierCiphertextRows(n_le, (2).to_bytes(size, "little") * 4)
    codes = np.zeros((4, 2), dtype=np.uint8)
    offsets = np.array([0, 3], dtype=np.int64)
    with pytest.raises(ValueError, match="row index"):
        rows.histogram(np.array([0, 4], dtype=np.int64), codes, offsets, 6)
    with pytest.raises(ValueError, match="beyond the histogram"):
        rows.histogram(np.array([0], dtype=np.int64), np.full((4, 2), 3, dtype=np.uint8), offsets, 6)
    with pytest.raises(ValueError, match="one row per ciphertext"):
        rows.histogram(np.array([0], dtype=np.int64), np.zeros((3, 2), dtype=np.uint8), offsets, 6)
    two = rows.histogram(np.array([0, 1, 3], dtype=np.int64), codes, offsets, 6)
    assert int.from_bytes(two[:size], "little") == 8 and int.from_bytes(two[size:2 * size], "little") == 1


def test_the_native_packing_is_the_gmpy2_packing(keys):
    import gmpy2

    from vflsec.he._paillier_math import native_in_use
    from vflsec.trees.secureboost import NativeRows

    if not native_in_use():
        pytest.skip("the native Paillier kernel needs AVX-512 IFMA")
    public, _ = keys
    rng = np.random.default_rng(4)
    cts = public.encrypt_encoded([int(v) for v in rng.integers(0, 2 ** 40, 61)]).ciphertexts
    rows = NativeRows(public, cts[:3])
    size = public.ciphertext_bytes
    data = b"".join(c.to_bytes(size, "little") for c in cts)
    nsq = gmpy2.mpz(public.nsquare)
    for slots, width in [(1, 100), (4, 111), (17, 120)]:  # 61 = 15 groups of 4 and a short one; 3 of 17 + 10
        native = rows.pack(data, slots, width)
        assert [int(c) for c in native] == [int(c) for c in pack_bins([gmpy2.mpz(c) for c in cts], slots, width, nsq)]
    with pytest.raises(ValueError, match="slots"):
        rows.pack(data, 0, 100)
