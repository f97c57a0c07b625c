"""The plain trees protocol's traffic (issue 37): a passive party that holds the gradients in the clear
scores its own splits and sends each node's best one, not its histogram; a split's rows are not sent
back to the party that made them; float32-valued gradients travel as float32. The trees are those of
the histogram exchange, bit for bit (and so scikit-learn's, tests/trees/test_vertical_boosting.py); a
run moves at most a tenth of the histogram format's bytes and at most what the information it carries
takes; each tree's bytes are counted and one line per tree is logged."""
from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from sklearn.datasets import make_classification

from vflsec._progress import time_left
from vflsec.federation.channel import InMemoryHub
from vflsec.federation.envelope import payload_nbytes
from vflsec.trees import FeatureBins, TreeJob, TreePartyData, VerticalGradientBoostingClassifier
from vflsec.trees.histogram import BinLayout, SplitChoice, decode_choices, encode_choices
from vflsec.trees.progress import TREE_RECORD
from vflsec.trees.protection import PlainRelease
from vflsec.trees.protocol import TAG_CANDIDATES, TAG_GRADIENTS, TAG_STEP, active_program, passive_program
from vflsec.vfl.runner import run_programs

TREE_KEYS = ("owner", "record", "left", "right", "value")


def _parts(n=2000, seed=0, passives=1, missing=False):
    """An active party of 4 columns; each passive party 12: 6 continuous (up to 255 bins), 6 with 2 to 7
    values (their bins only); NaN in some columns where ``missing``."""
    X, y = make_classification(n_samples=n, n_features=4 + 12 * passives, n_informative=8, random_state=seed,
                               flip_y=0.05)
    rng = np.random.default_rng(seed)
    for p in range(passives):
        for j in range(6):
            column = 4 + 12 * p + 6 + j
            X[:, column] = np.digitize(X[:, column], np.linspace(-1.5, 1.5, 1 + j))
    if missing:
        X[rng.random(n) < 0.1, 5] = np.nan
        X[rng.random(n) < 0.1, 1] = np.nan
    bounds = [0, 4] + [4 + 12 * (p + 1) for p in range(passives)]
    return [X[:, bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)], y


def _run(parts, y, max_iter=5, **kw):
    """A job on the parties' default bins, the transcript kept: (job, run)."""
    bins = [FeatureBins().fit(P) for P in parts]
    names = ["a"] + [f"p{i}" for i in range(1, len(parts))]
    job = TreeJob(n_samples=len(y), active="a", passives=tuple(names[1:]), max_iter=max_iter,
                  n_bins=tuple(tuple(int(c) for c in b.n_bins_) for b in bins),
                  missing_bins=tuple(tuple(bool(m) for m in b.has_missing_) for b in bins), **kw)
    data = {name: TreePartyData(b.transform(P), y.astype(np.float64) if i == 0 else None)
            for i, (name, b, P) in enumerate(zip(names, bins, parts))}
    run = run_programs(job, {"active": active_program, "passive": passive_program}, data,
                       InMemoryHub(keep_payloads=True))
    return job, run


def _same_trees(a, b):
    return len(a) == len(b) and all(np.array_equal(getattr(x, k), getattr(z, k)) for x, z in zip(a, b)
                                    for k in TREE_KEYS)


@pytest.mark.parametrize("passives,missing", [(1, False), (2, True)], ids=["2-party", "3-party-missing"])
def test_passive_parties_scoring_their_splits_grow_the_histogram_exchanges_trees(monkeypatch, passives, missing):
    parts, y = _parts(n=1500, passives=passives, missing=missing)
    job, scored = _run(parts, y, max_iter=4, max_leaf_nodes=12, min_samples_leaf=10)
    monkeypatch.setattr(PlainRelease, "passive_scores", False)  # the histograms sent, the active party scores
    _, histograms = _run(parts, y, max_iter=4, max_leaf_nodes=12, min_samples_leaf=10)
    assert _same_trees(scored.results["a"].trees, histograms.results["a"].trees)
    for name in job.parties:
        assert scored.results[name].lookup.to_dict() == histograms.results[name].lookup.to_dict()
    assert any(len(scored.results[p].lookup) for p in job.passives), "no passive party split"
    assert scored.hub.bytes_by_tag().get("trees_hist", 0) == 0
    assert histograms.hub.bytes_by_tag().get(TAG_CANDIDATES, 0) == 0
    assert scored.total_bytes() * 10 < histograms.total_bytes()


def test_a_plain_run_moves_a_tenth_of_the_histogram_format_and_what_its_information_takes():
    parts, y = _parts()
    n, trees = len(y), 5
    job, run = _run(parts, y, max_iter=trees)
    layout = job.layout("p1")
    assert layout.total > 6 * 200  # the continuous columns have their 255 bins (or nearly)
    records = run.records
    total = run.total_bytes()

    # The histogram format (before issue 37): where a passive party now sends its best splits of a node, it
    # sent the node's histogram (G, H float64, C int64 per bin); and the gradients went as float64.
    histogram = PlainRelease().aggregate((np.zeros(n), np.zeros(n)), np.zeros((n, len(layout.n_bins)), np.uint8),
                                         np.arange(n), layout)
    histogram_bytes = payload_nbytes({**histogram, "node": 0})
    assert histogram_bytes >= 24 * layout.total
    candidates = [r for r in records if r.tag == TAG_CANDIDATES]
    gradients = [r for r in records if r.tag == TAG_GRADIENTS]
    old_gradients = payload_nbytes({"g": np.zeros(n), "h": np.zeros(n)})
    old = (total - sum(r.nbytes for r in candidates) - sum(r.nbytes for r in gradients)
           + len(candidates) * histogram_bytes + len(gradients) * old_gradients)
    assert len(candidates) >= trees and total * 10 <= old, (total, old)

    # What the information takes: each tree's gradients as float32 (8 bytes a row), at most two row masks per
    # split (n / 8 bytes each) and 256 bytes of keys, numbers and framing per message.
    history = run.results["a"].history
    assert set(TREE_RECORD) <= set(history) and all(len(history[k]) == trees for k in TREE_RECORD)
    per_tree = np.add(history["tree_bytes_sent"], history["tree_bytes_received"])
    tree_of = np.cumsum([r.tag == TAG_STEP and p.get("op") == "end_tree" for r, p in run.hub.transcript])
    for k, tree in enumerate(run.results["a"].trees):
        messages = int(np.sum(tree_of == k)) + 1  # this tree's messages and its end_tree
        splits = len(tree.owner) // 2
        bound = 8 * n + splits * 2 * (n + 7) // 8 + 256 * messages
        assert per_tree[k] <= bound, (k, per_tree[k], bound)
    # Every message but the last ("end") belongs to a tree, and the trees' counts are the hub's.
    assert per_tree.sum() + payload_nbytes({"op": "end"}) == total
    passive = run.results["p1"].history
    assert np.array_equal(passive["tree_bytes_sent"], history["tree_bytes_received"])
    assert passive["tree_leaves"] == [float(t.n_leaves) for t in run.results["a"].trees] == history["tree_leaves"]


def test_float32_gradients_travel_as_float32_and_others_as_float64():
    parts, y = _parts(n=400)
    _, run = _run(parts, y, max_iter=2)
    released = [p for r, p in run.hub.transcript if r.tag == TAG_GRADIENTS]
    assert all(p["g"].dtype == np.float32 and p["h"].dtype == np.float32 for p in released)
    # A DP release (noise on a fine lattice) keeps float64 where float32 would round it.
    _, run = _run(parts, y, max_iter=2, protection="dp", epsilon=4.0, delta=1e-5, noise_seed=1)
    released = [p for r, p in run.hub.transcript if r.tag == TAG_GRADIENTS]
    for payload in released:
        for values in payload.values():
            if values.dtype == np.float32:
                assert np.array_equal(values.astype(np.float64).astype(np.float32), values)
    assert any(values.dtype == np.float64 for payload in released for values in payload.values())


def test_a_line_per_tree_is_logged_and_the_bytes_per_tree_kept(caplog):
    parts, y = _parts(n=600)
    caplog.set_level(logging.INFO, logger="vflsec.trees")
    model = VerticalGradientBoostingClassifier(max_iter=3, max_leaf_nodes=5).fit(parts, y)
    lines = [r.getMessage() for r in caplog.records if r.name == "vflsec.trees"]
    size = r"[\d.]+ (B|kB|MB)"
    for party in ("active", "passive_0"):
        mine = [line for line in lines if line.startswith(f"party {party!r}: tree ")]
        assert len(mine) == 3, lines
        for k, line in enumerate(mine, start=1):
            left = r", about \d+ s left" if k < 3 else ""
            assert re.fullmatch(rf"party {party!r}: tree {k}/3: [\d.]+ s, \d+ leaves, sent {size}, received {size}"
                                + left, line), line
    assert [int(re.search(r"(\d+) leaves", line).group(1)) for line in lines if "'active'" in line] == [
        t.n_leaves for t in model.trees_]
    assert len(model.bytes_per_tree_) == 3 and all(b > 0 for b in model.bytes_per_tree_)
    assert sum(model.bytes_per_tree_) + payload_nbytes({"op": "end"}) == model.bytes_


def test_the_time_left_is_the_mean_time_per_tree_times_the_trees_left():
    assert time_left(45.0, 3, 5) == "about 30 s left"  # 15 s a tree, 2 left
    assert time_left(120.0, 1, 3) == "about 4.0 min left"
    assert time_left(5.0, 4, 4) == "about 0 s left"


# -- the messages' checks --------------------------------------------------------------------------

def _choice(**kw):
    params = dict(gain=1.5, feature=1, code=2, G_left=-3.0, H_left=4.0, n_left=30, missing_left=False)
    params.update(kw)
    return SplitChoice(**params)


def test_best_splits_round_trip_and_a_split_the_sender_cannot_have_found_is_refused():
    layout = BinLayout((4, 6), (False, True))
    checks = dict(min_samples_leaf=10, min_gain=0.0, who="party 'b'")
    sent = encode_choices([3, 4], [_choice(), None])
    assert decode_choices(sent, [3, 4], [100, 50], layout, **checks) == [_choice(), None]
    # The missing bin (code 5 of 6 bins) is a threshold only with missing values going right.
    assert decode_choices(encode_choices([0], [_choice(code=4)]), [0], [100], layout, **checks)[0].code == 4
    for bad, match in [(_choice(feature=2), "cannot have found"), (_choice(code=4, missing_left=True), "cannot"),
                       (_choice(n_left=95), "cannot"), (_choice(gain=0.0), "cannot"),
                       (_choice(gain=float("nan")), "cannot")]:
        with pytest.raises(ValueError, match=match):
            decode_choices(encode_choices([0], [bad]), [0], [100], layout, **checks)
    with pytest.raises(ValueError, match="nodes"):
        decode_choices(sent, [3, 5], [100, 50], layout, **checks)
    with pytest.raises(ValueError, match="not"):
        decode_choices({"split": sent["split"].astype(np.int32), "gain": sent["gain"]}, [3, 4], [100, 50], layout,
                       **checks)


def test_a_passive_party_refuses_a_partition_without_its_rows_it_did_not_make():
    parts, y = _parts(n=400)
    bins = [FeatureBins().fit(P) for P in parts]
    job = TreeJob(n_samples=400, active="a", passives=("b",), n_bins=tuple(tuple(int(c) for c in b.n_bins_)
                                                                           for b in bins))
    hub = InMemoryHub(default_timeout=30)
    active, passive = hub.endpoint("a"), hub.endpoint("b")
    active.send("b", TAG_STEP, {"op": "tree", "totals": np.array([[0.0, 100.0]])})
    active.send("b", TAG_GRADIENTS, {"g": np.zeros(400, dtype=np.float32), "h": np.full(400, 0.25, np.float32)})
    active.send("b", TAG_STEP, {"op": "children", "node": 0, "build": "left", "score": "both",
                                "totals": np.zeros((2, 2))})
    with pytest.raises(ValueError, match="without saying which rows go left"):
        passive_program(passive, job, TreePartyData(bins[1].transform(parts[1])))
    assert active.recv("b", TAG_CANDIDATES)["split"].shape == (1, 5)  # it scored the root
