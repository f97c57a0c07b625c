"""vflsec's old Paillier paths, the named baselines of ``vflsec bench he``:
the per-product X^T [[r]] and :func:`old_paillier_path`, which patches keys
without the DJN fixed base and that product in for the HE-VFL epoch."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional


def per_product_dot(self, matrix: Any, *, processes: Optional[int] = None):
    """``EncryptedVector.dot`` as it was before the Pippenger multi-exponentiation:
    one short exponentiation per matrix entry (``_paillier_math.dot_chunk``),
    rows split among the workers, one inversion per column."""
    import gmpy2

    from ....he import _paillier_math as _pm
    from ....he._pool import chunk_bounds, resolve_processes, run_chunks
    from ....he.paillier import _MIN_CHUNK_MUL, EncryptedVector

    encoded = self.public_key.encode_signed(matrix, 1, "matrix")
    if encoded.ndim != 2 or encoded.shape[0] != len(self):
        raise ValueError(f"matrix must have shape ({len(self)}, p), got {encoded.shape}")
    n_cols = encoded.shape[1]
    nsq = self.public_key.nsquare
    processes = resolve_processes(processes)
    cts, rows = self.ciphertexts, encoded.tolist()
    bounds = chunk_bounds(len(cts), processes, max(1, _MIN_CHUNK_MUL // max(1, n_cols)))
    parts = run_chunks(_pm.dot_chunk, [(self.public_key.n, cts[a:b], rows[a:b]) for a, b in bounds], processes)
    out = []
    for j in range(n_cols):
        positive, negative = 1, 1
        for pos, neg in parts:
            positive = positive * pos[j] % nsq
            negative = negative * neg[j] % nsq
        if negative != 1:
            positive = positive * gmpy2.invert(negative, nsq) % nsq
        out.append(int(positive))
    return EncryptedVector(self.public_key, out, self.level + 1)


@contextlib.contextmanager
def old_paillier_path() -> Iterator[Dict[str, int]]:
    """In this process only, for the epoch baseline: ``generate_keypair`` returns
    a key without the DJN fixed base (classic r^n encryption and
    re-randomization) and ``EncryptedVector.dot`` is :func:`per_product_dot`.
    Yields call counters, so the caller can check the patch took effect."""
    from ....he import paillier as _paillier

    real_generate, real_dot = _paillier.generate_keypair, _paillier.EncryptedVector.dot
    calls = {"generate_keypair": 0, "dot": 0}

    def classic_keypair(key_bits: int = _paillier.DEFAULT_KEY_BITS):
        calls["generate_keypair"] += 1
        public, private = real_generate(key_bits)
        bare = _paillier.PaillierPublicKey(public.n)
        return bare, _paillier.PaillierPrivateKey(bare, private.p, private.q)

    def counted_dot(self, matrix, *, processes=None):
        calls["dot"] += 1
        return per_product_dot(self, matrix, processes=processes)

    _paillier.generate_keypair = classic_keypair
    # A deliberate, temporary monkeypatch (restored below): the old path's per-product dot, counted.
    _paillier.EncryptedVector.dot = counted_dot  # type: ignore[method-assign]
    try:
        yield calls
    finally:
        _paillier.generate_keypair = real_generate
        _paillier.EncryptedVector.dot = real_dot  # type: ignore[method-assign]  # restores the method
