"""The diagonal-layout vector-matrix product of :mod:`vflsec.he.ckks` (Halevi-Shoup
for a wide matrix, baby-step giant-step), on SEAL objects through TenSEAL's sealapi."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from ._ckks_params import next_power_of_two
from ._dependencies import CKKS_INSTALL, missing_dependency

try:
    from tenseal import sealapi
except ImportError as _exc:
    raise missing_dependency("CKKS (vflsec.he._ckks_diagonal)", _exc, CKKS_INSTALL) from _exc

__all__ = ["baby_steps", "diagonal_product", "next_power_of_two"]


def baby_steps(m: int, chunks: int) -> int:
    """Baby steps g (a power of two dividing m) of the product, minimizing
    chunks (g - 1) rotations of the inputs (one level above the last: two
    primes) plus m / g - 1 giant rotations at the last level (one prime, about
    half the cost, but each giant block also needs a rescale: about the same
    in all); ties go to the larger g (fewer rescales)."""
    candidates = [1 << e for e in range(m.bit_length())]
    return min(candidates, key=lambda g: (chunks * (g - 1) + m // g - 1, -g))


def diagonal_product(ctx: Any, inputs: List[Any], blocks: List[np.ndarray]) -> Any:
    """One ciphertext of the product sum_k blocks[k]^T inputs[k] for a block of
    at most ``slot_count`` columns (:mod:`vflsec.he.ckks`'s docstring). ``ctx`` is
    a CKKS context of that module (typed loosely: it imports this one);
    ``inputs`` are at level 1."""
    slots = ctx.params.slot_count
    width = blocks[0].shape[1]
    m = next_power_of_two(width)
    g = baby_steps(m, len(inputs))
    giants = m // g
    evaluator, galois, mid = ctx._evaluator, ctx.galois_keys, ctx._levels[1]
    slot = np.arange(slots)
    inner: List[Any] = [None] * giants
    column = slot % m
    for ciphertext, rows in zip(inputs, blocks):
        if not rows.any():
            continue
        n_rows = rows.shape[0]
        babies = [ciphertext]
        for _ in range(1, g):
            rotated = sealapi.Ciphertext()
            evaluator.rotate_vector(babies[-1], 1, galois, rotated)
            babies.append(rotated)
        for a in range(giants):
            # diag_k[i] = W[i mod m, (i + k) mod S] with W = rows^T zero-padded to m x S, for the g
            # diagonals k of this giant step, each rotated right by g a (the giant rotation by g a
            # comes after the sum).
            row = (slot[None, :] + (g * a + np.arange(g))[:, None]) % slots
            inside = (row < n_rows) & (column < width)
            diagonals = np.where(inside, rows[np.minimum(row, n_rows - 1), np.minimum(column, width - 1)], 0.0)
            diagonals = np.roll(diagonals, g * a, axis=1)
            for b in range(g):
                if not diagonals[b].any():
                    continue  # SEAL refuses a product with a zero plaintext (a transparent ciphertext)
                plain = sealapi.Plaintext()
                # Scale = the prime the rescale divides by: the result is at scale 2^scale_bits exactly.
                ctx._encoder.encode(diagonals[b].tolist(), mid, ctx._rescale_prime, plain)
                term = sealapi.Ciphertext()
                evaluator.multiply_plain(babies[b], plain, term)
                if inner[a] is None:
                    inner[a] = term
                else:
                    evaluator.add_inplace(inner[a], term)
    acc = None
    for a in range(giants - 1, -1, -1):  # Horner: acc = inner[a] + rot(acc, g)
        if acc is not None:
            evaluator.rotate_vector_inplace(acc, g, galois)
        if inner[a] is not None:
            evaluator.rescale_to_next_inplace(inner[a])
            if acc is None:
                acc = inner[a]
            else:
                evaluator.add_inplace(acc, inner[a])
    if acc is None:  # X is zero: a fresh encryption of zeros at the last level
        return ctx._encrypt_layout(np.zeros(width), ((width, m),), [ctx._levels[0]]).chunks[0]
    step = m
    while step < slots:
        rotated = sealapi.Ciphertext()
        evaluator.rotate_vector(acc, step, galois, rotated)
        evaluator.add_inplace(acc, rotated)
        step *= 2
    return acc
