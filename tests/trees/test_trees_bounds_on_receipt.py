"""Bounds on receipt in vertical boosting (issue 39, item 6): each party refuses a message no honest
sender could have sent, with one line naming that sender (:mod:`vflsec.trees.bounds`).

Every test runs the real protocol with one party deviating (its own program, a message changed as it
sends it, or its grower patched) and asserts the job fails naming the deviating party. A passive party
refuses the active party's steps that break the job's growth rules: a child of fewer than
``min_samples_leaf`` rows (under SecureBoost its histogram would show the active party that row's bin
on every feature), a built child that is not the smaller one, a split beyond ``max_depth`` or
``max_leaf_nodes``, a split request with too few rows a side, a second split of a node before its
children, a split other than the one it proposed; gradients no honest release has; node totals that
are not the sums over the node's rows. The active party refuses a passive party's best split whose
gain its own sums do not give.
"""
from __future__ import annotations

import dataclasses
import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification

from vflsec.trees import VerticalGradientBoostingClassifier, protocol
from vflsec.trees import estimator as trees_estimator
from vflsec.trees.histogram import SplitChoice
from vflsec.vfl.received import PeerMessageRefused
from vflsec.vfl.runner import PartyError

N = 300
PROTECTIONS = ["plain", pytest.param("secureboost", marks=pytest.mark.filterwarnings("ignore"))]


def _parts():
    """The active party's four informative columns; the passive party's: one with 5 rows in its first bin
    (a split there sends 5 rows left), two of uniform noise (16 bins of about 19 rows)."""
    X, y = make_classification(n_samples=N, n_features=4, n_informative=4, n_redundant=0, random_state=3)
    rng = np.random.default_rng(0)
    rare = np.ones(N)
    rare[:5] = 0.0
    return [X, np.column_stack([rare, rng.uniform(size=N), rng.uniform(size=N)])], y


def _fit(protection="plain", **options):
    if protection == "secureboost":
        pytest.importorskip("phe")
    params = dict(max_iter=2, max_bins=16, max_leaf_nodes=4)
    if protection == "dp":
        pytest.importorskip("dp_accounting")
        params.update(epsilon=4.0, delta=1e-5, noise_seed=3)
    params.update(options)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the 2048-bit key's strength warning; a DP model's one-class warning
        return VerticalGradientBoostingClassifier(protection, **params).fit(*_parts())


def _sending(monkeypatch, role, change):
    """The ``role`` party's own program ("active" or "passive"), each message it sends passed through
    ``change(tag, payload)``."""
    honest = getattr(protocol, f"{role}_program")

    def program(endpoint, job, data):
        send = endpoint.send
        endpoint.send = lambda receiver, tag, payload: send(receiver, tag, change(tag, payload))
        return honest(endpoint, job, data)
    monkeypatch.setattr(trees_estimator, f"{role}_program", program)


def _once(condition, alter):
    """``change`` for :func:`_sending`: ``alter`` the first payload that meets ``condition``."""
    done = []

    def change(tag, payload):
        if not done and condition(tag, payload):
            done.append(tag)
            return alter(payload)
        return payload
    return change


def _children(tag, payload):
    return tag == protocol.TAG_STEP and isinstance(payload, dict) and payload.get("op") == "children"


def _refused_by_the_passive_party(tag, reason):
    """The job's failure: the passive party refused the active party's message tagged ``tag``."""
    return pytest.raises(PartyError, match=rf"party 'passive_0' failed: PeerMessageRefused: party 'passive_0' "
                                           rf"refused the message tagged '{tag}' from peer 'active' at step "
                                           rf"\d+: {reason}")


def _sender(info) -> str:
    cause = info.value.__cause__
    assert isinstance(cause, PeerMessageRefused)
    return cause.sender


# -- the active party's children requests -----------------------------------------------------------

@pytest.mark.parametrize("protection", PROTECTIONS)
def test_a_child_of_one_row_is_refused_naming_the_active_party(protection, monkeypatch):
    """The active party's first split of its own announced as sending one row left (min_samples_leaf 20):
    under SecureBoost the passive party would build that child's histogram, which shows that row's bin on
    every feature."""
    def one_row_left(payload):
        mask = np.zeros(len(payload["mask"]) * 8, dtype=bool)
        mask[0] = True
        return {**payload, "mask": np.packbits(mask).tobytes()}

    _sending(monkeypatch, "active", _once(lambda tag, p: _children(tag, p) and "mask" in p, one_row_left))
    with _refused_by_the_passive_party("trees_step", r"split node \d+ into children of 1 and \d+ rows; "
                                                     r"min_samples_leaf 20 keeps at least 20 in each") as info:
        _fit(protection)
    assert _sender(info) == "active"


@pytest.mark.parametrize("protection", PROTECTIONS)
def test_building_the_larger_child_is_refused_naming_the_active_party(protection, monkeypatch):
    swap = {"left": "right", "right": "left"}
    _sending(monkeypatch, "active", _once(lambda tag, p: _children(tag, p) and p["build"] != "none",
                                          lambda p: {**p, "build": swap[p["build"]]}))
    with _refused_by_the_passive_party("trees_step", r"asked to build '(left|right)' of node \d+'s children \(\d+ "
                                                     r"and \d+ rows\); the protocol builds '(left|right)': the "
                                                     r"smaller child"):
        _fit(protection)


@pytest.mark.parametrize("protection", PROTECTIONS)
def test_growing_past_max_depth_is_refused_naming_the_active_party(protection, monkeypatch):
    """An active party whose grower ignores max_depth (1): it asks for a histogram of (or to score) the
    root's children, which the job keeps leaves."""
    monkeypatch.setattr(protocol._Grower, "_splittable",
                        lambda self, node: node.totals[2] >= 2 * self.job.min_samples_leaf)
    with _refused_by_the_passive_party("trees_step", r"asked to build '(left|right)' of node 0's children .* the "
                                                     r"protocol builds 'none': neither child can be split \(left: "
                                                     r"it is at depth 1, max_depth 1"):
        _fit(protection, max_depth=1)


@pytest.mark.parametrize("protection", PROTECTIONS)
def test_more_splits_than_max_leaf_nodes_allows_are_refused_naming_the_active_party(protection, monkeypatch):
    """An active party that grows trees of up to 7 leaves in a job of max_leaf_nodes 3."""
    def program(endpoint, job, data):
        return protocol.active_program(endpoint, dataclasses.replace(job, max_leaf_nodes=7), data)

    monkeypatch.setattr(trees_estimator, "active_program", program)
    with _refused_by_the_passive_party("trees_step", r"split node \d+, which the growth rules keep a leaf: this "
                                                     r"tree has had 2 splits, all that max_leaf_nodes 3 allows"):
        _fit(protection, max_leaf_nodes=3)


def test_more_trees_than_max_iter_are_refused_naming_the_active_party(monkeypatch):
    """Every tree shows a passive party's histograms (or best splits) of new nodes: the job says how many."""
    def program(endpoint, job, data):
        return protocol.active_program(endpoint, dataclasses.replace(job, max_iter=job.max_iter + 1), data)

    monkeypatch.setattr(trees_estimator, "active_program", program)
    with _refused_by_the_passive_party("trees_step", r"began tree 3 of a job of max_iter 2"):
        _fit("plain")


# -- the active party's split requests ------------------------------------------------------------

def _root_split_by_the_passive_party(monkeypatch, choice):
    """The active party's grower asks the passive party for ``choice(grower, root)`` at the root, whatever
    it scored."""
    choose = protocol._Grower._choose

    def deviating(self, node_id):
        choose(self, node_id)
        if node_id == 0:
            self.nodes[0].split = (1, choice(self, self.nodes[0]))
    monkeypatch.setattr(protocol._Grower, "_choose", deviating)


@pytest.mark.parametrize("protection", PROTECTIONS)
def test_a_split_sending_fewer_than_min_samples_leaf_rows_left_is_refused_naming_the_active_party(protection,
                                                                                                  monkeypatch):
    """Feature 0's first bin holds 5 rows: that split shows the active party which 5."""
    _root_split_by_the_passive_party(monkeypatch, lambda grower, node: SplitChoice(
        gain=1.0, feature=0, code=0, G_left=0.0, H_left=1.0, n_left=5))
    with _refused_by_the_passive_party("trees_step", r"asked for a split of node 0 that sends 5 of its 300 rows "
                                                     r"left; min_samples_leaf 20 keeps 20 to 280"):
        _fit(protection)


@pytest.mark.filterwarnings("ignore")
def test_a_second_split_of_a_node_before_its_children_is_refused_naming_the_active_party(monkeypatch):
    """Under SecureBoost the active party picks a passive party's splits itself; asking for one split of a
    node after another (each answered with its row mask) would read the rows' bins threshold by threshold."""
    pytest.importorskip("phe")

    def middle_of_feature_1(grower, node):
        """Feature 1 at code 7, with the count and sums its histogram gives (the reply to the first request
        passes the active party's own checks)."""
        start = int(grower.layouts[1].offsets[1])
        hist = node.hists[1]
        left = slice(start, start + 8)
        return SplitChoice(gain=1.0, feature=1, code=7, G_left=float(hist.G[left].sum()),
                           H_left=float(hist.H[left].sum()), n_left=int(hist.C[left].sum()))

    _root_split_by_the_passive_party(monkeypatch, middle_of_feature_1)
    twice = []

    def program(endpoint, job, data):
        send = endpoint.send

        def sending(receiver, tag, payload):
            if tag == protocol.TAG_STEP and payload.get("op") == "split" and not twice:
                twice.append(payload)
                send(receiver, tag, payload)  # the same request twice: the first reply is the honest one
            return send(receiver, tag, payload)
        endpoint.send = sending
        return protocol.active_program(endpoint, job, data)

    monkeypatch.setattr(trees_estimator, "active_program", program)
    with _refused_by_the_passive_party("trees_step", r"asked for a split of node 0 before announcing the children "
                                                     r"of node 0, which this party split"):
        _fit("secureboost")


@pytest.mark.parametrize("protection", ["plain", "dp"])
def test_a_split_other_than_the_one_the_passive_party_proposed_is_refused_naming_the_active_party(protection,
                                                                                                  monkeypatch):
    """Where a passive party scores its own splits it sends each node's best one; the active party asking
    for another (feature 1 at its middle code, about 150 rows a side) is refused."""
    def other(grower, node):
        proposed = node.choices[1]
        assert proposed is not None, "the passive party proposed no split of the root"
        code = 7 if (proposed.feature, proposed.code) != (1, 7) else 8
        return dataclasses.replace(proposed, feature=1, code=code)

    _root_split_by_the_passive_party(monkeypatch, other)
    with _refused_by_the_passive_party("trees_step", r"asked for the split feature 1, code [78], missing_left "
                                                     r"(True|False) of node 0; this party proposed feature \d"):
        _fit(protection)


# -- the round's gradients ------------------------------------------------------------------------

def _gradients(alter_g=None, alter_h=None, round_index=0):
    """``change``: the ``round_index``-th round's released g (or h) changed by ``alter_g(g)`` (``alter_h``)."""
    seen = []

    def change(tag, payload):
        if tag != protocol.TAG_GRADIENTS:
            return payload
        seen.append(tag)
        if len(seen) - 1 != round_index:
            return payload
        out = dict(payload)
        for key, alter in (("g", alter_g), ("h", alter_h)):
            if alter is not None:
                values = np.array(payload[key], dtype=np.float64)
                alter(values)
                out[key] = values
        return out
    return change


def test_a_non_finite_gradient_is_refused_naming_the_active_party_and_the_round(monkeypatch):
    def nan_at_row_5(g):
        g[5] = np.nan

    _sending(monkeypatch, "active", _gradients(alter_g=nan_at_row_5, round_index=1))
    with pytest.raises(PartyError, match=r"party 'passive_0' refused the message tagged 'trees_gradients' from "
                                         r"peer 'active' at step 1: g must be 300 finite float64 values") as info:
        _fit("plain")
    assert _sender(info) == "active"


def test_a_negative_hessian_is_refused_naming_the_active_party(monkeypatch):
    """Whatever the active party's row weights (the job does not say them), an honest hessian is p (1 - p)
    times a non-negative weight."""
    def negative(h):
        h[0] = -0.25

    _sending(monkeypatch, "active", _gradients(alter_h=negative))
    with _refused_by_the_passive_party("trees_gradients", r"hessian h: a hessian of -0.25; an honest one is "):
        _fit("plain")


def test_weighted_plain_gradients_beyond_one_pass_the_passive_party_which_cannot_know_the_weights(monkeypatch):
    """Under "plain" the job does not say whether the active party weights its rows (its own data): with
    every row weighing 3 the released |g| exceeds 1 and h exceeds 1/4, and the run completes."""
    largest = []

    def recording(tag, payload):
        if tag == protocol.TAG_GRADIENTS:
            largest.append((float(np.max(np.abs(payload["g"]))), float(np.max(payload["h"]))))
        return payload

    _sending(monkeypatch, "active", recording)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VerticalGradientBoostingClassifier(max_iter=2, max_bins=16, max_leaf_nodes=4).fit(
            *_parts(), sample_weight=np.full(N, 3.0))
    assert len(model.trees_) == len(largest) == 2
    assert all(g > 1.0 and h > 0.25 for g, h in largest), largest


@pytest.mark.parametrize("key,value,bound", [("g", 1e6, r"beyond the bound [\d.]+ that every honest gradient g"),
                                             ("h", 0.5, r"beyond the bound 0.25 that every honest hessian h")])
def test_a_dp_release_beyond_what_the_noise_allows_is_refused_naming_the_active_party(key, value, bound,
                                                                                      monkeypatch):
    """"dp": |g~| <= 1 plus the lattice noise's support (below 131 sigma), h = q (1 - q) <= 1/4."""
    def set_row_3(values):
        values[3] = value

    _sending(monkeypatch, "active", _gradients(**{f"alter_{key}": set_row_3}))
    with _refused_by_the_passive_party("trees_gradients", rf".*\|value\| up to {re.escape(f'{value:g}')}, {bound}"):
        _fit("dp")


@pytest.mark.filterwarnings("ignore")
def test_secureboost_ciphertexts_short_of_one_per_row_are_refused_naming_the_active_party(monkeypatch):
    pytest.importorskip("phe")

    def change(tag, payload):
        if tag == protocol.TAG_GRADIENTS:
            return {"ciphertexts": payload["ciphertexts"][:-10]}
        return payload

    _sending(monkeypatch, "active", change)
    with _refused_by_the_passive_party("trees_gradients", r"expected 300 ciphertexts"):
        _fit("secureboost")


# -- node totals -----------------------------------------------------------------------------------

@pytest.mark.parametrize("protection", ["plain", "dp"])
@pytest.mark.parametrize("op,column,what", [("tree", 0, "gradient"), ("children", 1, "hessian")])
def test_node_totals_that_are_not_the_rows_sums_are_refused_naming_the_active_party(protection, op, column, what,
                                                                                  monkeypatch):
    """Where the passive party holds the round's gradients it scores its splits against the node totals the
    active party sends; totals off by 1 would steer its choice."""
    def off_by_one(payload):
        totals = payload["totals"].copy()
        totals[0, column] += 1.0
        return {**payload, "totals": totals}

    _sending(monkeypatch, "active", _once(lambda tag, p: tag == protocol.TAG_STEP and isinstance(p, dict)
                                                          and p.get("op") == op and "totals" in p, off_by_one))
    with _refused_by_the_passive_party("trees_step", rf"node \d+'s {what} total .*; the round's {what}s of its "
                                                     r"\d+ rows sum to"):
        _fit(protection)


# -- a passive party's best splits ----------------------------------------------------------------

@pytest.mark.parametrize("column,factor,reason", [
    (0, 1e6, r"with gain .*; its G_left .*, H_left .* and the node's totals \(.*\) give"),
    (2, 0.0, r"whose children's hessians \(0, .*\) are not both at least min_hessian 0.001"),
])
def test_a_best_split_its_own_sums_do_not_give_is_refused_naming_the_passive_party(column, factor, reason,
                                                                                 monkeypatch):
    """A gain inflated a millionfold (it would take every split), a left hessian below min_hessian."""
    def scaled(tag, payload):
        if tag == protocol.TAG_CANDIDATES:
            gain = payload["gain"].copy()
            gain[payload["split"][:, 1] != -1, column] *= factor
            return {**payload, "gain": gain}
        return payload

    _sending(monkeypatch, "passive", scaled)
    with pytest.raises(ValueError, match=rf"party 'active': party 'passive_0' sent a best split of node \d+ "
                                         rf"{reason}"):
        _fit("plain")
