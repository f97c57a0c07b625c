"""scikit-learn and Opacus contracts: clone / get_params / set_params on every
estimator and registered defense, NotFittedError, keyword-only privacy
arguments, the defense registry, one party convention for both estimators."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

pytest.importorskip("torch")

from vflsec.glm import VerticalLogisticRegression  # noqa: E402
from vflsec.splitnn import (  # noqa: E402
    DPSGD,
    VFLAFE,
    Defense,
    FedPass,
    GaussianEmbeddingNoise,
    GaussianGradientNoise,
    GradientSparsification,
    NoDefense,
    SplitNNClassifier,
    SplitNNRegressor,
    available_defenses,
    get_defense,
    make_defense,
    register_defense,
)
from vflsec.trees import VerticalGradientBoostingClassifier  # noqa: E402

# Settings for the registered defenses that have required parameters.
REQUIRED = {"dp_sgd": {"epsilon": 2.0}, "noise_embedding": {"scale": 0.5}, "noise_gradient": {"scale": 0.5},
            "sparsify": {"keep_fraction": 0.5}}
ESTIMATORS = [VerticalLogisticRegression, SplitNNClassifier, SplitNNRegressor, VerticalGradientBoostingClassifier]


def _defense(name):
    return make_defense(name, **REQUIRED.get(name, {}))


def test_registry_has_every_defense_under_a_unique_name():
    assert set(available_defenses()) == {"none", "vfl_afe", "dp_sgd", "fedpass", "noise_embedding",
                                         "noise_gradient", "sparsify"}
    expected = {"none": NoDefense, "vfl_afe": VFLAFE, "dp_sgd": DPSGD, "fedpass": FedPass,
                "noise_embedding": GaussianEmbeddingNoise, "noise_gradient": GaussianGradientNoise,
                "sparsify": GradientSparsification}
    assert {name: get_defense(name) for name in available_defenses()} == expected
    with pytest.raises(ValueError, match="already registered"):
        register_defense("vfl_afe", DPSGD)
    register_defense("vfl_afe", VFLAFE)  # the same class again is not a conflict
    with pytest.raises(ValueError, match="registered defenses: dp_sgd, fedpass"):
        get_defense("vfl-afe")
    with pytest.raises(TypeError):
        register_defense("not_a_defense", dict)
    assert make_defense("vfl_afe", t=2.0, epsilon=3.0).get_params()["t"] == 2.0


def test_register_replace_overrides(monkeypatch):
    from vflsec.splitnn.defenses import registry

    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    class Mine(Defense):
        pass

    register_defense("mine", Mine)
    register_defense("mine", NoDefense, replace=True)
    assert get_defense("mine") is NoDefense


@pytest.mark.parametrize("name", sorted(available_defenses()))
def test_clone_every_registered_defense(name):
    d = _defense(name)
    c = clone(d)
    assert type(c) is type(d) and c is not d
    assert c.get_params() == d.get_params()
    assert set(d.get_params()) == set(type(d)._get_param_names())


# One invalid setting per defense: __init__ stores it unchanged (scikit-learn:
# no validation or conversion there); check_params() / setup() refuse it.
INVALID = [
    ("vfl_afe", {"t": -1}, ValueError), ("vfl_afe", {"epsilon": 0}, ValueError),
    ("vfl_afe", {"rescale": 1}, TypeError), ("dp_sgd", {"epsilon": "1"}, TypeError),
    ("fedpass", {"where": ("server",)}, ValueError), ("fedpass", {"seed": -1}, TypeError),
    ("noise_embedding", {"scale": -1.0}, ValueError), ("noise_gradient", {"scale": 0}, ValueError),
    ("sparsify", {"keep_fraction": 1.5}, ValueError),
]


@pytest.mark.parametrize("name, bad, exc", INVALID)
def test_defense_init_stores_parameters_unchanged(name, bad, exc):
    from vflsec.splitnn.defenses import DefenseContext

    d = make_defense(name, **{**REQUIRED.get(name, {}), **bad})
    for key, value in bad.items():
        assert getattr(d, key) is value and d.get_params()[key] is value
    with pytest.raises(exc):
        d.check_params()
    with pytest.raises(exc):
        d.setup(DefenseContext(n_classes=2, passive_parties=("p",), n_samples=10, batch_size=5, epochs=1))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_clone_every_estimator(estimator):
    model = estimator()
    c = clone(model)
    assert type(c) is estimator and c.get_params() == model.get_params()


@pytest.mark.parametrize("name", sorted(available_defenses()))
@pytest.mark.parametrize("estimator", [SplitNNClassifier, SplitNNRegressor])
def test_clone_estimator_with_defense(estimator, name):
    model = estimator(defense=_defense(name), epochs=3)
    c = clone(model)
    assert c.defense is not model.defense and type(c.defense) is type(model.defense)
    assert c.get_params(deep=False).keys() == model.get_params(deep=False).keys()
    deep, deep_c = model.get_params(deep=True), c.get_params(deep=True)
    assert {k: v for k, v in deep.items() if k != "defense"} == {k: v for k, v in deep_c.items() if k != "defense"}
    # independent objects: changing the clone's defense leaves the original alone
    key = next(iter(c.defense.get_params()), None)
    if key is not None:
        c.set_params(**{f"defense__{key}": "changed"})
        assert getattr(model.defense, key) != "changed"


def test_get_params_deep_includes_nested_defense_params():
    model = SplitNNClassifier(defense=VFLAFE(t=3.0, epsilon=0.5, delta=1e-3))
    deep = model.get_params(deep=True)
    assert deep["defense__epsilon"] == 0.5 and deep["defense__delta"] == 1e-3 and deep["defense__t"] == 3.0
    assert "defense__epsilon" not in model.get_params(deep=False)
    assert isinstance(deep["defense"], VFLAFE)


def test_set_params_round_trips():
    model = SplitNNClassifier(defense=DPSGD(epsilon=1.0), epochs=2)
    model.set_params(epochs=4, defense__epsilon=8.0, defense__delta=1e-5)
    assert model.epochs == 4 and model.defense.epsilon == 8.0 and model.defense.delta == 1e-5
    again = SplitNNClassifier().set_params(**model.get_params(deep=False))
    assert again.get_params(deep=True) == model.get_params(deep=True)
    d = VFLAFE()
    assert d.set_params(epsilon=2.0, rescale=False) is d and d.epsilon == 2.0 and d.rescale is False
    with pytest.raises(ValueError, match="Invalid parameter"):
        d.set_params(nonsense=1)
    glm = VerticalLogisticRegression().set_params(epsilon=0.3, protection="plain")
    assert glm.get_params()["epsilon"] == 0.3 and glm.protection == "plain"


def test_set_params_then_setup_recalibrates():
    from vflsec.splitnn.defenses import DefenseContext

    context = DefenseContext(n_classes=2, passive_parties=("p",), n_samples=100, batch_size=10, epochs=1,
                             extra={"embedding_dims": {"p": 4}})
    d = VFLAFE(epsilon=0.5, calibration="analytic")
    d.setup(context)
    before = d.release_sigma(4)
    d.set_params(epsilon=0.25)
    d.setup(context)
    assert d.release_sigma(4) > before


def _split_data(n=40):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 4)).astype(np.float32)
    return [X[:, :2], X[:, 2:]], (X[:, 0] > 0).astype(int)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_unfitted_use_raises_not_fitted(estimator):
    parts, _ = _split_data()
    model = estimator()
    with pytest.raises(NotFittedError, match="not fitted"):
        model.predict(parts)
    # NotFittedError subclasses both: older callers catching either still work
    with pytest.raises(ValueError):
        model.predict(parts)
    with pytest.raises(AttributeError):
        model.predict(parts)


def test_unfitted_embed_and_proba_raise_not_fitted():
    parts, _ = _split_data()
    with pytest.raises(NotFittedError):
        SplitNNClassifier().embed(parts)
    with pytest.raises(NotFittedError):
        SplitNNClassifier().predict_proba(parts)
    with pytest.raises(NotFittedError):
        VerticalLogisticRegression().decision_function(parts)


@pytest.mark.parametrize("make", [
    lambda: VFLAFE(1.0),
    lambda: VFLAFE(1.0, 2.0),
    lambda: VFLAFE(1.0, 2.0, 1e-2),
    lambda: DPSGD(2.0),
    lambda: DPSGD(2.0, 1e-3),
    lambda: GaussianEmbeddingNoise(0.5),
    lambda: GaussianGradientNoise(0.5),
    lambda: GradientSparsification(0.5),
    lambda: FedPass(100.0, 5.0),
])
def test_positional_privacy_arguments_raise(make):
    with pytest.raises(TypeError):
        make()


def test_party_convention_is_shared():
    """Active party first and passives named passive_0, passive_1, ... for both
    estimators; history_ is a dict of per-epoch lists for both."""
    parts, y = _split_data(n=60)
    glm = VerticalLogisticRegression("plain", epochs=2).fit(parts, y)
    assert list(glm.privacy_spent_) == ["active", "passive_0"]
    assert isinstance(glm.history_, dict) and len(glm.history_["loss"]) == 2
    split = SplitNNClassifier(epochs=2, batch_size=20, device="cpu", active_features=True).fit(parts, y)
    assert list(split.privacy_spent_) == ["passive_0"] and set(split.bottoms_) == {"active", "passive_0"}
    # X_parts[0] is the active party's block
    assert split.bottoms_["active"][0].in_features == parts[0].shape[1]
    assert isinstance(split.history_, dict) and len(split.history_["loss"]) == 2
    assert len(split.history_["accuracy"]) == len(split.history_["seconds"]) == len(split.history_["bytes"]) == 2
    passive_only = SplitNNClassifier(epochs=1, batch_size=20, device="cpu").fit(parts, y)
    assert list(passive_only.privacy_spent_) == ["passive_0", "passive_1"]
