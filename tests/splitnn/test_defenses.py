"""VFL-AFE and the baseline defenses (noise, sparsification), tested hook by hook."""
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from scipy.spatial.distance import pdist  # noqa: E402

from vflsec.splitnn.defenses import (  # noqa: E402
    VFLAFE,
    BatchInfo,
    DefenseContext,
    GaussianEmbeddingNoise,
    GaussianGradientNoise,
    GradientSparsification,
)

BATCH = BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(4, dtype=np.int64))


def _afe(**kw):
    """VFL-AFE set up for a 2-class job of 100 rows, 3 epochs (the benchmark's baseline
    subclass has the same checks in tests/bench/test_splitnn_afe_baseline.py). These hook
    tests are stated per release: ``epsilon`` here is ``epsilon_per_release`` (default 1)
    and delta defaults to the paper's 1e-2; pass ``total=True`` for the whole-run meaning."""
    kw.setdefault("seed", 0)
    if not kw.pop("total", False):
        kw["epsilon_per_release"] = kw.pop("epsilon", 1.0)
        kw.setdefault("delta", 1e-2)
    d = VFLAFE(**kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classic calibration warns for epsilon >= 1
        d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=3))
    return d


def test_clip_bounds_norms():
    d = _afe(t=0.7, rescale=False, adjust=False)
    h = torch.randn(50, 8) * torch.linspace(0.01, 5, 50)[:, None]
    d.transform_embedding("p", h, BATCH)
    clean = d._clean["p"]
    norms = torch.linalg.vector_norm(clean, dim=1)
    assert float(norms.max()) <= 0.7 * (1 + 1e-6)
    small = torch.linalg.vector_norm(h, dim=1) <= 0.7
    assert torch.allclose(clean[small], h[small])  # rows inside the ball are untouched


def test_rescale_sets_estimated_diameter_to_2t():
    # The paper's rule (rescale_estimate="batch"): the factor of this very batch.
    t = 1.3
    d = _afe(t=t, rescale=True, rescale_estimate="batch", adjust=False)
    h = torch.randn(64, 16, dtype=torch.float64) * 0.1
    d.transform_embedding("p", h, BATCH)
    dist = pdist(d._clean["p"].detach().numpy())
    assert dist.mean() + 3 * dist.std() == pytest.approx(2 * t, rel=1e-6)
    assert d.max_distance_estimate(d._clean["p"]) == pytest.approx(2 * t, rel=1e-6)


def test_rescale_factor_is_constant_for_autograd():
    d = _afe(t=1.0, rescale=True, rescale_estimate="batch", adjust=False)
    h = (torch.randn(20, 4, dtype=torch.float64) * 0.1).requires_grad_(True)
    d.transform_embedding("p", h, BATCH)
    d._clean["p"].sum().backward()
    # Inside the ball clip is the identity, so d/dh sum(h * s) = s for every entry.
    assert torch.allclose(h.grad, torch.full_like(h, d.last_scale_["p"]))


def test_dp_rescale_centre_and_factor_are_constants_for_autograd():
    # "dp": released rows c~ + clip(s (h - c~), t) + noise; c~ and s are constants, so the
    # gradient of sum(out) is s for every entry of a row the re-clip leaves alone.
    d = _afe(t=1.0, epsilon=50.0, rescale=True, adjust=False, calibration="analytic")
    h = (torch.randn(40, 4, dtype=torch.float64) * 0.1).requires_grad_(True)
    out = d.transform_embedding("p", h, BATCH)
    out.sum().backward()
    release = d.last_release_["p"]
    s = release["scale"]
    inside = torch.linalg.vector_norm(s * (h.detach() - release["centre"]), dim=1) < 1.0 - 1e-6
    assert 0 < int(inside.sum()) < 40  # both kinds of rows occur, so the check below means something
    assert torch.allclose(h.grad[inside], torch.full_like(h[inside], s))
    assert torch.equal(out.detach(), release["embedding"] + release["centre"])


@pytest.mark.parametrize("calibration", ["classic", "analytic"])
def test_noise_std_matches_calibration(calibration):
    from vflsec.dp import gaussian_sigma
    from vflsec.kernels import lattice_spacing

    t, eps, delta = 0.5, 2.0, 1e-2
    d = _afe(t=t, epsilon=eps, delta=delta, rescale=False, adjust=False, calibration=calibration)
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


def test_fcm_mask_keeps_only_confident_samples():
    rng = np.random.default_rng(0)
    g, truth = _two_blobs_with_ambiguous(rng)
    d = _afe(adjust=True, confidence_threshold=0.8)
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
    from vflsec.splitnn.defenses.vfl_afe import PER_RELEASE_CAVEAT

    d = _afe(epsilon=2.0, rescale=False, adjust=False)
    with pytest.raises(RuntimeError, match="embedding width"):
        d.privacy_spent()  # the release's calibration depends on the width
    d.transform_embedding("p", torch.zeros(5, 8), BATCH)
    spent = d.privacy_spent()
    # The lattice release's effective multiplier, with the 8 draws per release.
    z = lattice_noise_multiplier(d.release_sigma(8), 2 * d.t)
    assert d.noise_multiplier_for(8) == pytest.approx(z, rel=1e-12)
    assert z == pytest.approx(d.noise_multiplier_, rel=1e-4)
    assert d.mechanism_for(8).name == "vfl_afe_embedding" and d.mechanism_for(8).sensitivity == 2 * d.t
    ref = composed_gaussian(z, 3, 1e-2)
    assert spent.releases == 3 and spent.epsilon == pytest.approx(ref.epsilon)
    assert spent.epsilon > spent.epsilon_per_release
    assert spent.neighbours == "replace_one" and spent.caveat == PER_RELEASE_CAVEAT


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
    paper = _afe(t=t, rescale=True, rescale_estimate="batch", adjust=False)
    paper.transform_embedding("p", h, BATCH)
    assert paper.last_scale_["p"] < 0.95
    grow_only = _afe(t=t, rescale=True, rescale_estimate="batch", adjust=False, rescale_shrink=False)
    grow_only.transform_embedding("p", h, BATCH)
    assert grow_only.last_scale_["p"] == 1.0
    assert torch.equal(grow_only._clean["p"], paper.clip(h))
    # Small embeddings are still enlarged to the estimated diameter 2t.
    grow_only.transform_embedding("p", h * 0.1, BATCH)
    # (rel 2e-6: the rows of h sit on the sphere, which the clip moves in by 2^-20.)
    assert grow_only.last_scale_["p"] == pytest.approx(paper.last_scale_["p"] * 10, rel=2e-6)
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
    ({"rescale_estimate": "paper"}, ValueError), ({"rescale_budget": 0}, ValueError),
    ({"rescale_budget": 1}, ValueError), ({"rescale_budget": float("nan")}, ValueError),
    ({"neighbours": "add_one"}, ValueError), ({"neighbours": 1}, TypeError), ({"accountant": "moments"}, ValueError),
])
def test_invalid_settings_raise(kw, exc):
    with pytest.raises(exc):
        VFLAFE(**kw).check_params()  # validated when attached (setup), not in __init__


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


# -- +R with a guarantee (rescale_estimate="dp") ---------------------------------------------

def _worst_case_batches(t, rows, width, neighbours):
    """Two batches differing in row 0 only: the other rows sit at -t e1; row 0 sits at
    +t e1 in one world and at the opposite side of the ball (-t e1, replace-one) or is
    the zero row (add/remove, read as zero-out) in the other. Every distance of row 0's
    pairs then goes from 2t to 0 (resp. t): the statistics move by their full bound."""
    e1 = torch.zeros(width, dtype=torch.float64)
    e1[0] = t
    base = -e1.repeat(rows, 1)
    a, b = base.clone(), base.clone()
    a[0] = e1
    b[0] = -e1 if neighbours == "replace_one" else 0.0
    return a, b


@pytest.mark.parametrize("neighbours", ["replace_one", "add_remove"])
def test_dp_rescale_parts_move_by_at_most_their_sensitivity(neighbours):
    t, rows, width = 1.5, 8, 4
    d = _afe(t=t, rescale=True, adjust=False, neighbours=neighbours, calibration="analytic", epsilon=3.0)
    sens = d.part_sensitivities(rows)
    mechanism = d.mechanism_for(width, rows)
    assert mechanism.name == "vfl_afe_rescale" and mechanism.neighbours == neighbours
    assert {p.label: p.sensitivity for p in mechanism.parts} == {k: sens[k] for k in ("centre", "stats", "embedding")}
    expected = ({"centre": 2 * t / rows, "stats": math.sqrt(2), "embedding": 2 * t} if neighbours == "replace_one"
                else {"centre": t / rows, "stats": math.sqrt(13) / 4, "embedding": 2 * t})
    assert {k: sens[k] for k in expected} == pytest.approx(expected)
    a, b = _worst_case_batches(t, rows, width, neighbours)
    ha, hb = d.clip(a), d.clip(b)
    centre_a, stats_a, _ = d.rescale_queries(ha)
    centre_b, stats_b, _ = d.rescale_queries(hb)
    # The clean centre and statistics: within each part's sensitivity, and the construction reaches it.
    moved_centre = float(torch.linalg.vector_norm(centre_a - centre_b))
    moved_stats = float(np.linalg.norm(stats_a - stats_b))
    assert moved_centre <= sens["centre"] and moved_centre >= 0.999 * sens["centre"]
    assert moved_stats <= sens["stats"] and moved_stats >= 0.999 * sens["stats"]
    # The embeddings given the same released centre and factor: only row 0 moves, by at most 2t.
    # A centre just off 0 towards +e1 and a large factor put row 0 at opposite ends of the t-ball
    # around it in the two worlds (also for the zero row: the embeddings' bound does not halve).
    centre = torch.zeros(width, dtype=torch.float64)
    centre[0] = 0.01
    for scale in (1000.0, 0.3, d.rescale_factor(stats_a, rows)[0]):
        dev_a, dev_b = d.recentre(ha, centre, scale), d.recentre(hb, centre, scale)
        assert torch.equal(dev_a[1:], dev_b[1:])
        moved_row = float(torch.linalg.vector_norm(dev_a[0] - dev_b[0]))
        assert moved_row <= sens["embedding"]
        assert float(torch.linalg.vector_norm(dev_a, dim=1).max()) <= t
    assert float(torch.linalg.vector_norm(d.recentre(ha, centre, 1000.0)[0] - d.recentre(hb, centre, 1000.0)[0])) \
        >= 0.999 * sens["embedding"]


def test_dp_rescale_release_with_the_noise_off_matches_the_clean_parts():
    # Bypass the generator: a mechanism whose release adds nothing, to check that what the
    # defense releases is exactly the clean parts (and that the parts come from the mechanism).
    import dataclasses

    from vflsec.dp import GaussianMechanism

    class Silent(GaussianMechanism):
        def release(self, x, *, generator=None, part=None):
            self.seen.append(part)
            return x.clone() if hasattr(x, "clone") else np.array(x, copy=True)

    t, rows, width = 2.0, 16, 3
    d = _afe(t=t, rescale=True, adjust=False, calibration="analytic")
    real = d.mechanism_for(width, rows)
    silent = Silent(**{f.name: getattr(real, f.name) for f in dataclasses.fields(real)})
    object.__setattr__(silent, "seen", [])
    d._mechanisms[(width, rows)] = silent
    a, b = _worst_case_batches(t, rows, width, "replace_one")
    out_a = d.transform_embedding("p", a, BATCH)
    rel_a = d.last_release_["p"]
    out_b = d.transform_embedding("p", b, BATCH)
    rel_b = d.last_release_["p"]
    assert silent.seen == ["centre", "stats", "embedding"] * 2
    sens = d.part_sensitivities(rows)
    assert float(torch.linalg.vector_norm(rel_a["centre"] - rel_b["centre"])) <= sens["centre"]
    assert float(np.linalg.norm(rel_a["stats"] - rel_b["stats"])) <= sens["stats"]
    # The factor: -t e1 rows and one +t e1 row: mean distance 2t/8 -> estimate from exact stats.
    assert rel_a["scale"] == pytest.approx(2 * t / rel_a["estimate"])
    assert torch.equal(out_a, rel_a["embedding"] + rel_a["centre"])
    assert float(torch.linalg.vector_norm(out_b - rel_b["centre"], dim=1).max()) <= t


def test_dp_rescale_privacy_spent_is_the_composite_mechanisms():
    from vflsec.splitnn.defenses.vfl_afe import PER_RELEASE_CAVEAT

    d = VFLAFE(t=1.0, epsilon=2.0, delta=1e-5, calibration="analytic", adjust=False, rescale_budget=0.2, seed=0)
    d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=32, epochs=4,
                           extra={"embedding_dims": {"p": 6}}))
    # Calibrated at setup for the training batches: 32 rows and the last batch's 4.
    assert set(d._mechanisms) == {(6, 4), (6, 32)}
    mechanism = d.mechanism_for(6, 32)
    parts = {p.label: p for p in mechanism.parts}
    assert [parts["centre"].coordinates, parts["stats"].coordinates, parts["embedding"].coordinates] == [6, 2, 6]
    mu2 = mechanism.ratio ** 2
    # Budget split in mu^2: 0.1 / 0.1 / 0.8 (each part's sigma is rounded up to the release grid).
    assert parts["centre"].ratio ** 2 == pytest.approx(0.1 * mu2, rel=0.01)
    assert parts["stats"].ratio ** 2 == pytest.approx(0.1 * mu2, rel=0.01)
    assert parts["embedding"].ratio ** 2 == pytest.approx(0.8 * mu2, rel=0.01)
    d.transform_embedding("p", torch.randn(1, 6), BATCH)  # one row: no pair, the one-part release
    assert d.mechanism_for(6, 1).name == "vfl_afe_embedding"
    spent = d.privacy_spent()
    # epsilon = 2 is the whole run's: each mechanism's 4 releases compose to at most 2.
    composed = [m.privacy_spent(1e-5, count=4).epsilon for m in d._mechanisms.values()]
    per_release = [m.privacy_spent(1e-5).epsilon for m in d._mechanisms.values()]
    assert max(composed) <= 2.0 and min(composed) >= 0.98 * 2.0
    assert spent.epsilon == max(composed) and spent.epsilon_per_release == pytest.approx(max(per_release), rel=1e-9)
    assert spent.releases == 4 and spent.epsilon_per_release < 0.6 * 2.0 and spent.caveat == PER_RELEASE_CAVEAT


@pytest.mark.parametrize("shrink", [True, False])
def test_batch_rescale_reports_no_guarantee(shrink):
    from vflsec.splitnn.defenses.vfl_afe import BATCH_RESCALE_CAVEAT

    d = _afe(rescale=True, rescale_estimate="batch", rescale_shrink=shrink, adjust=False)
    d.transform_embedding("p", torch.randn(8, 4), BATCH)
    spent = d.privacy_spent()
    assert spent.epsilon is None and not spent.has_guarantee and spent.caveat == BATCH_RESCALE_CAVEAT
    assert "no DP guarantee" in str(spent)
    # Without rescale the same setting is the accounted one-part release.
    assert _afe(rescale=False, rescale_estimate="batch", adjust=False).mechanism_for(4).name == "vfl_afe_embedding"


def test_add_remove_halves_only_the_one_part_release():
    replace = _afe(rescale=False, adjust=False, calibration="analytic")
    zero_out = _afe(rescale=False, adjust=False, calibration="analytic", neighbours="add_remove")
    assert zero_out.mechanism_for(4).sensitivity == 1.0 and replace.mechanism_for(4).sensitivity == 2.0
    assert zero_out.release_sigma(4) == pytest.approx(replace.release_sigma(4) / 2, rel=2.0 ** -7)
    assert zero_out.privacy_spent().neighbours == "add_remove"


@pytest.mark.parametrize("bad, exc", [
    (torch.tensor([[float("nan"), 0.0]]), ValueError), (torch.tensor([[float("inf"), 0.0]] * 3), ValueError),
    (torch.zeros(4), ValueError), (torch.zeros(0, 4), ValueError), (torch.zeros(3, 4, dtype=torch.int64), TypeError),
    (np.zeros((3, 4)), TypeError),
])
def test_bad_embeddings_are_refused(bad, exc):
    d = _afe(rescale=True, adjust=False)
    with pytest.raises(exc):
        d.transform_embedding("p", bad, BATCH)


def test_noise_baselines_release_through_the_catalogue_and_claim_nothing():
    from vflsec.splitnn.defenses.base import UnaccountedNoise

    emb, grad = GaussianEmbeddingNoise(scale=0.2, seed=1), GaussianGradientNoise(scale=0.3, seed=1)
    assert emb.mechanism == UnaccountedNoise("noise_embedding", 0.2)
    assert grad.mechanism.name == "noise_gradient" and grad.mechanism.sigma == 0.3
    assert emb.privacy_spent() is None and grad.privacy_spent() is None and emb.mechanism.privacy_spent() is None
    with pytest.raises(ValueError, match="claims a guarantee"):
        UnaccountedNoise("vfl_afe_embedding", 1.0)
    with pytest.raises(ValueError, match="unknown DP mechanism"):
        UnaccountedNoise("noise_labels", 1.0)
    with pytest.raises(ValueError):
        UnaccountedNoise("noise_embedding", 0.0)
