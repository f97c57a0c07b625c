"""DP-SGD on the bottom models (DP-VFL): clipping, noise scale, calibration, accounting."""
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from vflsec.splitnn.defenses.base import BatchInfo, DefenseContext  # noqa: E402
from vflsec.splitnn.defenses.dp_sgd import (  # noqa: E402
    DPSGD,
    SCOPE,
    dp_vfl_centralized_model,
    dp_vfl_models,
    per_sample_gradients,
    split_features_equally,
)

PARTIES = ("p1", "p2")


def _data(n=120, p=(3, 3), seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, sum(p), generator=g)
    w = torch.randn(sum(p), generator=g)
    y = (X @ w > 0).to(torch.float32)
    cols = np.cumsum((0,) + tuple(p))
    return {P: X[:, cols[i]:cols[i + 1]].contiguous() for i, P in enumerate(PARTIES)}, y


def _models(p=(3, 3), seed=0):
    torch.manual_seed(seed)
    bottoms, head = dp_vfl_models(p, 1, embedding_dim=4)
    return dict(zip(PARTIES, bottoms)), head


def _mean_loss(bottoms, head, Xs, y):
    with torch.no_grad():
        z = head(torch.cat([bottoms[P](Xs[P]) for P in PARTIES], dim=1)).squeeze(1)
        return float(torch.nn.functional.binary_cross_entropy_with_logits(z, y))


def _train(defense, Xs, y, *, epochs, batch_size, lr, seed=0):
    """A minimal split-learning loop calling the hooks in the documented order."""
    n = len(y)
    bottoms, head = _models(tuple(Xs[P].shape[1] for P in PARTIES), seed)
    defense.setup(DefenseContext(n_classes=2, passive_parties=PARTIES, n_samples=n, batch_size=batch_size,
                                 epochs=epochs, seed=seed))
    bottoms = {P: defense.wrap_bottom(P, m) for P, m in bottoms.items()}
    head = defense.wrap_head(head)
    opts = {P: torch.optim.SGD(m.parameters(), lr=lr) for P, m in bottoms.items()}
    head_opt = torch.optim.SGD(head.parameters(), lr=lr)
    before = _mean_loss(bottoms, head, Xs, y)
    rng = np.random.default_rng(seed)
    global_step = 0
    for epoch in range(epochs):
        order = rng.permutation(n)
        for step, start in enumerate(range(0, n, batch_size)):
            idx = order[start:start + batch_size]
            batch = BatchInfo(epoch, step, global_step, idx)
            defense.on_batch_start(batch)
            sent = {P: defense.transform_embedding(P, bottoms[P](Xs[P][idx]), batch) for P in PARTIES}
            received = {P: h.detach().requires_grad_(True) for P, h in sent.items()}
            z = head(torch.cat([received[P] for P in PARTIES], dim=1)).squeeze(1)
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y[idx])
            head_opt.zero_grad()
            loss.backward()
            head_opt.step()
            grads = defense.transform_gradient({P: received[P].grad for P in PARTIES}, batch)
            for P in PARTIES:
                opts[P].zero_grad()

                def embed(x, P=P, batch=batch):
                    return defense.transform_embedding(P, bottoms[P](x), batch)

                if not defense.bottom_backward(P, bottoms[P], opts[P], Xs[P][idx], embed, grads[P], batch):
                    (sent[P] * grads[P]).sum().backward()
                    opts[P].step()
            global_step += 1
    return before, _mean_loss(bottoms, head, Xs, y), bottoms


def _setup(defense, n=100, batch_size=20, epochs=5):
    defense.setup(DefenseContext(n_classes=2, passive_parties=PARTIES, n_samples=n, batch_size=batch_size,
                                 epochs=epochs))


def _manual_norms(module, x, grad, scale):
    """Per-sample gradient norms by one autograd pass per sample (the reference)."""
    out = []
    for i in range(x.shape[0]):
        module.zero_grad()
        (scale * (module(x[i:i + 1]).squeeze(0) * grad[i]).sum()).backward()
        out.append(math.sqrt(sum(float((p.grad ** 2).sum()) for p in module.parameters())))
    module.zero_grad()
    return np.array(out)


def _batch(step=0):
    return BatchInfo(0, step, step, np.arange(8))


def test_per_sample_gradients_match_autograd():
    torch.manual_seed(1)
    m = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    x, g = torch.randn(6, 3), torch.randn(6, 2)
    names, per_sample = per_sample_gradients(m, m, x, g, 2.0)
    for i in range(6):
        m.zero_grad()
        (2.0 * (m(x[i:i + 1]).squeeze(0) * g[i]).sum()).backward()
        for name, ps in zip(names, per_sample):
            torch.testing.assert_close(ps[i], dict(m.named_parameters())[name].grad)


@pytest.mark.slow  # many DP-SGD steps
def test_clipped_per_sample_norms_within_threshold():
    torch.manual_seed(0)
    d = DPSGD(epsilon=5.0, clip_norm=0.05, seed=3)
    _setup(d)
    m = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    x, g = torch.randn(8, 4), torch.randn(8, 3)
    raw = _manual_norms(m, x, g, 8.0)
    assert (raw > 0.05).sum() >= 4  # clipping must actually bite for the test to mean something
    assert d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.0), x, m, g, _batch())
    clipped = d.last_clipped_norms_["p1"]
    assert np.all(clipped <= 0.05 * (1 + 1e-5))
    np.testing.assert_allclose(clipped, np.minimum(raw, 0.05), rtol=1e-4)


@pytest.mark.slow  # statistical: many noise draws
def test_noise_std_is_multiplier_times_clip():
    clip = 0.5
    d = DPSGD(epsilon=2.0, clip_norm=clip, seed=11)
    _setup(d)
    m = torch.nn.Linear(200, 100)  # 20,100 parameters: a tight estimate of the noise std
    x = torch.randn(10, 200)
    zero_grad = torch.zeros(10, 100)  # every per-sample gradient is 0: the update is pure noise
    before = [p.detach().clone() for p in m.parameters()]
    d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=1.0), x, m, zero_grad, _batch())
    # Update = -(noise / B): recover the noise from the parameter change.
    noise = torch.cat([((b - p.detach()) * 10).reshape(-1) for b, p in zip(before, m.parameters())]).double()
    expected = d.noise_multiplier_ * clip
    assert abs(float(noise.mean())) < 4 * expected / math.sqrt(noise.numel())
    assert float(noise.std()) == pytest.approx(expected, rel=0.03)


@pytest.mark.slow  # calibration runs and the PLD accountant
def test_percentile_calibration_picks_the_percentile():
    torch.manual_seed(2)
    d = DPSGD(epsilon=10.0, clip_percentile=80, calibration_steps=3, seed=0)
    _setup(d)
    m = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    seen = []
    for step in range(3):
        x, g = torch.randn(8, 4), torch.randn(8, 2) * (step + 1)
        seen.append(_manual_norms(m, x, g, 8.0))
        d.bottom_backward("p1", m, opt, x, m, g, _batch(step))
        # the running estimate during calibration: the percentile of all norms so far
        assert d.clip_norm_["p1"] == pytest.approx(np.percentile(np.concatenate(seen), 80), rel=1e-4)
    final = d.clip_norm_["p1"]
    assert final == pytest.approx(np.percentile(np.concatenate(seen), 80), rel=1e-4)
    d.bottom_backward("p1", m, opt, torch.randn(8, 4), m, torch.randn(8, 2) * 100, _batch(3))
    assert d.clip_norm_["p1"] == final  # frozen after calibration
    assert np.all(d.last_clipped_norms_["p1"] <= final * (1 + 1e-5))


@pytest.mark.slow  # PLD accountant calibrations
def test_composed_epsilon_within_target_and_budget_enforced():
    Xs, y = _data(n=60)
    d = DPSGD(epsilon=3.0, delta=1e-3, clip_norm=0.5, seed=5)
    _train(d, Xs, y, epochs=2, batch_size=20, lr=0.05)
    assert d.planned_steps_ == 6 and d.steps_ == {"p1": 6, "p2": 6}
    assert d.sampling_rate_ == pytest.approx(20 / 60)
    spent = d.privacy_spent()
    assert spent.releases == 6 and spent.epsilon_per_release is None and spent.delta == 1e-3
    assert spent.neighbours == "replace_one" and spent.accountant == "pld"
    assert 0.9 * 3.0 < spent.epsilon <= 3.0
    assert spent == d.planned_privacy()  # every planned step taken
    m = torch.nn.Linear(3, 4)
    with pytest.raises(RuntimeError, match="budget"):
        d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.1), torch.randn(5, 3), m,
                          torch.randn(5, 4), _batch(7))


@pytest.mark.slow  # trains to convergence
def test_loss_decreases_at_large_epsilon():
    Xs, y = _data(n=200)
    before, after, _ = _train(DPSGD(epsilon=100.0, calibration_steps=5, seed=1), Xs, y, epochs=15,
                              batch_size=25, lr=0.3)
    assert after < before - 0.1


def test_invalid_settings_raise():
    for kwargs, match in [({"epsilon": 0}, "epsilon"), ({"epsilon": -1}, "epsilon"),
                          ({"epsilon": 1, "delta": 0}, "delta"), ({"epsilon": 1, "delta": 1.0}, "delta"),
                          ({"epsilon": 1, "clip_percentile": 0}, "clip_percentile"),
                          ({"epsilon": 1, "clip_percentile": 100.5}, "clip_percentile"),
                          ({"epsilon": 1, "clip_norm": 0.0}, "clip_norm"),
                          ({"epsilon": 1, "calibration_steps": 0}, "calibration_steps"),
                          ({"epsilon": 1, "accountant": "moments"}, "accountant"),
                          ({"epsilon": 1, "neighbours": "add"}, "neighbours"),
                          ({"epsilon": 1, "loss_reduction": "none"}, "loss_reduction")]:
        with pytest.raises(ValueError, match=match):
            DPSGD(**kwargs).check_params()  # validated when attached (setup), not in __init__
    with pytest.raises(TypeError, match="epsilon"):
        DPSGD(epsilon="1").check_params()
    with pytest.raises(ValueError, match="epsilon"):
        DPSGD(epsilon=float("nan")).check_params()
    DPSGD(epsilon=1, clip_percentile=100).check_params()  # the top of the range is allowed


def test_batchnorm_bottom_gives_clear_error():
    d = DPSGD(epsilon=5.0, clip_norm=1.0, seed=0)
    _setup(d)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    with pytest.raises(RuntimeError, match="per-sample"):
        d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.1), torch.randn(6, 3), m,
                          torch.randn(6, 4), _batch())


def test_paper_models_shapes():
    bottoms, head = dp_vfl_models([3, 3, 2], 1)
    assert [b(torch.randn(5, p)).shape for b, p in zip(bottoms, [3, 3, 2])] == [(5, 32)] * 3
    assert head[0].in_features == 96 and head(torch.randn(5, 96)).shape == (5, 1)
    assert dp_vfl_centralized_model(8, 2)(torch.randn(4, 8)).shape == (4, 2)
    blocks = split_features_equally(10, 3)
    assert [len(b) for b in blocks] == [4, 3, 3] and np.array_equal(np.concatenate(blocks), np.arange(10))
    with pytest.raises(ValueError):
        split_features_equally(2, 3)


# -- end to end with the split-learning estimators, regression data ------------------------------

def _parts(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 6)).astype(np.float32)
    return [X[:, :3], X[:, 3:]], X @ rng.standard_normal(6)


@pytest.mark.slow  # end to end: estimator training and the PLD accountant
def test_estimator_end_to_end_reports_composed_epsilon():
    from vflsec.splitnn import SplitNNClassifier

    parts, score = _parts()
    y = (score > 0).astype(int)
    clf = SplitNNClassifier(defense=DPSGD(epsilon=4.0, clip_norm=1.0, seed=0), epochs=3, batch_size=50,
                            lr=0.1, optimizer="sgd").fit(parts, y)
    assert set(clf.privacy_spent_) == {"passive_0", "passive_1"}
    for spent in clf.privacy_spent_.values():
        assert spent.releases == 18 and 0.9 * 4.0 < spent.epsilon <= 4.0
    assert clf.score(parts, y) > 0.6


def test_regression_loaders(shared_datasets):
    from vflsec.data.regression import load_california_housing, load_diabetes, load_energy

    energy = load_energy(data_dir=shared_datasets)
    assert energy.X.shape == (768, 8) and energy.task == "regression" and energy.y[0] == pytest.approx(15.55)
    assert load_energy(data_dir=shared_datasets, target="cooling").y[0] == pytest.approx(21.33)
    cal = load_california_housing(data_dir=shared_datasets)
    assert cal.X.shape == (20640, 8) and cal.y[0] == pytest.approx(4.526)
    # scikit-learn's fetch_california_housing row 0
    np.testing.assert_allclose(cal.X[0], [8.3252, 41.0, 6.984127, 1.02381, 322.0, 2.555556, 37.88, -122.23],
                               rtol=1e-5)
    assert load_diabetes().X.shape == (442, 10)
    with pytest.raises(ValueError, match="target"):
        load_energy(data_dir=shared_datasets, target="both")


# -- the VFL neighbour relation (replace-one) and one accountant path ---------------------------

def _one_step(**kw):
    """One DP-SGD step at sampling rate 1 (the batch is every row) on a small linear bottom."""
    d = DPSGD(clip_norm=kw.pop("clip_norm", 0.5), seed=0, **kw)
    d.setup(DefenseContext(n_classes=2, passive_parties=("p1",), n_samples=8, batch_size=8, epochs=1))
    m = torch.nn.Linear(3, 2)
    d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.0), torch.randn(8, 3), m, torch.randn(8, 2),
                      _batch())
    return d


def _analytic_ratio(epsilon, delta):
    """Delta / sigma of the exact (analytic) Gaussian mechanism at (epsilon, delta)."""
    from scipy.optimize import brentq

    from vflsec.dp import gaussian_delta

    return brentq(lambda r: gaussian_delta(epsilon, 1.0 / r, 1.0) - delta, 1e-3, 100.0, xtol=1e-12)


@pytest.mark.slow  # PLD accountant calibrations
def test_replace_one_noise_covers_distance_2c_and_reports_within_target():
    from vflsec.dp.accounting import composed_subsampled_gaussian

    clip, epsilon, delta = 0.5, 2.0, 1e-5
    d = _one_step(epsilon=epsilon, delta=delta, clip_norm=clip)
    mechanism = d.mechanisms_["p1"]
    assert mechanism.name == "dp_sgd" and mechanism.neighbours == "replace_one" and mechanism.sampling_rate == 1.0
    # A replaced record moves the sum from one side of the C-ball to the other: distance 2C.
    ratio = _analytic_ratio(epsilon, delta)
    assert mechanism.sigma(clip) >= 2 * clip / ratio
    assert d.noise_multiplier_ == mechanism.noise_multiplier and d.noise_multiplier_ >= 2 / ratio
    assert d.noise_multiplier_ == pytest.approx(2 / ratio, rel=0.01)  # and not much more
    # Calibration and report: the same accountant path, never above the target.
    planned = d.planned_privacy()
    calibrated = composed_subsampled_gaussian(mechanism.noise_multiplier, 1.0, 1, delta, accountant="pld",
                                              coordinates=mechanism.coordinates, neighbours="replace_one")
    assert planned.epsilon == calibrated.epsilon and 0.99 * epsilon <= planned.epsilon <= epsilon
    assert d.privacy_spent() == planned


@pytest.mark.slow  # PLD accountant calibrations
def test_add_remove_is_the_opt_in_with_less_noise():
    replace = _one_step(epsilon=2.0, delta=1e-5)
    add_remove = _one_step(epsilon=2.0, delta=1e-5, neighbours="add_remove")
    ratio = _analytic_ratio(2.0, 1e-5)
    assert add_remove.noise_multiplier_ >= 1 / ratio
    assert add_remove.noise_multiplier_ == pytest.approx(replace.noise_multiplier_ / 2, rel=0.01)
    assert add_remove.privacy_spent().neighbours == "add_remove" and add_remove.privacy_spent().epsilon <= 2.0


@pytest.mark.slow  # PLD accountant calibrations
def test_subsampled_planned_privacy_agrees_with_calibration():
    d = DPSGD(epsilon=2.0, delta=1e-3, clip_norm=1.0, seed=0)
    _setup(d, n=100, batch_size=20, epochs=5)
    m = torch.nn.Linear(3, 2)
    d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.0), torch.randn(20, 3), m, torch.randn(20, 2),
                      _batch())
    planned = d.planned_privacy()
    assert planned.releases == 25 and 0.97 * 2.0 <= planned.epsilon <= 2.0
    assert planned == d.mechanisms_["p1"].privacy_spent(caveat=SCOPE)  # the same figure, with what it does not cover
    assert d.privacy_spent().releases == 1 and d.privacy_spent().epsilon < planned.epsilon


@pytest.mark.slow  # PLD accountant calibration (subsampled, 25 steps)
def test_percentile_clip_reports_no_guarantee():
    from vflsec.splitnn.defenses.dp_sgd import NON_PRIVATE_CLIP

    d = DPSGD(epsilon=2.0, calibration_steps=2, seed=0)
    _setup(d)
    assert d.privacy_spent().epsilon is None  # before any step too: the rule itself has no guarantee
    m = torch.nn.Linear(3, 2)
    d.bottom_backward("p1", m, torch.optim.SGD(m.parameters(), lr=0.0), torch.randn(20, 3), m, torch.randn(20, 2),
                      _batch())
    for spent in (d.privacy_spent(), d.planned_privacy()):
        assert spent.epsilon is None and not spent.has_guarantee and spent.caveat == NON_PRIVATE_CLIP
        assert "non-private percentile" in str(spent)
    assert d.privacy_spent().releases == 1 and d.planned_privacy().releases == 25


def test_rdp_is_refused_for_subsampling_under_replace_one():
    d = DPSGD(epsilon=2.0, clip_norm=1.0, accountant="rdp")
    with pytest.raises(ValueError, match="RDP accountant has no bound for Poisson subsampling under replace-one"):
        _setup(d)
    _setup(DPSGD(epsilon=2.0, clip_norm=1.0, accountant="rdp", neighbours="add_remove"))
    one_step = _one_step(epsilon=2.0, delta=1e-5, accountant="rdp")  # rate 1: no subsampling, RDP has a bound
    assert one_step.privacy_spent().epsilon <= 2.0


@pytest.mark.parametrize("n, expected", [(100, 1e-5), (10_000, 1e-5), (200_000, 1.0 / 2_000_000)])
def test_default_delta_is_the_shared_rule_for_the_training_rows(n, expected):
    from vflsec.dp import default_delta

    d = DPSGD(epsilon=2.0, clip_norm=1.0)
    assert d.delta is None  # stored as given (scikit-learn's contract); resolved by setup()
    _setup(d, n=n, batch_size=min(n, 20), epochs=1)
    assert d.delta_ == default_delta(n) == pytest.approx(expected, rel=1e-12)
    assert d.privacy_spent().delta == d.delta_


def test_an_explicit_delta_of_at_least_one_over_n_is_kept_with_a_warning():
    from vflsec.dp import PrivacyWarning

    d = DPSGD(epsilon=2.0, delta=1e-2, clip_norm=1.0)
    with pytest.warns(PrivacyWarning, match=r"delta=0.01 is at least 1/n = 0.01 for n=100 rows"):
        _setup(d, n=100)
    assert d.delta_ == 1e-2
    quiet = DPSGD(epsilon=2.0, delta=1e-3, clip_norm=1.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", PrivacyWarning)
        _setup(quiet, n=100)
    assert quiet.delta_ == 1e-3


def test_the_estimator_flags_the_data_dependent_default_clip():
    # clip_norm=None (the paper's percentile rule) reads the gradients it protects: the
    # report carries the caveat and no epsilon, never a number that looks like a guarantee.
    from vflsec.splitnn import SplitNNClassifier
    from vflsec.splitnn.defenses.dp_sgd import NON_PRIVATE_CLIP

    parts, score = _parts()
    y = (score > 0).astype(int)
    n = len(y)
    clf = SplitNNClassifier(defense=DPSGD(epsilon=4.0, calibration_steps=1, seed=0), epochs=1,
                            batch_size=n).fit(parts, y)
    for spent in clf.privacy_spent_.values():
        assert spent.epsilon is None and spent.caveat == NON_PRIVATE_CLIP and spent.releases == 1
        assert str(spent).startswith("no DP guarantee (the clip threshold is a non-private percentile")
