"""Vertical boosting jobs through ``vflsec party`` (``kind = "trees"``): each party is a
``python -m vflsec party`` process (loopback gRPC, mutual TLS, PSI alignment of shuffled,
partly overlapping rows). A plain job grows the in-process estimator's trees on the aligned
rows (2 and 3 parties) and scores the held-out rows as the estimator does; SecureBoost grows
the plain trees; the label-DP protections report their guarantee; bad ``[job]`` values stop
every party in one line with exit status 2 before it connects; no party's output holds
another party's thresholds or rows."""
from __future__ import annotations

import json
from typing import Any, Dict, Set, Tuple

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from sklearn.metrics import roc_auc_score  # noqa: E402

from vflsec.runtime.launch import write_local_job  # noqa: E402
from vflsec.trees import VerticalGradientBoostingClassifier  # noqa: E402

pytestmark = pytest.mark.network

WIDTHS = {"active": 2, "passive1": 3, "passive2": 2}
HYPER = dict(max_iter=4, learning_rate=0.3, max_leaf_nodes=6, min_samples_leaf=8, max_bins=16)


def _frames(names, n=200, seed=0, keep=0.9, prefix="cust"):
    """Every party's rows, shuffled, each missing a random tenth; the label depends on every
    party's first feature. Labels are 3/7 (any two classes: 7 is the positive one)."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"{prefix}-{v:06d}" for v in rng.permutation(10 ** 6)[:n]])
    blocks = {name: np.round(rng.normal(size=(n, WIDTHS[name])), 3) for name in names}
    score = sum(blocks[name][:, 0] for name in names) + 0.5 * rng.normal(size=n)
    y = np.where(score > 0, 7.0, 3.0)
    frames = {}
    for name in names:
        kept = rng.permutation(np.flatnonzero(rng.random(n) < keep))
        frames[name] = (ids[kept].tolist(), blocks[name][kept], y[kept] if name == "active" else None)
    return frames


def _aligned(frames, names):
    """Each party's rows in the order PSI aligns them (the sorted common IDs), and the labels."""
    common = sorted(set.intersection(*[set(frames[name][0]) for name in names]))
    blocks = []
    for name in names:
        position = {v: i for i, v in enumerate(frames[name][0])}
        blocks.append(frames[name][1][[position[c] for c in common]])
    position = {v: i for i, v in enumerate(frames["active"][0])}
    return blocks, frames["active"][2][[position[c] for c in common]]


def _job(names, **extra) -> Dict[str, Any]:
    return dict(kind="trees", active="active", passives=list(names[1:]), **{**HYPER, **extra})


def _float_lists(value: Any) -> Set[Tuple[float, ...]]:
    """Every list of floats in a JSON value, as tuples."""
    if isinstance(value, dict):
        return {found for item in value.values() for found in _float_lists(item)}
    if isinstance(value, list):
        if value and all(isinstance(v, float) for v in value):
            return {tuple(value)}
        return {found for item in value for found in _float_lists(item)}
    return set()


@pytest.mark.parametrize("names", [("active", "passive1"), ("active", "passive1", "passive2")],
                         ids=["2-party", "3-party"])
def test_plain_job_grows_the_estimators_trees_and_scores_the_held_out_rows_as_it_does(
        tmp_path, fast_network, run_parties, party_outputs, names):
    frames, test = _frames(names), _frames(names, n=120, seed=1, prefix="test")
    local = write_local_job(tmp_path, _job(names, evaluate=True), frames, network=fast_network, test_data=test)
    status = run_parties(local)
    outputs = party_outputs(local, status)

    blocks, y = _aligned(frames, names)
    model = VerticalGradientBoostingClassifier(**HYPER).fit(blocks, y)
    active = outputs["active"]
    assert {out["n_samples"] for out in outputs.values()} == {len(y)}
    assert {out["kind"] for out in outputs.values()} == {"trees"}
    assert active["trees"] == [tree.to_dict() for tree in model.trees_]
    assert active["baseline"] == model.baseline_ and active["classes"] == [3.0, 7.0]
    assert active["history"]["train_loss"] == model.train_loss_
    for position, name in enumerate(names):
        out = outputs[name]
        assert out["lookup"] == model.lookups_[position].to_dict()
        assert out["thresholds"] == [cuts.tolist() for cuts in model.bins_[position].thresholds_]
        assert out["n_bins"] == {p: b.n_bins_.tolist() for p, b in zip(names, model.bins_)}
        assert out["privacy_spent"] is None
        if name != "active":
            assert "trees" not in out and "baseline" not in out and out["evaluation"] is None
            assert out["bytes_sent_by_tag"]["trees_masks"] > 0  # its split masks for the held-out rows
    assert sum(len(out["lookup"]["feature"]) for out in outputs.values()) == sum(
        int(np.sum(tree.owner >= 0)) for tree in model.trees_)
    # Each party's bytes per tree (what the estimator counted for the same trees) and one line per tree.
    assert np.add(active["history"]["tree_bytes_sent"], active["history"]["tree_bytes_received"]).tolist() == \
        model.bytes_per_tree_
    for name in names:
        history, trees = outputs[name]["history"], HYPER["max_iter"]
        assert history["tree_leaves"] == [float(tree.n_leaves) for tree in model.trees_]
        assert outputs[name]["bytes_per_tree"]["total"] == pytest.approx(
            np.mean(np.add(history["tree_bytes_sent"], history["tree_bytes_received"])))
        assert sum(history["tree_bytes_sent"]) <= outputs[name]["wire_bytes_sent"]
        for k in range(1, trees + 1):
            assert f"party {name!r}: tree {k}/{trees}: " in status[name][1]
    assert any(len(outputs[name]["lookup"]["feature"]) for name in names[1:]), "no passive party split"

    # The held-out score is the estimator's on the aligned held-out rows.
    test_blocks, test_y = _aligned(test, names)
    evaluation = active["evaluation"]
    assert evaluation["n"] == len(test_y) and evaluation["metric"] == "accuracy"
    assert evaluation["value"] == model.score(test_blocks, test_y)
    assert evaluation["auc"] == pytest.approx(roc_auc_score(test_y == 7.0, model.decision_function(test_blocks)),
                                              abs=1e-12)
    assert evaluation["value"] > evaluation["baseline"]
    assert f"held-out accuracy {evaluation['value']:.4f} on {len(test_y)} test rows" in status["active"][1]

    # No party's output holds another party's thresholds or rows (not one feature's cuts, not one column).
    for name in names:
        written = _float_lists(outputs[name])
        for other in names:
            if other != name:
                theirs = [tuple(c) for c in outputs[other]["thresholds"]] + [
                    tuple(float(v) for v in column) for column in frames[other][1].T]
                assert not written & set(theirs), (name, other)


def test_secureboost_job_grows_the_plain_trees(tmp_path, fast_network, run_parties, party_outputs):
    names = ("active", "passive1")
    hyper = dict(HYPER, max_iter=2, max_leaf_nodes=4)
    frames = _frames(names, n=80)
    job = dict(kind="trees", active="active", passives=["passive1"], protection="secureboost", key_bits=2048,
               **hyper)
    local = write_local_job(tmp_path, job, frames, network=fast_network)
    outputs = party_outputs(local, run_parties(local, 240.0))

    blocks, y = _aligned(frames, names)
    plain = VerticalGradientBoostingClassifier(**hyper).fit(blocks, y)
    assert outputs["active"]["trees"] == [tree.to_dict() for tree in plain.trees_]
    assert outputs["passive1"]["lookup"] == plain.lookups_[1].to_dict()
    assert outputs["active"]["protection"] == "secureboost"
    assert outputs["active"]["protection_seconds"]["keygen"] > 0
    assert outputs["active"]["bytes_sent_by_tag"]["trees_public_key"] > 0


@pytest.mark.parametrize("protection, privacy", [("dp", dict(epsilon=4.0, delta=1e-4, l2_regularization=1.0)),
                                                 ("label_dp", dict(epsilon=2.0))])
def test_label_dp_jobs_report_the_guarantee(tmp_path, fast_network, run_parties, party_outputs, protection,
                                            privacy):
    names = ("active", "passive1")
    local = write_local_job(tmp_path, _job(names, protection=protection, **privacy), _frames(names),
                            network=fast_network)
    status = run_parties(local)
    outputs = party_outputs(local, status)
    for name in names:
        spent = outputs[name]["privacy_spent"]
        assert spent is not None and spent.startswith("epsilon "), spent
        assert float(spent.split()[1]) <= privacy["epsilon"], spent
        assert "replace-one-label" in spent and "noise_seed" not in spent, spent
    final = status["active"][1]
    assert outputs["active"]["privacy_spent"] in final  # the final line names it, beside the training loss
    assert f"training log loss {outputs['active']['history']['train_loss'][-1]:.4f}" in final
    assert len(outputs["active"]["trees"]) == HYPER["max_iter"]


@pytest.mark.parametrize("class_weight, expected", [("balanced", "balanced"), ({"3": 1.0, "7": 4.0}, [1.0, 4.0])])
def test_a_class_weight_job_grows_the_weighted_estimators_trees(tmp_path, fast_network, run_parties, party_outputs,
                                                                class_weight, expected):
    """``[job] class_weight`` is the estimator's: "balanced" of the aligned training labels, or a table keyed
    by the labels as the active party's file codes them."""
    names = ("active", "passive1")
    frames = _frames(names)
    local = write_local_job(tmp_path, _job(names, class_weight=class_weight), frames, network=fast_network)
    outputs = party_outputs(local, run_parties(local))
    blocks, y = _aligned(frames, names)
    weights = class_weight if class_weight == "balanced" else {3.0: 1.0, 7.0: 4.0}
    model = VerticalGradientBoostingClassifier(class_weight=weights, **HYPER).fit(blocks, y)
    unweighted = VerticalGradientBoostingClassifier(**HYPER).fit(blocks, y)
    assert outputs["active"]["trees"] == [tree.to_dict() for tree in model.trees_]
    assert outputs["active"]["trees"] != [tree.to_dict() for tree in unweighted.trees_]  # the weights did act
    assert outputs["active"]["baseline"] == model.baseline_ and outputs["active"]["class_weight"] == expected


@pytest.mark.parametrize("change, needle", [
    (dict(noise_seed=3), "noise_seed is not a [job] key"),
    (dict(protection="dp", epsilon=1.0), "protection 'dp' needs delta"),
    (dict(protection="dp", epsilon=1.0, delta=1e-4, class_weight="balanced"),
     "protection 'dp' does not take class_weight"),
    (dict(class_weight={"7": -2.0}), "class_weight of label 7 must be a finite non-negative number"),
])  # more bad values, in-process: tests/runtime/test_party_startup_errors.py
def test_bad_job_values_stop_every_party_in_one_line_before_it_connects(tmp_path, fast_network, run_parties,
                                                                          change, needle):
    names = ("active", "passive1")
    network = dict(fast_network, connect_timeout=20.0)
    local = write_local_job(tmp_path, _job(names, **change), _frames(names, n=40), network=network)
    status = run_parties(local, 60.0)
    for name, (rc, err) in status.items():
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1, (name, err)
        assert lines[0].startswith("vflsec party: error: ") and needle in lines[0] and " -- " in lines[0], err
    assert not (tmp_path / "out").exists()


def test_a_class_weight_naming_no_class_stops_the_active_party_in_one_line_before_it_connects(
        tmp_path, fast_network, run_parties):
    names = ("active", "passive1")
    network = dict(fast_network, connect_timeout=20.0)
    local = write_local_job(tmp_path, _job(names, class_weight={"5": 2.0}), _frames(names, n=40), network=network)
    status = run_parties(local, 60.0)
    rc, err = status["active"]
    assert rc == 2 and err.strip().splitlines() == [err.strip()], err
    assert "class_weight names 5.0, which is not a class of y ([3.0, 7.0])" in err and " -- " in err
    assert status["passive1"][0] != 0  # it waited for a peer that never came


def test_the_job_file_is_what_the_parties_agree_on(tmp_path):
    """The kind's [job] keys: TreeJob's hyper-parameters and max_bins, never n_samples."""
    from vflsec.runtime.job_spec import load_job_spec
    from vflsec.runtime.launch import to_toml

    path = tmp_path / "job.toml"
    path.write_text(to_toml({"job": _job(("active", "passive1"), protection="label_dp", epsilon=1.0)}))
    spec = load_job_spec(path)
    job = spec.job(n_samples=100)
    assert spec.kind.name == "trees" and job.max_bins == HYPER["max_bins"] and job.epochs == HYPER["max_iter"]
    tree_job = job.tree_job(((3, 3), (2, 2, 2)))
    assert tree_job.protection == "label_dp" and tree_job.noise_seed is None and tree_job.n_samples == 100
    assert json.loads(json.dumps(job.settings)) == {**{k: v for k, v in _job(("active", "passive1")).items()
                                                       if k not in ("kind", "max_bins")},
                                                    "protection": "label_dp", "epsilon": 1.0}
