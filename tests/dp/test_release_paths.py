"""Every DP release path of vflsec releases through the lattice Gaussian mechanism.

Each test drives a real release path and checks

(a) every released value is an integer multiple of ``lattice_spacing(sigma)``
    for the sigma that path uses: the output is then a function of the
    rounded integer ``rint(x / g) + Z`` alone, which is what defeats the
    floating-point attack (Mironov, CCS 2012);
(b) for HDP, the GLM grid path, VFL-AFE, the noise baselines and DP-SGD, the
    attack's distinguishing event itself: on neighbouring inputs 0.0 and 1.0,
    ``{|y| < 0.5 and y finer than 2^-53}`` (2^-24 for float32 releases) never
    occurs. With ``x + float noise`` it occurs often for x = 0 and never for
    x = 1 (``test_the_event_detects_float_noise`` shows the test has that power).
"""
import dataclasses
import math

import numpy as np
import pytest

from vflsec.dp.lattice import sigma_for_multiplier
from vflsec.kernels import NoiseGenerator, gaussian_noise, lattice_spacing

# float64 releases: a value below 0.5 is "finer" when y * 2^53 is not an integer;
# 1 + n rounds to a multiple of 2^-53 there, a bare float n usually does not.
BITS64, BITS32 = 53, 24


def _numpy(values):
    if hasattr(values, "detach"):  # torch tensor (float32 converts to float64 exactly)
        values = values.detach().cpu().double().numpy()
    return np.asarray(values, dtype=np.float64)


def assert_on_lattice(values, sigma):
    k = _numpy(values) / lattice_spacing(sigma)  # exact: the spacing is a power of two
    assert k.size and np.all(np.isfinite(k))
    assert np.array_equal(k, np.rint(k)), "a released value is off the release lattice"


def fine_events(values, bits):
    """(occurrences of {|y| < 0.5 and y * 2^bits not an integer}, number of |y| < 0.5)."""
    y = _numpy(values).ravel()
    small = y[np.abs(y) < 0.5] * 2.0 ** bits
    return int(np.count_nonzero(small != np.floor(small))), int(small.size)


def assert_indistinguishable(release_zero, release_one, bits, min_small=100):
    """The attack's event occurs for neither neighbour, and the test had power
    (enough releases landed below 0.5 for a float path to be caught)."""
    for name, values in (("x=0", release_zero), ("x=1", release_one)):
        events, small = fine_events(values, bits)
        assert small >= min_small, (name, small)
        assert events == 0, f"{name}: {events} of {small} small outputs are finer than the float grid"


def test_the_event_detects_float_noise():
    # Control: the old release, x + float noise, is caught by this very check.
    n, sigma = 50_000, 2.0
    zero = 0.0 + gaussian_noise(n, sigma, generator=NoiseGenerator(seed=1))
    one = 1.0 + gaussian_noise(n, sigma, generator=NoiseGenerator(seed=2))
    assert fine_events(zero, BITS64)[0] > 1000 and fine_events(one, BITS64)[0] == 0
    zero32 = np.float32(0.0) + gaussian_noise(n, sigma, dtype="float32", generator=NoiseGenerator(seed=3))
    assert fine_events(zero32, BITS32)[0] > 1000
    with pytest.raises(AssertionError):
        assert_on_lattice(one, sigma)


# -- HDP-VFL: the party programs ----------------------------------------------------------
def _unit_rows(X):
    return X / np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]


def _hdp_job(**kw):
    from vflsec.glm import GLMJob

    settings = dict(n_samples=200, batch_size=64, epochs=2, lr=0.5, k=0.5, epsilon=4.0, delta=1e-3,
                    passives=("p1", "p2"), noise_seed=3)
    settings.update(kw)
    return GLMJob("hdp", **settings)


def _glm_data(n=200, widths=(3, 2, 2), seed=0):
    rng = np.random.default_rng(seed)
    parts = [_unit_rows(rng.standard_normal((n, d))) for d in widths]
    y = np.where(sum(X[:, 0] for X in parts) + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return parts, y


def test_hdp_party_programs_send_lattice_releases():
    from vflsec.federation import InMemoryHub
    from vflsec.glm import PartyData, run_job
    from vflsec.glm.hdp import hdp_noise_scales
    from vflsec.glm.ir_exchange import TAG_IR_ACTIVE, TAG_IR_PASSIVE

    job = _hdp_job()
    parts, y = _glm_data()
    data = {job.active: PartyData(parts[0], y)}
    data.update({p: PartyData(X) for p, X in zip(job.passives, parts[1:])})
    hub = InMemoryHub(keep_payloads=True)
    run_job(job, data, hub=hub)
    scales = hdp_noise_scales(job)
    # Calibrated for every IR value one party sends in the run (the lemmas bound the whole sequence).
    assert scales["coordinates"] == job.epochs * job.n_samples
    sent = {TAG_IR_PASSIVE: [], TAG_IR_ACTIVE: []}
    for record, payload in hub.transcript:
        sent[record.tag].append(payload)
    assert len(sent[TAG_IR_PASSIVE]) == len(sent[TAG_IR_ACTIVE]) == 2 * job.total_steps
    assert_on_lattice(np.concatenate(sent[TAG_IR_PASSIVE]), scales["sigma_passive"])
    assert_on_lattice(np.concatenate(sent[TAG_IR_ACTIVE]), scales["sigma_active"])


@pytest.mark.parametrize("role", ["active", "passive"])
def test_hdp_release_hides_the_float_grid(role):
    # The release function the party programs call, on neighbouring IR values.
    from vflsec.glm.hdp import _release, hdp_mechanisms, hdp_noise_scales
    from vflsec.vfl import PhaseClock

    job = _hdp_job()
    party = job.active if role == "active" else "p1"
    mechanism = hdp_mechanisms(job)[role]
    sigma = hdp_noise_scales(job)[f"sigma_{role}"]
    assert (mechanism.name, mechanism.sigma) == (f"hdp_{role}_ir", sigma)
    release = _release(job, party, mechanism, PhaseClock())
    zero, one = release(np.zeros(40_000)), release(np.ones(40_000))
    assert_on_lattice(zero, sigma)
    assert_on_lattice(one, sigma)
    assert_indistinguishable(zero, one, BITS64)


# -- the GLM grid trainer (vflsec.glm.fast) --------------------------------------------------
def test_fast_grid_releases_match_the_protocol_and_lie_on_the_lattice():
    from vflsec.glm.fast import _release, _Settings
    from vflsec.glm.hdp import _release as protocol_release
    from vflsec.glm.hdp import hdp_mechanisms
    from vflsec.vfl import PhaseClock

    parts, y = _glm_data()
    seeded = _hdp_job(noise_seed=5)
    jobs = (seeded, dataclasses.replace(seeded, noise_seed=None),
            dataclasses.replace(seeded, noise_seed=None, epsilon=1.0),
            dataclasses.replace(seeded, noise=False), dataclasses.replace(seeded, protocol="plain"))
    settings = _Settings(jobs, parts, y)
    for party, name in ((0, seeded.active), (1, "p1")):
        key = "sigma_active" if party == 0 else "sigma_passive"
        values = np.random.default_rng(party).uniform(-1, 1, size=(len(jobs), 64))
        out = _release(settings, party, values)
        # Seeded row: exactly what the protocol program releases with the same generator.
        mechanism = hdp_mechanisms(seeded)["active" if party == 0 else "passive"]
        assert settings.mechanisms[0][party] == mechanism and mechanism.sigma == settings.info[0][key]
        expected = protocol_release(seeded, name, mechanism, PhaseClock())(values[0])
        np.testing.assert_array_equal(out[0], expected)
        for g in range(3):
            assert_on_lattice(out[g], settings.info[g][key])
        np.testing.assert_array_equal(out[3:], values[3:])  # noise-free jobs send the value itself
        # Neighbouring values through the unseeded rows.
        zero = _release(settings, party, np.zeros((len(jobs), 20_000)))[1:3]
        one = _release(settings, party, np.ones((len(jobs), 20_000)))[1:3]
        assert_indistinguishable(zero, one, BITS64)


# -- private hyperparameter selection (vflsec.glm.tuning) ------------------------------------
def test_private_selection_scores_are_lattice_releases(monkeypatch):
    import vflsec.kernels as kernels
    from vflsec.glm.tuning import PoissonRepetitions, grid_jobs, private_select

    calls = []
    real = kernels.add_gaussian_noise

    def spy(x, sigma, *, generator=None):
        out = real(x, sigma, generator=generator)
        calls.append((np.array(x, dtype=np.float64), sigma, np.array(out)))
        return out

    monkeypatch.setattr(kernels, "add_gaussian_noise", spy)
    parts, y = _glm_data(n=250, widths=(3, 2))
    base = _hdp_job(n_samples=250, passives=("p1",), noise_seed=None, epochs=1, epsilon=1.0)
    result = private_select(parts, y, grid_jobs(base, k=[0.3, 1.0]), PoissonRepetitions(3.0), delta=1e-6, seed=4)
    assert result.n_runs >= 1 and calls
    for _, sigma, out in calls:  # training releases and the score release alike
        assert_on_lattice(out, sigma)
    counts, sigma, noisy = calls[-1]  # the scores come last, one count per run
    assert counts.shape == (result.n_runs,) and np.array_equal(counts, np.round(counts))
    z_score = min(result.privacy.noise_multiplier_by_party.values())
    assert sigma == sigma_for_multiplier(z_score, 1.0)
    n_val = int(round(0.2 * len(y)))
    assert result.noisy_accuracy == float(noisy.max()) / n_val


# -- split learning: VFL-AFE, the noise baselines, DP-SGD -------------------------------------
@pytest.fixture(scope="module")
def torch():
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)
    return torch


def _batch():
    from vflsec.splitnn.defenses import BatchInfo

    return BatchInfo(epoch=0, step=0, global_step=0, indices=np.arange(4, dtype=np.int64))


def _afe(**kw):
    from vflsec.splitnn.defenses import VFLAFE, DefenseContext

    kw.setdefault("calibration", "analytic")
    d = VFLAFE(seed=0, **kw)
    d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=2,
                           extra={"embedding_dims": {"p": 8}}))
    return d


def test_vfl_afe_forward_releases_on_the_lattice(torch):
    d = _afe(t=1.5, epsilon=2.0)  # full: clip, +R "dp", noise
    bottom = torch.nn.Linear(5, 8)
    h = bottom(torch.randn(32, 5))
    out = d.transform_embedding("p", h, _batch())
    assert out.dtype == torch.float32 and out.shape == (32, 8)
    # Every part of the +R release is a lattice release with its part's sigma; the output
    # is the released deviations plus the released centre (post-processing).
    mechanism = d.mechanism_for(8, 32)
    assert mechanism.name == "vfl_afe_rescale"
    parts = d.last_release_["p"]
    for label in ("centre", "stats", "embedding"):
        assert_on_lattice(parts[label], mechanism.part(label).sigma)
    assert d.release_sigma(8, 32) == mechanism.part("embedding").sigma
    assert torch.equal(out.detach(), parts["embedding"] + parts["centre"].to(torch.float32))
    # The bottom model still trains through the release (identity for autograd).
    (out * torch.ones_like(out)).sum().backward()
    assert bottom.weight.grad is not None and torch.isfinite(bottom.weight.grad).all()


def test_vfl_afe_paper_rescale_releases_on_the_lattice(torch):
    d = _afe(t=1.5, epsilon=2.0, rescale_estimate="batch")  # the paper's rule: one-part release
    out = d.transform_embedding("p", torch.nn.Linear(5, 8)(torch.randn(32, 5)), _batch())
    assert_on_lattice(out, d.release_sigma(8))


def test_vfl_afe_release_hides_the_float_grid(torch):
    d = _afe(t=1.0, epsilon=1.0, delta=1e-2, rescale=False, adjust=False)  # clip + noise only
    h0 = torch.zeros(20_000, 4)
    h1 = h0.clone()
    h1[:, 0] = 1.0  # norm 1 <= t: unchanged by the clip
    zero = d.transform_embedding("p", h0, _batch())[:, 0]
    one = d.transform_embedding("p", h1, _batch())[:, 0]
    assert_on_lattice(zero, d.release_sigma(4))
    assert_indistinguishable(zero, one, BITS32)


def test_gaussian_release_is_the_identity_for_autograd(torch):
    from vflsec.dp import GaussianMechanism
    from vflsec.splitnn.defenses.base import gaussian_release

    x = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    y = gaussian_release(x, 0.5, NoiseGenerator(seed=1))
    assert_on_lattice(y, 0.5)
    w = torch.randn(6, 3, dtype=torch.float64)
    (y * w).sum().backward()
    assert torch.equal(x.grad, w)
    # A mechanism's part: its sigma, the same draws as the bare release with that sigma.
    mechanism = GaussianMechanism.calibrated("vfl_afe_rescale", epsilon=1.0, delta=1e-5,
                                             parts=[("a", 1.0, 3, 0.5), ("b", 2.0, 3, 0.5)])
    x.grad = None
    y = gaussian_release(x, mechanism, NoiseGenerator(seed=2), part="b")
    assert torch.equal(y, gaussian_release(x.detach(), mechanism.part("b").sigma, NoiseGenerator(seed=2)))
    (y * w).sum().backward()
    assert torch.equal(x.grad, w)


def test_noise_baselines_release_on_the_lattice(torch):
    from vflsec.splitnn.defenses import GaussianEmbeddingNoise, GaussianGradientNoise

    emb, grad = GaussianEmbeddingNoise(scale=1.0, seed=1), GaussianGradientNoise(scale=0.8, seed=2)
    h = torch.randn(16, 4, requires_grad=True)
    out = emb.transform_embedding("p", h, _batch())
    assert_on_lattice(out, 1.0)
    out.sum().backward()
    assert torch.equal(h.grad, torch.ones_like(h))
    assert_on_lattice(grad.transform_gradient({"p": torch.randn(16, 4)}, _batch())["p"], 0.8)
    for _defense, release in ((emb, lambda x: emb.transform_embedding("p", x, _batch())),
                             (grad, lambda x: grad.transform_gradient({"p": x}, _batch())["p"])):
        zero, one = release(torch.zeros(20_000)), release(torch.ones(20_000))
        assert_indistinguishable(zero, one, BITS32)


def _dp_sgd_world(torch, grad_rows, steps):
    """DP-SGD steps on ``Linear(1, 64)`` with zero inputs and sum-reduced per-sample
    losses ``<h_i, g_i>``: sample i's gradient is ``g_i`` on the bias and 0 on the
    weight, so the released sum is ``sum_i g_i`` (bias) and 0 (weight). Returns the
    released sums (``grad * batch``, exact: the batch is a power of two) and the defense."""
    from vflsec.splitnn.defenses import DPSGD, DefenseContext

    batch = 64
    d = DPSGD(epsilon=4.0, delta=1e-3, clip_norm=1.0, loss_reduction="sum", seed=7)
    # Sampling rate 1 (n = batch): the plain Gaussian accountant, fast to invert.
    d.setup(DefenseContext(n_classes=2, passive_parties=("p1",), n_samples=batch, batch_size=batch, epochs=steps))
    m = torch.nn.Linear(1, 64)
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    x = torch.zeros(batch, 1)
    released = []
    for _step in range(steps):
        d.bottom_backward("p1", m, opt, x, m, grad_rows, _batch())
        released.append(torch.cat([m.weight.grad.reshape(-1), m.bias.grad]) * batch)
    return torch.stack(released), d


@pytest.mark.slow  # statistical: 40 DP-SGD releases and the PLD accountant
def test_dp_sgd_step_releases_on_the_lattice_and_hides_the_float_grid(torch):
    one, d = _dp_sgd_world(torch, torch.eye(64), steps=20)  # bias sum = 1.0 in every coordinate
    zero, _ = _dp_sgd_world(torch, torch.zeros(64, 64), steps=20)  # the neighbour: all sums 0.0
    assert d.coordinates_ == {"p1": 128}
    sigma = d.mechanisms_["p1"].sigma(1.0)
    assert sigma == sigma_for_multiplier(d.noise_multipliers_["p1"], 1.0)
    # on the release's sigma grid: at most 0.39% above the multiplier
    assert sigma >= d.noise_multiplier_ and sigma == pytest.approx(d.noise_multiplier_, rel=2.0**-7)
    assert_on_lattice(one, sigma)
    assert_on_lattice(zero, sigma)
    assert one.dtype == torch.float32
    assert_indistinguishable(zero[:, 64:], one[:, 64:], BITS32, min_small=50)
    spent = d.privacy_spent()
    assert spent.releases == 20 and spent.epsilon <= 4.0


# -- CKKS noise flooding ---------------------------------------------------------------------
def test_ckks_flooding_releases_on_the_lattice():
    pytest.importorskip("tenseal")
    from vflsec.he import ckks as C

    secret = C.CKKSSecretContext()
    values = np.random.default_rng(0).uniform(-1, 1, size=512)
    flooded = secret.decrypt_flooded(secret.encrypt(values), generator=NoiseGenerator(seed=1))
    sigma = C.flooding_sigma(secret.params, C.DEFAULT_FLOODING_BITS)
    assert_on_lattice(flooded, sigma)
    assert np.max(np.abs(flooded - values)) < 10 * sigma + 1e-3 and not math.isnan(flooded.sum())
