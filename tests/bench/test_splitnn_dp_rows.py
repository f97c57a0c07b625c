"""The split-learning benchmark's DP-VFL and FedPass sections (vflsec.bench.experiments.splitnn.dp) on tiny
data: the rows they write (the defenses themselves: tests/splitnn/test_dp_sgd.py and
tests/splitnn/test_fedpass.py)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)


@pytest.mark.slow  # end to end: DP-VFL runs and the PLD accountant
def test_benchmark_rows_schema():
    import logging

    from vflsec.bench.experiments.splitnn.dp import dp_vfl_estimator_factory, run_dp_vfl, split_attributes_equally
    from vflsec.data.regression import load_diabetes

    ds = load_diabetes()
    blocks = split_attributes_equally(ds, 3)
    assert [len(b) for b in blocks] == [4, 3, 3]
    rows = run_dp_vfl({"diabetes": ds}, dp_vfl_estimator_factory(epochs=1, batch_size=50, lr=0.01),
                      epsilons=(2.0,), owners=(3,), dp_kwargs={"calibration_steps": 2, "seed": 0})
    logging.getLogger("absl").setLevel(logging.WARNING)
    keys = {"dataset", "defense", "variant", "parties", "epsilon", "epsilon_composed", "delta", "seed", "metric",
            "value"}
    assert [(r["defense"], r["variant"], r["parties"]) for r in rows] == [
        ("centralized", None, 1), ("none", "vfl", 3), ("dp_sgd", "clip=p80", 3)]
    for r in rows:
        assert set(r) == keys and r["metric"] == "mse" and np.isfinite(r["value"]) and r["value"] > 0
    # The paper's percentile clip reads the data it protects: no guarantee (None), never a number.
    assert rows[2]["epsilon"] == 2.0 and rows[2]["epsilon_composed"] is None and rows[2]["delta"] == 1e-3


def test_fedpass_benchmark_rows():
    from vflsec.bench.experiments.splitnn.dp import fedpass_estimator_factory, run_fedpass
    from vflsec.data import make_synthetic

    ds = make_synthetic(300, (3, 3), seed=1)
    rows = run_fedpass({"syn": ds}, fedpass_estimator_factory(epochs=1, batch_size=50), settings=[(10, 2)],
                       parties=(2,))
    assert [(r["defense"], r["variant"]) for r in rows] == [("none", None), ("fedpass", "N=10,sigma2=2")]
    assert all(r["metric"] == "accuracy" and 0 <= r["value"] <= 1 for r in rows)
