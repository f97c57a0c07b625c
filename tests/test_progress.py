"""Progress output: ``verbose=`` on the estimators (one stderr line per epoch,
nothing by default), and the ``vflsec party`` split-learning summary's
``privacy_spent`` on every party."""
import re

import numpy as np
import pytest
from sklearn.base import clone

from vflsec._progress import EpochProgress, format_epsilon
from vflsec.dp.accounting import PrivacySpent
from vflsec.glm import VerticalLogisticRegression

EPOCH_LINE = re.compile(r"epoch (\d+)/(\d+): loss [0-9.]+(, accuracy [0-9.]+)?, [0-9.]+ s")


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X @ rng.normal(size=6) > 0).astype(int)
    return [X[:, :3], X[:, 3:]], y


def _epoch_lines(err):
    return [line for line in err.splitlines() if EPOCH_LINE.search(line)]


def test_epoch_progress_formats_one_line_per_call():
    lines = []
    spent = PrivacySpent(epsilon=1.234, delta=1e-5, releases=1, epsilon_per_release=1.234, accountant="x")
    progress = EpochProgress(3, lines.append, epsilon=lambda: {"a": None, "b": spent}, prefix="p: ")
    progress(0, {"loss": [0.5], "accuracy": [0.75]})
    progress(1, {})
    assert re.fullmatch(r"p: epoch 1/3: loss 0\.5000, accuracy 0\.7500, [0-9.]+ s, epsilon 1\.23 \(delta 1e-05\)",
                        lines[0])
    assert re.fullmatch(r"p: epoch 2/3: [0-9.]+ s, epsilon 1\.23 \(delta 1e-05\)", lines[1])
    assert format_epsilon({"a": None}) is None and format_epsilon(None) is None


def test_a_release_without_a_guarantee_is_said_in_the_progress_line():
    lines = []
    none = PrivacySpent(epsilon=None, delta=1e-5, releases=1, epsilon_per_release=None, accountant="x",
                        caveat="no clip")
    some = PrivacySpent(epsilon=1.0, delta=1e-5, releases=1, epsilon_per_release=1.0, accountant="x")
    EpochProgress(1, lines.append, epsilon=lambda: {"a": some, "b": none})(0, {"loss": [1.0]})
    assert lines[0].endswith(", no DP guarantee")
    assert format_epsilon(none) == "no DP guarantee"


def test_epoch_progress_survives_a_failing_epsilon():
    lines = []

    def boom():
        raise RuntimeError("not known yet")

    EpochProgress(1, lines.append, epsilon=boom)(0, {"loss": [1.0]})
    assert "epsilon" not in lines[0] and lines[0].startswith("epoch 1/1: loss 1.0000")


@pytest.mark.parametrize("protection", ["plain", "hdp"])
def test_glm_verbose_prints_one_line_per_epoch(capsys, protection):
    X_parts, y = _data()
    model = VerticalLogisticRegression(protection, epochs=3, verbose=1, epsilon=2.0).fit(X_parts, y)
    out, err = capsys.readouterr()
    lines = _epoch_lines(err)
    assert [EPOCH_LINE.search(x).group(1, 2) for x in lines] == [("1", "3"), ("2", "3"), ("3", "3")]
    assert all("accuracy" in x for x in lines)
    assert out == ""
    if protection == "hdp":
        # The active party's mechanism's own report (at most the calibrated 2.0).
        spent = model.privacy_spent_["active"].epsilon
        assert 1.95 < spent <= 2.0 and all(f"epsilon {spent:.2f}" in x for x in lines)
    else:
        assert not any("epsilon" in x for x in lines)


def test_glm_silent_by_default(capsys):
    X_parts, y = _data()
    est = VerticalLogisticRegression("plain", epochs=2)
    assert est.get_params()["verbose"] == 0
    est.fit(X_parts, y)
    assert capsys.readouterr() == ("", "")


def test_glm_verbose_is_a_cloned_param():
    est = VerticalLogisticRegression("plain", verbose=2)
    assert est.get_params()["verbose"] == 2 and clone(est).verbose == 2
    with pytest.raises(TypeError, match="verbose"):
        VerticalLogisticRegression("plain", verbose="yes").fit(*_data())


torch = pytest.importorskip("torch")

from vflsec.splitnn import SplitNNClassifier, SplitNNRegressor  # noqa: E402
from vflsec.splitnn.defenses import VFLAFE  # noqa: E402


@pytest.mark.parametrize("defense", [None, "vfl_afe"])
def test_splitnn_verbose_prints_one_line_per_epoch(capsys, defense):
    X_parts, y = _data()
    d = VFLAFE(epsilon=5.0, calibration="analytic") if defense else None
    SplitNNClassifier(defense=d, epochs=2, batch_size=40, verbose=1, lr=1e-2).fit(X_parts, y)
    out, err = capsys.readouterr()
    lines = _epoch_lines(err)
    assert len(lines) == 2 and all("accuracy" in x for x in lines), err
    assert out == ""
    assert all(("epsilon" in x) == bool(defense) for x in lines)


def test_splitnn_silent_by_default_and_clone(capsys):
    X_parts, y = _data()
    est = SplitNNRegressor(epochs=2, batch_size=40)
    assert est.get_params()["verbose"] == 0
    est.fit(X_parts, y.astype(float))
    assert capsys.readouterr() == ("", "")
    est = SplitNNClassifier(verbose=1)
    assert clone(est).get_params()["verbose"] == 1
    with pytest.raises(TypeError, match="verbose"):
        SplitNNClassifier(verbose=None, epochs=1, batch_size=40).fit(X_parts, y)
