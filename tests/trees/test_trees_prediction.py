"""Prediction across parties (:mod:`vflsec.trees.prediction`) and the bin agreement of the
``trees`` job kind (:mod:`vflsec.runtime.trees_kind`), in one process over the in-memory hub:
the split masks give the estimator's scores, and a peer's bad message is refused naming it."""
from __future__ import annotations

import numpy as np
import pytest

from vflsec.federation.channel import InMemoryHub
from vflsec.runtime.kinds import get_job_kind
from vflsec.runtime.trees_kind import agree_on_bins
from vflsec.trees import VerticalGradientBoostingClassifier
from vflsec.trees.prediction import TAG_MASKS, predict_raw
from vflsec.vfl.received import PeerMessageRefused
from vflsec.vfl.runner import PartyError, run_party_threads

NAMES = ("active", "passive1", "passive2")


def _blocks(n, seed):
    rng = np.random.default_rng(seed)
    blocks = [rng.normal(size=(n, 2)), rng.normal(size=(n, 3)), rng.normal(size=(n, 1))]
    y = (blocks[0][:, 0] + blocks[1][:, 1] + blocks[2][:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return blocks, y


def test_split_masks_give_the_estimators_scores(masks_scores):
    blocks, y = _blocks(300, 0)
    model = VerticalGradientBoostingClassifier(max_iter=5, max_leaf_nodes=6, min_samples_leaf=10).fit(blocks, y)
    assert all(len(table) for table in model.lookups_), "every party should own a split"
    test, _ = _blocks(57, 1)  # not a multiple of 8: the masks' padding bits
    codes = [bins.transform(X) for bins, X in zip(model.bins_, test)]

    hub = InMemoryHub()
    raw = masks_scores(model, codes, NAMES, hub)
    np.testing.assert_array_equal(raw, model.decision_function(test))
    # One message per passive party: a packed mask of the 57 rows per node it owns.
    for name in NAMES[1:]:
        sent = [r for r in hub.records if r.sender == name and r.tag == TAG_MASKS]
        assert len(sent) == 1


def test_a_mask_message_of_the_wrong_length_is_refused_naming_the_sender():
    blocks, y = _blocks(200, 2)
    model = VerticalGradientBoostingClassifier(max_iter=2, max_leaf_nodes=4, min_samples_leaf=10).fit(blocks[:2], y)
    codes = [bins.transform(X) for bins, X in zip(model.bins_, blocks[:2])]

    def party(name, endpoint):
        if name == "passive1":
            endpoint.send("active", TAG_MASKS, b"\x00" * 3)
            return None
        return predict_raw(endpoint, ["passive1"], model.trees_, model.baseline_, model.lookups_[0], codes[0])

    with pytest.raises(PartyError, match="from peer 'passive1'.*split masks: expected") as info:
        run_party_threads(InMemoryHub(), ["active", "passive1"], party)
    assert isinstance(info.value.__cause__, PeerMessageRefused)


def _bins_job():
    fields = dict(active="active", passives=["passive1", "passive2"], max_bins=8)
    return get_job_kind("trees").make_job(fields, 50)


def test_the_bin_agreement_gives_every_party_the_same_tree_job():
    job = _bins_job()
    own = {"active": [8, 3], "passive1": [2, 8, 5], "passive2": [1]}
    agreed = run_party_threads(InMemoryHub(), NAMES, lambda name, ep: agree_on_bins(ep, job, np.array(own[name])))
    assert {tree_job.n_bins for tree_job in agreed.values()} == {((8, 3), (2, 8, 5), (1,))}
    assert {tree_job.max_iter for tree_job in agreed.values()} == {100}


@pytest.mark.parametrize("bins, reason", [([9], "is not 1 to max_bins=8"), ([0, 2], "is not 1 to max_bins=8")])
def test_bins_beyond_max_bins_are_refused_naming_the_sender(bins, reason):
    job = _bins_job()
    own = {"active": [8, 3], "passive1": [2, 8, 5], "passive2": bins}
    with pytest.raises(PartyError, match=f"from peer 'passive2'.*{reason}") as info:
        run_party_threads(InMemoryHub(), NAMES, lambda name, ep: agree_on_bins(ep, job, np.array(own[name])))
    assert isinstance(info.value.__cause__, PeerMessageRefused)
