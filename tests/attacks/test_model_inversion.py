"""Feature inference from embeddings: black-box decoder and white-box inversion.

The attacker gets only the embeddings the passive party sends (here from a
small trained-like bottom model, optionally with Gaussian noise as a defense)
and, per threat model, auxiliary rows with their embeddings (black-box) or
the released bottom model (white-box).
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.attacks import (  # noqa: E402
    blackbox_model_inversion,
    feature_mse,
    normalized_feature_mse,
    query_embeddings,
    total_variation,
    whitebox_model_inversion,
)

torch.set_num_threads(1)


def low_rank_data(n, d=8, rank=4, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(n, rank)) @ rng.normal(size=(rank, d)) / 2).astype(np.float32)


def bottom(d_in, d_out, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(d_in, 32), torch.nn.Tanh(), torch.nn.Linear(32, d_out))


def sent(model, X, noise=0.0, seed=0):
    """What the passive party sends: f(x) plus its defense's Gaussian noise."""
    h = query_embeddings(model, X)
    return h + noise * np.random.default_rng(seed).normal(size=h.shape).astype(np.float32)


def test_blackbox_inversion_beats_the_mean_and_degrades_under_noise():
    X = low_rank_data(700)
    aux, target = X[:500], X[500:]
    f = bottom(8, 6)
    rec = blackbox_model_inversion(aux, sent(f, aux), sent(f, target, seed=1), epochs=60, seed=0)
    assert rec.shape == target.shape
    mean_guess = feature_mse(target, np.broadcast_to(aux.mean(0), target.shape))
    assert feature_mse(target, rec) < 0.1 * mean_guess
    # Strong embedding noise (well above the embedding scale) leaves little to decode.
    noisy = blackbox_model_inversion(aux, sent(f, aux, 5.0), sent(f, target, 5.0, seed=1), epochs=60, seed=0)
    assert normalized_feature_mse(target, noisy) > 0.7


def test_whitebox_inversion_recovers_inputs_and_degrades_under_noise():
    X = low_rank_data(40, seed=2)
    f = bottom(8, 12, seed=3)  # wider than the input: f is (locally) invertible
    rec = whitebox_model_inversion(f, sent(f, X), (8,), steps=200, optimizer="lbfgs")
    assert normalized_feature_mse(X, rec) < 1e-4
    noisy = whitebox_model_inversion(f, sent(f, X, 2.0), (8,), steps=200, optimizer="lbfgs")
    assert normalized_feature_mse(X, noisy) > 0.5
    # The attacker's model is never modified.
    before = [p.detach().clone() for p in f.parameters()]
    whitebox_model_inversion(f, sent(f, X[:2]), (8,), steps=3)
    assert all(torch.equal(a, b) for a, b in zip(before, f.parameters()))
    assert all(p.requires_grad for p in f.parameters())


def test_whitebox_inversion_with_total_variation_prior_on_images():
    # Smooth 6x6 "images"; the bottom model compresses 36 pixels to 12 values,
    # so the embedding alone underdetermines the image and the TV prior helps.
    rng = np.random.default_rng(4)
    yy, xx = np.mgrid[0:6, 0:6] / 5.0
    planes = rng.uniform(-0.5, 0.5, size=(20, 3)) + [0, 0, 0.5]
    imgs = np.stack([np.clip(a * xx + b * yy + c, 0, 1) for a, b, c in planes])
    imgs = imgs.astype(np.float32)[:, None]  # (20, 1, 6, 6)
    torch.manual_seed(5)
    f = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(36, 12))
    h = query_embeddings(f, imgs)
    plain = whitebox_model_inversion(f, h, (1, 6, 6), steps=300, lr=0.05, bounds=(0.0, 1.0))
    tv = whitebox_model_inversion(f, h, (1, 6, 6), tv_weight=0.1, steps=300, lr=0.05, bounds=(0.0, 1.0))
    assert tv.shape == imgs.shape and tv.min() >= 0.0 and tv.max() <= 1.0
    assert feature_mse(imgs, tv) < feature_mse(imgs, plain)
    assert feature_mse(imgs, tv) < 0.5 * feature_mse(imgs, np.broadcast_to(imgs.mean(0), imgs.shape))


def test_total_variation_and_validation():
    img = torch.zeros(2, 1, 3, 3)
    img[1, 0, :, 2] = 1.0  # one vertical edge of height 3
    assert total_variation(img).tolist() == [0.0, 3.0]
    f = bottom(8, 6)
    with pytest.raises(ValueError):
        whitebox_model_inversion(f, np.ones((2, 6)), (8,), tv_weight=0.1)  # TV needs 2-D images
    with pytest.raises(ValueError):
        blackbox_model_inversion(np.ones((4, 3)), np.ones((5, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError):
        blackbox_model_inversion(np.ones((4, 3)), np.ones((4, 2)), np.ones((2, 2)), bounds=(1.0, 0.0))
    with pytest.raises(ValueError):
        whitebox_model_inversion(f, np.ones((2, 5)), (8,), steps=1)  # wrong embedding width
    with pytest.raises(TypeError):
        query_embeddings(object(), np.ones((2, 8)))
