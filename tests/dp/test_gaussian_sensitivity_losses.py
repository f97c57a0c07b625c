import math
import warnings

import numpy as np
import pytest

from vflsec.dp import (
    LOSSES,
    LossConstants,
    PrivacyWarning,
    gaussian_delta,
    gaussian_sigma,
    hdp_sensitivities,
    loss_constants,
    loss_gradient,
    loss_value,
)

# ---------------------------------------------------------------- Gaussian

def _lattice(per_unit_sigma, sensitivity=1.0):
    """What gaussian_sigma returns for a continuous-mechanism sigma of
    ``per_unit_sigma * Delta``: that sigma rounded up to the release's grid
    (256 steps per octave)."""
    from vflsec.kernels import lattice_sigma

    return lattice_sigma(per_unit_sigma * sensitivity)


def test_classic_formula_value():
    # sqrt(2 ln(1.25 / 1e-5)) = sqrt(2 * 11.736069016284437) = 4.844805...;
    # the release rounds sigma up to its grid (256 steps per octave).
    classic = math.sqrt(2 * 11.736069016284437) / 0.5
    sigma = gaussian_sigma(0.5, 1e-5, method="classic")
    assert sigma == pytest.approx(_lattice(classic), rel=1e-12)
    assert classic <= sigma <= classic * (1 + 2.0**-8)
    assert gaussian_sigma(0.5, 1e-5, 3.0, method="classic") == pytest.approx(_lattice(9.6896102, 3.0), rel=1e-6)
    # delta = 0.01: sqrt(2 ln 125) = sqrt(9.656627474604601) = 3.1075114...
    assert gaussian_sigma(0.1, 0.01, method="classic") == pytest.approx(_lattice(31.075114), rel=1e-6)


def test_classic_warns_for_epsilon_at_least_one():
    with pytest.warns(PrivacyWarning, match="epsilon < 1"):
        gaussian_sigma(1.0, 0.01, method="classic")
    with pytest.warns(UserWarning):
        gaussian_sigma(10.0, 0.01, method="classic")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gaussian_sigma(0.99, 0.01, method="classic")
        gaussian_sigma(10.0, 0.01)  # analytic: valid everywhere, no warning


@pytest.mark.parametrize("epsilon", [1e-3, 0.01, 0.1, 0.5, 0.9, 1.0, 3.0, 10.0, 100.0, 1e3])
@pytest.mark.parametrize("delta", [1e-12, 1e-10, 1e-5, 0.01, 0.5])
def test_analytic_sigma_lies_on_exact_delta_curve(epsilon, delta):
    # The curve of the continuous mechanism at the lattice release's effective
    # sensitivity Delta + g (one coordinate; vflsec.dp.lattice).
    from vflsec.kernels import lattice_sigma, lattice_spacing

    sigma = gaussian_sigma(epsilon, delta, 2.5)
    assert np.isfinite(sigma) and sigma > 0 and lattice_sigma(sigma) == sigma  # on the release's grid
    # never more delta than requested (the release is the continuous mechanism
    # on x itself: no rounding term) ...
    assert gaussian_delta(epsilon, sigma, 2.5) <= delta
    # ... and the grid's next sigma down (256 steps per octave) leaks more
    g = lattice_spacing(sigma)
    s = sigma / g
    below = (s - 2.0**12) * g if s > 2.0**20 else (2.0**21 - 2.0**12) * g / 2
    assert gaussian_delta(epsilon, below, 2.5) > delta


def test_exact_delta_matches_high_precision_reference():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 60

    def reference(eps, sigma, sens):
        eps, sigma, sens = mpmath.mpf(eps), mpmath.mpf(sigma), mpmath.mpf(sens)
        a = sens / (2 * sigma) - eps * sigma / sens
        b = -sens / (2 * sigma) - eps * sigma / sens
        return mpmath.ncdf(a) - mpmath.exp(eps) * mpmath.ncdf(b)

    for eps, sigma, sens in [(1e-3, 5000.0, 1.0), (0.5, 3.0, 1.0), (1.0, 3.7, 1.0),
                             (10.0, 0.7, 1.0), (1e3, 0.026, 1.0), (200.0, 2.0, 20.0)]:
        ref = float(reference(eps, sigma, sens))
        assert gaussian_delta(eps, sigma, sens) == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("epsilon", [1e-3, 0.01, 0.1, 0.5, 0.99])
@pytest.mark.parametrize("delta", [1e-10, 1e-5, 0.01])
def test_analytic_needs_less_noise_than_classic_below_one(epsilon, delta):
    assert gaussian_sigma(epsilon, delta) < gaussian_sigma(epsilon, delta, method="classic")


def test_classic_sigma_is_private_where_valid():
    # The classic calibration is a valid guarantee for epsilon < 1: its exact delta is smaller.
    for eps in (0.01, 0.3, 0.9):
        sigma = gaussian_sigma(eps, 1e-5, method="classic")
        assert gaussian_delta(eps, sigma) < 1e-5


def test_sigma_monotone_and_linear_in_sensitivity():
    eps_grid = np.logspace(-3, 3, 25)
    sig = [gaussian_sigma(e, 1e-5) for e in eps_grid]
    assert np.all(np.diff(sig) < 0)
    delta_grid = np.logspace(-12, math.log10(0.5), 25)
    sig = [gaussian_sigma(0.7, d) for d in delta_grid]
    assert np.all(np.diff(sig) < 0)
    # Linear up to the release's sigma grid (256 steps per octave) and lattice spacing.
    assert gaussian_sigma(0.7, 1e-5, 7.0) == pytest.approx(7.0 * gaussian_sigma(0.7, 1e-5), rel=2.0**-7)


def test_known_analytic_value():
    # Balle & Wang (2018): eps=1, delta=1e-5, Delta=1 gives sigma ~ 3.73 (classic 4.84).
    # (3.7344: rounded up to the release's sigma grid, 256 steps per octave)
    assert gaussian_sigma(1.0, 1e-5) == pytest.approx(3.7306, rel=2.0**-8)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(epsilon=0.0, delta=0.1), ValueError, "epsilon"),
    (dict(epsilon=-1.0, delta=0.1), ValueError, "epsilon"),
    (dict(epsilon=math.inf, delta=0.1), ValueError, "epsilon"),
    (dict(epsilon=math.nan, delta=0.1), ValueError, "epsilon"),
    (dict(epsilon=1.0, delta=0.0), ValueError, "delta"),
    (dict(epsilon=1.0, delta=1.0), ValueError, "delta"),
    (dict(epsilon=1.0, delta=-0.1), ValueError, "delta"),
    (dict(epsilon=1.0, delta=0.1, sensitivity=0.0), ValueError, "sensitivity"),
    (dict(epsilon=1.0, delta=0.1, sensitivity=math.inf), ValueError, "sensitivity"),
    (dict(epsilon=1.0, delta=0.1, method="laplace"), ValueError, "method"),
    (dict(epsilon="1", delta=0.1), TypeError, "epsilon"),
    (dict(epsilon=1.0, delta=None), TypeError, "delta"),
    (dict(epsilon=1.0, delta=0.1, method=None), TypeError, "method"),
])
def test_gaussian_sigma_bad_inputs(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        gaussian_sigma(**kwargs)


def test_gaussian_delta_bad_inputs():
    with pytest.raises(ValueError, match="sigma"):
        gaussian_delta(1.0, 0.0)
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_delta(-1.0, 1.0)


# ---------------------------------------------------------------- sensitivities

def test_logistic_sensitivities_by_hand():
    # logistic (L=1, bt=0.25, by=1, ky=1), eta=0.1, e=10, T=100, b=3200, k=1
    # passive: 4*1*100*100*0.01/3200 = 0.125; 8*1*1*100*0.1/3200 = 0.025; 4*1*10 = 40
    # active: jump = 0.25*1 + 1*1 = 1.25
    #   4*0.0625*1*100*100*0.01/3200 = 0.0078125; 8*1.25*0.25*1*100*0.1/3200 = 0.0078125;
    #   4*1.5625*10 = 62.5
    # Two coupled parties (rho = sqrt(2), see vflsec.dp.sensitivity): the passive
    # terms scale by rho^2, rho, 1 and the active ones by rho^4, rho^2, 1.
    s = hdp_sensitivities(loss="logistic", lr=0.1, epochs=10, steps=100, batch_size=3200, k=1.0, n_parties=2)
    r = math.sqrt(2.0)
    assert s.passive == pytest.approx(math.sqrt(0.125 * r**2 + 0.025 * r + 40.0), rel=1e-12)
    assert s.active == pytest.approx(math.sqrt(0.0078125 * r**4 + 0.0078125 * r**2 + 62.5), rel=1e-12)
    # With one party's row norm (the paper's Lemma 3/4) the values would be smaller:
    assert s.passive > math.sqrt(0.125 + 0.025 + 40.0) and s.active > math.sqrt(0.0078125 + 0.0078125 + 62.5)
    s3 = hdp_sensitivities(loss="logistic", lr=0.1, epochs=10, steps=100, batch_size=3200, k=1.0, n_parties=3)
    assert s3.passive == pytest.approx(math.sqrt(0.125 * 3 + 0.025 * math.sqrt(3) + 40.0), rel=1e-12)
    assert s.constants == LossConstants("logistic", 1.0, 0.25, 1.0, 1.0)


def test_least_squares_sensitivities_by_hand():
    # L=6, bt=2, by=2, ky=3; eta=0.5, e=2, T=8, b=8, k=0.5
    # passive: 4*36*4*8*0.25/8 = 144; 8*0.5*6*4*0.5/8 = 6; 4*0.25*2 = 2  -> 152
    # active: jump = 2*0.5 + 2*3 = 7; 4*4*36*4*8*0.25/8 = 576; 8*7*2*6*4*0.5/8 = 168;
    #   4*49*2 = 392 -> 1136
    #   (two parties: terms times rho^2 / rho / 1 and rho^4 / rho^2 / 1, rho = sqrt 2;
    #   lr = 0.5 is exactly the limit 2 / (2 * beta_theta))
    s = hdp_sensitivities(loss="least_squares", lr=0.5, epochs=2, steps=8, batch_size=8, k=0.5, n_parties=2)
    r = math.sqrt(2.0)
    assert s.passive == pytest.approx(math.sqrt(144.0 * 2 + 6.0 * r + 2.0), rel=1e-12)
    assert s.active == pytest.approx(math.sqrt(576.0 * 4 + 168.0 * 2 + 392.0), rel=1e-12)


def test_svm_sensitivities_by_hand():
    # L=2, bt=2, by=2, ky=1; eta=0.25, e=1, T=4, b=2, k=1
    # passive: 4*4*1*4*0.0625/2 = 2; 8*1*2*1*0.25/2 = 2; 4*1*1 = 4 -> 8
    # active: jump = 2 + 2 = 4; 4*4*4*1*4*0.0625/2 = 8; 8*4*2*2*0.25/2 = 16; 4*16*1 = 64 -> 88
    s = hdp_sensitivities(loss="svm", lr=0.25, epochs=1, steps=4, batch_size=2, k=1.0, n_parties=2)
    r = math.sqrt(2.0)
    assert s.passive == pytest.approx(math.sqrt(2.0 * 2 + 2.0 * r + 4.0), rel=1e-12)
    assert s.active == pytest.approx(math.sqrt(8.0 * 4 + 16.0 * 2 + 64.0), rel=1e-12)


def test_poisson_constants_and_sensitivities():
    c = loss_constants("poisson", k=1.0, y_max=5.0)  # two parties: |theta| <= 2
    e2 = math.exp(2.0)
    assert c.theta_bound == 2.0 and c.y_max == 5.0
    assert (c.L, c.beta_theta, c.beta_y, c.k_y) == pytest.approx((max(e2, 5.0), e2, 1.0, 5.0))
    c3 = loss_constants("poisson", k=0.5, y_max=20.0, n_parties=3)
    assert c3.theta_bound == 1.5 and c3.L == 20.0 and c3.beta_theta == pytest.approx(math.exp(1.5))
    # eta=0.1, e=1, T=3, b=10, k=1
    s = hdp_sensitivities(loss="poisson", lr=0.1, epochs=1, steps=3, batch_size=10, k=1.0, y_max=5.0, n_parties=2)
    L, bt = e2, e2
    jump = bt * 1.0 + 1.0 * 5.0
    r2 = 2.0  # rho^2 for two parties
    passive = math.sqrt(4 * L * L * r2 * 3 * 0.01 / 10 + 8 * 1 * L * math.sqrt(r2) * 0.1 / 10 + 4 * 1 * 1)
    active = math.sqrt(4 * bt * bt * r2**2 * L * L * 3 * 0.01 / 10 + 8 * jump * bt * r2 * L * 0.1 / 10
                       + 4 * jump**2)
    assert s.passive == pytest.approx(passive, rel=1e-12)
    assert s.active == pytest.approx(active, rel=1e-12)
    # constants can be passed directly
    s2 = hdp_sensitivities(loss=c, lr=0.1, epochs=1, steps=3, batch_size=10, k=1.0, n_parties=2)
    assert s2.active == s.active


def test_sensitivity_grows_with_epochs_and_lr():
    base = dict(loss="logistic", batch_size=100, k=1.0, n_parties=2)
    a = hdp_sensitivities(lr=0.1, epochs=5, steps=50, **base)
    b = hdp_sensitivities(lr=0.1, epochs=10, steps=100, **base)
    c = hdp_sensitivities(lr=1.0, epochs=10, steps=100, **base)
    assert a.active < b.active < c.active
    assert a.passive < b.passive < c.passive


@pytest.mark.parametrize("override, exc, match", [
    (dict(loss="hinge"), ValueError, "logistic, least_squares, svm, poisson"),
    (dict(loss=3), TypeError, "loss"),
    (dict(lr=0.0), ValueError, "lr"),
    (dict(lr=-0.1), ValueError, "lr"),
    (dict(lr=math.nan), ValueError, "lr"),
    (dict(lr=9.0), ValueError, "lr"),           # > 2 / beta_theta = 8 for logistic
    (dict(lr=4.5), ValueError, "n_parties"),     # > 2 / (2 beta_theta) = 4 for two parties
    (dict(n_parties=1), ValueError, "n_parties"),
    (dict(penalty="ridge"), ValueError, "penalty"),
    (dict(k=0.0), ValueError, "k"),
    (dict(batch_size=0), ValueError, "batch_size"),
    (dict(batch_size=3.0), TypeError, "batch_size"),
    (dict(epochs=0), ValueError, "epochs"),
    (dict(steps=0), ValueError, "steps"),
    (dict(steps=15), ValueError, "steps"),       # not a multiple of epochs=10
    (dict(y_max=3.0), ValueError, "y_max"),
    (dict(loss="poisson"), ValueError, "y_max"),
])
def test_hdp_sensitivities_bad_inputs(override, exc, match):
    kwargs = dict(loss="logistic", lr=0.1, epochs=10, steps=100, batch_size=32, k=1.0, n_parties=2)
    kwargs.update(override)
    with pytest.raises(exc, match=match):
        hdp_sensitivities(**kwargs)


def test_loss_constants_bad_inputs():
    with pytest.raises(TypeError, match="no parameters"):
        loss_constants("logistic", k=1.0)
    with pytest.raises(ValueError, match="y_max"):
        loss_constants("poisson", k=1.0)
    with pytest.raises(ValueError, match="y_max"):
        loss_constants("poisson", k=1.0, y_max=-2.0)
    with pytest.raises(TypeError, match="unexpected"):
        loss_constants("poisson", k=1.0, y_max=2.0, phi=3.0)
    with pytest.raises(ValueError, match="overflow"):
        loss_constants("poisson", k=400.0, y_max=2.0)


# ---------------------------------------------------------------- losses

@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_matches_finite_difference(loss):
    rng = np.random.default_rng(0)
    theta = rng.uniform(-2, 2, 200)
    if loss in ("logistic", "svm"):
        y = rng.choice([-1.0, 1.0], 200)
    elif loss == "poisson":
        y = rng.poisson(2.0, 200).astype(float)
    else:
        y = rng.normal(size=200)
    h = 1e-6
    numeric = (loss_value(loss, theta + h, y) - loss_value(loss, theta - h, y)) / (2 * h)
    np.testing.assert_allclose(loss_gradient(loss, theta, y), numeric, rtol=1e-6, atol=1e-6)


def test_closed_forms():
    theta = np.array([-1.0, 0.0, 0.5, 2.0])
    y = np.array([1.0, -1.0, 1.0, -1.0])
    np.testing.assert_allclose(loss_gradient("logistic", theta, y), -y / (1 + np.exp(y * theta)))
    np.testing.assert_allclose(loss_value("logistic", theta, y), np.log1p(np.exp(-y * theta)))
    np.testing.assert_allclose(loss_gradient("least_squares", theta, y), -2 * (y - theta))
    np.testing.assert_allclose(loss_gradient("svm", theta, y), -2 * y * np.maximum(0, 1 - y * theta))
    counts = np.array([0.0, 1.0, 3.0, 2.0])
    np.testing.assert_allclose(loss_gradient("poisson", theta, counts), np.exp(theta) - counts)


def test_logistic_is_stable_for_extreme_theta():
    theta = np.array([-1e4, -800.0, 800.0, 1e4])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        g = loss_gradient("logistic", theta, y)
        v = loss_value("logistic", theta, y)
    np.testing.assert_allclose(g, [-1.0, -1.0, 1.0, 1.0])
    np.testing.assert_allclose(v, [1e4, 800.0, 800.0, 1e4])
    # and the gradient stays within the Lipschitz constant L = 1
    assert np.all(np.abs(loss_gradient("logistic", np.linspace(-50, 50, 101), np.ones(101))) <= 1.0)


def test_poisson_theta_bound_clips():
    c = loss_constants("poisson", k=1.0, y_max=4.0)
    theta = np.array([-50.0, 0.0, 50.0])
    y = np.array([0.0, 4.0, 4.0])
    g = loss_gradient("poisson", theta, y, theta_bound=c.theta_bound)
    np.testing.assert_allclose(g, [math.exp(-2.0), -3.0, math.exp(2.0) - 4.0])
    assert np.all(np.abs(g) <= c.L)


def test_dtype_and_torch_preserved():
    theta32 = np.array([0.1, -0.2], dtype=np.float32)
    out = loss_gradient("logistic", theta32, np.array([1, -1]))
    assert out.dtype == np.float32
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.1, -0.2], dtype=torch.float64)
    out_t = loss_gradient("least_squares", t, torch.tensor([1.0, 0.0], dtype=torch.float64))
    assert isinstance(out_t, torch.Tensor)
    np.testing.assert_allclose(out_t.numpy(), [-1.8, -0.4])


def test_loss_bad_inputs():
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        loss_gradient("logistic", [0.1, 0.2], [0, 1])
    with pytest.raises(ValueError, match=r"\{-1, \+1\}"):
        loss_value("svm", [0.1, 0.2], [1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        loss_gradient("poisson", [0.1], [-1])
    with pytest.raises(ValueError, match="shape"):
        loss_gradient("least_squares", [0.1, 0.2], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        loss_gradient("least_squares", [np.nan], [1.0])
    with pytest.raises(ValueError, match="valid losses"):
        loss_gradient("huber", [0.1], [1.0])
    with pytest.raises(ValueError, match="theta_bound"):
        loss_gradient("poisson", [0.1], [1.0], theta_bound=-1.0)
