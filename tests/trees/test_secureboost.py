"""SecureBoost (issue 29): the trees under Paillier are the plain protocol's, bit for bit; the slot
packing round-trips at its extremes; what a passive party receives is ciphertexts only; a packed
histogram of the wrong size is refused."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification

pytest.importorskip("gmpy2")
pytest.importorskip("phe")

from vflsec.he.paillier import PaillierEncryptedVector, generate_keypair  # noqa: E402
from vflsec.trees import VerticalGradientBoostingClassifier  # noqa: E402
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


def test_secureboost_grows_the_plain_trees_bit_for_bit():
    parts, y = _parts()
    options = dict(max_iter=3, max_bins=16, max_leaf_nodes=6)
    plain = VerticalGradientBoostingClassifier(**options).fit(parts, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 2048-bit key's strength warning
        secure = VerticalGradientBoostingClassifier("secureboost", **options).fit(parts, y)
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
