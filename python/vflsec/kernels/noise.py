"""Cryptographically secure Gaussian noise for the DP defenses.

Every DP mechanism in vflsec draws its randomness from a :class:`NoiseGenerator`:

* ``NoiseGenerator()`` (the default everywhere) is a ChaCha20 stream cipher
  (RFC 8439 block function) keyed with 32 bytes from the operating system's
  CSPRNG (``getrandom(2)``). It is implemented in C++, vectorized over 16 / 8 /
  4 blocks on AVX-512 / AVX2 / SSE2, and threaded with OpenMP. A forked child
  process re-keys itself from OS entropy on its first draw, so parent and child
  never hand out the same noise.
* ``NoiseGenerator(seed=...)`` gives a reproducible stream for experiments and
  tests. **It is not for deployment**: anyone who knows the seed knows the
  noise, and a forked child continues the parent's stream (both processes then
  draw identical values: give each process its own seed).

Stream. Block ``b`` of the stream (64 bytes, read as 8 little-endian uint64
words) is ``ChaCha20(key, stream id 0, block counter b)``. Each request takes
``ceil(n / 8)`` fresh blocks (a lock reserves them, so concurrent callers never
share blocks) and value ``i`` of the request always comes from block
``first + i // 8``: the output is bit-identical for any thread count and on
every CPU. Calls never overlap; a seeded stream depends on the sequence of
request sizes, as with numpy's generators.

Seed to key. ``key = SHA-256(b"vflsec.NoiseGenerator.v1/" + tag + payload)``
where an int seed ``s >= 0`` has ``tag = b"int:"`` and payload
``s.to_bytes(max(1, ceil(s.bit_length() / 8)), "big")`` and a bytes seed has
``tag = b"bytes:"`` and the bytes themselves.

Normals. Box-Muller with two 53-bit uniforms per pair (``u1`` in (0, 1],
``u2`` in [0, 1)): ``r = sqrt(-2 ln u1)``, ``z = r cos(2 pi u2 - pi/4)``,
``r sin(2 pi u2 - pi/4)``. log, sin and cos are fixed branch-free polynomials
(accurate to a few ulp), so every sample costs the same whatever its value: no
rejection loop whose timing depends on the noise. Because ``u1 >= 2^-53`` the
magnitude of a standard normal is at most ``sqrt(106 ln 2) = 8.57``; the
probability mass cut off is about 1e-17, far below any useful delta.
float32 output is generated in float64 and rounded once.

Those float normals are for uses that are not privacy releases
(:func:`gaussian_noise`, ``NoiseGenerator.normal``): ``x + noise`` formed in
floating point leaks ``x`` through the grid the sum lies on. Measured on the
old release path: with sigma calibrated for (epsilon = 1, delta = 1e-5),
the event {|y| < 0.5 and y * 2^53 not an integer} has probability 0.071 when
x = 0 and 0 when x = 1, an infinite-privacy-loss event (Mironov, CCS 2012;
Jin et al., IEEE S&P 2022).

The DP release. Every DP mechanism in vflsec releases through
:func:`add_gaussian_noise`, which rounds ``x`` to the lattice
``g Z`` (``g = lattice_spacing(sigma) <= sigma 2^-20``, a power of two fixed by
sigma): it draws the integer ``K`` with the exact law of ``round(x / g + s N)``,
``s = sigma / g`` (up to a relative error of 2^-58 per draw), in integer
arithmetic, and converts it to floating point once. The output is a
function of ``K`` alone, so the attack above sees identical grids for every
x; and ``K`` is post-processing of the continuous Gaussian mechanism on x
itself, so the guarantee is the continuous one with the query's own
sensitivity, which :func:`vflsec.dp.gaussian_sigma` calibrates for. :func:`discrete_gaussian` is
the exact discrete Gaussian of Canonne, Kamath & Steinke (2020) on the
integers, for callers who want that distribution itself.
"""
from __future__ import annotations

import functools
import hashlib
import math
import numbers
import threading
from decimal import Decimal
from fractions import Fraction
from typing import Any, Optional, Tuple, Union

import numpy as np

from .. import _core
from .._arrays import as_float_array, check_positive_int, check_real, check_shape
from . import _cuda
from . import _discrete_gaussian as _dg
from ._checks import _check_sigma

__all__ = [
    "LATTICE_BITS",
    "NoiseGenerator",
    "PER_DRAW_LOG_RATIO",
    "SUPPORT_SIGMAS",
    "add_gaussian_noise",
    "default_generator",
    "discrete_gaussian",
    "gaussian_noise",
    "lattice_gaussian",
    "lattice_sigma",
    "lattice_spacing",
]

_KEY_DOMAIN = b"vflsec.NoiseGenerator.v1/"
_FLOAT_DTYPES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}
# Discrete Gaussian samples must fit in int64; at sigma = 2^52 that needs a
# deviation of 2^11 sigma, probability exp(-2^21).
_DISCRETE_SIGMA_MAX = 2**52
DISCRETE_GAUSSIAN_MAX_SAMPLES = 2**31
"""Most samples one :func:`discrete_gaussian` call draws (native sampler)."""
DISCRETE_GAUSSIAN_MAX_PYTHON_SAMPLES = 2**20
"""Most samples one call draws when sigma needs the pure-Python sampler."""

Seed = Union[None, int, bytes, bytearray]


def _seed_to_key(seed: Any) -> Tuple[bytes, str]:
    """The 32-byte ChaCha20 key for ``seed`` (documented in the module docstring) and its repr."""
    if isinstance(seed, (bytes, bytearray)):
        payload = b"bytes:" + bytes(seed)
        shown = repr(bytes(seed)) if len(seed) <= 16 else f"<{len(seed)} bytes>"
    elif isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        s = int(seed)
        if s < 0:
            raise ValueError(f"seed must be a non-negative integer or bytes, got {s}")
        payload = b"int:" + s.to_bytes(max(1, (s.bit_length() + 7) // 8), "big")
        shown = str(s)
    else:
        raise TypeError(f"seed must be None, a non-negative int or bytes, got {type(seed).__name__}")
    return hashlib.sha256(_KEY_DOMAIN + payload).digest(), shown


def _check_dtype(dtype: Any) -> np.dtype:
    name = str(dtype)
    if name in ("torch.float32", "torch.float64"):
        dtype = name[len("torch."):]
    if dtype is None:
        raise TypeError("dtype must be float32 or float64, got None")
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be float32 or float64, got {dtype!r}") from None
    if dt not in _FLOAT_DTYPES:
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    return dt


class NoiseGenerator:
    """Source of Gaussian noise and uniform words: ChaCha20 in counter mode.

    Parameters
    ----------
    seed : None, int >= 0 or bytes
        ``None`` (default): cryptographically secure, keyed from OS entropy.
        An int or bytes: a reproducible stream for experiments and tests, NOT
        for deployment (see the module docstring for the key derivation).

    A generator is safe to share between threads (each call reserves its own
    blocks) and cannot be copied or pickled: a copy would repeat its stream.
    """

    __slots__ = ("_core_gen", "_seed_shown", "__weakref__")

    def __init__(self, seed: Seed = None) -> None:
        if seed is None:
            self._core_gen = _core.ChaCha20Generator()
            self._seed_shown = None
        else:
            key, self._seed_shown = _seed_to_key(seed)
            self._core_gen = _core.ChaCha20Generator.from_key(key)

    @property
    def native(self) -> Any:
        """The compiled generator behind this one (``vflsec._core.ChaCha20Generator``).

        For vflsec's own kernels (the CUDA noise reserves its blocks through
        it, so CPU and GPU draws share one stream and never reuse keystream);
        not a public API of its own. Drawing from it advances this generator.
        """
        return self._core_gen

    @property
    def is_secure(self) -> bool:
        """True when keyed from OS entropy (``seed=None``)."""
        return bool(self._core_gen.is_secure)

    @property
    def blocks_used(self) -> int:
        """64-byte blocks consumed so far (since the last re-key after a fork)."""
        return int(self._core_gen.blocks_used)

    def __repr__(self) -> str:
        used = self.blocks_used
        if self.is_secure:
            return f"<NoiseGenerator: secure ChaCha20 keyed from OS entropy, {used} blocks used>"
        return (f"<NoiseGenerator: seeded ChaCha20 (seed={self._seed_shown}), reproducible, "
                f"NOT secure, {used} blocks used>")

    def __reduce__(self):
        raise TypeError("a NoiseGenerator cannot be copied or pickled: a copy would repeat its noise; "
                        "create one per process (seeded ones from their own seeds)")

    # -- Gaussian ---------------------------------------------------------

    def normal(self, shape: Any, sigma: float = 1.0, dtype: Any = "float64") -> np.ndarray:
        """An array of N(0, sigma^2) samples (C-contiguous, float32 or float64)."""
        shape = check_shape(shape, "shape")
        dt = _check_dtype(dtype)
        sigma = _check_sigma(sigma, dt)
        return self._normal(shape, sigma, dt)

    def standard_normal(self, shape: Any, dtype: Any = "float64") -> np.ndarray:
        """An array of N(0, 1) samples (C-contiguous, float32 or float64)."""
        shape = check_shape(shape, "shape")
        return self._normal(shape, 1.0, _check_dtype(dtype))

    def _normal(self, shape: Tuple[int, ...], sigma: float, dt: np.dtype) -> np.ndarray:
        if sigma == 0.0:
            return np.zeros(shape, dtype=dt)  # consumes no blocks
        out = np.empty(shape, dtype=dt)
        if out.size:
            self._core_gen.fill_normal(out.reshape(-1), sigma)
        return out

    def _add_normal(self, x: np.ndarray, sigma: float) -> np.ndarray:
        # x + float noise in one pass: the pre-lattice release, kept only so the
        # kernels benchmark can time it. NOT a DP release (module docstring).
        out = np.empty_like(x, order="C")
        if x.size == 0:
            return out
        if sigma == 0.0:
            out[...] = x
            return out
        nonfinite = self._core_gen.add_normal(x.reshape(-1), out.reshape(-1), sigma)
        if nonfinite:
            raise ValueError(f"x + noise overflowed {x.dtype} in {nonfinite} entries "
                             "(x too close to the dtype's maximum)")
        return out

    # -- uniform ------------------------------------------------------------

    def random_raw(self, n: int) -> np.ndarray:
        """``n`` uniform 64-bit words (uint64), the raw keystream in order."""
        n = check_positive_int(n, "n", minimum=0)
        out = np.empty(n, dtype=np.uint64)
        if n:
            self._core_gen.fill_raw(out)
        return out

    def random(self, shape: Any, dtype: Any = "float64") -> np.ndarray:
        """Uniform floats on [0, 1): 53-bit (float64) or 24-bit (float32) multiples of 2^-bits."""
        shape = check_shape(shape, "shape")
        dt = _check_dtype(dtype)
        words = self.random_raw(math.prod(shape))
        if dt == np.float64:
            u: np.ndarray = (words >> np.uint64(11)).astype(np.float64) * 2.0**-53
        else:
            u = (words >> np.uint64(40)).astype(np.float32) * np.float32(2.0**-24)
        return u.reshape(shape)

    def integers_below(self, n: int, size: Any = None) -> Union[int, np.ndarray]:
        """Exactly uniform integers on ``[0, n)`` by rejection sampling.

        ``size=None`` returns one Python int (``n`` may be arbitrarily large);
        otherwise an int64 array of shape ``size`` (``n <= 2**63``).
        """
        n = check_positive_int(n, "n", minimum=1)
        if size is None:
            return _dg.UniformSource(self, chunk_words=8).below(n)
        shape = check_shape(size, "size")
        if n > 2**63:
            raise ValueError(f"n must be <= 2**63 when size is given (int64 output), got {n}")
        total = math.prod(shape)
        out = np.empty(total, dtype=np.int64)
        if n == 1 or total == 0:
            out[:] = 0
            return out.reshape(shape)
        mask = np.uint64((1 << (n - 1).bit_length()) - 1)
        bound = np.uint64(n)
        filled = 0
        while filled < total:  # acceptance >= 1/2 per word
            need = total - filled
            words = self.random_raw(need + need // 2 + 8) & mask
            words = words[words < bound][:need]
            out[filled:filled + words.size] = words
            filled += words.size
        return out.reshape(shape)


_default_lock = threading.Lock()
_default: Optional[NoiseGenerator] = None


def default_generator() -> NoiseGenerator:
    """The module's shared secure generator, created on first use."""
    global _default
    gen = _default
    if gen is None:
        with _default_lock:
            if _default is None:
                _default = NoiseGenerator()
            gen = _default
    return gen


def _resolve_generator(generator: Any) -> NoiseGenerator:
    if generator is None:
        return default_generator()
    if not isinstance(generator, NoiseGenerator):
        raise TypeError(f"generator must be a vflsec NoiseGenerator or None, got {type(generator).__name__}")
    return generator


def gaussian_noise(shape: Any, sigma: float = 1.0, *, dtype: Any = "float64",
                   generator: Optional[NoiseGenerator] = None, device: Any = None) -> Any:
    """N(0, sigma^2) noise of the given shape as a C-contiguous numpy array.

    Not a DP release: adding this noise to data in floating point leaks the
    data through rounding (module docstring). Release with
    :func:`add_gaussian_noise`.

    ``shape`` is an int or a tuple of non-negative ints; ``sigma >= 0`` finite
    (``sigma == 0`` gives zeros and consumes no randomness); ``dtype`` float32
    or float64 (numpy or torch). ``generator=None`` uses the shared secure
    generator.

    ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``, a torch.device) returns a
    torch tensor on that device instead of a numpy array. On a CUDA device the
    noise is generated there, by the same ChaCha20 stream: the generator
    reserves the blocks (so CPU and GPU draws never share keystream) and a
    seeded generator is designed to give the CPU's values bit for bit (checked
    by running the kernel body on the host; not yet run on GPU hardware).
    """
    shape = check_shape(shape, "shape")
    dt = _check_dtype(dtype)
    sigma = _check_sigma(sigma, dt)
    gen = _resolve_generator(generator)
    if device is None:
        return gen._normal(shape, sigma, dt)
    cuda = _cuda.cuda_device(device)
    if cuda is not None:
        return _cuda.gaussian_noise(shape, sigma, dt, gen, cuda)
    import torch

    return torch.from_numpy(gen._normal(shape, sigma, dt))


# --------------------------------------------------------------------------
# the secure release (the DP Gaussian mechanism)
# --------------------------------------------------------------------------

LATTICE_BITS = 20
"""The release lattice has spacing ``2^(floor(log2 sigma) - LATTICE_BITS)``: at most ``sigma * 2^-20``."""
PER_DRAW_LOG_RATIO = 2.0**-58
"""Bound on ``|ln Q(z) / P(z)|`` per noise draw between the sampler (Q) and the exact rounded Gaussian (P)."""
SUPPORT_SIGMAS = 130.0
"""The sampler's noise is supported on ``|Z| < 130 s`` (the exact rounded Gaussian puts below 10^-3000 beyond)."""
# |x| / g must stay below 2^62 (int64 lattice coordinates); g >= sigma 2^-21.
_RANGE_BITS = 62
# Exponents whose 2^-e and 2^e are normal doubles (no flush to 0 or inf).
_MIN_SIGMA = 2.0**-1000


SCALE_STEPS = 256
"""Noise scales per octave: sigma is rounded up to ``2^e (2^20 + k 2^12)``, at most 1/256 (0.39%) more noise."""


def _lattice_parameters(sigma: float) -> Tuple[int, float]:
    """``(e, s)``: the lattice exponent and integer noise scale of the release at
    ``sigma``, with ``sigma_used = s 2^e >= sigma``, ``s`` one of ``SCALE_STEPS``
    values in [2^20, 2^21) (so at most ``SCALE_STEPS`` sampling tables exist
    whatever sigmas a program uses; the table cache never thrashes)."""
    _, k = math.frexp(sigma)  # sigma = m 2^k, m in [1/2, 1)
    e = k - 1 - LATTICE_BITS
    step = 2.0 ** (LATTICE_BITS - 8)  # 2^20 / 256
    s = math.ceil(math.ldexp(sigma, -e) / step) * step  # exact: sigma 2^-e has at most 53 bits
    if s >= 2.0 ** (LATTICE_BITS + 1):  # rounded up into the next octave
        e, s = e + 1, 2.0**LATTICE_BITS
    return e, s


def lattice_sigma(sigma: float) -> float:
    """The noise standard deviation :func:`add_gaussian_noise` really uses for ``sigma``:
    ``sigma`` rounded up to one of 256 steps per octave (at most 0.39% more).
    :func:`vflsec.dp.gaussian_sigma` returns values that are already on the grid."""
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    e, s = _lattice_parameters(sigma)
    if e + LATTICE_BITS >= 1024:  # s 2^e >= 2^1024: sigma within 0.39% of the float64 maximum rounds past it
        raise ValueError(f"sigma={sigma!r} rounded up to the lattice grid exceeds the float64 range")
    return math.ldexp(s, e)


def lattice_spacing(sigma: float) -> float:
    """The spacing ``g`` of the lattice :func:`add_gaussian_noise` releases on at ``sigma``:
    ``2^(floor(log2 lattice_sigma(sigma)) - 20)``.

    It depends on ``sigma`` only (never on the data) and satisfies
    ``sigma * 2^-21 < g <= sigma * 2^-20``.
    """
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    return math.ldexp(1.0, _lattice_parameters(sigma)[0])


def _power_of_two_text(k: int) -> str:
    """2^k in %.3g form, also where it exceeds the float range (k >= 1024)."""
    return f"{Decimal(2) ** k:.3g}"


@functools.lru_cache(maxsize=SCALE_STEPS)
def _lattice_table(scale: float) -> Any:
    # Built in C++ in a few ms (alias table over 2^15 blocks, 1.3 MB); one per
    # scale step in use, at most SCALE_STEPS (the grid trainer cycles through
    # hundreds of sigmas per step: a smaller cache would rebuild every time).
    return _core.LatticeGaussianTable(scale)


def add_gaussian_noise(x: Any, sigma: float, *, generator: Optional[NoiseGenerator] = None) -> Any:
    """The Gaussian mechanism: ``x`` plus N(0, sigma^2) noise, released on a lattice so
    that floating point leaks nothing (a new array of ``x``'s type and dtype).

    Mechanism. With ``g = lattice_spacing(sigma)`` (a power of two, at most
    ``sigma * 2^-20``, a function of sigma alone) each value is released as

        y = g * (rint(x / g) + Z),    Z ~ round(c + s N(0, 1)),  s = sigma' / g,

    where ``sigma' = lattice_sigma(sigma)`` is sigma rounded up to one of 256
    steps per octave (at most 0.39% more noise, so that a bounded number of
    sampling tables serves every sigma; :func:`vflsec.dp.gaussian_sigma`
    returns sigmas already on that grid). ``Z`` is drawn centred at the
    fractional part ``c = x / g - rint(x / g)``: ``Z ~ round(c + s N)``, so
    ``rint(x / g) + Z`` has exactly the law of ``round(x / g + s N)``. All in
    exact integer arithmetic, then converted to float64 / float32 once. The
    output is a fixed function of that integer; the floating-point attack of
    Mironov (CCS 2012) and Jin et al. (IEEE S&P 2022), which tells
    ``x + noise`` from ``x' + noise`` by the grid the floating-point sum lies
    on, has nothing to read. The release is "add N(0, sigma^2) to x, round to
    the lattice": post-processing of the continuous Gaussian mechanism on x
    itself, so every guarantee of the continuous mechanism (the analytic
    calibration, RDP, PLD) holds with the query's own sensitivity;
    :func:`vflsec.dp.gaussian_sigma` (``coordinates=d``) adds only the
    sampler's evaluation error and finite support
    (``PER_DRAW_LOG_RATIO``, ``SUPPORT_SIGMAS``; see ``vflsec.dp.lattice``).

    The integer noise is drawn in C++ (cpp/lattice_gaussian.hpp) from the
    ChaCha20 stream: rejection from a piecewise-uniform envelope with an
    exact integer alias table, one 64-bit word per trial on the fast path,
    OpenMP-threaded, bit-identical for any thread count with a seeded
    generator. The number of trials does not depend on the value drawn; the
    rare slow path (about 0.1-0.4% of values) and the table address do, weakly
    (see the C++ header), and nothing in the timing depends on ``x``.

    Inputs: ``x`` a numpy array, array-like or torch tensor (not modified);
    float32 and float64 keep their dtype, integers give float64, float16 gives
    float32; a CUDA tensor is released on the CPU and returned on its device.
    NaN/inf, bool/complex/object dtypes, ``sigma < 0`` and values too large for
    the lattice (``|x| >= 2^62 g``, i.e. beyond about ``2^41 sigma``) are
    errors; an empty ``x`` gives an empty result; ``sigma == 0`` gives an
    exact copy (no noise, no lattice: not a DP release).
    """
    if _cuda.is_cuda_tensor(x):
        device = x.device
        return add_gaussian_noise(x.detach().cpu(), sigma, generator=generator).to(device)
    # NaN/inf: the kernel counts them with the out-of-range values (one pass over x).
    arr, wrap_array = as_float_array(x, "x", allow_empty=True, check_finite=False)
    # A 0-d input (a scalar, np.float64, a 0-d array or tensor) gives a 0-d
    # result, not shape (1,).
    zero_d = np.ndim(x) == 0

    def wrap(result: np.ndarray) -> Any:
        out = wrap_array(result)
        return out.reshape(()) if zero_d else out
    sigma = _check_sigma(sigma, arr.dtype)
    gen = _resolve_generator(generator)
    out = np.empty_like(arr, order="C")
    if arr.size == 0:
        return wrap(out)
    if sigma == 0.0:
        _require_finite(arr)
        out[...] = arr
        return wrap(out)
    if sigma < _MIN_SIGMA:
        raise ValueError(f"sigma={sigma!r} is too small for the lattice release (minimum 2^-1000)")
    e, scale = _lattice_parameters(sigma)
    table = _lattice_table(scale)
    bad = gen._core_gen.add_lattice_gaussian(table, arr.reshape(-1), out.reshape(-1), e)
    if bad:
        _require_finite(arr)
        raise ValueError(
            f"{bad} values of x are too large to release with sigma={sigma:g} (|x| must stay below "
            f"2^62 lattice steps, 2^{_RANGE_BITS + e} = {_power_of_two_text(_RANGE_BITS + e)}, and x + noise "
            f"must stay finite in {arr.dtype}); rescale x or clip it to a bounded range first")
    return wrap(out)


def _require_finite(arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():
        raise ValueError("x contains NaN or infinite values")


def lattice_gaussian(shape: Any, sigma: float, *, generator: Optional[NoiseGenerator] = None) -> np.ndarray:
    """The integer noise ``Z ~ round(s N(0, 1))``, ``s = sigma / lattice_spacing(sigma)``, of
    :func:`add_gaussian_noise` (int64; ``g * Z`` is the noise that function adds)."""
    shape = check_shape(shape, "shape")
    sigma = check_real(sigma, "sigma", low=0.0, low_inclusive=False)
    if sigma < _MIN_SIGMA:
        raise ValueError(f"sigma={sigma!r} is too small for the lattice release (minimum 2^-1000)")
    gen = _resolve_generator(generator)
    out = np.empty(math.prod(shape), dtype=np.int64)
    if out.size:
        gen._core_gen.fill_lattice_gaussian(_lattice_table(_lattice_parameters(sigma)[1]), out)
    return out.reshape(shape)


def _exact_sigma(sigma: Any) -> Fraction:
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real):
        raise TypeError(f"sigma must be a real number, got {type(sigma).__name__}")
    if isinstance(sigma, numbers.Rational):
        exact = Fraction(int(sigma.numerator), int(sigma.denominator))
    else:
        value = float(sigma)
        if not math.isfinite(value):
            raise ValueError(f"sigma must be finite, got {value}")
        exact = Fraction(value)
    if exact < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    if exact > _DISCRETE_SIGMA_MAX:
        raise ValueError(f"sigma must be <= 2**52 for int64 discrete Gaussian samples, got {sigma}")
    return exact


def discrete_gaussian(shape: Any, sigma: Any, *, generator: Optional[NoiseGenerator] = None) -> np.ndarray:
    """Exact discrete Gaussian N_Z(0, sigma^2) samples as an int64 array.

    P[X = x] is proportional to exp(-x^2 / (2 sigma^2)) over the integers,
    sampled exactly (Canonne, Kamath & Steinke, NeurIPS 2020) with integer
    arithmetic: ``sigma`` (float, int or fractions.Fraction) is converted to an
    exact rational and squared exactly. ``sigma == 0`` gives zeros (the limit
    distribution, a point mass at 0). Rejection sampling makes the running
    time depend on the output (a timing side channel: Jin et al., IEEE S&P
    2022); the samples themselves are exact.

    The sampler runs in C++ on OpenMP threads (cpp/discrete_gaussian.hpp)
    whenever the exact parameters fit in 512 bits: every float sigma from
    2^-150 up to the 2^52 maximum, and rationals of moderate size; others use
    the slower pure-Python sampler (same distribution). Each
    chunk of 64 samples draws from its own reserved block range of the
    generator's stream (then a per-chunk overflow stream), so a seeded
    generator gives the same samples for any thread count.

    One call draws at most ``DISCRETE_GAUSSIAN_MAX_SAMPLES`` (2^31) samples,
    or ``DISCRETE_GAUSSIAN_MAX_PYTHON_SAMPLES`` (2^20) on the pure-Python
    sampler; larger requests raise ``ValueError``.
    """
    shape = check_shape(shape, "shape")
    sigma_exact = _exact_sigma(sigma)
    gen = _resolve_generator(generator)
    total = math.prod(shape)
    if total == 0 or sigma_exact == 0:
        return np.zeros(shape, dtype=np.int64)
    sigma2 = sigma_exact * sigma_exact
    if total > DISCRETE_GAUSSIAN_MAX_SAMPLES:
        raise ValueError(f"discrete_gaussian draws at most {DISCRETE_GAUSSIAN_MAX_SAMPLES} samples per call "
                         f"(2^31: 16 GiB of int64), got shape {shape} ({total} samples); draw in chunks")
    if _dg.native_parameters(sigma2) is None:
        # Parameters wider than 512 bits: the exact pure-Python sampler
        # (a Python int per sample, about 10^5 samples/s).
        if total > DISCRETE_GAUSSIAN_MAX_PYTHON_SAMPLES:
            raise ValueError(
                f"sigma={sigma} has a rational form wider than the native sampler's 512 bits; the pure-Python "
                f"sampler draws at most {DISCRETE_GAUSSIAN_MAX_PYTHON_SAMPLES} samples per call, got {total} "
                "(too many; round sigma to a float or draw in chunks)")
        out = _dg.sample_discrete_gaussian(gen, total, sigma2)
    else:
        native = _dg.sample_discrete_gaussian_native(gen, total, sigma2)
        assert native is not None
        out = native
    return out.reshape(shape)

