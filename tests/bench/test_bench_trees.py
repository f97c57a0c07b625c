"""``vflsec bench trees``: a tiny run through the runner (every row kind, a dataset whose files are
missing reported as skipped, the report, the PNGs and the conclusion, re-rendered unchanged), and
the report's answers, targets and conclusion from constructed numbers."""
import json

import pytest

pytest.importorskip("matplotlib")
pytest.importorskip("gmpy2")

from vflsec import cli  # noqa: E402
from vflsec.bench.experiments.trees import answers as trees_answers  # noqa: E402
from vflsec.bench.experiments.trees.report import render_report  # noqa: E402
from vflsec.trees import PROTECTIONS  # noqa: E402

DP = [p for p in ("dp", "label_dp") if p in PROTECTIONS]
TINY = dict(seed=0, datasets=["breast", "credit"], split_seeds=2, test_size=0.25, max_iter=4, learning_rate=0.3,
            max_leaf_nodes=6, min_samples_leaf=10, l2_regularization=0.0, max_bins=8, secureboost_trees=2,
            key_bits=2048, dp_protections=DP, epsilons=[1.0, 8.0], dp_delta=1e-5, attack_known=20,
            aggregation_rows=300, aggregation_features=9, aggregation_phe_rows=100)


def _toml(table):
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        return "[" + ", ".join(value(x) for x in v) + "]" if isinstance(v, (list, tuple)) else repr(v)

    return "[quick]\n" + "".join(f"{k} = {value(v)}\n" for k, v in table.items())


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """`vflsec bench trees --quick --config tiny.toml --seed 3 --data-dir EMPTY`: (folder, results)."""
    folder = tmp_path_factory.mktemp("bench-trees")
    (folder / "tiny.toml").write_text(_toml(TINY))
    empty = folder / "no-data"
    empty.mkdir()
    out = folder / "out"
    assert cli.main(["bench", "trees", "--quick", "--config", str(folder / "tiny.toml"), "--seed", "3",
                     "--data-dir", str(empty), "--out", str(out)]) == 0
    return out, json.loads((out / "results.json").read_text())  # strict JSON: NaN would fail here


@pytest.mark.timeout(300)
def test_a_tiny_run_measures_every_row_and_reports(tiny_run):
    out, saved = tiny_run
    assert saved["benchmark"] == "trees" and saved["seed"] == 3 and saved["config"]["seed"] == 3
    assert "partial" not in saved and len(saved["load"]["end"]["loadavg"]) == 3
    # credit's file is not in the (empty) data folder: skipped, with the fix, not a crash
    credit = saved["datasets"]["credit"]
    assert credit["status"] == "skipped" and "--data-dir" in credit["fix"] and "credit" in credit["reason"]
    breast = saved["datasets"]["breast"]
    assert breast["status"] == "ok" and breast["train_rows"] + breast["test_rows"] == 569
    assert len(breast["attributes"]["active"]) == len(breast["attributes"]["passive_0"]) == 15

    rows = saved["cells"]
    assert {r["dataset"] for r in rows} == {"breast"}
    expected = {"majority", "hgb_centralized", "hgb_active", "hgb_passive", "plain", "secureboost"}
    expected |= {f"{p}@{e:g}" for p in DP for e in TINY["epsilons"]}
    for split in (0, 1):
        kinds = {trees_answers.row_key(r["method"], r["epsilon"] if "epsilon" in r else None): r
                 for r in rows if r["split"] == split}
        assert set(kinds) == expected
        plain, central, sb = kinds["plain"], kinds["hgb_centralized"], kinds["secureboost"]
        # the same bins and hyper-parameters: plain vertical boosting is the centralized booster
        assert abs(plain["accuracy"] - central["accuracy"]) <= 0.02
        assert plain["attack_same_trees"] is True and plain["trees"] == 4
        assert set(plain["leakage"]) == {"instance_space", "gradients", "own_features"}
        assert plain["leakage"]["gradients"]["auc"] == 1.0  # plain gradients give every label away
        assert plain["leakage_first"]["trees"] == 2
        # SecureBoost: plain's trees, ciphertexts only, its time broken into steps that add up to the wall time
        assert sb["trees_equal_plain"] is True and sb["accuracy"] is None and sb["accuracy_of"] == "plain"
        assert set(sb["leakage"]) == {"instance_space", "own_features"}
        assert sb["leakage"]["instance_space"] == plain["leakage_first"]["instance_space"]  # same partitions
        assert sum(sb["steps_per_tree"].values()) >= 0.99 * sb["seconds_per_tree"] > 0
        assert sb["steps_per_tree"]["encrypt"] > 0 and sb["steps_per_tree"]["decrypt"] > 0
        assert sb["bytes_by_kind"]["gradients"] > 0 and sb["bytes_per_tree"] > plain["bytes_per_tree"]
        assert any(w.startswith("WeakKeyWarning") for w in sb["warnings"])  # labelled, not silenced
        for p in DP:
            for eps in TINY["epsilons"]:
                row = kinds[f"{p}@{eps:g}"]
                assert row["privacy"]["epsilon"] <= eps + 1e-9 and row["noise_seed"] is not None
                assert row["attack_same_trees"] is True and row["leakage"]["instance_space"]["auc"] > 0

    report = (out / "report.md").read_text()
    assert report.rstrip().endswith(saved["conclusion"])
    # The aggregation per CPU-second: checked against the gmpy2 loop, phe's too, and reported with its verdict.
    agg = saved["aggregation"]
    assert agg["products"] == 300 * 9 and agg["phe_equals_gmpy2"] is True
    assert agg["native_equals_gmpy2"] is True or agg["native"] is False
    assert "## Encrypted histogram aggregation per CPU-second" in report and "phe additions" in report
    for section in ("## Data", "## breast: accuracy, cost and leakage", "## SecureBoost: time and bytes per tree",
                    "## Label leakage to the passive party", "## Targets (issue 29)", "## Answers, per dataset",
                    "## Conclusion", "skipped:", "seeded generator (seed 3"):
        assert section in report, section
    assert "On breast, plain vertical boosting is" in saved["conclusion"]
    assert "Not measured (data not found): credit." in saved["conclusion"]
    figures = ["secureboost_time.png", "leakage.png"] + (["accuracy_vs_epsilon.png"] if DP else [])
    for name in figures:
        assert (out / name).stat().st_size > 0, name


def test_rerender_rewrites_the_same_report_from_the_results_alone(tiny_run, tmp_path):
    out, saved = tiny_run
    (tmp_path / "results.json").write_text((out / "results.json").read_text())
    assert cli.main(["bench", "trees", "--rerender", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").read_text() == (out / "report.md").read_text()
    assert json.loads((tmp_path / "results.json").read_text()) == saved


def _row(dataset, method, split, accuracy, epsilon=None, **extra):
    row = {"dataset": dataset, "method": method, "split": split, "accuracy": accuracy, "auc": accuracy}
    if method in ("plain", "secureboost", "dp", "label_dp"):
        row.update({"protection": method, "epsilon": epsilon, "trees": 10, "warnings": []})
    row.update(extra)
    return row


def _leak(instance, own, gradients=None):
    out = {"instance_space": {"auc": instance}, "own_features": {"auc": own}}
    if gradients is not None:
        out["gradients"] = {"auc": gradients}
    return out


def _constructed():
    """Two datasets, two splits each: adult's plain within 0.3 points of the centralized booster, credit's 0.7
    points below; adult's DP beats the active party (0.80) at epsilon 1 and from 4 on, not at 2."""
    cells = []
    for split, wiggle in ((0, -0.001), (1, 0.001)):
        for dataset, central, plain in (("adult", 0.870, 0.873), ("credit", 0.820, 0.813)):
            cells += [_row(dataset, "majority", split, 0.76), _row(dataset, "hgb_centralized", split, central + wiggle),
                      _row(dataset, "hgb_active", split, 0.80 + wiggle), _row(dataset, "hgb_passive", split, 0.78),
                      _row(dataset, "plain", split, plain + wiggle, seconds_per_tree=0.1, bytes_per_tree=1000.0,
                           leakage=_leak(0.95, 0.70, gradients=1.0))]
        cells.append(_row("adult", "secureboost", split, None, seconds_per_tree=5.0 + wiggle * 1000,
                          bytes_per_tree=8000.0, keygen_seconds=0.5, trees_equal_plain=True,
                          steps_per_tree={"encrypt": 2.0, "decrypt": 2.0, "messaging": 1.0},
                          leakage=_leak(0.93, 0.70)))
        for eps, acc in ((0.5, 0.70), (1.0, 0.81), (2.0, 0.79), (4.0, 0.82), (8.0, 0.85)):
            cells.append(_row("adult", "dp", split, acc + wiggle, eps, privacy={"epsilon": eps * 0.99},
                              leakage=_leak(0.60 + eps / 100, 0.70, gradients=0.55)))
    return {"config": {"seed": 0, "test_size": 0.2, "attack_known": 40, "secureboost_trees": 3, "key_bits": 2048,
                       "max_iter": 10, "learning_rate": 0.1, "max_leaf_nodes": 31, "max_depth": None,
                       "min_samples_leaf": 20, "l2_regularization": 0.0, "max_bins": 255},
            "datasets": {name: {"status": "ok", "train_rows": 800, "test_rows": 200, "positive_rate": 0.24,
                                "attributes": {"active": ["a", "b"], "passive_0": ["c"]},
                                "columns": {"active": 5, "passive_0": 3}, "bins": {"active": 40, "passive_0": 20}}
                         for name in ("adult", "credit")} | {
                "breast": {"status": "skipped", "reason": "x", "fix": "y"}},
            "cells": cells, "dp_layer": 1, "audit_mechanisms": {"dp": ["trees_gradient"]}}


def test_the_answers_come_from_the_rows():
    found = trees_answers.answers(_constructed())
    adult, credit = found["adult"], found["credit"]
    assert adult["plain_minus_centralized_points"] == pytest.approx(0.3)
    assert credit["plain_minus_centralized_points"] == pytest.approx(-0.7)
    beat = adult["dp_beats_active"]["dp"]
    assert beat["epsilon"] == 4.0 and beat["margin_points"] == pytest.approx(2.0)  # not 1: it falls back at 2
    assert beat["grid"] == [0.5, 1.0, 2.0, 4.0, 8.0]
    sb = adult["secureboost"]
    assert sb["time_ratio"] == pytest.approx(50.0) and sb["bytes_ratio"] == pytest.approx(8.0)
    assert sb["trees_equal_plain"] is True and "secureboost" not in credit
    leak = adult["leakage"]
    assert leak["plain"]["instance_space_gain"] == pytest.approx(0.25) and leak["plain"]["best_gain"] == \
        pytest.approx(0.30)
    assert leak["secureboost"]["gradients_auc"] is None and leak["secureboost"]["best_gain"] == pytest.approx(0.23)
    assert leak["dp@0.5"]["best_gain"] == pytest.approx(-0.095)
    # the spread over the two splits, and the epsilon the model reported
    kinds = trees_answers.summary(_constructed())["adult"]
    assert kinds["hgb_active"]["accuracy"]["n"] == 2 and kinds["hgb_active"]["accuracy"]["std"] == \
        pytest.approx(0.001 * 2 ** 0.5)
    assert kinds["dp@4"]["epsilon_spent"]["mean"] == pytest.approx(3.96)


def test_the_targets_and_the_conclusion_follow_the_answers():
    result = _constructed()
    by_quantity = {v.claim.quantity: v for v in trees_answers.verdicts(result)}
    assert by_quantity["trees.plain_gap_points.adult"].holds is True
    assert by_quantity["trees.plain_gap_points.credit"].measured == pytest.approx(0.7)
    assert by_quantity["trees.plain_gap_points.credit"].holds is False
    text = trees_answers.conclusion(result)
    assert "On adult, plain vertical boosting is +0.30 points" in text and "(within 0.5 points)" in text
    assert "On credit, plain vertical boosting is -0.70 points" in text and "NOT within 0.5 points" in text
    assert "DP-gradient boosting beats the active party alone from epsilon 4 on (+2.00 points there)" in text
    assert "SecureBoost costs 50x plain's time per tree" in text and "8x its bytes" in text
    assert "Not measured (data not found): breast." in text
    assert "under SecureBoost the node partitions alone still gave the attack more than the passive party's own " \
        "features (adult +0.230 AUC)" in text
    report = render_report(result)
    assert report.rstrip().endswith(text)
    assert "| 3.96 (" in report  # the epsilon the model reported, with the audit's verdict beside it
    # DP that never beats the active party says so, with its best margin
    for row in result["cells"]:
        if row["method"] == "dp":
            row["accuracy"] = 0.75
    assert "does not beat the active party alone at any epsilon of the grid (up to 8; best -5.00 points)" in \
        trees_answers.conclusion(result)


def test_the_shipped_grid_is_the_issues_experiment():
    from vflsec.bench.experiments.trees.grid import load_grid

    full, quick = load_grid(False), load_grid(True)
    assert full.datasets == ("breast", "credit", "adult") and full.split_seeds == 3
    assert full.epsilons == (0.25, 0.5, 1.0, 2.0, 4.0, 8.0) and full.dp_protections == ("dp", "label_dp")
    # scikit-learn's HistGradientBoostingClassifier defaults, shared by every model
    assert (full.max_iter, full.learning_rate, full.max_leaf_nodes, full.min_samples_leaf, full.max_bins) == \
        (100, 0.1, 31, 20, 255) and full.max_depth is None
    # The "dp" variant's own (few, shallow, regularised trees), the others' unchanged.
    dp, label_dp = full.hyper_parameters("dp"), full.hyper_parameters("label_dp")
    assert (dp["max_iter"], dp["max_leaf_nodes"], dp["l2_regularization"]) == (10, 4, 10.0)
    assert label_dp == full.hyper_parameters("plain") and label_dp["max_iter"] == 100
    assert quick.datasets == ("breast",) and quick.secureboost_trees <= quick.max_iter


def test_rare_positives_add_pr_auc_to_the_scores():
    import numpy as np
    from sklearn.metrics import average_precision_score

    from vflsec.bench.experiments.trees.cells import scores

    rng = np.random.default_rng(1)
    y = (rng.random(3000) < 0.06).astype(int)
    p1 = np.clip(0.06 + 0.3 * y + rng.normal(0, 0.1, y.size), 0, 1)
    rare = scores(y, p1)
    assert rare["pr_auc"] == pytest.approx(average_precision_score(y, p1))
    assert "pr_auc" not in scores((rng.random(3000) < 0.5).astype(int), p1)
