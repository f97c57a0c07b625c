"""Input conversion and validation shared by every public function.

Every public entry point validates its arguments here, once, and hands the
compiled core only C-contiguous, aligned float32/float64 numpy arrays. torch CPU
tensors are accepted without importing torch (zero-copy when contiguous) and
results are returned as the caller's type.
"""
from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Tuple

import numpy as np
import numpy.typing as npt

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def is_torch_tensor(x: Any) -> bool:
    """True for a torch.Tensor, decided without importing torch."""
    cls = type(x)
    return cls.__module__.startswith("torch") and hasattr(x, "detach") and hasattr(x, "numpy")


def _torch_to_numpy(x: Any, name: str) -> np.ndarray:
    if x.device.type != "cpu":
        raise TypeError(
            f"{name} is a torch tensor on device '{x.device}'; vflsec kernels accept CPU tensors only"
        )
    if x.is_complex():
        raise TypeError(f"{name} has complex dtype {x.dtype}; expected a real floating or integer dtype")
    if x.dtype.is_floating_point and x.dtype.itemsize < 4:
        # float16/bfloat16 have no numpy view (bfloat16) or too little precision.
        x = x.float()
    # .detach() drops autograd; .numpy() shares memory with the tensor.
    return x.detach().resolve_conj().resolve_neg().numpy()


def as_float_array(
    x: Any,
    name: str,
    *,
    ndim: Optional[int] = None,
    allow_empty: bool = False,
    dtype: Optional[npt.DTypeLike] = None,
    check_finite: bool = True,
) -> Tuple[np.ndarray, Callable[[np.ndarray], Any]]:
    """Convert ``x`` to a C-contiguous float32/float64 array, validating it.

    Returns ``(array, wrap)`` where ``wrap(result)`` turns a numpy result back
    into the caller's type (a torch tensor if ``x`` was one). Integers are
    converted to float64; float16 to float32; bool, complex, object and
    string data raise ``TypeError``. NaN/inf, the wrong number of
    dimensions or an empty array raise ``ValueError``. ``dtype`` forces the
    output dtype (used to match a second operand). ``check_finite=False``
    leaves the NaN/inf check to the caller (the DP release's kernel flags
    non-finite values in the same pass as the release, saving a pass over x).
    """
    if x is None:
        raise TypeError(f"{name} must be an array, got None")
    torch_in = is_torch_tensor(x)
    if torch_in:
        arr = _torch_to_numpy(x, name)
    else:
        try:
            arr = np.asarray(x)
        except (ValueError, TypeError) as exc:  # ragged nested lists, etc.
            raise ValueError(f"{name} could not be converted to an array: {exc}") from None
    kind = arr.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} has boolean dtype; expected float32, float64 or an integer dtype")
    if kind == "c":
        raise TypeError(f"{name} has complex dtype {arr.dtype}; expected real numbers")
    if kind not in "fiu":
        raise TypeError(f"{name} has dtype {arr.dtype}; expected float32, float64 or an integer dtype")
    if dtype is not None:
        target = np.dtype(dtype)
    elif arr.dtype in _FLOAT_DTYPES:
        target = arr.dtype
    elif kind == "f" and arr.dtype.itemsize < 4:
        target = np.dtype(np.float32)
    else:
        target = np.dtype(np.float64)
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got an array of shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name} is empty (shape {arr.shape}); at least one element is required")
    # Note: np.ascontiguousarray makes a 0-d input 1-d; callers that must keep
    # a 0-d shape (add_gaussian_noise) reshape their result.
    arr = np.ascontiguousarray(arr, dtype=target)
    if arr.ctypes.data % arr.dtype.alignment != 0:
        # C-contiguous but misaligned (a view at an odd byte offset): the C++
        # kernels load whole floats, so they get an aligned copy.
        arr = arr.copy()
    if check_finite and kind == "f" and not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or infinite values")

    if torch_in:
        def wrap(result: np.ndarray) -> Any:
            import torch

            return torch.from_numpy(np.ascontiguousarray(result))
    else:
        def wrap(result: np.ndarray) -> Any:
            return result

    return arr, wrap


def check_positive_int(value: Any, name: str, *, minimum: int = 1) -> int:
    """An integer >= ``minimum`` (bools and floats are refused)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_real(
    value: Any,
    name: str,
    *,
    low: Optional[float] = None,
    low_inclusive: bool = True,
    high: Optional[float] = None,
    high_inclusive: bool = True,
) -> float:
    """A finite real number within the given bounds.

    Values that have no float64 representation (Python ints or fractions
    beyond about 1.8e308) raise ``ValueError``, not ``OverflowError``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:
        raise ValueError(
            f"{name} is too large in magnitude to be represented as a float64 (|{name}| must be below "
            f"about 1.8e308)") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value}")
    if high is not None and (value > high or (value == high and not high_inclusive)):
        op = "<=" if high_inclusive else "<"
        raise ValueError(f"{name} must be {op} {high}, got {value}")
    return value


MAX_ELEMENTS = 2**31
"""Largest number of values one sampling call returns (16 GiB of float64): a
larger request is refused before any memory is touched (draw in chunks)."""


def check_shape(shape: Any, name: str = "shape") -> Tuple[int, ...]:
    """A shape: an int or a sequence of non-negative ints, at most
    :data:`MAX_ELEMENTS` values in all."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of ints, got {type(shape).__name__}") from None
    out = []
    for i, dim in enumerate(dims):
        if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
            raise TypeError(f"{name}[{i}] must be an integer, got {type(dim).__name__}")
        if dim < 0:
            raise ValueError(f"{name}[{i}] must be non-negative, got {dim}")
        out.append(int(dim))
    total, nonzero = 1, 1
    for dim in out:
        total *= dim
        nonzero *= max(dim, 1)
    if nonzero > 2**62:  # numpy bounds the product of the non-zero extents even for an empty array
        raise ValueError(f"{name} {tuple(out)} is beyond numpy's index range")
    if total > MAX_ELEMENTS:
        raise ValueError(f"{name} {tuple(out)} asks for {total} values; at most 2^31 per call -- draw in chunks")
    return tuple(out)
