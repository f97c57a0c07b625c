"""Prediction of the split-learning estimators: deterministic by default for every
registered defense; the defended (noisy) inference is an opt-in whose releases are counted."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from vflsec.splitnn import SplitNNClassifier, SplitNNRegressor  # noqa: E402
from vflsec.splitnn.defenses import VFLAFE, available_defenses, make_defense  # noqa: E402

# Small, fast settings for every registered defense. DP-SGD uses full batches in these
# tests (sampling rate 1: its calibration is then a closed-form Gaussian, not a PLD search).
DEFENSE_PARAMS = {
    "none": {},
    "vfl_afe": {"t": 1.0, "epsilon": 1.0, "seed": 0},
    "dp_sgd": {"epsilon": 2.0, "clip_norm": 1.0, "seed": 0},
    "fedpass": {"seed": 0},
    "noise_embedding": {"scale": 0.5, "seed": 0},
    "noise_gradient": {"scale": 0.5, "seed": 0},
    "sparsify": {"keep_fraction": 0.5},
}
ROWS = 48


def _data(seed=0, rows=ROWS):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 4] > 0).astype(np.int64)
    return [X[:, :3], X[:, 3:]], y


def _fit(name, **kw):
    parts, y = _data()
    batch = ROWS if name == "dp_sgd" else 16
    model = SplitNNClassifier(defense=make_defense(name, **DEFENSE_PARAMS[name]), epochs=2, batch_size=batch,
                              embedding_dim=4, **kw)
    return model.fit(parts, y), parts, y


def test_every_registered_defense_has_test_settings():
    # A new defense must be added here, so that its default prediction is checked too.
    assert set(DEFENSE_PARAMS) >= set(available_defenses())


@pytest.mark.parametrize("name", sorted(DEFENSE_PARAMS))
def test_predict_is_deterministic_by_default(name):
    model, parts, _ = _fit(name)
    assert model.inference == "raw"
    first, second = model.predict(parts), model.predict(parts)
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(model.predict_proba(parts), model.predict_proba(parts))
    before = model.privacy_spent_["passive_0"]
    model.predict(parts)
    assert model.privacy_spent_["passive_0"] == before  # the default prediction releases nothing


def test_regressor_predict_is_deterministic_by_default():
    parts, y = _data()
    model = SplitNNRegressor(defense=VFLAFE(t=1.0, epsilon=1.0, adjust=False, seed=0), epochs=2, batch_size=16,
                             embedding_dim=4).fit(parts, y.astype(np.float32))
    np.testing.assert_array_equal(model.predict(parts), model.predict(parts))


def test_defended_inference_is_an_opt_in_counted_in_privacy_spent():
    model, parts, y = _fit("vfl_afe")
    trained = model.privacy_spent_["passive_0"]
    assert trained.releases == 2 and trained.epsilon <= 1.0
    model.set_params(inference="defended")
    first = model.predict_proba(parts)
    after_one = model.privacy_spent_["passive_0"]
    assert after_one.releases == 3 and after_one.epsilon > trained.epsilon
    second = model.predict_proba(parts)
    assert not np.array_equal(first, second)  # noisy releases: a fresh draw per pass
    assert model.privacy_spent_["passive_0"].releases == 4
    # embed() releases too when asked for the defended embeddings, and only then.
    model.embed(parts)
    assert model.privacy_spent_["passive_0"].releases == 4
    model.embed(parts, defended=True)
    assert model.privacy_spent_["passive_0"].releases == 5
    assert model.party_defenses_["passive_0"].inference_passes_ == {"passive_0": 3}


def test_inference_mode_is_checked():
    model, parts, _ = _fit("none")
    with pytest.raises(TypeError, match="defended"):
        model.embed(parts, defended="yes")
    model.set_params(inference="noisy")
    with pytest.raises(ValueError, match="inference"):
        model.predict(parts)
    with pytest.raises(ValueError, match="inference"):
        SplitNNClassifier(inference="noisy").fit(*_data())
