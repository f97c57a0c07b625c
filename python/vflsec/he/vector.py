"""The encrypted-vector contract every scheme of :mod:`vflsec.he` follows.

:class:`AbstractEncryptedVector` is the one base of
:class:`vflsec.he.paillier.PaillierEncryptedVector` and
:class:`vflsec.he.ckks.CKKSEncryptedVector` (after TenSEAL's
``tensors/abstract_tensor.py``): each wrapper holds its scheme's native
ciphertexts and the key or context they belong to, the operations have the
same names in both schemes, and serialization is symmetric,
``type(v).from_bytes(key_or_context, v.to_bytes())``.

Arithmetic is additively homomorphic: encrypted + encrypted
(:meth:`~AbstractEncryptedVector.add`, ``+``, ``-``), encrypted + plaintext
(:meth:`~AbstractEncryptedVector.add_plain`), encrypted times a plaintext
scalar or vector (:meth:`~AbstractEncryptedVector.mul_scalar`,
:meth:`~AbstractEncryptedVector.mul_plain`, ``*`` on either side) and times a
plaintext matrix (:meth:`~AbstractEncryptedVector.dot`). A product of two
ciphertexts does not exist in these schemes as used here and is a TypeError.
``+`` and ``-`` take encrypted operands only: a plaintext goes through
:meth:`~AbstractEncryptedVector.add_plain`, so that adding a value in the
clear is always written as such.

Every multiplication by a plaintext moves the result one level deeper: one
more fixed-point scale for Paillier (``level`` + 1), one prime of the modulus
chain spent for CKKS. Operands of ``+`` must be at the same Paillier level;
CKKS aligns levels itself.
"""
from __future__ import annotations

import abc
import numbers
from typing import Any, ClassVar, Type, TypeVar

import numpy as np

__all__ = ["AbstractEncryptedVector"]

V = TypeVar("V", bound="AbstractEncryptedVector")


def _check_scalar(scalar: Any) -> float:
    """A finite real number (bool and complex refused; a 0-d array is its value), as float."""
    if isinstance(scalar, np.ndarray) and scalar.ndim == 0:
        scalar = scalar[()]
    if isinstance(scalar, (bool, np.bool_)) or not isinstance(scalar, numbers.Real):
        raise TypeError(f"the scalar must be a real number, got {type(scalar).__name__}")
    value = float(scalar)
    if not np.isfinite(value):
        raise ValueError(f"the scalar must be finite, got {value}")
    return value


class AbstractEncryptedVector(abc.ABC):
    """A 1-D vector of encrypted reals under one key (Paillier) or context (CKKS)."""

    __slots__ = ()
    # numpy defers to this class's reflected operators: ``np.float64(2) * v`` and
    # ``array * v`` call ``v.__rmul__`` instead of building an object array.
    __array_ufunc__ = None

    scheme: ClassVar[str] = ""
    """The scheme's name ("paillier", "ckks")."""

    # -- what each scheme implements ----------------------------------------
    @property
    @abc.abstractmethod
    def size(self) -> int:
        """Number of encrypted values."""

    @abc.abstractmethod
    def add(self: V, other: V) -> V:
        """Elementwise Enc(a) + Enc(b) (same key or context, same size)."""

    @abc.abstractmethod
    def add_plain(self: V, values: Any) -> V:
        """Elementwise Enc(a) + x for a real vector x of this size."""

    @abc.abstractmethod
    def mul_plain(self: V, values: Any) -> V:
        """Elementwise Enc(a_i) * x_i for a real vector x of this size; one level deeper."""

    @abc.abstractmethod
    def neg(self: V) -> V:
        """Elementwise -Enc(a), at the same level."""

    @abc.abstractmethod
    def dot(self: V, matrix: Any) -> V:
        """Vector-matrix product Enc(a)^T X for a real (size, p) matrix; one level deeper."""

    @abc.abstractmethod
    def decrypt(self, secret: Any) -> np.ndarray:
        """The values as float64, with the scheme's secret (a Paillier private
        key, the CKKS key holder's secret context)."""

    @abc.abstractmethod
    def to_bytes(self) -> bytes:
        """The wire form; :meth:`from_bytes` reads it back."""

    @classmethod
    @abc.abstractmethod
    def from_bytes(cls: Type[V], key_or_context: Any, data: Any) -> V:
        """Parse :meth:`to_bytes` output under ``key_or_context`` (Paillier: the
        public or private key; CKKS: a public or secret context), checking the
        format, sizes and ranges (ValueError/TypeError otherwise)."""

    # -- derived operations -------------------------------------------------
    def mul_scalar(self: V, scalar: Any) -> V:
        """Enc(a) * c for a finite real scalar c; one level deeper."""
        return self.mul_plain(np.full(self.size, _check_scalar(scalar)))

    def sub(self: V, other: V) -> V:
        """Elementwise Enc(a) - Enc(b)."""
        return self.add(other.neg())

    def sub_plain(self: V, values: Any) -> V:
        """Elementwise Enc(a) - x for a real vector x of this size."""
        return self.add_plain(-np.asarray(values, dtype=np.float64))

    def sum(self: V) -> V:
        """Enc(sum_i a_i) as a one-value vector (default: a product with a column of ones)."""
        return self.dot(np.ones((self.size, 1)))

    # -- operators ----------------------------------------------------------
    def __len__(self) -> int:
        return self.size

    def _encrypted_operand(self, other: Any, op: str) -> Any:
        if not isinstance(other, type(self)):
            hint = f" (a plaintext goes through {'add_plain' if op == '+' else 'sub_plain'})" \
                if not isinstance(other, AbstractEncryptedVector) else ""
            raise TypeError(f"{op}: expected a {type(self).__name__}, got {type(other).__name__}{hint}")
        return other

    def __add__(self: V, other: Any) -> V:
        return self.add(self._encrypted_operand(other, "+"))

    def __sub__(self: V, other: Any) -> V:
        return self.sub(self._encrypted_operand(other, "-"))

    def __neg__(self: V) -> V:
        return self.neg()

    def __mul__(self: V, other: Any) -> V:
        if isinstance(other, AbstractEncryptedVector):
            raise TypeError("*: the product of two ciphertexts is not available (additively homomorphic "
                            "encryption): multiply by a plaintext scalar or vector")
        if isinstance(other, (numbers.Number, np.generic)) or (isinstance(other, np.ndarray) and other.ndim == 0):
            return self.mul_scalar(other)
        return self.mul_plain(other)

    def __rmul__(self: V, other: Any) -> V:
        return self.__mul__(other)
