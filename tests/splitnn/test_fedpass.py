"""FedPass passport layers: formula, shapes, passport sampling, model surgery, training."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from vflsec.kernels import NoiseGenerator  # noqa: E402
from vflsec.splitnn.defenses.base import BatchInfo, DefenseContext  # noqa: E402
from vflsec.splitnn.defenses.dp_sgd import dp_vfl_models  # noqa: E402
from vflsec.splitnn.defenses.fedpass import FedPass, PassportConv2d, PassportLinear  # noqa: E402

PARTIES = ("p1", "p2")


def _context(n=100, batch_size=20, epochs=3, seed=None):
    return DefenseContext(n_classes=2, passive_parties=PARTIES, n_samples=n, batch_size=batch_size,
                          epochs=epochs, seed=seed)


def _batch(step=0):
    return BatchInfo(0, step, step, np.arange(4))


def _autoencode(layer, key):
    out = layer.decoder(F.leaky_relu(layer.encoder(key))).mean(dim=0)
    return torch.tanh(out) if layer.squash == "tanh" else out


@pytest.mark.parametrize("squash", ["tanh", None])
def test_passport_linear_formula_and_shapes(squash):
    torch.manual_seed(0)
    layer = PassportLinear(5, 8, n_range=10, sigma2=2, passport_rows=3, squash=squash,
                           generator=NoiseGenerator(1))
    assert layer.passport_gamma.shape == (3, 5) and layer.passport_beta.shape == (3, 5)
    x = torch.randn(4, 5)
    gamma = _autoencode(layer, layer.passport_gamma @ layer.weight.T)
    beta = _autoencode(layer, layer.passport_beta @ layer.weight.T)
    torch.testing.assert_close(layer(x), gamma * (x @ layer.weight.T) + beta)
    assert layer(torch.randn(2, 7, 5)).shape == (2, 7, 8)  # extra leading dims as nn.Linear
    if squash == "tanh":
        g, b = layer.passport_params()
        assert g.abs().max() < 1 and b.abs().max() < 1


@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 0)])
def test_passport_conv_formula_and_shapes(stride, padding):
    torch.manual_seed(0)
    layer = PassportConv2d(3, 8, 3, stride=stride, padding=padding, n_range=5, sigma2=1,
                           generator=NoiseGenerator(2))
    ref = nn.Conv2d(3, 8, 3, stride=stride, padding=padding)
    x = torch.randn(2, 3, 9, 9)
    out = layer(x)
    assert out.shape == ref(x).shape
    assert layer.passport_gamma.shape == (1, 3, 9, 9)  # passport size taken from the first input
    key = F.conv2d(layer.passport_gamma, layer.weight, None, stride, padding)
    gamma = _autoencode(layer, key.flatten(2).squeeze(0).T)
    key = F.conv2d(layer.passport_beta, layer.weight, None, stride, padding)
    beta = _autoencode(layer, key.flatten(2).squeeze(0).T)
    expected = gamma.view(1, -1, 1, 1) * F.conv2d(x, layer.weight, None, stride, padding) + beta.view(1, -1, 1, 1)
    torch.testing.assert_close(out, expected)
    fixed = PassportConv2d(3, 4, 3, passport_size=5, generator=NoiseGenerator(0))
    assert fixed.passport_gamma.shape == (1, 3, 5, 5) and fixed(torch.randn(1, 3, 7, 7)).shape == (1, 4, 5, 5)


def test_passport_distribution():
    n_range, sigma2 = 20.0, 4.0
    layer = PassportLinear(6, 4, n_range=n_range, sigma2=sigma2, passport_rows=4000, generator=NoiseGenerator(5))
    mu = layer.passport_mean  # (2, in): gamma and beta means per input channel
    assert mu.shape == (2, 6) and bool(((mu > -n_range) & (mu <= 0)).all())
    assert len(set(mu.flatten().tolist())) == 12  # all different
    for s, m in ((layer.passport_gamma, mu[0]), (layer.passport_beta, mu[1])):
        torch.testing.assert_close(s.mean(dim=0), m, atol=0.15, rtol=0)  # 4 sd of the mean of 4000
        torch.testing.assert_close(s.var(dim=0), torch.full((6,), sigma2), atol=0.6, rtol=0)


def test_passports_differ_between_batches_and_means_stay():
    torch.manual_seed(0)
    fp = FedPass(n_range=50, sigma2=3, seed=7)
    fp.setup(_context())
    bottom = fp.wrap_bottom("p1", nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5)))
    layer = bottom[2]
    x = torch.randn(3, 4)
    fp.on_batch_start(_batch(0))
    s1, mu1, out1 = layer.passport_gamma.clone(), layer.passport_mean.clone(), bottom(x)
    fp.on_batch_start(_batch(1))
    assert not torch.equal(layer.passport_gamma, s1)
    assert not torch.allclose(bottom(x), out1)
    assert torch.equal(layer.passport_mean, mu1)


def test_seeded_passports_reproducible_and_secure_ones_differ():
    def passports(seed):
        torch.manual_seed(0)
        fp = FedPass(seed=seed)
        fp.setup(_context())
        m = fp.wrap_bottom("p1", nn.Linear(4, 4))
        fp.on_batch_start(_batch())
        return m.passport_gamma.clone()

    assert torch.equal(passports(3), passports(3))
    assert not torch.equal(passports(3), passports(4))
    assert not torch.equal(passports(None), passports(None))


def test_model_surgery_places_passports():
    torch.manual_seed(0)
    fp = FedPass(seed=0)
    fp.setup(_context())
    mlp = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5), nn.ReLU())
    w = mlp[2].weight.detach().clone()
    mlp = fp.wrap_bottom("p1", mlp)
    assert isinstance(mlp[2], PassportLinear) and isinstance(mlp[0], nn.Linear)
    assert not isinstance(mlp[0], PassportLinear) and torch.equal(mlp[2].weight.detach(), w)

    cnn = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 6, 3), nn.ReLU(), nn.Flatten(),
                        nn.Linear(6 * 4 * 4, 10))
    cnn = fp.wrap_bottom("p2", cnn)
    assert isinstance(cnn[2], PassportConv2d) and type(cnn[0]) is nn.Conv2d and type(cnn[5]) is nn.Linear
    assert cnn(torch.randn(2, 1, 6, 6)).shape == (2, 10)

    head = fp.wrap_head(nn.Sequential(nn.Linear(10, 7), nn.ReLU(), nn.Linear(7, 2)))
    assert isinstance(head[0], PassportLinear) and type(head[2]) is nn.Linear
    assert set(fp.layers_) == {"p1", "p2", "active"} and fp.layers_["p2"][0] == "2"

    only_active = FedPass(where=("active",), seed=0)
    only_active.setup(_context())
    plain = nn.Linear(3, 3)
    assert only_active.wrap_bottom("p1", plain) is plain
    assert isinstance(only_active.wrap_head(nn.Linear(3, 2)), PassportLinear)  # a bare layer is replaced

    with pytest.raises(ValueError, match="no Conv2d or Linear"):
        fp.wrap_bottom("p3", nn.Sequential(nn.ReLU()))


def test_weight_learns_through_all_paths_and_autoencoder_trains():
    torch.manual_seed(0)
    layer = PassportLinear(4, 8, n_range=5, sigma2=1, generator=NoiseGenerator(0))
    x = torch.zeros(2, 4)  # W x = 0: any gradient on W must come through gamma or beta
    layer(x).sum().backward()
    assert layer.weight.grad.abs().sum() > 0
    assert layer.encoder.weight.grad.abs().sum() > 0 and layer.decoder.weight.grad.abs().sum() > 0


def _train(defense, X, y, *, epochs=15, batch_size=25, lr=0.1, seed=0):
    """Minimal split-learning loop with the hooks in the documented order."""
    n, cols = len(y), {"p1": slice(0, 3), "p2": slice(3, 6)}
    torch.manual_seed(seed)
    bottoms, head = dp_vfl_models([3, 3], 1)
    defense.setup(_context(n=n, batch_size=batch_size, epochs=epochs, seed=seed))
    bottoms = {P: defense.wrap_bottom(P, m) for P, m in zip(PARTIES, bottoms)}
    head = defense.wrap_head(head)
    opts = {P: torch.optim.SGD(m.parameters(), lr=lr) for P, m in bottoms.items()}
    head_opt = torch.optim.SGD(head.parameters(), lr=lr)

    def loss_all():
        with torch.no_grad():
            z = head(torch.cat([bottoms[P](X[:, cols[P]]) for P in PARTIES], 1)).squeeze(1)
            return float(F.binary_cross_entropy_with_logits(z, y))

    rng = np.random.default_rng(seed)
    step = 0
    defense.on_batch_start(BatchInfo(0, 0, 0, np.arange(0)))
    before = loss_all()
    for epoch in range(epochs):
        order = rng.permutation(n)
        for i, start in enumerate(range(0, n, batch_size)):
            idx = order[start:start + batch_size]
            batch = BatchInfo(epoch, i, step, idx)
            defense.on_batch_start(batch)
            sent = {P: defense.transform_embedding(P, bottoms[P](X[idx][:, cols[P]]), batch) for P in PARTIES}
            recv = {P: h.detach().requires_grad_(True) for P, h in sent.items()}
            loss = F.binary_cross_entropy_with_logits(head(torch.cat([recv[P] for P in PARTIES], 1)).squeeze(1),
                                                      y[idx])
            head_opt.zero_grad()
            loss.backward()
            head_opt.step()
            grads = defense.transform_gradient({P: recv[P].grad for P in PARTIES}, batch)
            for P in PARTIES:
                opts[P].zero_grad()
                assert not defense.bottom_backward(P, bottoms[P], opts[P], X[idx][:, cols[P]], bottoms[P],
                                                   grads[P], batch)
                (sent[P] * grads[P]).sum().backward()
                opts[P].step()
            step += 1
    return before, loss_all()


def test_loss_decreases_with_fedpass():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(200, 6, generator=g)
    y = (X @ torch.randn(6, generator=g) > 0).float()
    before, after = _train(FedPass(n_range=100, sigma2=5, seed=1), X, y)
    assert after < before - 0.2
    assert FedPass().privacy_spent() is None


def test_invalid_settings_raise():
    for kwargs, match in [({"n_range": 0}, "n_range"), ({"n_range": -3}, "n_range"),
                          ({"sigma2": 0}, "sigma2"), ({"sigma2": -1}, "sigma2"),
                          ({"where": ()}, "where"), ({"where": ("server",)}, "where"),
                          ({"where": ("active", "active")}, "where"), ({"squash": "relu"}, "squash"),
                          ({"passport_rows": 0}, "passport_rows")]:
        with pytest.raises(ValueError, match=match):
            FedPass(**kwargs).check_params()  # validated when attached (setup), not in __init__
    with pytest.raises(TypeError, match="n_range"):
        FedPass(n_range="10").check_params()
    with pytest.raises(ValueError, match="n_range"):
        FedPass(n_range=float("inf")).check_params()
    with pytest.raises(ValueError, match="sigma2"):
        PassportLinear(3, 3, sigma2=0)
    with pytest.raises(TypeError, match="seed"):
        FedPass(seed=-1).check_params()
    one_side = FedPass(where="passive")
    one_side.setup(_context())
    assert one_side.where_ == ("passive",)
    assert FedPass(n_range=20, sigma2=2).variant == "N=20,sigma2=2"
    with pytest.raises(RuntimeError, match="setup"):
        FedPass().wrap_bottom("p1", nn.Linear(2, 2))


def test_estimator_end_to_end():
    from vflsec.data import make_synthetic
    from vflsec.splitnn import SplitNNClassifier

    ds = make_synthetic(300, (3, 3), seed=1)
    parts = [ds.X[:, :3].astype(np.float32), ds.X[:, 3:].astype(np.float32)]
    clf = SplitNNClassifier(defense=FedPass(seed=0), epochs=8, batch_size=30, lr=0.1, optimizer="sgd",
                            embedding_dim=32).fit(parts, ds.y)
    assert isinstance(clf.bottoms_["passive_0"][2], PassportLinear)  # mlp_bottom's last Linear
    assert isinstance(clf.head_, PassportLinear)  # the default head is one Linear layer
    assert clf.score(parts, ds.y) > 0.6 and clf.privacy_spent_ == {"passive_0": None, "passive_1": None}


def test_wrapping_is_reproducible_and_leaves_global_rng_alone():
    # The trainer wraps models inside party threads: the passport layers must not
    # draw from torch's global generator (thread timing would change the run).
    def wrapped(global_seed):
        torch.manual_seed(global_seed)
        fp = FedPass(seed=4)
        fp.setup(_context())
        bottom = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Conv2d(4, 8, 3))
        head = nn.Sequential(nn.Linear(8, 8))
        state = torch.get_rng_state()
        m = fp.wrap_bottom("p1", bottom)
        h = fp.wrap_head(head)
        assert torch.equal(torch.get_rng_state(), state)
        return m[2].encoder.weight, m[2].decoder.weight, h[0].encoder.weight, h[0].decoder.weight

    for a, b in zip(wrapped(0), wrapped(99)):
        assert torch.equal(a, b)
