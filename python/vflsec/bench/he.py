"""Paillier and CKKS throughput against phe and HEU, and one HE-VFL epoch, in one run.

``vflsec bench he [--quick] [--seed N] [--out DIR] [--key-bits 2048 3072]``
(or ``python -m vflsec bench he``) times, for every Paillier key size:
encryption, decryption, ciphertext addition, ciphertext times plaintext with
41-bit (vflsec's 2^40 fixed-point encoding of |x| < 2) and 53-bit scalars, the
encrypted vector-matrix product X^T [[r]] and re-randomization, for

- vflsec in-process (``processes=1``, CPU time) and with 2 worker processes
  (wall time; their CPU time read from /proc where it can be),
- vflsec's old paths as named baselines: "vflsec classic r^n" (a key without
  the DJN fixed base) and "vflsec per-product" (one exponentiation per matrix
  entry, the product before the Pippenger multi-exponentiation),
- ``phe`` (python-paillier) on the same modulus,
- SecretFlow HEU's ZPaillier and OU (``sf-heu``) where it imports,

then vflsec's CKKS wrapper (and TenSEAL directly): encryption, the
vector-matrix product and serialized sizes; and one epoch of Paillier HE-VFL
logistic regression with the new and the old path (CPU time in-process).
Every timed result is decrypted (a spot check) so a broken path cannot be
timed. Writes ``DIR/results.json``, ``DIR/report.md`` and ``DIR/he.png``.

Plaintexts, matrices and the training data come from ``--seed``; keys and the
encryption randomness come from the operating system's CSPRNG by design (a
seeded encryption would be insecure), so rates vary a little run to run while
the plaintext workload is identical.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import math
import os
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np
from tqdm import tqdm

from .common import git_revision, machine_info, markdown_table, package_versions, pyplot, write_json

_PROG = "vflsec bench he"

# Done criteria of the fast-Paillier work (evaluated on Paillier-2048, 1 worker, per CPU-second).
TARGET_ENCRYPT_VS_PHE = 8.0
TARGET_DOT_VS_PHE = 5.0
TARGET_VS_HEU = 1.0
TARGET_EPOCH_CPU = 6.0

QUICK = dict(n_exp=100, n_add=2000, n_mul=400, dot_rows=400, dot_cols=10, repeats=3, min_total=0.3,
             max_total=8.0, ckks_rows=400, tenseal_matmul_rows=400, epoch_n=2000, epoch_batch=400,
             key_bits=[2048])
FULL = dict(n_exp=400, n_add=10000, n_mul=2000, dot_rows=3200, dot_cols=10, repeats=5, min_total=1.0,
            max_total=45.0, ckks_rows=3200, tenseal_matmul_rows=800, epoch_n=10000, epoch_batch=3200,
            key_bits=[2048, 3072])

OPS = {
    "encrypt": "values",
    "decrypt": "values",
    "add": "ct + ct additions",
    "mul 41-bit": "ct x pt products (41-bit scalars)",
    "mul 53-bit": "ct x pt products (53-bit scalars)",
    "X^T [[r]]": "multiply-accumulates (rows x columns)",
    "re-randomize": "values",
}


def _fail(message: str) -> None:
    print(f"{_PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _load_snapshot() -> Dict[str, Any]:
    """Load averages and uptime: how busy the machine was (other load slows every row)."""
    snap: Dict[str, Any] = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        snap["loadavg"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        snap["loadavg"] = None
    try:
        with open("/proc/uptime") as fh:
            snap["uptime_s"] = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):  # pragma: no cover
        snap["uptime_s"] = None
    return snap


def _optional_heu():
    """(heu.numpy, heu.phe) or None when sf-heu is absent or fails to import."""
    try:
        from heu import numpy as hnp
        from heu import phe as hphe
    except Exception:  # noqa: BLE001 - any import failure: skip the HEU baselines
        return None
    return hnp, hphe


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------

def _worker_cpu() -> Optional[float]:
    """Total CPU seconds (user + system) of vflsec's Paillier pool workers, from
    /proc; None where that cannot be read. The workers are children of the
    forkserver, not of this process, so getrusage cannot see them."""
    from ..he import _pool

    pool = _pool._pool
    pids = list(getattr(pool, "_processes", None) or {}) if pool is not None else []
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, ValueError, IndexError):
        return None
    return total


class _Timing:
    __slots__ = ("cpu_s", "wall_s", "samples", "cpu_source", "result")

    def __init__(self, cpu_s, wall_s, samples, cpu_source, result):
        self.cpu_s, self.wall_s, self.samples, self.cpu_source, self.result = cpu_s, wall_s, samples, cpu_source, result


def _measure(thunk: Callable[[], Any], *, repeats: int, min_total: float, max_total: float,
             pool: bool = False) -> _Timing:
    """Median CPU and wall time of ``thunk()``: at least ``repeats`` runs and
    ``min_total`` wall seconds (up to 5x ``repeats``), but stop once
    ``max_total`` wall seconds are spent (slow baselines get fewer samples).
    In-process runs: median ``time.process_time`` (every thread of this
    process). Pool runs: the mean over all runs of this process's CPU time plus
    the workers' (read from /proc in 10 ms ticks, so summed over the runs
    rather than per run)."""
    cpu: List[float] = []
    wall: List[float] = []
    result = None
    k_start = _worker_cpu() if pool else None
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        result = thunk()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        spent = sum(wall)
        if spent >= max_total:
            break
        if len(wall) >= repeats and (spent >= min_total or len(wall) >= 5 * repeats):
            break
    if not pool:
        return _Timing(statistics.median(cpu), statistics.median(wall), len(wall), "process_time", result)
    k_end = _worker_cpu()
    if k_start is None or k_end is None:
        return _Timing(None, statistics.median(wall), len(wall), "unavailable", result)
    return _Timing((sum(cpu) + k_end - k_start) / len(cpu), statistics.median(wall), len(wall),
                   "process_time + pool workers (/proc), mean over runs", result)


class _Method:
    """One timed method: ``make(k)`` prepares inputs for ``k`` items (untimed)
    and returns the thunk to time; ``check(result, k)`` decrypts a spot check."""

    def __init__(self, name: str, family: str, make: Callable[[int], Callable[[], Any]],
                 check: Callable[[Any, int], bool], *, workers: Optional[int] = 1, warm_full: bool = False,
                 note: str = ""):
        self.name, self.family, self.make, self.check = name, family, make, check
        self.workers, self.warm_full, self.note = workers, warm_full, note


def _run_methods(rows: List[Dict[str, Any]], base: Dict[str, Any], methods: Sequence[_Method], items: int,
                 warm_items: int, per_item: int, cfg: Dict[str, Any]) -> None:
    for m in methods:
        # vflsec's fast rows warm up at full size so both pool workers have built
        # their fixed-base tables (an offline cost, reported on its own).
        m.make(items if m.warm_full else warm_items)()
        thunk = m.make(items)
        t = _measure(thunk, repeats=cfg["repeats"], min_total=cfg["min_total"], max_total=cfg["max_total"],
                     pool=(m.workers or 1) > 1)
        verified = bool(m.check(t.result, items))
        if not verified:
            message = f"{base['op']} / {m.name}: the spot-check decryption does not match"
            if m.family.startswith("vflsec"):
                raise RuntimeError(f"{_PROG}: {message}")
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        n_items = items * per_item
        rows.append({
            **base, "method": m.name, "family": m.family, "workers": m.workers, "items": n_items,
            "cpu_s": t.cpu_s, "wall_s": t.wall_s, "samples": t.samples, "cpu_source": t.cpu_source,
            "items_per_s": n_items / t.wall_s,
            "items_per_cpu_s": n_items / t.cpu_s if t.cpu_s else None,
            "verified": verified, **({"note": m.note} if m.note else {}),
        })


# ---------------------------------------------------------------------------
# the old paths (named baselines)
# ---------------------------------------------------------------------------

def per_product_dot(self, matrix: Any, *, processes: Optional[int] = None):
    """``EncryptedVector.dot`` as it was before the Pippenger multi-exponentiation:
    one short exponentiation per matrix entry (``_paillier_math.dot_chunk``),
    rows split among the workers, one inversion per column."""
    import gmpy2

    from ..he import _paillier_math as _pm
    from ..he._pool import chunk_bounds, resolve_processes, run_chunks
    from ..he.paillier import _MIN_CHUNK_MUL, EncryptedVector

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
    from ..he import paillier as _paillier

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
    _paillier.EncryptedVector.dot = counted_dot
    try:
        yield calls
    finally:
        _paillier.generate_keypair = real_generate
        _paillier.EncryptedVector.dot = real_dot


# ---------------------------------------------------------------------------
# Paillier
# ---------------------------------------------------------------------------

def _spot(k: int) -> List[int]:
    return sorted({0, k // 2, k - 1})


def bench_paillier(bits: int, cfg: Dict[str, Any], seed: int, heu, rows: List[Dict[str, Any]],
                   setup: List[Dict[str, Any]], progress) -> None:
    import phe

    from ..he import _paillier_math as _pm
    from ..he.paillier import EncryptedVector, PaillierPublicKey, generate_keypair

    t0 = time.perf_counter()
    pk, sk = generate_keypair(bits)
    setup.append({"key_bits": bits, "what": "vflsec generate_keypair (admissible modulus + DJN base)",
                  "seconds": time.perf_counter() - t0})
    n = pk.n
    # The fixed-base table: an offline cost, once per key and process.
    c0 = time.process_time()
    table = _pm.fixed_base_table.__wrapped__(n, pk.hs)
    build = time.process_time() - c0
    entries = sum(len(row) for row in table)
    setup.append({"key_bits": bits, "what": "DJN fixed-base table (per key and process)", "entries": entries,
                  "bytes": entries * pk.ciphertext_bytes, "seconds": build})
    del table
    pk_classic = PaillierPublicKey(n)
    ppk = phe.PaillierPublicKey(n)
    psk = phe.PaillierPrivateKey(ppk, sk.p, sk.q)
    kits: Dict[str, Any] = {}
    if heu is not None:
        hnp, hphe = heu
        for label, schema in (("HEU ZPaillier", hphe.SchemaType.ZPaillier), ("HEU OU", hphe.SchemaType.OU)):
            t0 = time.perf_counter()
            kits[label] = hnp.setup(schema, bits)
            setup.append({"key_bits": bits, "what": f"{label} setup (key generation)",
                          "seconds": time.perf_counter() - t0})

    rng = np.random.default_rng([seed, bits])
    N, n_add, n_mul = cfg["n_exp"], cfg["n_add"], cfg["n_mul"]
    x = rng.uniform(-2.0, 2.0, max(N, n_add, n_mul))
    ints = [int(v) for v in pk.encode_signed(x)]          # round(x 2^40): 41-bit signed
    base_cts = pk.encrypt(x[:N], processes=1).ciphertexts
    warm = min(8, N)

    def expect(values: Sequence[int]) -> List[int]:
        return [int(v) % n for v in values]

    def vf_ok(cts: Sequence[int], expected: Sequence[int], k: int, level: int = 1) -> bool:
        idx = _spot(k)
        got = sk.decrypt_raw(EncryptedVector(pk, [cts[i] for i in idx], level), processes=1)
        return got == [expected[i] % n for i in idx]

    def phe_ok(encs: Sequence[Any], expected: Sequence[int], k: int) -> bool:
        idx = _spot(k)
        return vf_ok([encs[i].ciphertext(be_secure=False) for i in idx], [expected[i] for i in idx], len(idx))

    def heu_ok(kit, result, expected: Sequence[int]) -> bool:
        got = kit.decryptor().decrypt(result).to_numpy().ravel()
        return all(int(got[i]) == int(expected[i]) for i in _spot(len(expected)))

    def heu_array(kit, values: Sequence[int]):
        return kit.array(np.array(values, dtype=object if any(abs(v) >= 2**62 for v in values) else np.int64))

    def heu_encrypt(kit, values: Sequence[int]):
        return kit.encryptor().encrypt(heu_array(kit, values))

    def tiled(k: int) -> List[int]:
        return [base_cts[i % N] for i in range(k)]

    def tiled_ints(k: int) -> List[int]:
        return [ints[i % N] for i in range(k)]

    ops: List[Tuple[str, int, int, List[_Method], str]] = []

    # -- encrypt ---------------------------------------------------------------
    enc = [
        _Method("vflsec (DJN fixed base)", "vflsec", lambda k: lambda: pk.encrypt(x[:k], processes=1),
                lambda r, k: vf_ok(r.ciphertexts, ints, k), warm_full=True),
        _Method("vflsec (DJN fixed base), 2 workers", "vflsec", lambda k: lambda: pk.encrypt(x[:k], processes=2),
                lambda r, k: vf_ok(r.ciphertexts, ints, k), workers=2, warm_full=True),
        _Method("vflsec classic r^n (old path)", "vflsec-old",
                lambda k: lambda: pk_classic.encrypt(x[:k], processes=1), lambda r, k: vf_ok(r.ciphertexts, ints, k)),
        _Method("phe", "phe", lambda k: (lambda vals: lambda: [ppk.encrypt(v) for v in vals])(ints[:k]),
                lambda r, k: phe_ok(r, ints, k)),
    ]
    for label, kit in kits.items():
        enc.append(_Method(label, "heu", lambda k, kit=kit: (lambda a: lambda: kit.encryptor().encrypt(a))(
            heu_array(kit, ints[:k])), lambda r, k, kit=kit: heu_ok(kit, r, ints[:k]), workers=None))
    ops.append(("encrypt", N, warm, enc, "vflsec's fixed-point values |x| < 2 (integers round(x 2^40))"))

    # -- decrypt ---------------------------------------------------------------
    dec = [
        _Method("vflsec (CRT)", "vflsec",
                lambda k: (lambda v: lambda: sk.decrypt_raw(v, processes=1))(EncryptedVector(pk, base_cts[:k])),
                lambda r, k: r == expect(ints[:k]), warm_full=True,
                note="decryption unchanged by this work (already CRT): no old-path row"),
        _Method("vflsec (CRT), 2 workers", "vflsec",
                lambda k: (lambda v: lambda: sk.decrypt_raw(v, processes=2))(EncryptedVector(pk, base_cts[:k])),
                lambda r, k: r == expect(ints[:k]), workers=2, warm_full=True),
        _Method("phe", "phe",
                lambda k: (lambda es: lambda: [psk.decrypt(e) for e in es])(
                    [phe.EncryptedNumber(ppk, c, 0) for c in base_cts[:k]]),
                lambda r, k: list(r) == ints[:k]),
    ]
    for label, kit in kits.items():
        dec.append(_Method(label, "heu", lambda k, kit=kit: (lambda c: lambda: kit.decryptor().decrypt(c))(
            heu_encrypt(kit, ints[:k])),
            lambda r, k: all(int(a) == b for a, b in zip(r.to_numpy().ravel(), ints[:k])), workers=None))
    ops.append(("decrypt", N, warm, dec, "ciphertexts of the encrypt values"))

    # -- add -------------------------------------------------------------------
    def add_expected(k: int) -> List[int]:
        a = tiled_ints(k)
        return [a[i] + a[k - 1 - i] for i in range(k)]

    add = [
        _Method("vflsec", "vflsec",
                lambda k: (lambda a, b: lambda: a + b)(EncryptedVector(pk, tiled(k)),
                                                       EncryptedVector(pk, tiled(k)[::-1])),
                lambda r, k: vf_ok(r.ciphertexts, add_expected(k), k), warm_full=True,
                note="in-process (one product each: no pool); unchanged by this work"),
        _Method("phe", "phe",
                lambda k: (lambda es: lambda: [a + b for a, b in zip(es, es[::-1])])(
                    [phe.EncryptedNumber(ppk, c, 0) for c in tiled(k)]),
                lambda r, k: phe_ok(r, add_expected(k), k)),
    ]
    for label, kit in kits.items():
        add.append(_Method(label, "heu", lambda k, kit=kit: (lambda a, b: lambda: kit.evaluator().add(a, b))(
            heu_encrypt(kit, tiled_ints(k)), heu_encrypt(kit, tiled_ints(k)[::-1])),
            lambda r, k, kit=kit: heu_ok(kit, r, add_expected(k)), workers=None))
    ops.append(("add", n_add, min(64, n_add), add, "ciphertexts reused cyclically"))

    # -- ct x pt -----------------------------------------------------------------
    for op, bound in (("mul 41-bit", 2.0), ("mul 53-bit", 2.0 ** 13)):
        s_float = rng.uniform(-bound, bound, n_mul)
        s_int = [int(v) for v in pk.encode_signed(s_float)]
        bits_used = max(abs(v) for v in s_int).bit_length()

        def mul_expected(k: int, s_int=s_int) -> List[int]:
            a = tiled_ints(k)
            return [a[i] * s_int[i] for i in range(k)]

        mul = [
            _Method("vflsec", "vflsec",
                    lambda k, s=s_float: (lambda v: lambda: v.mul_plain(s[:k], processes=1))(
                        EncryptedVector(pk, tiled(k))),
                    lambda r, k, e=mul_expected: vf_ok(r.ciphertexts, e(k), k, level=2), warm_full=True,
                    note="unchanged by this work: no old-path row"),
            _Method("vflsec, 2 workers", "vflsec",
                    lambda k, s=s_float: (lambda v: lambda: v.mul_plain(s[:k], processes=2))(
                        EncryptedVector(pk, tiled(k))),
                    lambda r, k, e=mul_expected: vf_ok(r.ciphertexts, e(k), k, level=2), workers=2, warm_full=True),
            _Method("phe", "phe",
                    lambda k, s=s_int: (lambda es, ss: lambda: [e * v for e, v in zip(es, ss)])(
                        [phe.EncryptedNumber(ppk, c, 0) for c in tiled(k)], s[:k]),
                    lambda r, k, e=mul_expected: phe_ok(r, e(k), k)),
        ]
        for label, kit in kits.items():
            mul.append(_Method(label, "heu", lambda k, kit=kit, s=s_int: (
                lambda a, b: lambda: kit.evaluator().mul(a, b))(heu_encrypt(kit, tiled_ints(k)),
                                                                heu_array(kit, s[:k])),
                lambda r, k, kit=kit, e=mul_expected: heu_ok(kit, r, e(k)), workers=None))
        ops.append((op, n_mul, min(16, n_mul), mul, f"scalars round(s 2^40), |s| < {bound:g}: {bits_used}-bit"))

    # -- X^T [[r]] ----------------------------------------------------------------
    rows_n, cols = cfg["dot_rows"], cfg["dot_cols"]
    r_float = rng.uniform(-1.0, 1.0, rows_n)
    X = rng.uniform(-2.0, 2.0, (rows_n, cols))
    r_int = [int(v) for v in pk.encode_signed(r_float)]
    X_int = pk.encode_signed(X).tolist()
    r_vec = pk.encrypt(r_float, processes=2)

    def dot_expected(k: int) -> List[int]:
        return [sum(r_int[i] * X_int[i][j] for i in range(k)) for j in range(cols)]

    def dot_vf_ok(res, k: int) -> bool:
        exp = dot_expected(k)
        return sk.decrypt_raw(res, processes=1) == [v % n for v in exp]

    def sub_vec(k: int):
        return EncryptedVector(pk, r_vec.ciphertexts[:k])

    def phe_dot(encs, Xk):
        out = []
        for j in range(cols):
            acc = encs[0] * Xk[0][j]
            for e, row in zip(encs[1:], Xk[1:]):
                acc = acc + e * row[j]
            out.append(acc)
        return out

    dot = [
        _Method("vflsec (Pippenger)", "vflsec", lambda k: (lambda v: lambda: v.dot(X[:k], processes=1))(sub_vec(k)),
                dot_vf_ok, warm_full=True),
        _Method("vflsec (Pippenger), 2 workers", "vflsec",
                lambda k: (lambda v: lambda: v.dot(X[:k], processes=2))(sub_vec(k)), dot_vf_ok, workers=2,
                warm_full=True),
        _Method("vflsec per-product (old path)", "vflsec-old",
                lambda k: (lambda v: lambda: per_product_dot(v, X[:k], processes=1))(sub_vec(k)), dot_vf_ok),
        _Method("phe", "phe",
                lambda k: (lambda es, Xk: lambda: phe_dot(es, Xk))(
                    [phe.EncryptedNumber(ppk, c, 0) for c in r_vec.ciphertexts[:k]], X_int[:k]),
                lambda r, k: vf_ok([e.ciphertext(be_secure=False) for e in r], dot_expected(k), cols, level=2)),
    ]
    for label, kit in kits.items():
        dot.append(_Method(label, "heu", lambda k, kit=kit: (lambda c, m: lambda: kit.evaluator().matmul(c, m))(
            heu_encrypt(kit, r_int[:k]), kit.array(np.array(X_int[:k], dtype=np.int64))),
            lambda r, k, kit=kit: [int(v) for v in kit.decryptor().decrypt(r).to_numpy().ravel()] == dot_expected(k),
            workers=None))
    ops.append(("X^T [[r]]", rows_n, min(16, rows_n), dot,
                f"X {rows_n} x {cols}, entries |x| < 2 (41-bit), |r| < 1"))

    # -- re-randomize --------------------------------------------------------------
    def phe_rerandomize(encs):
        for e in encs:
            e.obfuscate()
        return encs

    def changed_ok(res_cts: Sequence[int], k: int) -> bool:
        return vf_ok(res_cts, ints, k) and all(res_cts[i] != base_cts[i] for i in _spot(k))

    rer = [
        _Method("vflsec (DJN fixed base)", "vflsec",
                lambda k: (lambda v: lambda: v.obfuscate(processes=1))(EncryptedVector(pk, base_cts[:k])),
                lambda r, k: changed_ok(r.ciphertexts, k), warm_full=True),
        _Method("vflsec (DJN fixed base), 2 workers", "vflsec",
                lambda k: (lambda v: lambda: v.obfuscate(processes=2))(EncryptedVector(pk, base_cts[:k])),
                lambda r, k: changed_ok(r.ciphertexts, k), workers=2, warm_full=True),
        _Method("vflsec classic r^n (old path)", "vflsec-old",
                lambda k: (lambda v: lambda: v.obfuscate(processes=1))(EncryptedVector(pk_classic, base_cts[:k])),
                lambda r, k: changed_ok(r.ciphertexts, k)),
        _Method("phe", "phe",
                lambda k: (lambda es: lambda: phe_rerandomize(es))(
                    [phe.EncryptedNumber(ppk, c, 0) for c in base_cts[:k]]),
                lambda r, k: changed_ok([e.ciphertext(be_secure=False) for e in r], k)),
    ]
    for label, kit in kits.items():
        rer.append(_Method(label + " (encrypt 0 + add)", "heu", lambda k, kit=kit: (
            lambda c, z: lambda: kit.evaluator().add(c, kit.encryptor().encrypt(z)))(
                heu_encrypt(kit, ints[:k]), heu_array(kit, [0] * k)),
            lambda r, k, kit=kit: heu_ok(kit, r, ints[:k]), workers=None,
            note="HEU's Python API has no re-randomize: a fresh encryption of 0 added"))
    ops.append(("re-randomize", N, warm, rer, "multiply by a fresh randomizer"))

    for op, items, warm_items, methods, case in ops:
        per_item = cols if op == "X^T [[r]]" else 1
        _run_methods(rows, {"key_bits": bits, "op": op, "case": case, "unit": OPS[op]}, methods, items,
                     warm_items, per_item, cfg)
        progress.update(1)


def _add_ratios(rows: List[Dict[str, Any]]) -> None:
    """vs_phe_cpu (per CPU-second) and vs_phe_wall (per wall second) against phe
    on the same key size and operation (> 1: faster than phe)."""
    phe_rows = {(r["key_bits"], r["op"]): r for r in rows if r["family"] == "phe"}
    for r in rows:
        ref = phe_rows.get((r["key_bits"], r["op"]))
        if ref is None:
            continue
        r["vs_phe_cpu"] = (r["items_per_cpu_s"] / ref["items_per_cpu_s"]
                           if r.get("items_per_cpu_s") and ref.get("items_per_cpu_s") else None)
        r["vs_phe_wall"] = r["items_per_s"] / ref["items_per_s"]


# ---------------------------------------------------------------------------
# CKKS
# ---------------------------------------------------------------------------

def bench_ckks(cfg: Dict[str, Any], seed: int, rows: List[Dict[str, Any]], sizes: Dict[str, Any]) -> None:
    import tenseal as ts

    from ..he.ckks import CKKSSecretContext

    t0 = time.perf_counter()
    ctx = CKKSSecretContext()
    sizes["context_seconds"] = time.perf_counter() - t0
    sizes["public_context_bytes"] = len(ctx.public_context_bytes())
    sizes["parameters"] = {"poly_modulus_degree": ctx.params.poly_modulus_degree,
                           "coeff_mod_bit_sizes": list(ctx.params.coeff_mod_bit_sizes),
                           "scale_bits": ctx.params.scale_bits, "slots": ctx.params.slot_count}
    rng = np.random.default_rng([seed, 1])
    n_rows, cols = cfg["ckks_rows"], cfg["dot_cols"]
    v = rng.uniform(-1.0, 1.0, n_rows)
    X = rng.uniform(-1.0, 1.0, (n_rows, cols)) / math.sqrt(cols)
    expected = v @ X
    timing = dict(repeats=cfg["repeats"], min_total=cfg["min_total"], max_total=cfg["max_total"])

    def add(op: str, method: str, items: int, t: _Timing, ok: bool, **extra: Any) -> None:
        if not ok:
            raise RuntimeError(f"{_PROG}: CKKS {op} / {method}: decryption does not match")
        rows.append({"op": op, "method": method, "items": items, "cpu_s": t.cpu_s, "wall_s": t.wall_s,
                     "samples": t.samples, "items_per_s": items / t.wall_s,
                     "items_per_cpu_s": items / t.cpu_s if t.cpu_s else None, "verified": ok, **extra})

    def close(got, want, tol: float) -> bool:
        return bool(np.max(np.abs(np.asarray(got, dtype=np.float64)[:len(want)] - want)) <= tol)

    ctx.encrypt(v, full_slots=True)  # warm-up
    t = _measure(lambda: ctx.encrypt(v, full_slots=True), **timing)
    enc = t.result
    add("encrypt", "vflsec CKKS (full_slots)", n_rows, t, close(ctx.decrypt(enc), v, 1e-4),
        case=f"{n_rows} values, ciphertexts of {ctx.params.slot_count} slots")
    enc.dot(X)
    t = _measure(lambda: enc.dot(X), **timing)
    prod = t.result
    err = float(np.max(np.abs(ctx.decrypt(prod) - expected)))
    add("X^T [[r]]", "vflsec CKKS dot", n_rows * cols, t, err <= 1e-3, case=f"X {n_rows} x {cols}",
        max_abs_error=err)
    t = _measure(lambda: enc.to_bytes(), **timing)
    add("serialize", "vflsec CKKS to_bytes (encrypted vector)", n_rows, t, True, bytes=len(t.result),
        case=f"{n_rows} values")
    t = _measure(lambda: prod.to_bytes(), **timing)
    add("serialize", "vflsec CKKS to_bytes (product)", cols, t, True, bytes=len(t.result), case=f"{cols} values")

    # TenSEAL directly: its own vector encryption and vector-matrix product.
    tctx = ctx.tenseal
    values = v.tolist()
    ts.ckks_vector(tctx, values)
    t = _measure(lambda: ts.ckks_vector(tctx, values), **timing)
    tvec = t.result
    add("encrypt", "TenSEAL ckks_vector", n_rows, t, close(tvec.decrypt(), v, 1e-4), case=f"{n_rows} values")
    m_rows = min(n_rows, cfg["tenseal_matmul_rows"])
    tsub = ts.ckks_vector(tctx, values[:m_rows])
    Xl = X[:m_rows].tolist()
    # TenSEAL's matmul costs O(rows) rotations: measured once, on at most
    # tenseal_matmul_rows rows (the rate per multiply-accumulate is what compares).
    t = _measure(lambda: tsub.matmul(Xl), repeats=1, min_total=0.0, max_total=0.0)
    err = float(np.max(np.abs(np.array(t.result.decrypt()) - v[:m_rows] @ X[:m_rows])))
    add("X^T [[r]]", "TenSEAL matmul", m_rows * cols, t, err <= 1e-3, case=f"X {m_rows} x {cols} (measured once)",
        max_abs_error=err)
    t = _measure(lambda: tvec.serialize(), **timing)
    add("serialize", "TenSEAL serialize (encrypted vector)", n_rows, t, True, bytes=len(t.result),
        case=f"{n_rows} values")
    sizes["ckks_vector_bytes"] = len(enc.to_bytes())
    sizes["ckks_product_bytes"] = len(prod.to_bytes())
    sizes["rows"], sizes["cols"] = n_rows, cols


def _paillier_sizes(bits: int, n_rows: int, cols: int) -> Dict[str, int]:
    """Wire sizes of vflsec's Paillier vectors (header + fixed-length ciphertexts)."""
    from ..he.paillier import _HEADER

    ct = -(-2 * bits // 8)
    return {"key_bits": bits, "ciphertext_bytes": ct, "vector_bytes": _HEADER.size + n_rows * ct,
            "product_bytes": _HEADER.size + cols * ct}


# ---------------------------------------------------------------------------
# one HE-VFL epoch
# ---------------------------------------------------------------------------

def bench_epoch(cfg: Dict[str, Any], seed: int) -> Dict[str, Any]:
    """One epoch of Paillier-2048 HE-VFL logistic regression, in-process (1
    process: CPU time of every party thread), new path vs the old one."""
    from ..data import make_synthetic
    from ..glm import VerticalLogisticRegression
    from ..he import _pool
    from ..he import set_num_processes

    data = make_synthetic(n_samples=cfg["epoch_n"], features_per_party=[10, 10], seed=seed)
    parts = [data.X[:, :10], data.X[:, 10:]]
    y = data.y
    previous = _pool._num_processes
    set_num_processes(1)
    runs: Dict[str, Any] = {}
    try:
        for label, ctx in (("vflsec (DJN + Pippenger)", contextlib.nullcontext({})),
                           ("vflsec old path (classic r^n + per-product)", old_paillier_path())):
            with ctx as calls:
                model = VerticalLogisticRegression(protection="paillier", epochs=1, batch_size=cfg["epoch_batch"],
                                                   key_bits=2048, seed=seed)
                c0, w0 = time.process_time(), time.perf_counter()
                model.fit(parts, y)
                cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            if label.startswith("vflsec old") and (calls.get("generate_keypair") != 1 or not calls.get("dot")):
                raise RuntimeError(f"{_PROG}: the old-path patch did not take effect ({calls}); "
                                   "vflsec.glm no longer calls vflsec.he.paillier.generate_keypair / "
                                   "EncryptedVector.dot")
            history = model.history_
            runs[label] = {
                "cpu_s": cpu, "wall_s": wall,
                "phases_s": dict(history.get("time", {})),
                "party_time_s": history.get("party_time"),
                "total_bytes": history.get("total_bytes"),
                "n_messages": history.get("n_messages"),
                "coef": [np.asarray(c).tolist() for c in model.coef_],
                "intercept": float(model.intercept_),
                **({"patched_calls": dict(calls)} if calls else {}),
            }
    finally:
        _pool._num_processes = previous
    new, old = runs["vflsec (DJN + Pippenger)"], runs["vflsec old path (classic r^n + per-product)"]
    coef_diff = max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(new["coef"], old["coef"]))
    return {
        "n_samples": cfg["epoch_n"], "features_per_party": [10, 10], "batch_size": cfg["epoch_batch"],
        "key_bits": 2048, "epochs": 1, "processes": 1, "runs": runs,
        "cpu_ratio_old_over_new": old["cpu_s"] / new["cpu_s"],
        "wall_ratio_old_over_new": old["wall_s"] / new["wall_s"],
        "max_abs_coef_difference": coef_diff,
    }


# ---------------------------------------------------------------------------
# criteria, report, plot
# ---------------------------------------------------------------------------

def _find(rows: List[Dict[str, Any]], bits: int, op: str, method: str) -> Optional[Dict[str, Any]]:
    for r in rows:
        if r["key_bits"] == bits and r["op"] == op and r["method"] == method and r.get("verified"):
            return r
    return None


def _criteria(rows: List[Dict[str, Any]], epoch: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, op, method in (("encrypt", "encrypt", "vflsec (DJN fixed base)"),
                            ("dot", "X^T [[r]]", "vflsec (Pippenger)")):
        ours = _find(rows, 2048, op, method)
        phe_row = next((r for r in rows if r["key_bits"] == 2048 and r["op"] == op and r["family"] == "phe"), None)
        target = TARGET_ENCRYPT_VS_PHE if key == "encrypt" else TARGET_DOT_VS_PHE
        if ours and phe_row and ours.get("items_per_cpu_s") and phe_row.get("items_per_cpu_s"):
            ratio = ours["items_per_cpu_s"] / phe_row["items_per_cpu_s"]
            out[f"{key}_vs_phe"] = {"ratio": ratio, "target": target, "met": ratio >= target,
                                    "basis": "Paillier-2048, items per CPU-second, 1 worker each"}
        heu_row = _find(rows, 2048, op, "HEU ZPaillier")
        if ours and heu_row and ours.get("items_per_cpu_s") and heu_row.get("items_per_cpu_s"):
            ratio = ours["items_per_cpu_s"] / heu_row["items_per_cpu_s"]
            two = _find(rows, 2048, op, method + ", 2 workers")
            out[f"{key}_vs_heu_zpaillier"] = {
                "ratio": ratio, "target": TARGET_VS_HEU, "met": ratio >= TARGET_VS_HEU,
                "basis": "Paillier-2048, items per CPU-second (vflsec 1 worker; HEU with its own thread pool)",
                "wall_ratio_2_workers": (two["items_per_s"] / heu_row["items_per_s"]) if two else None,
            }
    if epoch:
        ratio = epoch["cpu_ratio_old_over_new"]
        out["epoch_cpu"] = {"ratio": ratio, "target": TARGET_EPOCH_CPU, "met": ratio >= TARGET_EPOCH_CPU,
                            "basis": f"one epoch, n = {epoch['n_samples']}, batch {epoch['batch_size']}, "
                                     "CPU seconds in-process, old / new"}
    return out


_CRITERIA_TEXT = {
    "encrypt_vs_phe": "Paillier-2048 encryption, vflsec vs phe",
    "dot_vs_phe": "Paillier-2048 X^T [[r]], vflsec vs phe",
    "encrypt_vs_heu_zpaillier": "Paillier-2048 encryption, vflsec vs HEU ZPaillier",
    "dot_vs_heu_zpaillier": "Paillier-2048 X^T [[r]], vflsec vs HEU ZPaillier",
    "epoch_cpu": "one HE-VFL epoch, CPU seconds, old path / new path",
}


def _criteria_lines(criteria: Dict[str, Any], heu_available: bool) -> List[str]:
    lines = []
    for key, text in _CRITERIA_TEXT.items():
        c = criteria.get(key)
        if c is None:
            if "heu" in key and not heu_available:
                lines.append(f"- {text}: not evaluated (sf-heu is not installed)")
            elif key != "epoch_cpu":
                lines.append(f"- {text}: not evaluated (no Paillier-2048 run)")
            continue
        extra = ""
        if c.get("wall_ratio_2_workers") is not None:
            extra = f"; vflsec with 2 workers, per wall second: {c['wall_ratio_2_workers']:.3g}x"
        lines.append(f"- {text}: **{c['ratio']:.3g}x** (target >= {c['target']:g}x: "
                     f"{'met' if c['met'] else 'NOT met'}; {c['basis']}{extra})")
    return lines


def _conclusion(result: Dict[str, Any]) -> str:
    rows, crit, epoch = result["paillier"], result["criteria"], result.get("epoch")
    parts = []
    enc, dot = crit.get("encrypt_vs_phe"), crit.get("dot_vs_phe")
    if enc and dot:
        parts.append(f"On one core, vflsec encrypts {enc['ratio']:.3g}x as many values per CPU-second as phe "
                     f"with the same 2048-bit modulus, and computes the encrypted product X^T [[r]] "
                     f"{dot['ratio']:.3g}x as fast.")
    heu_e, heu_d = crit.get("encrypt_vs_heu_zpaillier"), crit.get("dot_vs_heu_zpaillier")
    if heu_e and heu_d:
        def word(c):
            return "faster than" if c["ratio"] >= 1 else "slower than"
        parts.append(f"Against SecretFlow HEU's C++ ZPaillier, vflsec is {word(heu_e)} it at encryption "
                     f"({heu_e['ratio']:.3g}x per CPU-second) and {word(heu_d)} it at X^T [[r]] "
                     f"({heu_d['ratio']:.3g}x).")
    else:
        parts.append("HEU was not measured (sf-heu is not installed).")
    same = [r for r in rows if r["key_bits"] == 2048 and r["family"] == "vflsec" and (r["workers"] or 1) == 1
            and r["op"] in ("decrypt", "mul 41-bit", "mul 53-bit") and r.get("vs_phe_cpu")]
    if same:
        parts.append("Decryption and single ciphertext-times-plaintext products were not changed by this work and "
                     "run at about phe's speed (" + ", ".join(f"{r['op']}: {r['vs_phe_cpu']:.2g}x" for r in same)
                     + " per CPU-second).")
    add = _find(rows, 2048, "add", "vflsec")
    if add and add.get("vs_phe_cpu") and add["vs_phe_cpu"] < 0.8:
        parts.append(f"Ciphertext addition runs at only {add['vs_phe_cpu']:.2g}x phe's rate: vflsec multiplies "
                     "Python ints there, where phe uses gmpy2 (cheap beside the exponentiations, but a free gain).")
    one, two = _find(rows, 2048, "X^T [[r]]", "vflsec (Pippenger)"), _find(rows, 2048, "X^T [[r]]",
                                                                            "vflsec (Pippenger), 2 workers")
    if one and two and two["items_per_s"] < 1.3 * one["items_per_s"]:
        la = (result["load"]["start"].get("loadavg") or [None])[0]
        parts.append(f"Two workers gained little over one in this run (X^T [[r]]: "
                     f"{two['items_per_s'] / one['items_per_s']:.2g}x per wall second"
                     + (f"; load average {la:.2f} at the start" if la is not None else "")
                     + "): the second core was busy with other work, so compare the per-CPU-second rates.")
    if epoch:
        parts.append(f"A whole HE-VFL epoch (n = {epoch['n_samples']}, batch {epoch['batch_size']}) needs "
                     f"{epoch['cpu_ratio_old_over_new']:.3g}x less CPU time than with the old classic-r^n, "
                     f"per-product path, with the same model (largest coefficient difference "
                     f"{epoch['max_abs_coef_difference']:.2g}).")
    if result.get("ckks"):
        ck = {r["method"]: r for r in result["ckks"]}
        cd, pd = ck.get("vflsec CKKS dot"), _find(rows, 2048, "X^T [[r]]", "vflsec (Pippenger)")
        if cd and pd and cd.get("items_per_cpu_s") and pd.get("items_per_cpu_s"):
            parts.append(f"vflsec's CKKS computes X^T [[r]] at {cd['items_per_cpu_s'] / pd['items_per_cpu_s']:.3g}x "
                         "the rate of Paillier-2048 per CPU-second (one ciphertext holds 4096 values), but its "
                         "decryptions are approximate and need noise flooding.")
    missed = [k for k, c in crit.items() if not c["met"]]
    parts.append("All done criteria measured here are met." if not missed else
                 "Not met in this run: " + ", ".join(_CRITERIA_TEXT[k] for k in missed) + ".")
    return " ".join(parts)


def _fmt_load(snap: Dict[str, Any]) -> str:
    la = snap.get("loadavg")
    la_text = "/".join(f"{v:.2f}" for v in la) if la else "n/a"
    up = snap.get("uptime_s")
    return f"load average (1/5/15 min) {la_text}, uptime {up / 3600:.2f} h" if up else f"load average {la_text}"


def render_report(result: Dict[str, Any]) -> str:
    cfg, m = result["config"], result["machine"]
    out = [
        "# vflsec HE benchmark: Paillier and CKKS against phe and HEU\n",
        f"Machine: {m.get('cpu')}, {m.get('logical_cores')} logical cores. "
        f"Start: {_fmt_load(result['load']['start'])}; end: {_fmt_load(result['load']['end'])}. "
        f"Run time {result.get('seconds', 0):.0f} s, {'--quick' if cfg['quick'] else 'full'} configuration, "
        f"seed {cfg['seed']}.\n",
        "Plaintexts, matrices and training data come from the seed; keys and encryption randomness come from "
        "the OS CSPRNG by design, so rates vary slightly between runs on the same workload. Rates: items per "
        "wall second and per CPU-second. In-process rows (vflsec `processes=1`, phe, HEU) count CPU time with "
        "`time.process_time` (every thread of the process); 2-worker rows are timed in wall seconds, their CPU "
        "time is this process's plus the workers' (from /proc). `vs phe` divides by phe's rate on the same "
        "modulus (CPU: per CPU-second; wall: per wall second). Every row's result was decrypted (spot check; "
        "vflsec rows must match or the run stops, others are flagged under Notes).\n",
        "## Done criteria (as measured in this run)\n",
        *_criteria_lines(result["criteria"], result["heu_available"]),
        "",
    ]
    if result["notes"]:
        out += ["Notes:\n"] + [f"- {n}" for n in result["notes"]] + [""]
    out.append("## Paillier\n")
    out.append("Setup costs (offline, once per key; the fixed-base table once per key and process):\n")
    out.append(markdown_table(
        ["key bits", "what", "seconds", "entries", "MiB"],
        [[s["key_bits"], s["what"], s["seconds"], s.get("entries"),
          s["bytes"] / 2**20 if s.get("bytes") else None] for s in result["setup"]]))
    out.append("")
    for bits in cfg["key_bits"]:
        out.append(f"### {bits}-bit modulus\n")
        for op in OPS:
            rs = [r for r in result["paillier"] if r["key_bits"] == bits and r["op"] == op]
            if not rs:
                continue
            out.append(f"**{op}** ({rs[0]['case']}; items = {rs[0]['unit']}, {rs[0]['items']} per run)\n")
            out.append(markdown_table(
                ["method", "workers", "items/s", "items/CPU-s", "vs phe (CPU)", "vs phe (wall)", "runs"],
                [[r["method"], r["workers"] if r["workers"] else "own threads", r["items_per_s"],
                  r.get("items_per_cpu_s"), r.get("vs_phe_cpu"), r.get("vs_phe_wall"), r["samples"]]
                 for r in rs]))
            notes = sorted({r["note"] for r in rs if r.get("note")})
            if notes:
                out.append("\n" + "; ".join(notes) + ".")
            out.append("")
    if result.get("ckks"):
        ck = result["ckks_sizes"]
        out.append("## CKKS (vflsec wrapper over TenSEAL)\n")
        p = ck["parameters"]
        out.append(f"N = {p['poly_modulus_degree']} ({p['slots']} slots), coefficient modulus "
                   f"{p['coeff_mod_bit_sizes']}, scale 2^{p['scale_bits']}. Context with Galois keys: "
                   f"{ck['context_seconds']:.2f} s to make, public context {ck['public_context_bytes'] / 2**20:.1f} "
                   "MiB on the wire (sent once).\n")
        out.append(markdown_table(
            ["op", "method", "case", "items/s", "items/CPU-s", "bytes", "max abs error"],
            [[r["op"], r["method"], r.get("case"), r["items_per_s"], r.get("items_per_cpu_s"), r.get("bytes"),
              r.get("max_abs_error")] for r in result["ckks"]]))
        out.append("")
        out.append(f"Wire sizes for {ck['rows']} values and the {ck['cols']}-value product:\n")
        size_rows = [["CKKS (vflsec)", ck["ckks_vector_bytes"], ck["ckks_product_bytes"]]]
        size_rows += [[f"Paillier-{s['key_bits']}", s["vector_bytes"], s["product_bytes"]]
                      for s in result["paillier_sizes"]]
        out.append(markdown_table(["scheme", "encrypted vector bytes", "product bytes"], size_rows))
        out.append("")
    ep = result.get("epoch")
    if ep:
        out.append("## One HE-VFL epoch (Paillier-2048)\n")
        out.append(f"`VerticalLogisticRegression(protection='paillier', epochs=1, batch_size={ep['batch_size']}, "
                   f"key_bits=2048)` on `make_synthetic(n_samples={ep['n_samples']}, features_per_party=[10, 10])`, "
                   "two parties, in-process (`vflsec.he.set_num_processes(1)`): CPU seconds of every party thread. "
                   "The old path is patched in for this run only (`old_paillier_path`: keys without the DJN base, "
                   "so classic r^n encryption and re-randomization, and the per-product X^T [[r]]). Phase times "
                   "are `history_['time']` (wall seconds summed over the parties' threads; crypto = encryption, "
                   "decryption, homomorphic operations and (de)serialization).\n")
        table = []
        for label, run in ep["runs"].items():
            ph = run["phases_s"]
            table.append([label, run["cpu_s"], run["wall_s"], ph.get("crypto"), ph.get("compute"),
                          ph.get("messaging"), run["total_bytes"]])
        out.append(markdown_table(["path", "CPU s", "wall s", "crypto s", "compute s", "messaging s", "bytes"],
                                  table))
        out.append(f"\nOld / new: **{ep['cpu_ratio_old_over_new']:.3g}x** CPU, {ep['wall_ratio_old_over_new']:.3g}x "
                   f"wall; largest coefficient difference between the two models "
                   f"{ep['max_abs_coef_difference']:.2g} (same data and seed; encryption randomness cancels).\n")
    out.append("## Conclusion\n")
    out.append(result["conclusion"])
    out.append("")
    return "\n".join(out)


_FAMILY_COLORS = {"vflsec": "tab:green", "vflsec-old": "tab:olive", "phe": "tab:gray", "heu": "tab:blue"}


def plot(result: Dict[str, Any], path: Path) -> None:
    plt = pyplot()
    from matplotlib.patches import Patch

    bits_list = result["config"]["key_bits"]
    has_epoch = bool(result.get("epoch"))
    panels = len(bits_list) + (1 if has_epoch else 0)
    heights = []
    per_bits = {}
    for bits in bits_list:
        rs = [r for r in result["paillier"] if r["key_bits"] == bits and r["family"] != "phe"
              and r.get("vs_phe_cpu" if (r["workers"] or 1) == 1 else "vs_phe_wall")]
        per_bits[bits] = rs
        heights.append(max(2.0, 0.24 * len(rs) + 1.0))
    if has_epoch:
        heights.append(1.6)
    fig, axes = plt.subplots(panels, 1, figsize=(11, sum(heights) + 0.6),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, bits in zip(axes[:, 0], bits_list):
        rs = per_bits[bits]
        labels, values, colors = [], [], []
        for r in rs:
            one = (r["workers"] or 1) == 1
            labels.append(f"{r['op']} | {r['method']}" + ("" if one else " (wall)"))
            values.append(r["vs_phe_cpu"] if one else r["vs_phe_wall"])
            colors.append(_FAMILY_COLORS.get(r["family"], "tab:purple"))
        ax.barh(range(len(values)), values, color=colors)
        ax.set_yticks(range(len(values)), labels, fontsize=7)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.invert_yaxis()
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.3g}x", va="center", fontsize=6)
        ax.set_title(f"Paillier-{bits}: rate relative to phe (per CPU-second; 2-worker rows per wall second; "
                     "log scale, > 1 faster)", fontsize=9)
        ax.legend(handles=[Patch(color=c, label=name) for name, c in (
            ("vflsec", _FAMILY_COLORS["vflsec"]), ("vflsec old path", _FAMILY_COLORS["vflsec-old"]),
            ("HEU", _FAMILY_COLORS["heu"]))], fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        if values:
            ax.set_xlim(right=max(values) * 3)  # room for the value labels
    if has_epoch:
        ax = axes[-1, 0]
        ep = result["epoch"]
        labels = list(ep["runs"])
        values = [ep["runs"][k]["cpu_s"] for k in labels]
        ax.barh(range(len(values)), values, color=["tab:green", "tab:olive"][:len(values)])
        ax.set_yticks(range(len(values)), labels, fontsize=8)
        ax.invert_yaxis()
        for i, v in enumerate(values):
            ax.text(v, i, f" {v:.1f} s", va="center", fontsize=7)
        ax.set_xlabel("CPU seconds")
        ax.set_title(f"one HE-VFL epoch, Paillier-2048, n = {ep['n_samples']}, batch {ep['batch_size']}: "
                     f"{ep['cpu_ratio_old_over_new']:.3g}x less CPU", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


# ---------------------------------------------------------------------------
# entry points
# ---------------------------------------------------------------------------

def _check_key_bits(values: Optional[Sequence[int]]) -> Optional[List[int]]:
    if values is None:
        return None
    out: List[int] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int) or v < 2048 or v % 2:
            _fail(f"--key-bits must be even integers >= 2048, got {v!r}")
        if v not in out:
            out.append(v)
    if not out:
        _fail("--key-bits is empty")
    return out


def run(quick: bool = False, seed: int = 0, out: Optional[Path] = None, key_bits: Optional[Sequence[int]] = None,
        sizes: Optional[Dict[str, Any]] = None, epoch: bool = True, ckks: bool = True) -> Dict[str, Any]:
    """Run the benchmark and write ``results.json``, ``report.md`` and ``he.png``.

    ``sizes`` overrides entries of the configuration (tests use tiny ones);
    ``epoch=False`` / ``ckks=False`` skip those sections.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        _fail(f"--seed must be an integer >= 0, got {seed!r}")
    bits_list = _check_key_bits(key_bits)
    out = Path(out) if out is not None else Path("bench-out") / "he"
    cfg: Dict[str, Any] = dict(QUICK if quick else FULL)
    if sizes:
        unknown = set(sizes) - set(cfg)
        if unknown:
            raise ValueError(f"unknown size keys: {sorted(unknown)}")
        cfg.update(sizes)
    if bits_list is not None:
        cfg["key_bits"] = bits_list
    cfg.update(quick=bool(quick), seed=seed, epoch=bool(epoch), ckks=bool(ckks))
    heu = _optional_heu()
    notes: List[str] = []
    if heu is None:
        notes.append("sf-heu (SecretFlow HEU) is not installed: its ZPaillier and OU rows are skipped "
                     "(`pip install sf-heu`).")
    else:
        notes.append("HEU runs its C++ batch API (heu.numpy) with its own thread pool; its CPU time counts every "
                     "thread. HEU OU is Okamoto-Uchiyama (n = p^2 q of the same bit length), a different scheme "
                     "from Paillier. HEU generates its own keys (same size); phe and the vflsec baselines use the "
                     "same modulus as vflsec.")
    result: Dict[str, Any] = {
        "benchmark": "he",
        "machine": machine_info(),
        "versions": package_versions(["vflsec", "phe", "gmpy2", "sf-heu", "tenseal", "numpy"]),
        "git": git_revision(),
        "config": cfg,
        "randomness": "plaintexts, matrices and data from --seed; keys and encryption randomness from the OS "
                      "CSPRNG (by design)",
        "load": {"start": _load_snapshot()},
        "heu_available": heu is not None,
        "notes": notes,
        "setup": [], "paillier": [], "paillier_sizes": [], "ckks": [], "ckks_sizes": {}, "epoch": None,
    }
    start = time.perf_counter()
    from ..he import WeakKeyWarning, shutdown_pool

    steps = len(cfg["key_bits"]) * len(OPS) + int(ckks) + int(epoch)
    try:
        with warnings.catch_warnings(), tqdm(total=steps, desc="bench he", unit="step") as progress:
            warnings.simplefilter("ignore", WeakKeyWarning)
            for bits in cfg["key_bits"]:
                bench_paillier(bits, cfg, seed, heu, result["paillier"], result["setup"], progress)
                result["paillier_sizes"].append(_paillier_sizes(bits, cfg["ckks_rows"], cfg["dot_cols"]))
            shutdown_pool()
            if ckks:
                bench_ckks(cfg, seed, result["ckks"], result["ckks_sizes"])
                progress.update(1)
            if epoch:
                result["epoch"] = bench_epoch(cfg, seed)
                progress.update(1)
    finally:
        shutdown_pool()
    _add_ratios(result["paillier"])
    for r in result["paillier"]:
        if not r["verified"]:
            notes.append(f"{r['key_bits']}-bit {r['op']} / {r['method']}: its spot-check decryption did NOT match; "
                         "its rate is not comparable and it is left out of the criteria.")
    result["seconds"] = time.perf_counter() - start
    result["load"]["end"] = _load_snapshot()
    result["criteria"] = _criteria(result["paillier"], result["epoch"])
    result["conclusion"] = _conclusion(result)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", result)
    report = render_report(result)
    (out / "report.md").write_text(report)
    plot(result, out / "he.png")
    print(report)
    print(f"\nwrote {out / 'results.json'}, {out / 'report.md'}, {out / 'he.png'}")
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true",
                        help="Paillier-2048 only, small sizes (X 400 x 10; epoch n = 2000, batch 400): about 2 "
                             "minutes on 2 cores")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the plaintexts, matrices and training data (keys and encryption randomness "
                             "always come from the OS CSPRNG); default 0")
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "he", help="output directory "
                        "(default bench-out/he)")
    parser.add_argument("--key-bits", type=int, nargs="+", default=None, metavar="BITS",
                        help="Paillier modulus sizes (default 2048 3072; --quick: 2048)")

    def one_line_error(message: str) -> None:
        _fail(message)

    # argparse's own errors (a non-integer --seed, ...) in one line too, with exit code 2.
    parser.error = one_line_error  # type: ignore[method-assign]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog=_PROG, description=__doc__.splitlines()[0], allow_abbrev=False)
    add_arguments(parser)
    args = parser.parse_args(argv)
    run(**vars(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
