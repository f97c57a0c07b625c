"""Shadow-model membership inference and the shared metrics."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from vflsec.attacks import (  # noqa: E402
    ShadowModelAttack,
    calibrated_averaged_performance,
    feature_mse,
    label_attack_accuracy,
    membership_scores,
    normalized_feature_mse,
)

torch.set_num_threads(1)


def population(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 10)).astype(np.float32)
    # Weak signal plus label noise: a model that fits its training set memorizes it.
    y = ((X[:, 0] + 1.5 * rng.normal(size=n)) > 0).astype(np.int64)
    return X, y


def make_trainer(output_noise):
    """Trains like the target (small MLP, many full-batch steps) and releases
    softmax outputs, optionally noised (a crude output-perturbation defense)."""

    def train(X, y, seed):
        torch.manual_seed(seed)
        model = torch.nn.Sequential(torch.nn.Linear(10, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        xt, yt = torch.from_numpy(X), torch.from_numpy(y)
        for _ in range(300):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt), yt).backward()
            opt.step()
        rng = np.random.default_rng(seed + 7)

        def release(Xq, yq):
            with torch.no_grad():
                p = torch.softmax(model(torch.from_numpy(np.asarray(Xq, dtype=np.float32))), 1).numpy()
            return p + output_noise * rng.normal(size=p.shape)

        return release

    return train


@pytest.mark.slow  # trains shadow models
@pytest.mark.parametrize("noise, low, high", [(0.0, 0.65, 1.0), (3.0, 0.0, 0.6)])
def test_shadow_attack_succeeds_on_overfit_model_and_fails_under_noise(noise, low, high):
    X_target, y_target = population(200, 0)      # 100 members, 100 non-members
    X_shadow, y_shadow = population(400, 1)      # attacker's own data, disjoint
    trainer = make_trainer(noise)
    release = trainer(X_target[:100], y_target[:100], 123)
    attack = ShadowModelAttack(trainer, n_shadow=3, sort_outputs=False, seed=0).fit(X_shadow, y_shadow)
    scores = attack.predict_proba(release(X_target, y_target), y_target)
    is_member = np.r_[np.ones(100), np.zeros(100)]
    result = membership_scores(is_member, scores)
    assert low <= result["accuracy"] <= high
    assert low <= result["auc"] <= high


def test_shadow_attack_validation():
    attack = ShadowModelAttack(make_trainer(0.0), n_shadow=1)
    with pytest.raises(RuntimeError):
        attack.predict_proba(np.ones((2, 2)))
    with pytest.raises(ValueError):
        attack.fit(np.ones((5, 10), dtype=np.float32), np.zeros(4))
    with pytest.raises(TypeError):
        ShadowModelAttack("no", n_shadow=1).fit(np.ones((8, 10)), np.zeros(8))


def test_metrics():
    t = np.array([[0.0, 1.0], [2.0, 3.0]])
    assert feature_mse(t, t + 1) == 1.0
    assert normalized_feature_mse(t, np.tile(t.mean(0), (2, 1))) == pytest.approx(1.0)
    assert normalized_feature_mse(t, t) == 0.0
    with pytest.raises(ValueError):
        normalized_feature_mse(np.ones((3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError):
        feature_mse(t, t[:1])
    assert label_attack_accuracy([0, 1, 1, 0], [0, 1, 0, 0]) == 0.75
    res = membership_scores([1, 1, 0, 0], [0.9, 0.6, 0.4, 0.7])
    assert res["accuracy"] == 0.75 and res["auc"] == 0.75
    with pytest.raises(ValueError):
        membership_scores([1, 1], [0.2, 0.3])
    # FedPass Definition 2: mean of accuracy x recovery error over strengths.
    assert calibrated_averaged_performance([0.9, 0.8], [0.1, 0.5]) == pytest.approx((0.09 + 0.4) / 2)
    with pytest.raises(ValueError):
        calibrated_averaged_performance([0.9], [0.1, 0.2])
