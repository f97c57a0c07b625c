"""Encrypted histogram aggregation per CPU-second: the C++ kernel against ``phe`` (issue 29's target).

The same work three ways, on one thread each, CPU seconds: the per-bin products (mod n^2) of
``rows`` Paillier ciphertexts over ``features`` features of random bin codes, as a passive party
of SecureBoost computes a node's histogram:

* vflsec's kernel (:class:`vflsec.trees.secureboost.NativeRows`: Montgomery form once, eight
  features per AVX-512 IFMA product; ``vflsec.set_num_threads(1)``), where the CPU has IFMA;
* vflsec's gmpy2 loop (:func:`vflsec.trees.secureboost.aggregate_bins`: ``a * c % n^2`` on
  ``mpz``; the path elsewhere);
* ``phe`` (python-paillier with gmpy2, its fastest configuration): ``EncryptedNumber`` additions of
  one exponent (no exponent alignment), on the first ``phe_rows`` rows (it is the slow one).

Every result is checked: the kernel's bins equal the gmpy2 loop's, and phe's ciphertexts equal the
gmpy2 loop's on the rows phe summed (a ciphertext addition is exactly that product).
"""
from __future__ import annotations

import time
import warnings
from typing import Any, Dict

import numpy as np

__all__ = ["aggregation_throughput"]


def aggregation_throughput(rows: int, features: int, bins: int, phe_rows: int, key_bits: int,
                           seed: int) -> Dict[str, Any]:
    import gmpy2
    import phe

    from .... import get_num_threads, set_num_threads
    from ....he import get_num_processes, set_num_processes
    from ....he._paillier_math import native_in_use
    from ....he.paillier import generate_keypair
    from ....trees.histogram import BinLayout
    from ....trees.secureboost import NativeRows, aggregate_bins

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        public, _ = generate_keypair(key_bits)
    rng = np.random.default_rng(seed)
    processes = get_num_processes()
    set_num_processes(1)  # the inputs: encrypted in this process (not timed)
    try:
        cts = public.encrypt_encoded([int(v) for v in rng.integers(0, 2 ** 62, rows)]).ciphertexts
    finally:
        set_num_processes(processes)
    codes = rng.integers(0, bins, (rows, features)).astype(np.uint8)
    layout = BinLayout(tuple([bins] * features))
    nsq = gmpy2.mpz(public.nsquare)
    every = np.arange(rows, dtype=np.int64)
    out: Dict[str, Any] = {"rows": rows, "features": features, "bins_per_feature": bins, "key_bits": key_bits,
                           "phe_rows": phe_rows, "products": rows * features,
                           "warnings": sorted({f"{w.category.__name__}: {w.message}" for w in caught})}

    mpz = [gmpy2.mpz(c) for c in cts]
    started = time.process_time()
    reference = aggregate_bins(mpz, codes, every, layout, nsq)
    out["gmpy2_us_per_product"] = 1e6 * (time.process_time() - started) / (rows * features)

    out["native"] = native_in_use()
    if out["native"]:
        threads = get_num_threads()
        set_num_threads(1)
        try:
            kernel = NativeRows(public, cts)  # the round's conversion to Montgomery form: timed apart
            started = time.process_time()
            native = kernel.histogram(codes, every, layout)
            out["native_us_per_product"] = 1e6 * (time.process_time() - started) / (rows * features)
        finally:
            set_num_threads(threads)
        out["native_equals_gmpy2"] = [int(v) for v in native] == [int(v) for v in reference]

    few = every[:phe_rows]
    encrypted = [phe.EncryptedNumber(public.phe, c, -10) for c in cts[:phe_rows]]
    sums: Dict[int, Any] = {}
    offsets = layout.offsets[:-1]
    started = time.process_time()
    for r in few.tolist():
        e = encrypted[r]
        for b in (codes[r].astype(np.int64) + offsets).tolist():
            current = sums.get(b)
            sums[b] = e if current is None else current + e
    out["phe_us_per_addition"] = 1e6 * (time.process_time() - started) / (len(few) * features)
    check = aggregate_bins(mpz, codes, few, layout, nsq)
    out["phe_equals_gmpy2"] = all(int(check[b]) == (sums[b].ciphertext(be_secure=False) if b in sums else 1)
                                  for b in range(layout.total))
    out["gmpy2_over_phe"] = out["phe_us_per_addition"] / out["gmpy2_us_per_product"]
    if out["native"]:
        out["native_over_phe"] = out["phe_us_per_addition"] / out["native_us_per_product"]
    return out
