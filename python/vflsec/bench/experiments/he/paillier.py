"""Paillier primitive timings of ``vflsec bench he``: vflsec (1 and 2
workers), its old paths, phe on the same modulus and SecretFlow HEU's
ZPaillier and OU where ``sf-heu`` imports; ratios against phe; wire sizes."""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator, List, Sequence, Tuple

import numpy as np

from .grid import HEGrid
from .old_path import per_product_dot
from .timing import _Method, _run_methods

OPS = {
    "encrypt": "values",
    "decrypt": "values",
    "add": "ct + ct additions",
    "mul 41-bit": "ct x pt products (41-bit scalars)",
    "mul 53-bit": "ct x pt products (53-bit scalars)",
    "X^T [[r]]": "multiply-accumulates (rows x columns)",
    "re-randomize": "values",
}


def _optional_heu():
    """(heu.numpy, heu.phe) or None when sf-heu is absent or fails to import."""
    try:
        from heu import numpy as hnp
        from heu import phe as hphe
    except Exception:  # noqa: BLE001 - any import failure: skip the HEU baselines
        return None
    return hnp, hphe


def _spot(k: int) -> List[int]:
    return sorted({0, k // 2, k - 1})


def bench_paillier(bits: int, cfg: HEGrid, seed: int, heu, rows: List[Dict[str, Any]],
                   setup: List[Dict[str, Any]]) -> Iterator[str]:
    """Time every operation of :data:`OPS` on a ``bits``-bit key, appending each
    finished operation's rows to ``rows`` (setup costs to ``setup``) and yielding
    its name (one progress step)."""
    import phe

    from ....he import _paillier_math as _pm
    from ....he.paillier import EncryptedVector, PaillierPublicKey, generate_keypair

    t0 = time.perf_counter()
    pk, sk = generate_keypair(bits)
    setup.append({"key_bits": bits, "what": "vflsec generate_keypair (admissible modulus + DJN base)",
                  "seconds": time.perf_counter() - t0})
    n = pk.n
    # The fixed-base tables: an offline cost, once per key and process. The
    # native one (AVX-512 IFMA) serves the "vflsec (DJN fixed base)" rows where
    # it runs; the gmpy2 one the fallback and its named baseline rows.
    native = _pm.native_available()
    if native:
        c0 = time.process_time()
        table = _pm.native_fixed_base_table.__wrapped__(n, pk.hs)
        build = time.process_time() - c0
        setup.append({"key_bits": bits, "what": "DJN fixed-base table, native (per key and process)",
                      "entries": table.entries, "bytes": table.table_bytes, "seconds": build})
        del table
    c0 = time.process_time()
    table = _pm.fixed_base_table.__wrapped__(n, pk.hs)
    build = time.process_time() - c0
    entries = sum(len(row) for row in table)
    setup.append({"key_bits": bits, "what": "DJN fixed-base table, gmpy2 (per key and process)", "entries": entries,
                  "bytes": entries * pk.ciphertext_bytes, "seconds": build})
    del table
    djn_note = ("native C++ kernel (AVX-512 IFMA)" if native
                else "gmpy2: this CPU lacks AVX-512 IFMA, so the native kernel does not run")

    def gmpy2_rows(label: str, make, check) -> List[_Method]:
        """The gmpy2 fixed-base path as a named baseline next to the native rows (in-process)."""
        if not native:
            return []

        def make_gmpy2(k):
            thunk = make(k)

            def run():
                with _pm.gmpy2_only():
                    return thunk()
            return run
        return [_Method(label, "vflsec-old", make_gmpy2, check, warm_full=True,
                        note="gmpy2 fixed-base path: the fallback without AVX-512 IFMA, timed as a baseline")]
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
    N, n_add, n_mul = cfg.n_exp, cfg.n_add, cfg.n_mul
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
                lambda r, k: vf_ok(r.ciphertexts, ints, k), warm_full=True, note=djn_note),
        *gmpy2_rows("vflsec DJN fixed base, gmpy2", lambda k: lambda: pk.encrypt(x[:k], processes=1),
                    lambda r, k: vf_ok(r.ciphertexts, ints, k)),
        _Method("vflsec (DJN fixed base), 2 workers", "vflsec", lambda k: lambda: pk.encrypt(x[:k], processes=2),
                lambda r, k: vf_ok(r.ciphertexts, ints, k), workers=2, warm_full=True),
        # Offline/online split: the randomizers computed ahead of time (their own
        # row), then encryption with them; the online pool holds enough for every
        # timed repeat (at most 5 x repeats runs), so no value is used twice.
        _Method("vflsec offline: precompute randomness", "vflsec",
                lambda k: lambda: pk.precompute_randomness(k, processes=1), lambda r, k: len(r) == k,
                warm_full=True, note="the offline part of an encryption: h_s^alpha per value"),
        _Method("vflsec online: encrypt with precomputed randomness", "vflsec",
                lambda k: (lambda pool: lambda: pk.encrypt(x[:k], randomness=pool))(
                    pk.precompute_randomness(k * (5 * cfg.repeats + 1), processes=1)),
                lambda r, k: vf_ok(r.ciphertexts, ints, k),
                note="online part only: one modular product per value; the offline row is its other part"),
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
                    lambda k, s=s_float: (lambda vec: lambda: vec.mul_plain(s[:k], processes=1))(
                        EncryptedVector(pk, tiled(k))),
                    lambda r, k, e=mul_expected: vf_ok(r.ciphertexts, e(k), k, level=2), warm_full=True,
                    note="unchanged by this work: no old-path row"),
            _Method("vflsec, 2 workers", "vflsec",
                    lambda k, s=s_float: (lambda vec: lambda: vec.mul_plain(s[:k], processes=2))(
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
    rows_n, cols = cfg.dot_rows, cfg.dot_cols
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
                lambda r, k: changed_ok(r.ciphertexts, k), warm_full=True, note=djn_note),
        *gmpy2_rows("vflsec DJN fixed base, gmpy2",
                    lambda k: (lambda v: lambda: v.obfuscate(processes=1))(EncryptedVector(pk, base_cts[:k])),
                    lambda r, k: changed_ok(r.ciphertexts, k)),
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
        yield op


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


def _paillier_sizes(bits: int, n_rows: int, cols: int) -> Dict[str, int]:
    """Wire sizes of vflsec's Paillier vectors (header + fixed-length ciphertexts)."""
    from ....he.paillier import _HEADER

    ct = -(-2 * bits // 8)
    return {"key_bits": bits, "ciphertext_bytes": ct, "vector_bytes": _HEADER.size + n_rows * ct,
            "product_bytes": _HEADER.size + cols * ct}
