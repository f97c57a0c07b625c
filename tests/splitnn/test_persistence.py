"""Saved split-learning models and defenses (vflsec.splitnn.persistence): every registered
defense's model reloads and predicts identically, its privacy report survives, nothing is
pickled and no noise generator or seed is written; split models pickle and copy (their noise
generators are dropped, never copied); bad files are refused naming the file."""
import copy
import functools
import json
import pickle
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

from vflsec.splitnn import SplitNNClassifier, SplitNNRegressor  # noqa: E402
from vflsec.splitnn.defenses import (  # noqa: E402
    DPSGD,
    VFLAFE,
    Defense,
    FedPass,
    available_defenses,
    make_defense,
)
from vflsec.splitnn.models import cnn_bottom, mlp_bottom, mlp_head  # noqa: E402
from vflsec.splitnn.persistence import HEADER  # noqa: E402

# Small settings for every registered defense (DP-SGD with full batches: sampling rate 1
# calibrates in closed form instead of a PLD search).
SETTINGS = {
    "none": {},
    "vfl_afe": {"t": 1.0, "epsilon": 2.0, "seed": 3},
    "dp_sgd": {"epsilon": 2.0, "clip_norm": 1.0, "seed": 3},
    "fedpass": {"seed": 3},
    "noise_embedding": {"scale": 0.5, "seed": 3},
    "noise_gradient": {"scale": 0.5, "seed": 3},
    "sparsify": {"keep_fraction": 0.5},
}
ROWS = 48


def _data(rows=ROWS, seed=0, widths=(3, 3)):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(rows, sum(widths))).astype(np.float32)
    y = (X[:, 0] + X[:, -1] > 0).astype(np.int64)
    cut = np.cumsum(widths)[:-1]
    return np.split(X, cut, axis=1), y


def _fit(name, estimator=SplitNNClassifier, y_map=None, **kw):
    parts, y = _data()
    labels = y if y_map is None else y_map(y)
    batch = ROWS if name == "dp_sgd" else 16
    kw.setdefault("embedding_dim", 4)
    model = estimator(defense=make_defense(name, **SETTINGS[name]), epochs=2, batch_size=batch, **kw)
    return model.fit(parts, labels), parts


def _header(path):
    with np.load(path, allow_pickle=False) as data:
        return json.loads(bytes(data[HEADER].tobytes()).decode("utf-8"))


def test_every_registered_defense_has_settings_here():
    # A new defense must be added to SETTINGS, so that its save/load is checked too.
    assert set(SETTINGS) >= set(available_defenses())


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_a_reloaded_model_predicts_identically_and_reports_the_same_privacy(tmp_path, name):
    model, parts = _fit(name, y_map=lambda y: np.array(["decline", "approve"])[y])
    path = tmp_path / "model.npz"
    model.save(path)
    assert path.stat().st_mode & 0o777 == 0o600  # model weights: owner-only, as the runtime writes them
    loaded = SplitNNClassifier.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(parts), model.predict_proba(parts))  # bit for bit
    np.testing.assert_array_equal(loaded.predict(parts), model.predict(parts))
    assert loaded.classes_.tolist() == ["approve", "decline"]
    assert loaded.classes_.dtype == model.classes_.dtype
    assert loaded.privacy_spent_ == model.privacy_spent_
    assert loaded.history_ == model.history_ and loaded.passive_parties_ == model.passive_parties_
    assert loaded.embedding_dims_ == model.embedding_dims_ and loaded.n_features_per_party_ == [3, 3]
    assert type(loaded.defense_) is type(model.defense_) and loaded.defense is loaded.defense_
    # Every parameter comes back except the noise seed, which is never written.
    params = loaded.defense_.get_params()
    expected = dict(model.defense_.get_params())
    if "seed" in expected:
        assert params["seed"] is None
        expected["seed"] = None
    assert params == expected
    header = _header(path)
    text = json.dumps(header)
    assert header["format"] == "vflsec-splitnn-model" and header["estimator"] == "SplitNNClassifier"
    assert "Generator" not in text and '"seed": 3' not in text


def test_a_vfl_afe_model_keeps_its_mechanisms_and_inference_passes(tmp_path):
    model, parts = _fit("vfl_afe", inference="defended")
    model.predict(parts)  # one defended pass: a release, counted
    spent = model.privacy_spent_["passive_0"]
    assert spent.releases == 3
    path = tmp_path / "afe.npz"
    model.save(path)
    loaded = SplitNNClassifier.load(path)
    assert loaded.privacy_spent_["passive_0"] == spent and loaded.inference == "defended"
    original, copy_ = model.party_defenses_["passive_0"], loaded.party_defenses_["passive_0"]
    assert copy_._mechanisms == original._mechanisms  # the sigmas the noise was drawn with, not recalibrated
    assert copy_.delta_ == original.delta_ and copy_.epsilon_ == original.epsilon_ == 2.0
    # The loaded model goes on counting: a defended pass after loading is one more release.
    loaded.predict(parts)
    assert loaded.privacy_spent_["passive_0"].releases == 4
    assert loaded.privacy_spent_["passive_0"].epsilon > spent.epsilon
    # ... and draws fresh noise: the seeded stream is not saved, so it is not replayed.
    assert not np.array_equal(loaded.embed(parts, defended=True)["passive_0"],
                              model.embed(parts, defended=True)["passive_0"])


def test_a_dp_sgd_model_keeps_each_owners_accounting(tmp_path):
    model, parts = _fit("dp_sgd")
    path = tmp_path / "sgd.npz"
    model.save(path)
    loaded = SplitNNClassifier.load(path)
    for party in ("passive_0", "passive_1"):
        before, after = model.party_defenses_[party], loaded.party_defenses_[party]
        assert after.mechanisms_ == before.mechanisms_ and after.steps_ == before.steps_ == {party: 2}
        assert after.clip_norm_ == before.clip_norm_ and after.delta_ == before.delta_
        assert after.planned_privacy() == before.planned_privacy()
        assert not hasattr(after, "calibration_norms_") or after.calibration_norms_ == {}  # data: not saved
    np.testing.assert_array_equal(loaded.predict(parts), model.predict(parts))


def test_a_regressor_with_own_features_and_factory_models_reloads(tmp_path):
    parts, y = _data(widths=(2, 3, 2))
    model = SplitNNRegressor(bottoms=functools.partial(mlp_bottom, hidden=(5,), out_features=3),
                             head=functools.partial(mlp_head, hidden=(6,)), active_features=True,
                             defense=VFLAFE(t=2.0, epsilon=4.0, adjust=False), epochs=2, batch_size=16)
    model.fit(parts, y.astype(np.float32) + parts[1][:, 0])
    model.save(tmp_path / "reg.npz")
    with pytest.raises(ValueError, match="SplitNNRegressor.load"):
        SplitNNClassifier.load(tmp_path / "reg.npz")
    loaded = SplitNNRegressor.load(tmp_path / "reg.npz", device="cpu")
    np.testing.assert_array_equal(loaded.predict(parts), model.predict(parts))
    assert loaded.score(parts, y) == model.score(parts, y)
    assert set(loaded.bottoms_) == {"passive_0", "passive_1", "active"}
    assert isinstance(loaded.bottoms, functools.partial) and loaded.bottoms.keywords == {"hidden": [5],
                                                                                          "out_features": 3}


def test_models_of_the_users_own_must_be_given_again(tmp_path):
    parts, y = _data()
    own = lambda p: torch.nn.Sequential(torch.nn.Linear(p, 5), torch.nn.Tanh(), torch.nn.Linear(5, 4))  # noqa: E731
    model = SplitNNClassifier(bottoms=own, epochs=1, batch_size=16).fit(parts, y)
    model.save(tmp_path / "own.npz")
    with pytest.raises(ValueError, match=r"pass bottoms= \(the same modules or factories"):
        SplitNNClassifier.load(tmp_path / "own.npz")
    loaded = SplitNNClassifier.load(tmp_path / "own.npz", bottoms=own)
    np.testing.assert_array_equal(loaded.predict_proba(parts), model.predict_proba(parts))
    # Other modules than the saved ones: their weights do not fit, and the error says what to pass.
    with pytest.raises(ValueError, match="do not fit the model built for them"):
        SplitNNClassifier.load(tmp_path / "own.npz", bottoms=lambda p: mlp_bottom(p, (7,), 4))


def test_fedpass_conv_passports_drawn_at_the_first_input_reload(tmp_path):
    # A passport conv layer takes its passports' size from its first input (None buffers
    # until then): loading must restore them and keep them, not draw new ones.
    parts, y = _data(widths=(16, 16))
    bottom = lambda p: cnn_bottom((4, p // 4), 4, channels=(2, 3))  # noqa: E731  (the benchmark's kind)
    model = SplitNNClassifier(bottoms=bottom, defense=FedPass(seed=1), epochs=1, batch_size=16).fit(parts, y)
    model.save(tmp_path / "fedpass.npz")
    loaded = SplitNNClassifier.load(tmp_path / "fedpass.npz", bottoms=bottom)
    layer = loaded.party_defenses_["passive_0"].layers_["passive_0"][1]
    assert layer.passport_gamma is not None and layer.passport_gamma.shape == (1, 2, 2, 2)  # after one 2x2 pooling
    np.testing.assert_array_equal(loaded.predict_proba(parts), model.predict_proba(parts))
    np.testing.assert_array_equal(loaded.predict_proba(parts), loaded.predict_proba(parts))


@pytest.mark.parametrize("name", ["vfl_afe", "dp_sgd", "fedpass", "noise_embedding", "none"])
def test_a_defense_alone_saves_and_loads(tmp_path, name):
    model, parts = _fit(name)
    defense = model.party_defenses_["passive_0"]
    path = tmp_path / "defense.json"
    defense.save(path)
    assert path.stat().st_mode & 0o777 == 0o600
    document = json.loads(path.read_text())
    assert document["format"] == "vflsec-splitnn-defense" and document["defense"] == name
    assert document["context"]["seed"] is None and document["params"].get("seed") is None
    loaded = Defense.load(path)
    assert type(loaded) is type(defense) and loaded.privacy_spent() == defense.privacy_spent()
    assert type(defense).load(path).get_params() == loaded.get_params()
    other = DPSGD if name != "dp_sgd" else VFLAFE
    with pytest.raises(ValueError, match=f"not a {other.__name__}"):
        other.load(path)


def test_an_unset_defense_saves_its_parameters_only(tmp_path):
    defense = FedPass(n_range=10.0, sigma2=2.0, where=("passive",))
    defense.save(tmp_path / "d.json")
    loaded = Defense.load(tmp_path / "d.json")
    assert loaded.get_params() == defense.get_params() and loaded.where == ("passive",)
    assert not hasattr(loaded, "context_")


def test_an_unregistered_defense_cannot_be_saved(tmp_path):
    class Mine(Defense):
        pass

    with pytest.raises(ValueError, match="not registered"):
        Mine().save(tmp_path / "d.json")
    assert not (tmp_path / "d.json").exists()


@pytest.mark.parametrize("content, words", [
    (b"not a zip", "not a saved vflsec split-learning model"),
    (b"", "not a saved vflsec split-learning model"),
])
def test_bad_model_files_are_refused_naming_the_file(tmp_path, content, words):
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=words) as info:
        SplitNNClassifier.load(path)
    assert str(path) in str(info.value)


def test_an_npz_without_the_header_or_of_another_version_is_refused(tmp_path):
    np.savez(tmp_path / "plain.npz", w=np.zeros(3))
    with pytest.raises(ValueError, match="no __vflsec__ header"):
        SplitNNClassifier.load(tmp_path / "plain.npz")
    np.save(tmp_path / "one.npy", np.zeros(3))
    with pytest.raises(ValueError, match="one array, not an archive"):
        SplitNNClassifier.load(tmp_path / "one.npy")
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="not a saved vflsec split-learning model"):  # pickled data: refused
        SplitNNClassifier.load(tmp_path / "objects.npy")
    model, _ = _fit("none")
    model.save(tmp_path / "m.npz")
    header = _header(tmp_path / "m.npz")
    header["version"] = 99
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays[HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "v99.npz", **arrays)
    with pytest.raises(ValueError, match="format version 99"):
        SplitNNClassifier.load(tmp_path / "v99.npz")
    with pytest.raises(FileNotFoundError):
        SplitNNClassifier.load(tmp_path / "missing.npz")
    (tmp_path / "d.json").write_text("{not json")
    with pytest.raises(ValueError, match="not a saved vflsec split-learning defense"):
        Defense.load(tmp_path / "d.json")


def test_a_model_file_holds_no_pickle(tmp_path):
    model, _ = _fit("dp_sgd")
    model.save(tmp_path / "m.npz")
    with zipfile.ZipFile(tmp_path / "m.npz") as archive:
        members = archive.namelist()
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:  # object arrays would need pickle to load
        assert len(data.files) == len(members) > 1
        assert all(not data[key].dtype.hasobject for key in data.files)


def test_an_unfitted_model_cannot_be_saved(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SplitNNClassifier().save(tmp_path / "m.npz")


@pytest.mark.parametrize("name", ["dp_sgd", "fedpass", "vfl_afe", "noise_embedding"])
def test_split_models_pickle_and_copy_without_their_noise_generators(name):
    # "A DP-SGD split model cannot be pickled": its defense held its noise generators,
    # which refuse to be copied (a copy would repeat the noise). Copies now start their own.
    model, parts = _fit(name)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_proba(parts), model.predict_proba(parts))
    assert again.privacy_spent_ == model.privacy_spent_
    copied = copy.deepcopy(model)
    np.testing.assert_array_equal(copied.predict_proba(parts), model.predict_proba(parts))
    for defense in again.party_defenses_.values():
        assert not getattr(defense, "_generators", {})


def test_a_copied_passport_layer_cannot_draw_new_passports():
    model, parts = _fit("fedpass")
    layer = copy.deepcopy(model.party_defenses_["passive_0"].layers_["passive_0"][1])
    with pytest.raises(RuntimeError, match="cannot draw new ones"):
        layer.resample()


def test_a_model_saved_for_a_device_this_machine_lacks_loads_where_asked(tmp_path):
    model, parts = _fit("none")
    model.save(tmp_path / "m.npz")
    header = _header(tmp_path / "m.npz")
    header["params"]["device"] = "cuda:7"  # as saved on a machine with eight GPUs
    with np.load(tmp_path / "m.npz", allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays[HEADER] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "gpu.npz", **arrays)
    if torch.cuda.device_count() < 8:
        with pytest.raises(ValueError, match="pass device='cpu'"):
            SplitNNClassifier.load(tmp_path / "gpu.npz")
    loaded = SplitNNClassifier.load(tmp_path / "gpu.npz", device="cpu")
    assert loaded.device == loaded.device_ == "cpu"
    np.testing.assert_array_equal(loaded.predict_proba(parts), model.predict_proba(parts))
