"""CKKS's vector-matrix product before the diagonal layout, kept as the
baseline row of ``vflsec bench he`` (and for the tests that compare the two):
TenSEAL's default Galois keys and one rotate-and-sum per column."""
from __future__ import annotations

from typing import Any, List

import numpy as np

from ._dependencies import CKKS_INSTALL, missing_dependency

try:
    import tenseal as ts
except ImportError as _exc:
    raise missing_dependency("CKKS (vflsec.he._ckks_per_column)", _exc, CKKS_INSTALL) from _exc

from .._arrays import as_float_array
from .ckks import CKKSParameters, _new_tenseal_context


def per_column_context(params: CKKSParameters) -> ts.Context:
    """A TenSEAL context with TenSEAL's default Galois keys (every signed power
    of two), as the key holder made and sent before the diagonal product."""
    context = _new_tenseal_context(params)
    context.generate_galois_keys()
    return context


def per_column_encrypt(context: ts.Context, values: Any, slots: int) -> List[ts.CKKSVector]:
    """TenSEAL vectors of ``slots`` values each (zero-padded), the old path's input."""
    arr, _ = as_float_array(values, "values", ndim=1, dtype=np.float64)
    chunks = []
    for start in range(0, arr.shape[0], slots):
        piece = np.zeros(slots)
        part = arr[start:start + slots]
        piece[:part.shape[0]] = part
        chunks.append(ts.ckks_vector(context, piece.tolist()))
    return chunks


def per_column_dot(chunks: List[ts.CKKSVector], matrix: Any, slots: int) -> List[ts.CKKSVector]:
    """``CKKSEncryptedVector.dot`` before the diagonal layout: one TenSEAL
    ``dot`` (a rotate-and-sum over all slots) per column, then ``pack_vectors``;
    about d (log2 S + 1) rotations. The baseline row of ``vflsec bench he``."""
    X, _ = as_float_array(matrix, "matrix", ndim=2, dtype=np.float64)
    columns: List[ts.CKKSVector] = []
    for j in range(X.shape[1]):
        total = None
        for k, chunk in enumerate(chunks):
            block = np.zeros(slots)
            rows = X[k * slots:(k + 1) * slots, j]
            block[:rows.shape[0]] = rows
            term = chunk.dot(block.tolist())
            total = term if total is None else total + term
        columns.append(total)
    return [ts.CKKSVector.pack_vectors(columns[s:s + slots]) for s in range(0, X.shape[1], slots)]
