"""VFL-AFE and the baseline defenses, tested hook by hook."""
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from scipy.spatial.distance import pdist  # noqa: E402

from vflsec.bench.splitnn_afe_baseline import afe_class, numpy_fuzzy_cmeans  # noqa: E402
from vflsec.splitnn.defenses import (  # noqa: E402
    VFLAFE,
    BatchInfo,
    DefenseContext,
    GaussianEmbeddingNoise,
    GaussianGradientNoise,
    GradientSparsification,
)

BATCH = BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(4, dtype=np.int64))


def _afe(impl="vflsec", **kw):
    """VFL-AFE set up for a 2-class job; impl "baseline" is the benchmark's
    torch.cdist / numpy-FCM subclass (vflsec.bench.splitnn_afe_baseline)."""
    kw.setdefault("seed", 0)
    d = afe_class(impl)(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classic calibration warns for epsilon >= 1
        d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=3))
    return d


@pytest.mark.parametrize("impl", ["vflsec", "baseline"])
def test_clip_bounds_norms(impl):
    d = _afe(t=0.7, rescale=False, adjust=False, impl=impl)
    h = torch.randn(50, 8) * torch.linspace(0.01, 5, 50)[:, None]
    d.transform_embedding("p", h, BATCH)
    clean = d._clean["p"]
    norms = torch.linalg.vector_norm(clean, dim=1)
    assert float(norms.max()) <= 0.7 * (1 + 1e-6)
    small = torch.linalg.vector_norm(h, dim=1) <= 0.7
    assert torch.allclose(clean[small], h[small])  # rows inside the ball are untouched


@pytest.mark.parametrize("impl", ["vflsec", "baseline"])
def test_rescale_sets_estimated_diameter_to_2t(impl):
    t = 1.3
    d = _afe(t=t, rescale=True, adjust=False, impl=impl)
    h = torch.randn(64, 16, dtype=torch.float64) * 0.1
    d.transform_embedding("p", h, BATCH)
    dist = pdist(d._clean["p"].detach().numpy())
    assert dist.mean() + 3 * dist.std() == pytest.approx(2 * t, rel=1e-6)
    assert d.max_distance_estimate(d._clean["p"]) == pytest.approx(2 * t, rel=1e-6)


def test_rescale_factor_is_constant_for_autograd():
    d = _afe(t=1.0, rescale=True, adjust=False)
    h = (torch.randn(20, 4, dtype=torch.float64) * 0.1).requires_grad_(True)
    d.transform_embedding("p", h, BATCH)
    d._clean["p"].sum().backward()
    # Inside the ball clip is the identity, so d/dh sum(h * s) = s for every entry.
    assert torch.allclose(h.grad, torch.full_like(h, d.last_scale_["p"]))


@pytest.mark.parametrize("impl", ["vflsec", "baseline"])
@pytest.mark.parametrize("calibration", ["classic", "analytic"])
def test_noise_std_matches_calibration(impl, calibration):
    from vflsec.dp import gaussian_sigma
    from vflsec.kernels import lattice_spacing

    t, eps, delta = 0.5, 2.0, 1e-2
    d = _afe(t=t, epsilon=eps, delta=delta, rescale=False, adjust=False, impl=impl, calibration=calibration)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classic calibration warns for epsilon >= 1
        assert d.noise_multiplier_ == gaussian_sigma(eps, delta, 1.0, method=calibration)
        # The release is calibrated for sensitivity 2t over one embedding row (4 coordinates).
        expected = gaussian_sigma(eps, delta, 2 * t, method=calibration, coordinates=4)
    # Both are on the release's sigma grid (256 steps per octave): equal to the
    # continuous calibration up to that rounding (<= 0.39%).
    if calibration == "classic":
        assert d.noise_multiplier_ == pytest.approx(math.sqrt(2 * math.log(1.25 / delta)) / eps, rel=2.0**-8)
    assert d.release_sigma(4) == expected and expected == pytest.approx(2 * t * d.noise_multiplier_, rel=2.0**-7)
    h = torch.zeros(100_000, 4)
    out = d.transform_embedding("p", h, BATCH)
    k = out.double() / lattice_spacing(expected)
    assert torch.equal(k, torch.round(k))  # released on the lattice
    noise = (out - d._clean["p"]).double()
    # std of the sample std is ~ sigma / sqrt(2N) = 0.11% here; 1% is > 9 standard errors.
    assert float(noise.std()) == pytest.approx(expected, rel=0.01)
    assert abs(float(noise.mean())) < 5 * expected / math.sqrt(noise.numel())


def test_noise_secure_by_default_and_seeded_on_opt_in():
    a, b = _afe(seed=None, rescale=False, adjust=False), _afe(seed=None, rescale=False, adjust=False)
    h = torch.zeros(10, 3)
    assert not torch.equal(a.transform_embedding("p", h, BATCH), b.transform_embedding("p", h, BATCH))
    assert a._generator("p").is_secure
    c, e = _afe(seed=7, rescale=False, adjust=False), _afe(seed=7, rescale=False, adjust=False)
    assert torch.equal(c.transform_embedding("p", h, BATCH), e.transform_embedding("p", h, BATCH))
    # different parties draw different streams from the same seed
    assert not torch.equal(c.transform_embedding("q", h, BATCH), e.transform_embedding("p", h, BATCH))


def _two_blobs_with_ambiguous(rng):
    a = rng.normal([5.0, 0.0], 0.2, size=(20, 2))
    b = rng.normal([-5.0, 0.0], 0.2, size=(20, 2))
    middle = rng.normal([0.0, 0.0], 0.05, size=(6, 2))
    return np.vstack([a, b, middle]), np.r_[np.zeros(20), np.ones(20), np.full(6, -1)]


@pytest.mark.parametrize("impl", ["vflsec", "baseline"])
def test_fcm_mask_keeps_only_confident_samples(impl):
    rng = np.random.default_rng(0)
    g, truth = _two_blobs_with_ambiguous(rng)
    d = _afe(adjust=True, confidence_threshold=0.8, impl=impl)
    labels, confidence = d.cluster_gradients(torch.from_numpy(g), seed=3)
    keep = confidence >= 0.8
    assert keep[:40].all() and not keep[40:].any()
    # kept labels agree with the blobs (up to the cluster permutation)
    assert len(set(labels[:20])) == 1 and len(set(labels[20:40])) == 1 and labels[0] != labels[20]
    # adjust_loss records the kept fraction and uses only those
    h = torch.randn(len(g), 4, requires_grad=True)
    d._clean["p"] = h
    loss = d.adjust_loss("p", h, torch.from_numpy(g), BatchInfo(0, 0, 0, np.arange(len(g))))
    assert loss is not None and loss.requires_grad
    assert d.last_kept_fraction_["p"] == pytest.approx(40 / 46)


def test_numpy_fcm_agrees_with_kernel_on_separated_data():
    from vflsec.kernels import fuzzy_cmeans

    g, _ = _two_blobs_with_ambiguous(np.random.default_rng(1))
    lab_np, conf_np = numpy_fuzzy_cmeans(g, 2, seed=0)
    res = fuzzy_cmeans(g, 2, seed=0)
    same = (lab_np == np.asarray(res.labels)).all() or (lab_np == 1 - np.asarray(res.labels)).all()
    assert same
    assert np.allclose(np.sort(conf_np), np.sort(np.asarray(res.confidence)), atol=1e-3)


def test_contrastive_loss_increases_inter_class_distance():
    d = _afe(t=1.0, adjust=True, margin=2.0)
    rng = np.random.default_rng(0)
    labels = np.r_[np.zeros(10, dtype=int), np.ones(10, dtype=int)]
    h0 = torch.tensor(rng.normal(0, 0.3, size=(20, 4)) + labels[:, None] * 0.1, requires_grad=True)
    h = h0.detach().clone().requires_grad_(True)

    def gaps(x):
        x = x.detach()
        inter = torch.cdist(x[:10], x[10:]).mean()
        intra = (torch.cdist(x[:10], x[:10]).mean() + torch.cdist(x[10:], x[10:]).mean()) / 2
        return float(inter), float(intra)

    inter0, intra0 = gaps(h)
    opt = torch.optim.SGD([h], lr=0.2)
    for _ in range(50):
        opt.zero_grad()
        d.contrastive_loss(h, labels).backward()
        opt.step()
    inter1, intra1 = gaps(h)
    assert inter1 > 1.3 * inter0
    assert intra1 < intra0


def test_kl_regularizer_is_differentiable_and_small_for_gaussian_like_distances():
    d = _afe(rescale=True, kl_weight=1.0)
    h = torch.randn(200, 32, dtype=torch.float64, requires_grad=True)
    kl = d.kl_to_gaussian(h, np.random.default_rng(0))
    kl.backward()
    assert torch.isfinite(h.grad).all() and float(kl.detach()) < 0.05
    # a strongly non-Gaussian distance distribution (two far clusters) scores higher
    far = torch.cat([torch.zeros(190, 32), torch.full((10, 32), 10.0)]).double() + 0.01 * torch.randn(200, 32).double()
    assert float(d.kl_to_gaussian(far, np.random.default_rng(0))) > 10 * float(kl.detach())


def test_privacy_spent_composes_over_epochs():
    from vflsec.dp.accounting import composed_gaussian
    from vflsec.dp.lattice import lattice_noise_multiplier

    d = _afe(epsilon=2.0, rescale=False, adjust=False)
    with pytest.raises(RuntimeError, match="embedding width"):
        d.privacy_spent()  # the release's calibration depends on the width
    d.transform_embedding("p", torch.zeros(5, 8), BATCH)
    spent = d.privacy_spent()
    # The lattice release's effective multiplier, with the 8 draws per release.
    z = lattice_noise_multiplier(d.release_sigma(8), 2 * d.t)
    assert z == d.noise_multiplier_for(8) and z == pytest.approx(d.noise_multiplier_, rel=1e-4)
    ref = composed_gaussian(z, 3, 1e-2)
    assert spent.releases == 3 and spent.epsilon == pytest.approx(ref.epsilon)
    assert spent.epsilon > spent.epsilon_per_release


def test_variants():
    assert _afe(rescale=False, adjust=False).variant == "vanilla"
    assert _afe(rescale=True, adjust=False).variant == "R"
    assert _afe(rescale=False, adjust=True).variant == "D"
    assert _afe(rescale=True, adjust=True).variant == "full"


def test_rescale_shrink_false_never_shrinks():
    # Rows on the sphere of radius t in two antipodal clusters: every distance
    # is about 0 or 2t, so mu + 3 sigma exceeds the true diameter 2t and the
    # paper's factor is below 1.
    t = 2.0
    rng = np.random.default_rng(3)
    centre = np.zeros(8)
    centre[0] = 1.0
    rows = np.vstack([centre + 0.01 * rng.standard_normal((40, 8)), -centre + 0.01 * rng.standard_normal((8, 8))])
    rows = t * rows / np.linalg.norm(rows, axis=1, keepdims=True)
    h = torch.from_numpy(rows)
    paper = _afe(t=t, rescale=True, adjust=False)
    paper.transform_embedding("p", h, BATCH)
    assert paper.last_scale_["p"] < 0.95
    grow_only = _afe(t=t, rescale=True, adjust=False, rescale_shrink=False)
    grow_only.transform_embedding("p", h, BATCH)
    assert grow_only.last_scale_["p"] == 1.0
    assert torch.equal(grow_only._clean["p"], paper.clip(h))
    # Small embeddings are still enlarged to the estimated diameter 2t.
    grow_only.transform_embedding("p", h * 0.1, BATCH)
    assert grow_only.last_scale_["p"] == pytest.approx(paper.last_scale_["p"] * 10, rel=1e-9)
    # The trace averages training batches of an epoch; inference batches (global_step -1) are left out.
    trace = grow_only.rescale_trace_["p"][0]
    assert trace["batches"] == 2
    assert trace["factor"] == pytest.approx((1.0 + grow_only.last_scale_["p"]) / 2)
    assert paper.rescale_trace_["p"][0]["estimate_over_max"] > 1.05
    grow_only.transform_embedding("p", h, BatchInfo(epoch=0, step=0, global_step=-1, indices=BATCH.indices))
    assert grow_only.rescale_trace_["p"][0]["batches"] == 2


@pytest.mark.parametrize("kw, exc", [
    ({"t": 0}, ValueError), ({"t": -1}, ValueError), ({"t": float("nan")}, ValueError),
    ({"epsilon": 0}, ValueError), ({"epsilon": float("inf")}, ValueError), ({"epsilon": float("nan")}, ValueError),
    ({"delta": 0}, ValueError), ({"delta": 1}, ValueError), ({"delta": 1.5}, ValueError),
    ({"confidence_threshold": -0.1}, ValueError), ({"confidence_threshold": 1.1}, ValueError),
    ({"n_clusters": 1}, ValueError), ({"fcm_m": 1.0}, ValueError),
    ({"calibration": "x"}, ValueError), ({"rescale": 1}, TypeError), ({"rescale_shrink": "no"}, TypeError),
    ({"seed": -1}, TypeError),
    ({"margin": 0}, ValueError), ({"kl_weight": -1}, ValueError),
])
def test_invalid_settings_raise(kw, exc):
    with pytest.raises(exc):
        VFLAFE(**kw).check_params()  # validated when attached (setup), not in __init__


def test_benchmark_impl_names():
    with pytest.raises(ValueError):
        afe_class("fast")


def test_adjust_needs_clusters_for_regression():
    d = VFLAFE(epsilon=0.5, adjust=True)
    with pytest.raises(ValueError, match="n_clusters"):
        d.setup(DefenseContext(n_classes=None, passive_parties=("p",), n_samples=10, batch_size=5, epochs=1))


def test_sparsification_keeps_exactly_k_percent():
    g = torch.randn(7, 50)
    out = GradientSparsification(keep_fraction=0.1).sparsify(g)
    assert ((out != 0).sum(dim=1) == 5).all()
    kept = out != 0
    # the kept entries are the largest in magnitude of their row
    assert (g.abs()[kept].reshape(7, 5).min(dim=1).values >= g.abs().masked_fill(kept, 0).max(dim=1).values).all()
    assert torch.equal(out[kept], g[kept])
    with pytest.raises(ValueError):
        GradientSparsification(keep_fraction=0.0).check_params()
    with pytest.raises(ValueError):
        GradientSparsification(keep_fraction=1.5).check_params()


def test_gradient_and_embedding_noise():
    g = torch.zeros(20_000, 5)
    out = GaussianGradientNoise(scale=0.3, seed=1).transform_gradient({"p": g}, BATCH)["p"]
    assert float(out.std()) == pytest.approx(0.3, rel=0.02)
    h = torch.zeros(20_000, 5)
    out = GaussianEmbeddingNoise(scale=0.2).transform_embedding("p", h, BATCH)
    assert float(out.std()) == pytest.approx(0.2, rel=0.02)
    assert GaussianGradientNoise(scale=0.1).name == "noise" and GaussianGradientNoise(scale=0.1).variant == "gradient"
    for bad in (0, -1, float("nan")):
        with pytest.raises(ValueError):
            GaussianEmbeddingNoise(scale=bad).check_params()
