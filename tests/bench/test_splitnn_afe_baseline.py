"""The split-learning benchmark's baseline VFL-AFE (vflsec.bench.experiments.splitnn.baseline): the
torch.cdist / numpy-FCM subclass the benchmark times against the product's VFLAFE. The hooks
it replaces are checked as tests/splitnn/test_defenses.py checks the product's, and it trains."""
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from scipy.spatial.distance import pdist  # noqa: E402

from vflsec.bench.experiments.splitnn.baseline import BaselineVFLAFE, afe_class, numpy_fuzzy_cmeans  # noqa: E402
from vflsec.splitnn import SplitNNClassifier  # noqa: E402
from vflsec.splitnn.defenses import BatchInfo, DefenseContext  # noqa: E402

BATCH = BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(4, dtype=np.int64))


def _afe(impl="vflsec", **kw):
    """VFL-AFE set up for a 2-class job; impl "baseline" is the benchmark's
    torch.cdist / numpy-FCM subclass (vflsec.bench.experiments.splitnn.baseline)."""
    kw.setdefault("seed", 0)
    d = afe_class(impl)(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classic calibration warns for epsilon >= 1
        d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=3))
    return d


@pytest.mark.parametrize("impl", ["baseline"])
def test_clip_bounds_norms(impl):
    d = _afe(t=0.7, rescale=False, adjust=False, impl=impl)
    h = torch.randn(50, 8) * torch.linspace(0.01, 5, 50)[:, None]
    d.transform_embedding("p", h, BATCH)
    clean = d._clean["p"]
    norms = torch.linalg.vector_norm(clean, dim=1)
    assert float(norms.max()) <= 0.7 * (1 + 1e-6)
    small = torch.linalg.vector_norm(h, dim=1) <= 0.7
    assert torch.allclose(clean[small], h[small])  # rows inside the ball are untouched


@pytest.mark.parametrize("impl", ["baseline"])
def test_rescale_sets_estimated_diameter_to_2t(impl):
    # The paper's rule (rescale_estimate="batch"): the factor of this very batch.
    t = 1.3
    d = _afe(t=t, rescale=True, rescale_estimate="batch", adjust=False, impl=impl)
    h = torch.randn(64, 16, dtype=torch.float64) * 0.1
    d.transform_embedding("p", h, BATCH)
    dist = pdist(d._clean["p"].detach().numpy())
    assert dist.mean() + 3 * dist.std() == pytest.approx(2 * t, rel=1e-6)
    assert d.max_distance_estimate(d._clean["p"]) == pytest.approx(2 * t, rel=1e-6)


@pytest.mark.parametrize("impl", ["baseline"])
@pytest.mark.parametrize("calibration", ["classic", "analytic"])
def test_noise_std_matches_calibration(impl, calibration):
    from vflsec.dp import gaussian_sigma
    from vflsec.kernels import lattice_spacing

    t, eps, delta = 0.5, 2.0, 1e-2
    d = _afe(t=t, epsilon_per_release=eps, delta=delta, rescale=False, adjust=False, impl=impl, calibration=calibration)
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


def _two_blobs_with_ambiguous(rng):
    a = rng.normal([5.0, 0.0], 0.2, size=(20, 2))
    b = rng.normal([-5.0, 0.0], 0.2, size=(20, 2))
    middle = rng.normal([0.0, 0.0], 0.05, size=(6, 2))
    return np.vstack([a, b, middle]), np.r_[np.zeros(20), np.ones(20), np.full(6, -1)]


@pytest.mark.parametrize("impl", ["baseline"])
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


def test_benchmark_impl_names():
    with pytest.raises(ValueError):
        afe_class("fast")


# -- training with the baseline (tests/splitnn/test_trainer.py trains every product defense) --

def _data(n=240, seed=0, classes=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 9)).astype(np.float32)
    score = X[:, 0] + X[:, 4] - X[:, 7]
    y = (score > 0).astype(int) if classes == 2 else np.digitize(score, [-0.7, 0.7])
    return [X[:, :3], X[:, 3:6], X[:, 6:]], y


@pytest.mark.slow  # end to end: a training
@pytest.mark.parametrize("defense", [BaselineVFLAFE(t=1.0, epsilon=50.0, rescale=True, adjust=True, seed=0,
                                                    calibration="analytic")],
                         ids=lambda d: f"{d.name}-{d.variant}")
def test_every_defense_trains(defense):
    parts, y = _data(n=300, classes=3)
    model = SplitNNClassifier(defense=defense, epochs=6, batch_size=50, lr=0.02, seed=0, device="cpu").fit(parts, y)
    losses = model.history_["loss"]
    assert losses[-1] < losses[0]
    assert model.score(parts, y) > 0.6  # three balanced-ish classes: chance is ~0.33
    spent = model.privacy_spent_["passive_0"]
    assert (spent is None) == (defense.name != "vfl_afe")
