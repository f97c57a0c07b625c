"""The GLM benchmark's pieces run end to end on built-in data (DP and plain cells only; HE
protocols are covered by test_glm_he.py)."""
import json
import numpy as np

import pytest

from vflsec.bench import glm


def test_accuracy_and_runtime_cells_and_report(tmp_path):
    acc, skipped = glm.run_accuracy(["breast"], data_dir=None, seeds=1, he_seeds=0, epsilons=[0.01, 100.0],
                                    batch_size=3200, epochs=2, he_methods=[], max_rows=None)
    assert skipped == []
    methods = {(r["method"], r["calibration"], r["epsilon"]) for r in acc}
    assert ("plain", None, None) in methods and ("hdp", "analytic", 100.0) in methods
    assert ("taylor", None, None) in methods
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in acc)
    rt = glm.run_runtime(sizes=[400], epoch_counts=[1, 2], epochs_n=400, features=[5, 7],
                         methods=["plain", "hdp"], batch_size=100, he_budget=1.0)
    assert {(r["method"], r["epochs"]) for r in rt} == {("plain", 1), ("hdp", 1), ("plain", 2), ("hdp", 2)}
    by = {(r["method"], r["epochs"]): r for r in rt}
    # Two epochs send exactly twice the bytes of one: the channel counts every message.
    assert by[("plain", 2)]["bytes"] == 2 * by[("plain", 1)]["bytes"] > 0
    assert not any(r["extrapolated"] for r in rt)
    result = {"machine": {"cpu": "x", "logical_cores": 2}, "config": {}, "accuracy": acc, "runtime": rt}
    report = glm._report(result)
    assert "## Accuracy: breast" in report and "paper's claims" in report
    glm._plot_accuracy(glm._accuracy_summary(acc), tmp_path / "a.png")
    glm._plot_runtime(rt, 400, tmp_path / "r.png")
    assert (tmp_path / "a.png").stat().st_size > 1000 and (tmp_path / "r.png").stat().st_size > 1000
    json.dumps(result)


def test_he_runtime_cell_past_budget_is_extrapolated_and_labelled():
    """A Paillier cell whose full run would exceed the budget is measured on whole
    batches, scaled linearly, and says so; key size is recorded."""
    import numpy as np

    rng = np.random.default_rng(0)
    parts = [rng.random((120, 3)) / 3, rng.random((120, 2)) / 2]
    y = rng.integers(0, 2, 120)
    cell = glm._runtime_cell("paillier", parts, y, 120, 1, 40, 3, he_budget=1e-6, cache={}, key_bits=2048,
                             label="p")
    assert cell["method"] == "p" and cell["key_bits"] == 2048
    assert cell["extrapolated"] is True and cell["measured_batches"] == 1
    assert cell["seconds"] == pytest.approx(3 * cell["measured_seconds"])


def test_he_runtime_prefix_counts_the_batches_it_really_ran():
    """With budget for more than one epoch's batches but fewer than the cell's,
    the measured prefix is whole epochs and the scale uses their true count."""
    import numpy as np

    rng = np.random.default_rng(1)
    parts = [rng.random((80, 3)) / 3, rng.random((80, 2)) / 2]
    y = rng.integers(0, 2, 80)
    cache = {}
    probe = glm._runtime_cell("ckks", parts, y, 80, 1, 40, 2, he_budget=1e9, cache=cache)
    assert probe["extrapolated"] is False and probe["measured_batches"] == 2
    per_batch = cache[("ckks", 2048, 80, 40, 1)][0]
    # Budget for ~5 batches: 2 whole epochs (4 batches) of a 10-epoch (20-batch) cell.
    cell = glm._runtime_cell("ckks", parts, y, 80, 10, 40, 20, he_budget=5.5 * per_batch, cache=cache)
    assert cell["extrapolated"] is True and cell["measured_batches"] == 4
    assert cell["seconds"] == pytest.approx(5 * cell["measured_seconds"])


def test_he_accuracy_cell_over_budget_is_skipped_and_listed():
    acc, skipped = glm.run_accuracy(["breast"], data_dir=None, seeds=1, he_seeds=1, epsilons=[1.0],
                                    batch_size=3200, epochs=2, he_methods=["ckks"], max_rows=None,
                                    he_accuracy_budget=1e-3)
    assert [s["method"] for s in skipped] == ["ckks"] and skipped[0]["estimated_seconds"] > 1e-3
    assert "ckks" not in {r["method"] for r in acc}
    report = glm._report({"machine": {"cpu": "x", "logical_cores": 2}, "config": {}, "accuracy": acc,
                          "accuracy_skipped": skipped, "runtime": []})
    assert "Not run: ckks accuracy on breast" in report


def test_majority_and_unclipped_references_and_claims():
    acc, _ = glm.run_accuracy(["breast"], data_dir=None, seeds=1, he_seeds=0, epsilons=[100.0],
                              batch_size=3200, epochs=2, he_methods=[], max_rows=None)
    by = {r["method"]: r["accuracy"] for r in acc}
    from vflsec.data import PAPER_SPLITS, load_breast, vertical_split

    split = vertical_split(load_breast(), PAPER_SPLITS["breast"], test_size=0.2, seed=0)
    majority = max(np.mean(split.y_test == 1), np.mean(split.y_test == 0))
    assert by["majority"] == pytest.approx(majority)
    assert 0.0 <= by["plain_unclipped"] <= 1.0
    # A run whose plain VFL is stuck at the majority rate is called out in the claims.
    rows = [{"dataset": "d", "method": m, "calibration": None, "epsilon": None, "seed": 0, "accuracy": a}
            for m, a in (("majority", 0.76), ("plain", 0.76), ("plain_unclipped", 0.82), ("centralized", 0.83))]
    lines = glm._claims(glm._accuracy_summary(rows), [])
    assert any("only the majority-class rate" in line and "without the clip plain VFL reaches 0.820" in line
               for line in lines)
