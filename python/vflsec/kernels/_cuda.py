"""CUDA dispatch for ``vflsec.kernels``: CUDA torch tensors in, CUDA tensors out.

The public functions (``pairwise_distances``, ``pairwise_distance_stats``,
``fuzzy_cmeans``, ``gaussian_noise(device=...)``) route here when given a
CUDA tensor (``add_gaussian_noise``, the DP release, does not: it releases a
CUDA tensor with the CPU's lattice sampler and copies the result back). Each
input is validated once on its device (dtype, dimensions, emptiness, and
finiteness with one scalar read back), outputs and workspaces are allocated
with torch on that device, and the compiled module ``vflsec._core_cuda``
receives raw device pointers and the current torch stream as integers: the
data never visit the host, and the kernels are ordered on the caller's stream
like any torch operation.

Host synchronisations: every call reads back one small validation result
(NaN/inf must raise, as on the CPU); ``pairwise_distance_stats`` reads back
its five numbers; ``fuzzy_cmeans`` reads back two numbers per iteration (the
stopping test) and, with ``init="kmeans++"``, one per centre chosen.

``_core_cuda`` exists only in builds with CUDA support (CMake option
``VFLSEC_CUDA``: AUTO by default, i.e. built wherever nvcc is found). It links
the CUDA runtime statically, so it imports without a GPU or driver, and needs
a driver at least as new as the toolkit it was built with (CUDA 13.0: driver
580 or newer); ``_core_cuda.device_status()`` says why no device is usable.
"""
from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .._arrays import as_float_array, is_torch_tensor
from .._torch import require_torch

_NOT_LOADED = object()
_module: Any = _NOT_LOADED
_import_error: Optional[BaseException] = None


def _load() -> Any:
    global _module, _import_error
    if _module is _NOT_LOADED:
        try:
            from .. import _core_cuda

            _module = _core_cuda
        except ImportError as exc:
            _module = None
            _import_error = exc
    return _module


def cuda_available() -> bool:
    """True when vflsec was built with its CUDA kernels and a CUDA device is visible."""
    module = _load()
    return module is not None and int(module.device_count()) > 0


def is_cuda_tensor(x: Any) -> bool:
    """A torch tensor on a CUDA device (decided without importing torch)."""
    return is_torch_tensor(x) and getattr(x.device, "type", None) == "cuda"


def _require() -> Any:
    module = _load()
    if module is None:
        raise RuntimeError(
            "CUDA work requested, but this vflsec build has no CUDA kernels (vflsec._core_cuda: "
            f"{_import_error}); reinstall with a CUDA toolkit present: "
            "pip install . -Ccmake.define.VFLSEC_CUDA=ON, or pass CPU tensors"
        )
    if int(module.device_count()) == 0:
        raise RuntimeError("CUDA work requested, but vflsec's CUDA kernels can use no device: "
                           f"{module.device_status()} "
                           f"(built for CUDA runtime {module.runtime_version()})")
    return module


def _np_dtype(dtype: Any) -> np.dtype:
    torch = require_torch("the CUDA kernels")
    return np.dtype(np.float32) if dtype == torch.float32 else np.dtype(np.float64)


def _launch(t: Any) -> Tuple[int, int]:
    """(device index, current stream handle) for a kernel reading or writing ``t``."""
    torch = require_torch("the CUDA kernels")
    return int(t.device.index), int(torch.cuda.current_stream(t.device).cuda_stream)


def as_cuda_float(x: Any, name: str, *, ndim: Optional[int] = None, allow_empty: bool = False,
                  device: Any = None, dtype: Any = None) -> Any:
    """``x`` (a CUDA tensor) as a contiguous float32/float64 tensor on its device.

    The dtype rules of ``as_float_array``: float32 and float64 kept, float16
    and bfloat16 to float32, integers to float64, bool and complex refused;
    ``dtype`` forces the result's dtype. ``device``: the device ``x`` must be on.
    Finiteness is checked separately (:func:`finite_absmax`), batched.
    """
    torch = require_torch("the CUDA kernels")
    if not is_cuda_tensor(x):
        where = f"a torch tensor on '{x.device}'" if is_torch_tensor(x) else type(x).__name__
        want = "a CUDA tensor" if device is None else f"a CUDA tensor on {device} like the other operands"
        raise TypeError(f"{name} must be {want}, got {where}")
    if device is not None and x.device != device:
        raise ValueError(f"{name} is on {x.device} but the other operands are on {device}")
    if x.is_complex():
        raise TypeError(f"{name} has complex dtype {x.dtype}; expected real numbers")
    if x.dtype == torch.bool:
        raise TypeError(f"{name} has boolean dtype; expected float32, float64 or an integer dtype")
    if not x.dtype.is_floating_point and x.dtype not in (torch.uint8, torch.int8, torch.int16, torch.int32,
                                                          torch.int64):
        raise TypeError(f"{name} has dtype {x.dtype}; expected float32, float64 or an integer dtype")
    if dtype is not None:
        target = dtype
    elif x.dtype in (torch.float32, torch.float64):
        target = x.dtype
    elif x.dtype.is_floating_point:
        target = torch.float32
    else:
        target = torch.float64
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got an array of shape {tuple(x.shape)}")
    if x.numel() == 0 and not allow_empty:
        raise ValueError(f"{name} is empty (shape {tuple(x.shape)}); at least one element is required")
    return x.detach().to(dtype=target).contiguous()


def finite_absmax(*named: Tuple[Any, str]) -> List[float]:
    """max |t| of each (tensor, name), raising ValueError naming the first with NaN/inf.

    One host synchronisation for all of them.
    """
    torch = require_torch("the CUDA kernels")
    rows = []
    for t, _ in named:
        if t.numel() == 0:
            rows.append(torch.zeros(2, dtype=torch.float64, device=t.device))
            continue
        lo, hi = torch.aminmax(t)
        bad = (~torch.isfinite(t)).any()
        rows.append(torch.stack([bad.to(torch.float64), torch.maximum(-lo, hi).to(torch.float64)]))
    values = torch.stack(rows).tolist()
    for (bad, _), (_, name) in zip(values, named):
        if bad:
            raise ValueError(f"{name} contains NaN or infinite values")
    return [largest for _, largest in values]


# ---------------------------------------------------------------------------
# distances
# ---------------------------------------------------------------------------

def _operand_device(X: Any, Y: Any) -> Any:
    if not is_cuda_tensor(X):
        raise TypeError(
            "Y is a CUDA tensor but X is not: pass X and Y on the same device "
            f"(X is {('a tensor on ' + str(X.device)) if is_torch_tensor(X) else type(X).__name__})"
        )
    return X.device


def pairwise_distances(X: Any, Y: Any, squared: bool) -> Any:
    from ._checks import _exponent_for

    torch = require_torch("the CUDA kernels")
    module = _require()
    device = _operand_device(X, Y)
    x = as_cuda_float(X, "X", ndim=2)
    same = Y is None or Y is X
    if same:
        y = x
    else:
        y = as_cuda_float(Y, "Y", ndim=2, device=device)
        if y.dtype != x.dtype:
            x, y = x.to(torch.float64), y.to(torch.float64)
        if y.shape[1] != x.shape[1]:
            raise ValueError(
                f"X and Y must have the same number of columns, got X with {x.shape[1]} and Y with {y.shape[1]}"
            )
    largest = max(finite_absmax((x, "X")) if same else finite_absmax((x, "X"), (y, "Y")))
    exponent = _exponent_for(largest, _np_dtype(x.dtype))
    n, d = x.shape
    m = y.shape[0]
    out = torch.empty((n, m), dtype=x.dtype, device=x.device)
    kernel = module.pairwise_distances_f32 if x.dtype == torch.float32 else module.pairwise_distances_f64
    kernel(x.data_ptr(), n, y.data_ptr(), m, d, squared, exponent, out.data_ptr(), *_launch(x))
    return out


def pairwise_distance_stats(X: Any) -> Any:
    from ._checks import DistanceStats, _exponent_for

    torch = require_torch("the CUDA kernels")
    module = _require()
    x = as_cuda_float(X, "X", ndim=2)
    n, d = x.shape
    if n < 2:
        raise ValueError(f"X must have at least 2 rows to form a pair, got {n}")
    (largest,) = finite_absmax((x, "X"))
    exponent = _exponent_for(largest, _np_dtype(x.dtype))
    workspace = torch.empty(module.distance_stats_workspace(n), dtype=torch.float64, device=x.device)
    result = torch.empty(5, dtype=torch.float64, device=x.device)
    kernel = module.pairwise_distance_stats_f32 if x.dtype == torch.float32 else module.pairwise_distance_stats_f64
    kernel(x.data_ptr(), n, d, exponent, workspace.data_ptr(), result.data_ptr(), *_launch(x))
    count, mean, std, lo, hi = result.tolist()
    scale = math.ldexp(1.0, exponent)
    return DistanceStats(count=int(count), mean=mean * scale, std=std * scale, min=lo * scale, max=hi * scale)


# ---------------------------------------------------------------------------
# fuzzy c-means
# ---------------------------------------------------------------------------

def _kmeans_plus_plus(x: Any, c: int, rng: np.random.Generator) -> Any:
    """The CPU's k-means++ (same generator calls) with the distances on the device."""
    torch = require_torch("the CUDA kernels")
    n = x.shape[0]
    x64 = x.to(torch.float64)
    chosen = [int(rng.integers(n))]
    closest = ((x64 - x64[chosen[0]]) ** 2).sum(dim=1)
    for _ in range(1, c):
        cumulative = torch.cumsum(closest, dim=0)
        total = float(cumulative[-1])
        if total > 0.0 and math.isfinite(total):
            target = torch.tensor([rng.random() * total], dtype=torch.float64, device=x.device)
            idx = min(int(torch.searchsorted(cumulative, target, right=True)[0]), n - 1)
        else:  # fewer distinct points than clusters: any point will do
            idx = int(rng.integers(n))
        chosen.append(idx)
        torch.minimum(closest, ((x64 - x64[idx]) ** 2).sum(dim=1), out=closest)
    return x[chosen].contiguous()


def _check_membership(u: Any) -> None:
    torch = require_torch("the CUDA kernels")
    slack = 1e-6 + u.shape[1] * float(torch.finfo(u.dtype).eps)
    lowest, worst = torch.stack([u.min().to(torch.float64),
                                 (u.to(torch.float64).sum(dim=1) - 1.0).abs().max()]).tolist()
    if lowest < 0:
        raise ValueError("init memberships must be nonnegative")
    if worst > slack:
        raise ValueError(f"init membership rows must sum to 1 (within {slack:.3g}); "
                         f"the worst row is off by {worst:.3g}")


def _device_init(init: Any, name: str, x: Any) -> Any:
    """An init array on x's device in x's dtype, validated (finite)."""
    torch = require_torch("the CUDA kernels")
    if is_cuda_tensor(init):
        start = as_cuda_float(init, name, ndim=2, device=x.device, dtype=x.dtype)
        finite_absmax((start, name))
        return start
    start, _ = as_float_array(init, name, ndim=2, dtype=_np_dtype(x.dtype))
    return torch.from_numpy(start).to(x.device)


def fuzzy_cmeans(X: Any, n_clusters: Any, *, m: Any, max_iter: Any, tol: Any, init: Any, seed: Any) -> Any:
    from . import _checks

    torch = require_torch("the CUDA kernels")
    module = _require()
    x = as_cuda_float(X, "X", ndim=2)
    n, d = x.shape
    lo_hi = torch.stack([t.to(torch.float64) for t in torch.aminmax(x)])
    finite_absmax((x, "X"))
    lo, hi = lo_hi.tolist()
    c, m, max_iter, tol, seed = _checks._check_parameters(n, n_clusters, m, max_iter, tol, seed)

    init_centers = init_membership = None
    mode = _checks._init_mode(init)
    if mode is not None:
        rng = np.random.default_rng(seed)
        if mode == "random":
            # The CPU's draws, copied to the device: equal starts on both.
            init_membership = torch.from_numpy(_checks._random_membership(n, c, rng, _np_dtype(x.dtype))).to(x.device)
        else:
            init_centers = _kmeans_plus_plus(x, c, rng)
    else:
        start = _device_init(init, "init", x)
        if tuple(start.shape) == (c, d):
            init_centers = start
        elif tuple(start.shape) == (n, c):
            _check_membership(start)
            init_membership = start
        else:
            raise ValueError(
                f"init array must have shape (n_clusters, d) = {(c, d)} for centres or "
                f"(n, n_clusters) = {(n, c)} for memberships, got {tuple(start.shape)}"
            )
    if init_centers is not None:
        clo, chi = torch.stack([t.to(torch.float64) for t in torch.aminmax(init_centers)]).tolist()
        lo, hi = min(lo, clo), max(hi, chi)
    _checks._check_span(lo, hi, d, _np_dtype(x.dtype))

    scratch = torch.empty(2 * c * d, dtype=x.dtype, device=x.device)
    if init_centers is not None:
        scratch[: c * d].copy_(init_centers.reshape(-1))
    centers = torch.empty((c, d), dtype=x.dtype, device=x.device)
    membership = torch.empty((n, c), dtype=x.dtype, device=x.device)
    labels = torch.empty(n, dtype=torch.int64, device=x.device)
    confidence = torch.empty(n, dtype=x.dtype, device=x.device)
    workspace = torch.empty(module.fcm_workspace(n, c, d), dtype=torch.float64, device=x.device)
    kernel = module.fuzzy_cmeans_f32 if x.dtype == torch.float32 else module.fuzzy_cmeans_f64
    history, n_iter, converged, shift, weightless = kernel(
        x.data_ptr(), n, d, c, m, max_iter, tol, init_centers is not None,
        0 if init_membership is None else init_membership.data_ptr(), scratch.data_ptr(), centers.data_ptr(),
        membership.data_ptr(), labels.data_ptr(), confidence.data_ptr(), workspace.data_ptr(), *_launch(x))
    if weightless >= 0:
        raise ValueError(
            f"init memberships give cluster {weightless} no weight (every u^m is 0), so its centre is undefined"
        )
    return _checks.FCMResult(
        centers=centers,
        membership=membership,
        labels=labels,
        confidence=confidence,
        n_iter=int(n_iter),
        objective=float(history[-1]),
        converged=bool(converged),
        objective_history=torch.tensor(history, dtype=torch.float64, device=x.device),
        center_shift=float(shift),
    )


# ---------------------------------------------------------------------------
# noise
# ---------------------------------------------------------------------------

def cuda_device(device: Any) -> Any:
    """``device`` as a torch.device, or None when it names the CPU."""
    torch = require_torch("the CUDA kernels")
    try:
        dev = torch.device(device)
    except (TypeError, RuntimeError) as exc:
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>', got {device!r} ({exc})") from None
    if dev.type == "cpu":
        return None
    if dev.type != "cuda":
        raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>', got {device!r}")
    return dev


def gaussian_noise(shape: Sequence[int], sigma: float, dtype: np.dtype, generator: Any, device: Any) -> Any:
    torch = require_torch("the CUDA kernels")
    module = _require()
    if not torch.cuda.is_available():
        raise RuntimeError(f"device={str(device)!r} requested, but torch sees no CUDA device "
                           "(a CPU-only torch build, or no GPU or driver)")
    tdtype = torch.float32 if dtype == np.float32 else torch.float64
    out = torch.empty(tuple(shape), dtype=tdtype, device=device)
    if sigma == 0.0:
        return out.zero_()  # consumes no blocks, as on the CPU
    if out.numel():
        kernel = module.fill_normal_f32 if tdtype == torch.float32 else module.fill_normal_f64
        kernel(generator.native, out.data_ptr(), out.numel(), sigma, *_launch(out))
    return out
