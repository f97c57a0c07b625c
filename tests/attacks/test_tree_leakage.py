"""Label leakage of vertical boosting to a passive party: the view read from a transcript is the
active party's trees' leaves; readable gradients give the labels away; node instance spaces leak
them beyond what the passive party's own features tell it, with or without encryption."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification

from vflsec.attacks import label_leakage, passive_tree_view
from vflsec.federation.channel import InMemoryHub
from vflsec.trees import FeatureBins, TreeJob, TreePartyData
from vflsec.trees.protocol import active_program, passive_program
from vflsec.trees.tree import LEAF
from vflsec.vfl.runner import run_programs


def _run(protection, n=1500, max_iter=4):
    X, y = make_classification(n_samples=n, n_features=10, n_informative=6, random_state=0)
    parts = [X[:, :5], X[:, 5:]]
    bins = [FeatureBins(max_bins=32).fit(P) for P in parts]
    data = {"a": TreePartyData(bins[0].transform(parts[0]), y), "b": TreePartyData(bins[1].transform(parts[1]))}
    hub = InMemoryHub(keep_payloads=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a 2048-bit key's strength warning
        job = TreeJob(n_samples=n, active="a", passives=("b",), n_bins=tuple(tuple(b.n_bins_) for b in bins),
                      protection=protection, max_iter=max_iter)
        run = run_programs(job, {"active": active_program, "passive": passive_program}, data, hub=hub)
    return job, hub, run, parts, y


@pytest.fixture(scope="module")
def plain():
    return _run("plain")


def test_the_view_is_the_active_partys_leaves(plain):
    job, hub, run, _, _ = plain
    view = passive_tree_view(hub.transcript, job)
    trees = run.results["a"].trees
    assert len(view.leaves) == len(trees) == len(view.gradients) == job.max_iter
    for leaf, tree in zip(view.leaves, trees):
        assert set(np.unique(leaf)) == set(np.flatnonzero(tree.owner == LEAF))


def test_readable_gradients_give_every_label_away_and_instance_spaces_beat_own_features(plain):
    job, hub, _, parts, y = plain
    scores = label_leakage(passive_tree_view(hub.transcript, job), y, features=parts[1])
    assert scores["gradients"] == {"auc": 1.0, "accuracy": 1.0}
    assert scores["instance_space"]["auc"] > scores["own_features"]["auc"] + 0.03


def test_secureboost_hides_the_gradients_not_the_instance_spaces(plain):
    pytest.importorskip("gmpy2")
    job, hub, _, _, y = _run("secureboost", max_iter=2)
    view = passive_tree_view(hub.transcript, job)
    assert view.gradients == []
    scores = label_leakage(view, y)
    assert "gradients" not in scores and scores["instance_space"]["auc"] > 0.85


def test_bad_input_is_refused(plain):
    job, hub, _, _, y = plain
    view = passive_tree_view(hub.transcript, job)
    with pytest.raises(ValueError, match="labels of 0 or 1"):
        label_leakage(view, y[:-1])
    with pytest.raises(ValueError, match="no boosting message"):
        passive_tree_view([], job)
    with pytest.raises(ValueError, match="passive party's"):
        label_leakage(view, y, features=np.zeros((3, 2)))
