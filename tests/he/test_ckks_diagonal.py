"""CKKS diagonal-layout vector-matrix product, its Galois keys and wire format (vflsec.he.ckks, issue 15).

Tolerance: the module's documented error bound for outputs of magnitude up
to about 1, 2^-(scale_bits - ERROR_BITS_ABOVE_SCALE) = 2^-16 (the product
measures about 2^-19).
"""
from __future__ import annotations

import numpy as np
import pytest

ts = pytest.importorskip("tenseal")

from tenseal import sealapi  # noqa: E402

from vflsec.he import _ckks_per_column as P  # noqa: E402
from vflsec.he import _seal_io as seal_io  # noqa: E402
from vflsec.he import ckks as C  # noqa: E402

PARAMS = C.CKKSParameters()
S = PARAMS.slot_count
TOL = 2.0 ** -(PARAMS.scale_bits - C.ERROR_BITS_ABOVE_SCALE)


@pytest.fixture(scope="module")
def contexts():
    secret = C.CKKSSecretContext()
    return secret, C.CKKSPublicContext.from_bytes(secret.public_context_bytes())


def _problem(b, d, seed=0):
    rng = np.random.default_rng([b, d, seed])
    r = rng.uniform(-1, 1, b)
    X = rng.uniform(-1, 1, (b, d)) / np.sqrt(b)  # outputs of magnitude about 1
    return r, X


def _all_slots(secret, ciphertext):
    plain = sealapi.Plaintext()
    secret._decryptor.decrypt(ciphertext, plain)
    return np.asarray(secret._encoder.decode_double(plain))


@pytest.mark.parametrize("d", [1, 3, 10, 16, 17])
@pytest.mark.parametrize("b", [100, S, S + 700])
def test_diagonal_product_matches_plaintext(contexts, b, d):
    secret, public = contexts
    r, X = _problem(b, d)
    enc = public.encrypt(r)
    assert len(enc.chunks) == -(-b // S)
    product = enc.dot(X)
    assert product.layout == C.product_layout(d, S) == ((d, C._next_power_of_two(d)),)
    assert public.level(product.chunks[0]) == 0  # the one multiplicative level is spent
    got = secret.decrypt(secret.vector_from_bytes(product.to_bytes()))
    assert got.shape == (d,)
    want = r @ X
    assert np.abs(got - want).max() < TOL, np.abs(got - want).max()
    # The layout the wire format announces: output j in every slot i with i mod m = j, zeros for the
    # padding columns d..m-1.
    m = C._next_power_of_two(d)
    slots = _all_slots(secret, product.chunks[0])
    assert np.abs(slots - np.tile(np.pad(want, (0, m - d)), S // m)).max() < TOL


@pytest.mark.slow  # CKKS key generation
def test_three_input_ciphertexts_and_two_column_blocks(contexts):
    secret, public = contexts
    r, X = _problem(2 * S + 5, 2)
    got = secret.decrypt(public.encrypt(r).dot(X))
    assert np.abs(got - r @ X).max() < TOL
    # More columns than slots: one ciphertext per block of S columns.
    r, X = _problem(20, S + 1)
    product = public.encrypt(r).dot(X)
    assert product.layout == ((S, S), (1, 1))
    assert np.abs(secret.decrypt(product) - r @ X).max() < TOL


def test_zero_matrix_gives_an_encryption_of_zeros(contexts):
    secret, public = contexts
    product = public.encrypt(np.ones(50)).dot(np.zeros((50, 3)))
    assert product.layout == ((3, 4),)
    assert np.abs(secret.decrypt(product)).max() < TOL


def test_diagonal_equals_the_old_per_column_path(contexts):
    secret, public = contexts
    r, X = _problem(3200, 10)
    new = secret.decrypt(public.encrypt(r).dot(X))
    legacy = P.per_column_context(PARAMS)
    old_chunks = P.per_column_dot(P.per_column_encrypt(legacy, r, S), X, S)
    old = np.asarray(old_chunks[0].decrypt())
    assert old.shape == (10,)
    # The old path spends two levels (its error is about 2^-16.3), the new one one.
    assert np.abs(old - r @ X).max() < 2 * TOL
    assert np.abs(new - old).max() < 3 * TOL


class _CountingEvaluator:
    """Delegates to a SEAL evaluator and counts its rotations."""

    def __init__(self, inner):
        self.inner, self.rotations = inner, 0

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name.startswith("rotate_vector"):
            def counted(*args):
                self.rotations += 1
                return attr(*args)
            return counted
        return attr


@pytest.mark.parametrize("b,d,rotations", [
    (3200, 10, 3 + 3 + 8),    # m = 16, g = 4: 3 baby, 3 giant, log2(4096 / 16) = 8 to sum
    (3200, 1, 12),            # m = 1: the rotate-and-sum only
    (2 * S, 16, 2 * 3 + 3 + 8),  # two input ciphertexts: baby steps for each, giant steps once
])
def test_rotation_count(contexts, b, d, rotations):
    secret, _ = contexts
    public = C.CKKSPublicContext.from_bytes(secret.public_context_bytes())
    counting = _CountingEvaluator(public._evaluator)
    public._evaluator = counting
    r, X = _problem(b, d)
    product = public.encrypt(r).dot(X)
    assert counting.rotations == rotations
    assert np.abs(secret.decrypt(product) - r @ X).max() < TOL


def test_only_the_power_of_two_galois_keys(contexts):
    secret, public = contexts
    steps = C.galois_steps(PARAMS)
    assert steps == tuple(2 ** e for e in range(12))
    keys = public.galois_keys
    elements = C._expected_galois_elements(public.seal, PARAMS)
    assert keys.size() == 12 and all(keys.has_key(e) for e in elements)
    # No key for any other step: negative ones and those whose signed binary (NAF) decomposition, which SEAL
    # falls back to, needs one (3 = 4 - 1). SEAL does compose 5 = 4 + 1 from two keys, in two key switches.
    vector = public.encrypt(np.arange(8.0))
    for step in (3, -1, -4, 7, S - 1):
        with pytest.raises(ValueError, match="Galois key not present"):
            public._evaluator.rotate_vector(vector.chunks[0], step, keys, sealapi.Ciphertext())
    rotated = sealapi.Ciphertext()
    public._evaluator.rotate_vector(vector.chunks[0], 4, keys, rotated)
    np.testing.assert_allclose(_all_slots(secret, rotated)[:4], [4, 5, 6, 7], atol=1e-5)
    # About a quarter of TenSEAL's default public context (every signed power of two, expanded).
    new_size = len(secret.public_context_bytes())
    legacy = P.per_column_context(PARAMS).serialize(save_public_key=True, save_secret_key=False,
                                                     save_galois_keys=True, save_relin_keys=False)
    assert new_size < 9.5e6 and len(legacy) > 3e7


def _framed(secret, steps):
    """A public context whose Galois keys are for ``steps``."""
    tenseal_part = secret.tenseal.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=False,
                                            save_relin_keys=False)
    tool = secret.seal.key_context_data().galois_tool()
    keygen = sealapi.KeyGenerator(secret.seal, secret.tenseal.secret_key().data)
    galois = C._seal_to_bytes(keygen.create_galois_keys(list(tool.get_elts_from_steps(list(steps)))))
    return C._PUBLIC_HEADER.pack(C._PUBLIC_MAGIC, len(tenseal_part), len(galois)) + tenseal_part + galois


@pytest.mark.slow  # CKKS key generation
def test_public_context_with_other_galois_keys_is_refused(contexts):
    secret, _ = contexts
    steps = list(C.galois_steps(PARAMS))
    C.CKKSPublicContext.from_bytes(_framed(secret, steps))  # the expected set: accepted
    for other in (steps + [3], steps[:-1], steps[1:] + [-1]):
        with pytest.raises(ValueError, match="expected exactly the steps"):
            C.CKKSPublicContext.from_bytes(_framed(secret, other))
    data = secret.public_context_bytes()
    with pytest.raises(ValueError, match="malformed CKKS Galois keys"):
        C.CKKSPublicContext.from_bytes(_reframed(data, galois=b"\0" * 64))
    with pytest.raises(ValueError, match="does not match its header"):
        C.CKKSPublicContext.from_bytes(data[:-1])
    with pytest.raises(TypeError, match="bytes"):
        C.CKKSPublicContext.from_bytes("text")
    # TenSEAL's own keys inside the context part are refused: only the needed keys are sent.
    with_keys = P.per_column_context(PARAMS).serialize(save_public_key=True, save_secret_key=False,
                                                        save_galois_keys=True, save_relin_keys=False)
    with pytest.raises(ValueError, match="its own Galois keys"):
        C.CKKSPublicContext.from_bytes(_reframed(data, context=with_keys))


def _reframed(data, *, context=None, galois=None):
    _magic, n_context, _n_galois = C._PUBLIC_HEADER.unpack_from(data)
    old_context = data[C._PUBLIC_HEADER.size:C._PUBLIC_HEADER.size + n_context]
    old_galois = data[C._PUBLIC_HEADER.size + n_context:]
    context = old_context if context is None else context
    galois = old_galois if galois is None else galois
    return C._PUBLIC_HEADER.pack(C._PUBLIC_MAGIC, len(context), len(galois)) + context + galois


def _vector_bytes(length, entries, pieces):
    header = C._HEADER.pack(C._MAGIC, length, len(entries))
    return header + b"".join(C._CHUNK.pack(*e) for e in entries) + b"".join(pieces)


def test_bad_vector_bytes_raise_clean_errors(contexts):
    secret, public = contexts
    good = public.encrypt(np.arange(5.0)).dot(np.eye(5)[:, :3])
    data = good.to_bytes()
    np.testing.assert_allclose(secret.decrypt(secret.vector_from_bytes(data)), [0, 1, 2], atol=TOL)
    piece = C._seal_to_bytes(good.chunks[0])
    cases = [
        (b"CV", "shorter than the header"),
        (b"XYZ" + data[3:], "not an encrypted CKKS vector"),
        (b"CV1" + data[3:], "not an encrypted CKKS vector"),  # the TenSEAL-based format before the diagonal one
        (data[:C._HEADER.size + 4], "truncated"),
        (C._HEADER.pack(C._MAGIC, 0, 0), "truncated"),
        (data[:-1], "does not match its header"),
        (data + b"\0", "does not match its header"),
        (_vector_bytes(3, [(3, 3, len(piece))], [piece]), "period a power of two"),
        (_vector_bytes(3, [(3, 2, len(piece))], [piece]), "values <= period"),
        (_vector_bytes(3, [(3, 2 * S, len(piece))], [piece]), f"period <= {S}"),
        (_vector_bytes(3, [(0, 4, len(piece))], [piece]), "1 <= values"),
        (_vector_bytes(4, [(3, 4, len(piece))], [piece]), "announces 4"),
        (_vector_bytes(3, [(3, 4, 100)], [b"\x5e" * 100]), "malformed CKKS ciphertext"),
        (_vector_bytes(3, [(3, 4, len(piece) - 10)], [piece[:-10]]), "malformed CKKS ciphertext"),
        # A coefficient above its prime. (Other changes to the coefficients, e.g. zeroing a few,
        # still give a valid ciphertext of something else: only a MAC would catch those.)
        (_vector_bytes(3, [(3, 4, len(piece))], [piece[:1000] + b"\xff" * 16 + piece[1016:]]),
         "malformed CKKS ciphertext: ciphertext data is invalid"),
    ]
    for bad, needle in cases:
        with pytest.raises(ValueError, match=needle):
            secret.vector_from_bytes(bad)
    with pytest.raises(TypeError, match="bytes"):
        secret.vector_from_bytes("text")
    # Valid SEAL ciphertexts the product never makes: another scale, three polynomials.
    plain, other_scale = sealapi.Plaintext(), sealapi.Ciphertext()
    public._encoder.encode([1.0], public._levels[0], 2.0 ** 30, plain)
    public._encryptor.encrypt(plain, other_scale)
    squared, fresh = sealapi.Ciphertext(), public.encrypt([1.0]).chunks[0]
    public._evaluator.multiply(fresh, fresh, squared)
    assert squared.size() == 3
    for ciphertext in (other_scale, squared):
        raw = C._seal_to_bytes(ciphertext)
        with pytest.raises(ValueError, match="expected 2 polynomials in NTT form at scale 2"):
            secret.vector_from_bytes(_vector_bytes(3, [(3, 4, len(raw))], [raw]))


def test_layouts_and_levels_must_agree(contexts):
    secret, public = contexts
    a = public.encrypt(np.ones(10))
    with pytest.raises(ValueError, match="layouts differ"):
        a + public.encrypt(np.ones(11))
    product = a.dot(np.ones((10, 3)))
    with pytest.raises(ValueError, match="layouts differ"):
        product + public.encrypt(np.ones(3))  # a batch vector does not add to a packed product
    # A value in the product's layout adds, from any level.
    total = product + public.encrypt([1.0, 2.0, 3.0], period=4)
    np.testing.assert_allclose(secret.decrypt(total), [11, 12, 13], atol=TOL)
    np.testing.assert_allclose(secret.decrypt(product.add_fresh([1.0, 2.0, 3.0])), [11, 12, 13], atol=TOL)
    with pytest.raises(ValueError, match="expected 3 values"):
        product.add_fresh([1.0, 2.0])
    with pytest.raises(ValueError, match="power of two"):
        public.encrypt([1.0], period=3)
    with pytest.raises(ValueError, match="do not fit"):
        public.encrypt([1.0, 2.0, 3.0], period=2)
    with pytest.raises(ValueError, match="last level"):
        C.CKKSEncryptedVector(public, product.chunks, 3).dot(np.ones((3, 1)))
    with pytest.raises(ValueError, match="does not describe"):
        C.CKKSEncryptedVector(public, a.chunks, 10, ((5, S),))
    with pytest.raises(TypeError, match="CKKSEncryptedVector"):
        a + np.ones(10)
    with pytest.raises(TypeError, match="CKKSEncryptedVector"):
        secret.decrypt(np.ones(3))


def test_key_holder_decrypts_only_the_product_layout_of_the_width(contexts):
    from vflsec.glm import GLMJob
    from vflsec.glm.ckks import CKKSKeyHolder, CKKSScheme

    job = GLMJob(protocol="ckks", n_samples=40, batch_size=20, coordinator="c", options={"flooding_bits": 0})
    holder = CKKSKeyHolder(job)
    scheme = CKKSScheme(holder.public_payload(), job)
    rng = np.random.default_rng(0)
    r, X = rng.uniform(-1, 1, 20), rng.uniform(-1, 1, (20, 3)) / 20
    enc = scheme.encrypt(r)
    payload, mask = scheme.masked_dot(enc, X, 0.5)
    got = scheme.unmask(holder.answer_gradient(payload, 3), mask, 3)
    assert np.abs(got - 0.5 * r @ X).max() < 2 * C.flooding_sigma(holder.secret.params, 0)
    with pytest.raises(ValueError, match="the party's gradient is 4 values"):
        holder.answer_gradient(payload, 4)
    for forged in (enc, C.CKKSEncryptedVector(enc.context, enc.chunks, 3)):  # [[r]] as it is, or relabelled
        with pytest.raises(ValueError, match="in the layout"):
            holder.answer_gradient(forged.to_bytes(), 3)
    loss = scheme.loss_term(enc, np.ones(20), scheme.encrypt_scalar_for_loss(2.0))
    assert abs(holder.decrypt_loss(scheme.dumps(loss)) - (r.sum() + 2.0)) < 1e-3
    with pytest.raises(ValueError, match="one-column product"):
        holder.decrypt_loss(payload)


def test_serialization_without_memfd(contexts, monkeypatch):
    """Where there is no memfd (not Linux), SEAL objects go through a private temporary file."""
    secret, public = contexts
    monkeypatch.setattr(seal_io, "use_memfd", lambda: False)
    r, X = _problem(300, 5)
    data = public.encrypt(r).dot(X).to_bytes()
    assert np.abs(secret.decrypt(secret.vector_from_bytes(data)) - r @ X).max() < TOL
    other = C.CKKSPublicContext.from_bytes(secret.public_context_bytes())
    assert other.galois_keys.size() == 12
    with pytest.raises(ValueError, match="malformed CKKS ciphertext"):
        secret.vector_from_bytes(_vector_bytes(3, [(3, 4, 100)], [b"\x5e" * 100]))
