"""The split-learning benchmark's DP-VFL and FedPass sections (vflsec.bench.experiments.splitnn.dp) on tiny
data: the rows they write (the defenses themselves: tests/splitnn/test_dp_sgd.py and
tests/splitnn/test_fedpass.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.mark.slow  # end to end: DP-VFL runs and the PLD accountant
def test_benchmark_rows_schema_and_each_clip_entry():
    """One DP-SGD row per clip entry: the default clip (C = 1, fixed before the run) has a
    guarantee within the target; the paper's percentile clip ("p80") none, and the
    report's epsilon cell says so."""
    import logging

    from vflsec.bench.experiments.splitnn.dp import dp_vfl_estimator_factory, run_dp_vfl, split_attributes_equally
    from vflsec.bench.experiments.splitnn.report import _dp_sgd_epsilon
    from vflsec.data.regression import load_diabetes

    ds = load_diabetes()
    blocks = split_attributes_equally(ds, 3)
    assert [len(b) for b in blocks] == [4, 3, 3]
    rows = run_dp_vfl({"diabetes": ds}, dp_vfl_estimator_factory(epochs=1, batch_size=50, lr=0.01),
                      epsilons=(2.0,), owners=(3,), clips=(1.0, "p80"), dp_kwargs={"calibration_steps": 2, "seed": 0})
    logging.getLogger("absl").setLevel(logging.WARNING)
    keys = {"dataset", "defense", "variant", "parties", "epsilon", "epsilon_composed", "delta", "seed", "metric",
            "value", "privacy_warning"}
    assert [(r["defense"], r["variant"], r["parties"]) for r in rows] == [
        ("centralized", None, 1), ("none", "vfl", 3), ("dp_sgd", "clip=1", 3), ("dp_sgd", "clip=p80", 3)]
    for r in rows:
        assert set(r) == keys and r["metric"] == "mse" and np.isfinite(r["value"]) and r["value"] > 0
    fixed, percentile = rows[2], rows[3]
    # C fixed before the run: the composed epsilon is a guarantee, calibrated to at most the target.
    assert fixed["epsilon"] == 2.0 and fixed["delta"] == 1e-3 and 1.9 < fixed["epsilon_composed"] <= 2.0
    assert fixed["privacy_warning"] is None  # 354 training rows: delta 1e-3 < 1/n
    # The paper's percentile clip reads the data it protects: no guarantee (None), never a number.
    assert percentile["epsilon"] == 2.0 and percentile["epsilon_composed"] is None
    result = {"accuracy": rows, "dp_layer": 1}
    assert _dp_sgd_epsilon(result, percentile) == "no guarantee"
    cell = str(_dp_sgd_epsilon(result, fixed))  # the number, with the last audit's verdict where there is one
    assert cell.startswith(f"{fixed['epsilon_composed']:.4g}") and "guarantee" not in cell


@pytest.mark.parametrize("clips, words", [
    ((0,), "clips[0]: expected a clip norm C > 0"), ((1.0, -1), "clips[1]: expected a clip norm C > 0"),
    (("q80",), "got 'q80'"), (("p0",), "got 'p0'"), (("p101",), "got 'p101'"), ((), "non-empty"),
    ("p80", "non-empty sequence")])
def test_a_bad_clip_entry_is_refused_before_any_training(clips, words):
    from vflsec.bench.experiments.splitnn.dp import run_dp_vfl
    from vflsec.data import make_synthetic

    def never(*args, **kwargs):
        raise AssertionError("trained before the clips were checked")

    with pytest.raises(ValueError) as info:
        run_dp_vfl({"syn": make_synthetic(60, (3, 3), seed=1)}, never, epsilons=(1.0,), owners=(2,), clips=clips,
                   references=False)
    assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="the clip is given by clips"):
        run_dp_vfl({"syn": make_synthetic(60, (3, 3), seed=1)}, never, owners=(2,), dp_kwargs={"clip_norm": 2.0})


def test_a_privacy_warning_labels_the_row_and_is_still_shown():
    """What a DP row carries when its training raised a PrivacyWarning (a delta of at least 1/n):
    the message, and a labelled epsilon cell with the message under the table; the warning
    itself still reaches the user."""
    from vflsec.bench.common import privacy_warnings, warned_cell, warning_notes, warning_text
    from vflsec.dp import PrivacyWarning
    from vflsec.dp.delta_rule import check_delta_for_rows

    with pytest.warns(PrivacyWarning, match="at least 1/n"):
        with privacy_warnings() as warned:
            check_delta_for_rows(1e-3, 10_000)
            check_delta_for_rows(1e-3, 10_000)  # the same message once
            check_delta_for_rows(1e-5, 10_000)  # below 1/n: no warning
    assert len(warned) == 1 and "delta=0.001 is at least 1/n = 0.0001 for n=10000 rows" in warned[0]
    row = {"privacy_warning": warning_text(warned)}
    assert warned_cell(1.99871, row["privacy_warning"]) == "1.999 (PrivacyWarning, below)"
    assert warned_cell(1.99871, None) == 1.99871 and warning_text([]) is None
    (note, _) = warning_notes([row, row, {"privacy_warning": None}])
    assert note.count("delta=0.001 is at least 1/n") == 1


def test_fedpass_benchmark_rows():
    from vflsec.bench.experiments.splitnn.dp import fedpass_estimator_factory, run_fedpass
    from vflsec.data import make_synthetic

    ds = make_synthetic(300, (3, 3), seed=1)
    rows = run_fedpass({"syn": ds}, fedpass_estimator_factory(epochs=1, batch_size=50), settings=[(10, 2)],
                       parties=(2,))
    assert [(r["defense"], r["variant"]) for r in rows] == [("none", None), ("fedpass", "N=10,sigma2=2")]
    assert all(r["metric"] == "accuracy" and 0 <= r["value"] <= 1 for r in rows)


@pytest.mark.parametrize("how", ["refused", "huge"])
def test_a_diverged_cell_is_a_labelled_row_not_a_crash(how):
    """A DP-SGD cell whose training stops on non-finite values (the receiver refuses them) or
    whose test MSE is beyond 100x the mean predictor's is recorded as diverged: value NaN, the
    measured value kept, left out of the means, its report cell says so; the section goes on."""
    from vflsec.bench.experiments.splitnn import dp
    from vflsec.bench.experiments.splitnn.report import _report_dp_vfl
    from vflsec.bench.experiments.splitnn.verdicts import mean
    from vflsec.data.regression import load_diabetes
    from vflsec.vfl.runner import PartyError

    real = dp.dp_vfl_estimator_factory(epochs=1, batch_size=50, lr=0.01)

    class Broken:
        def __init__(self, inner):
            self.inner = inner

        def fit(self, parts, y):
            if how == "refused":
                raise PartyError("passive_0", ValueError(
                    "party 'passive_0' refused the message tagged 'sl_gradient': gradient: 3 non-finite value(s)"))
            self.inner.fit(parts, y)
            return self

        def predict(self, parts):
            return self.inner.predict(parts) * 1e6  # a model that ran away

        @property
        def privacy_spent_(self):
            return self.inner.privacy_spent_

    def make(task, owners, defense, seed, centralized=False):
        est = real(task, owners, defense, seed, centralized=centralized)
        return Broken(est) if defense is not None else est

    rows = dp.run_dp_vfl({"diabetes": load_diabetes()}, make, epsilons=(2.0, 5.0), owners=(3,),
                         dp_kwargs={"seed": 0})
    cells = [r for r in rows if r["defense"] == "dp_sgd"]
    assert len(cells) == 2 and all(np.isnan(r["value"]) and r["diverged"] for r in cells)
    assert ("non-finite" in cells[0]["diverged"]) == (how == "refused")
    assert ("mean predictor" in cells[0]["diverged"]) == (how == "huge")
    assert (cells[0]["epsilon_composed"] is None) == (how == "refused")  # a stopped training reports none
    assert mean([r["value"] for r in cells]) is None
    config = {"dp_vfl": {"lr": 0.01, "batch_size": 50, "epochs": 1, "max_rows": 10000, "clips": [1.0]}}
    text = "\n".join(_report_dp_vfl({"accuracy": [dict(r, section="dp_vfl") for r in rows], "config": config}))
    assert text.count("**diverged**") == 2
