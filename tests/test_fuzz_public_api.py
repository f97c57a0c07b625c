"""Fuzzing the public numerical API (issue 18): arbitrary arrays (dtypes,
shapes including empty and 0-d, NaN/inf, huge and tiny values) and arbitrary
parameters (negative, zero, huge ints, NaN, wrong types). Every call must either
return or raise ValueError / TypeError with a message: any other exception is a
failure, and a crash ends the test run. Sizes stay small so CI's budget holds
(a thousand cases per function, about half a minute in all)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from vflsec import dp, kernels  # noqa: E402
from vflsec.kernels import NoiseGenerator  # noqa: E402

# hypothesis itself warns when it casts generated floats into float16 arrays
# slow: a thousand hypothesis cases per function (.ci/sanitize runs them against the instrumented build).
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")]

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow],
                derandomize=True)

_DTYPES = st.sampled_from([np.float64, np.float32, np.float16, np.int64, np.int32, np.uint8, np.bool_,
                           np.complex128])
_FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64)
_ELEMENTS = st.one_of(_FLOATS, st.sampled_from([0.0, -0.0, 1e308, -1e308, 1e-308, 5e-324, 1e170, 1.0]))


def _elements(dt):
    """Elements of dtype ``dt``: the float64 extremes for 64-bit floats (and complex), every value and
    the extremes of its own width for a narrower float (a float64 value it cannot hold is refused by
    hypothesis under numpy 1.x), and hypothesis's own for integers and booleans."""
    dtype = np.dtype(dt)
    if dtype.kind == "f" and dtype.itemsize < 8:
        top = float(np.finfo(dtype).max)
        return st.one_of(hnp.from_dtype(dtype, allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -0.0, 1.0, top, -top, float(np.finfo(dtype).tiny)]))
    return _ELEMENTS if dtype.kind in "fc" else None


def _arrays(max_dims: int = 3, max_side: int = 6):
    return _DTYPES.flatmap(lambda dt: hnp.arrays(
        dt, hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=max_side), elements=_elements(dt)))


_REALS = st.one_of(_FLOATS, st.integers(min_value=-(2**1100), max_value=2**1100),
                   st.sampled_from([0, 1, -1, 0.5, 1e-300, 1e300, 2**64]))
_ANY = st.one_of(_REALS, st.none(), st.text(max_size=3), st.booleans(), st.lists(st.integers(), max_size=2))


def _call(fn, *args, **kwargs):
    """The call returns, or raises ValueError / TypeError with a message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except (ValueError, TypeError) as exc:
            assert str(exc), f"{fn.__name__} raised {type(exc).__name__} without a message"
            return None


@FUZZ
@given(x=_arrays(), y=st.one_of(st.none(), _arrays()), squared=st.booleans())
def test_pairwise_distances(x, y, squared):
    out = _call(kernels.pairwise_distances, x, y, squared=squared)
    if out is not None:
        assert out.ndim == 2


@FUZZ
@given(x=_arrays())
def test_pairwise_distance_stats(x):
    _call(kernels.pairwise_distance_stats, x)


@FUZZ
@given(x=_arrays(max_side=8), c=_ANY, m=_ANY, max_iter=st.one_of(st.integers(-2, 50), _ANY))
def test_fuzzy_cmeans(x, c, m, max_iter):
    _call(kernels.fuzzy_cmeans, x, c, m=m, max_iter=max_iter, seed=0)


@FUZZ
@given(x=_arrays(), sigma=_ANY)
def test_add_gaussian_noise(x, sigma):
    out = _call(kernels.add_gaussian_noise, x, sigma, generator=NoiseGenerator(seed=1))
    if out is not None:
        assert np.shape(out) == np.shape(x)


_SMALL_SHAPES = st.one_of(st.integers(-3, 50), st.tuples(st.integers(-1, 5), st.integers(-1, 5)),
                         st.lists(st.integers(-2, 6), max_size=3), st.none(), st.text(max_size=2), _FLOATS)


@FUZZ
@given(shape=_SMALL_SHAPES, sigma=_ANY)
def test_noise_samplers(shape, sigma):
    gen = NoiseGenerator(seed=2)
    _call(kernels.gaussian_noise, shape, sigma, generator=gen)
    _call(kernels.lattice_gaussian, shape, sigma, generator=gen)
    if isinstance(shape, int) and shape <= 50:
        _call(kernels.discrete_gaussian, shape, sigma, generator=gen)


@FUZZ
@given(sigma=_ANY)
# Found by the sanitizer step's run (which test modules are loaded changes the examples: hypothesis
# also draws constants from the code under test): within 0.39% of the float64 maximum the sigma
# rounded up to the lattice grid overflowed, an OverflowError.
@example(sigma=1.7941820154582881e308)
def test_lattice_parameters(sigma):
    _call(kernels.lattice_spacing, sigma)
    _call(kernels.lattice_sigma, sigma)


@FUZZ
@given(epsilon=_ANY, delta=_ANY, sensitivity=_ANY, method=st.sampled_from(["analytic", "classic", "other"]))
def test_gaussian_calibration(epsilon, delta, sensitivity, method):
    sigma = _call(dp.gaussian_sigma, epsilon, delta, sensitivity, method=method)
    if sigma is not None:
        assert math.isfinite(sigma) and sigma > 0
    _call(dp.gaussian_delta, epsilon, sensitivity, sigma if sigma is not None else 1.0)


@FUZZ
@given(loss=st.sampled_from(["logistic", "least_squares", "svm", "poisson", "nope"]), lr=_ANY, epochs=_ANY,
       k=_ANY, batch=st.one_of(st.integers(-1, 100), _ANY))
def test_hdp_sensitivities(loss, lr, epochs, k, batch):
    out = _call(dp.hdp_sensitivities, loss=loss, lr=lr, epochs=epochs, steps=10, batch_size=batch, k=k,
                n_parties=2, y_max=10.0)
    if out is not None:
        for value in (getattr(out, name) for name in dir(out) if not name.startswith("_")):
            if isinstance(value, float):
                assert math.isfinite(value)


@pytest.mark.parametrize("shape, message", [(2**31 + 1, "at most 2\\^31 per call"),
                                            ((2**16, 2**16), "at most 2\\^31 per call"),
                                            ((3, 2**62), "beyond numpy's index range"),
                                            ((2**40, 2**40, 0), "beyond numpy's index range")])
def test_samplers_refuse_oversized_requests_before_touching_memory(shape, message):
    gen = NoiseGenerator(seed=3)
    for fn in (kernels.gaussian_noise, kernels.lattice_gaussian):
        with pytest.raises(ValueError, match=message):
            fn(shape, 1.0, generator=gen)
    assert kernels.gaussian_noise((0, 5), 1.0, generator=gen).shape == (0, 5)
