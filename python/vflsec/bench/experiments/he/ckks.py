"""CKKS primitive timings of ``vflsec bench he``: vflsec's CKKS layer (SEAL via
TenSEAL's sealapi: encryption, the diagonal vector-matrix product,
serialization), its old per-column product as the named baseline in the same
run, TenSEAL directly, and the context and ciphertext sizes."""
from __future__ import annotations

import math
import time
from typing import Any, Dict, List

import numpy as np

from .grid import HEGrid
from .timing import _PROG, _measure, _Timing

CKKS_DOT = "vflsec CKKS diagonal"
CKKS_DOT_OLD = "vflsec CKKS per-column (old path)"


def bench_ckks(cfg: HEGrid, seed: int, rows: List[Dict[str, Any]], sizes: Dict[str, Any]) -> None:
    import tenseal as ts

    from ....he._ckks_per_column import per_column_context, per_column_dot, per_column_encrypt
    from ....he.ckks import CKKSSecretContext, galois_steps

    t0 = time.perf_counter()
    ctx = CKKSSecretContext()
    public_bytes = ctx.public_context_bytes()
    sizes["context_seconds"] = time.perf_counter() - t0
    sizes["public_context_bytes"] = len(public_bytes)
    sizes["galois_steps"] = list(galois_steps(ctx.params))
    public = ctx.public_context()
    # The old path's context: TenSEAL's default Galois keys (both signs of every power of two).
    t0 = time.perf_counter()
    legacy = per_column_context(ctx.params)
    legacy_bytes = legacy.serialize(save_public_key=True, save_secret_key=False, save_galois_keys=True,
                                    save_relin_keys=False)
    sizes["per_column_context_seconds"] = time.perf_counter() - t0
    sizes["per_column_public_context_bytes"] = len(legacy_bytes)
    sizes["per_column_galois_keys"] = legacy.galois_keys().data.size()
    slots = ctx.params.slot_count
    sizes["parameters"] = {"poly_modulus_degree": ctx.params.poly_modulus_degree,
                           "coeff_mod_bit_sizes": list(ctx.params.coeff_mod_bit_sizes),
                           "scale_bits": ctx.params.scale_bits, "slots": slots}
    rng = np.random.default_rng([seed, 1])
    n_rows, cols = cfg.ckks_rows, cfg.dot_cols
    v = rng.uniform(-1.0, 1.0, n_rows)
    X = rng.uniform(-1.0, 1.0, (n_rows, cols)) / math.sqrt(cols)
    expected = v @ X
    timing: Dict[str, Any] = dict(repeats=cfg.repeats, min_total=cfg.min_total, max_total=cfg.max_total)

    def add(op: str, method: str, items: int, t: _Timing, ok: bool, **extra: Any) -> None:
        if not ok:
            raise RuntimeError(f"{_PROG}: CKKS {op} / {method}: decryption does not match")
        rows.append({"op": op, "method": method, "items": items, "cpu_s": t.cpu_s, "wall_s": t.wall_s,
                     "samples": t.samples, "items_per_s": items / t.wall_s,
                     "items_per_cpu_s": items / t.cpu_s if t.cpu_s else None, "verified": ok, **extra})

    def close(got, want, tol: float) -> bool:
        return bool(np.max(np.abs(np.asarray(got, dtype=np.float64)[:len(want)] - want)) <= tol)

    public.encrypt(v)  # warm-up
    t = _measure(lambda: public.encrypt(v), **timing)
    enc = t.result
    add("encrypt", "vflsec CKKS", n_rows, t, close(ctx.decrypt(enc), v, 1e-4),
        case=f"{n_rows} values, ciphertexts of {slots} slots")

    # X^T [[r]]: the diagonal product and the per-column one it replaced, on the same values.
    enc.dot(X)
    t = _measure(lambda: enc.dot(X), **timing)
    prod = t.result
    err = float(np.max(np.abs(ctx.decrypt(prod) - expected)))
    add("X^T [[r]]", CKKS_DOT, n_rows * cols, t, err <= 1e-3, case=f"X {n_rows} x {cols}", max_abs_error=err)
    old_input = per_column_encrypt(legacy, v, slots)
    per_column_dot(old_input, X, slots)
    t = _measure(lambda: per_column_dot(old_input, X, slots), **timing)
    err = float(np.max(np.abs(np.asarray(t.result[0].decrypt()) - expected)))
    add("X^T [[r]]", CKKS_DOT_OLD, n_rows * cols, t, err <= 1e-3, case=f"X {n_rows} x {cols}",
        max_abs_error=err)

    t = _measure(lambda: enc.to_bytes(), **timing)
    add("serialize", "vflsec CKKS to_bytes (encrypted vector)", n_rows, t, True, bytes=len(t.result),
        case=f"{n_rows} values")
    t = _measure(lambda: prod.to_bytes(), **timing)
    add("serialize", "vflsec CKKS to_bytes (product)", cols, t, True, bytes=len(t.result), case=f"{cols} values")

    # TenSEAL directly (its context with its default Galois keys): its own vector
    # encryption and vector-matrix product.
    values = v.tolist()
    ts.ckks_vector(legacy, values)
    t = _measure(lambda: ts.ckks_vector(legacy, values), **timing)
    tvec = t.result
    add("encrypt", "TenSEAL ckks_vector", n_rows, t, close(tvec.decrypt(), v, 1e-4), case=f"{n_rows} values")
    m_rows = min(n_rows, cfg.tenseal_matmul_rows)
    tsub = ts.ckks_vector(legacy, values[:m_rows])
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
