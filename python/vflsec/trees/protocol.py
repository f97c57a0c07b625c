"""Vertical gradient boosting over a Channel: the active party's and a passive party's programs.

Per round (one tree), as in SecureBoost (Cheng et al. 2021) with the growth rules of
scikit-learn's ``HistGradientBoostingClassifier``:

1. The active party computes every row's gradient and hessian of the log loss,
   ``g = p - y``, ``h = p (1 - p)`` with ``p = sigmoid(raw score)``, and hands them
   to each passive party through the job's protection (:mod:`vflsec.trees.protection`;
   "plain": as they are). The protection also says which labels the active party
   trains on, its baseline score and what it grows the tree from ("dp": the
   released noisy gradients, so the trees are post-processing of the releases;
   "label_dp": labels after randomized response; :mod:`vflsec.trees.dp`).
2. Every party builds its histograms of the root; the passive parties send theirs;
   the active party opens them and scores every party's splits
   (:func:`vflsec.trees.histogram.best_split`), the best over all parties first
   (active party's features, then each passive party's, in job order).
3. Best-first growth: the leaf with the largest gain is split until
   ``max_leaf_nodes`` leaves exist or no leaf can be split (``max_depth``, fewer
   than ``2 min_samples_leaf`` rows, no split gaining more than ``min_gain``). A
   passive party's split is made by that party: it records feature and threshold
   in its own lookup table and returns the record id and which of the node's rows
   go left. The active party then tells every passive party the node's partition
   (what SecureBoost shows passive parties: each node's instance space) and which
   child to build a histogram of: the smaller one; the other is the parent's
   minus it.
4. Leaves get ``learning_rate * (-G / (H + l2))``; the active party adds them to
   the raw scores of the leaf's rows.

Messages (active to passive on ``TAG_STEP`` in order, each round's gradients on
``TAG_GRADIENTS``; passive to active on ``TAG_HIST`` and ``TAG_SPLIT``):
``{"op": "tree"}`` then the protection's release, ``{"op": "split", "node",
"feature", "code"}`` (to the owner only), ``{"op": "children", "node", "mask",
"build"}`` (``build``: "left", "right" or "none"), ``{"op": "end_tree"}``,
``{"op": "end"}``. A histogram is the protection's payload with its ``node``.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..federation.channel import Channel
from ..vfl.clock import PhaseClock
from .histogram import BinLayout, Histogram, SplitChoice, best_split, build_histogram, leaf_value, subtract
from .job import TreeJob, TreePartyData, TreePartyResult
from .protection import baseline_score, get_protection
from .tree import LEAF, LookupTable, Tree

__all__ = ["TAG_GRADIENTS", "TAG_HIST", "TAG_SPLIT", "TAG_STEP", "active_program", "baseline_score", "passive_program"]

TAG_STEP = "trees_step"
TAG_GRADIENTS = "trees_gradients"
TAG_HIST = "trees_hist"
TAG_SPLIT = "trees_split"


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _log_loss(raw: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.logaddexp(0.0, raw) - y * raw))


def _pack(mask: np.ndarray) -> bytes:
    return np.packbits(mask).tobytes()


def _unpack(data: Any, count: int, who: str) -> np.ndarray:
    if not isinstance(data, (bytes, bytearray)) or len(data) != (count + 7) // 8:
        raise ValueError(f"{who} sent a row mask that is not {(count + 7) // 8} bytes")
    return np.unpackbits(np.frombuffer(bytes(data), dtype=np.uint8), count=count).astype(bool)


@dataclass
class _Node:
    rows: np.ndarray
    depth: int
    totals: Tuple[float, float, int]
    hists: Dict[int, Histogram]
    split: Optional[Tuple[int, SplitChoice]] = None


class _Grower:
    """The active party's state while it grows one tree."""

    def __init__(self, endpoint: Channel, job: TreeJob, codes: np.ndarray, g: np.ndarray, h: np.ndarray,
                 lookup: LookupTable, protection: Any, clock: PhaseClock):
        self.endpoint, self.job, self.codes, self.g, self.h = endpoint, job, codes, g, h
        self.lookup, self.protection, self.clock = lookup, protection, clock
        self.layouts = [job.layout(p) for p in job.data_parties]
        self.owner: List[int] = []
        self.record: List[int] = []
        self.left: List[int] = []
        self.right: List[int] = []
        self.nodes: List[_Node] = []

    def _new_node(self, rows: np.ndarray, depth: int) -> int:
        node = _Node(rows, depth, (float(self.g[rows].sum()), float(self.h[rows].sum()), len(rows)), {})
        self.nodes.append(node)
        for key in (self.owner, self.record, self.left, self.right):
            key.append(LEAF)
        return len(self.nodes) - 1

    def _splittable(self, node: _Node) -> bool:
        job = self.job
        if job.max_depth is not None and node.depth >= job.max_depth:
            return False
        return node.totals[2] >= 2 * job.min_samples_leaf

    def _collect(self, node_id: int) -> None:
        """The node's histograms from every party: built here, received from the passive parties."""
        node = self.nodes[node_id]
        node.hists[0] = build_histogram(self.codes, node.rows, self.g, self.h, self.layouts[0])
        for i, party in enumerate(self.job.passives, start=1):
            message = self.endpoint.recv(party, TAG_HIST)
            if not isinstance(message, dict) or message.get("node") != node_id:
                raise ValueError(f"party {party!r} sent a histogram for another node than {node_id}")
            with self.clock.crypto():
                node.hists[i] = self.protection.open(message, self.layouts[i], party)

    def _choose(self, node_id: int) -> None:
        node = self.nodes[node_id]
        job = self.job
        best: Optional[Tuple[int, SplitChoice]] = None
        for i in range(len(self.layouts)):
            choice = best_split(node.hists[i], self.layouts[i], node.totals, l2=job.l2_regularization,
                                min_samples_leaf=job.min_samples_leaf, min_hessian=job.min_hessian,
                                min_gain=job.min_gain)
            if choice is not None and (best is None or choice.gain > best[1].gain):
                best = (i, choice)
        node.split = best

    def grow(self) -> Tree:
        job = self.job
        root = self._new_node(np.arange(job.n_samples), 0)
        self._collect(root)
        heap: List[Tuple[float, int]] = []
        if self._splittable(self.nodes[root]):
            self._choose(root)
            split = self.nodes[root].split
            if split is not None:
                heap.append((-split[1].gain, root))
        n_leaves = 1
        while heap and (job.max_leaf_nodes is None or n_leaves < job.max_leaf_nodes):
            _, node_id = heapq.heappop(heap)
            for child in self._split(node_id):
                node = self.nodes[child]
                if node.split is not None:
                    heapq.heappush(heap, (-node.split[1].gain, child))
            n_leaves += 1
        values = np.zeros(len(self.nodes))
        for node_id, node in enumerate(self.nodes):
            if self.owner[node_id] == LEAF:
                values[node_id] = job.learning_rate * leaf_value(node.totals[0], node.totals[1],
                                                                 job.l2_regularization)
        ints = [np.asarray(a, dtype=np.int64) for a in (self.owner, self.record, self.left, self.right)]
        return Tree(owner=ints[0], record=ints[1], left=ints[2], right=ints[3], value=values)

    def _split(self, node_id: int) -> Tuple[int, ...]:
        node = self.nodes[node_id]
        assert node.split is not None
        party_index, choice = node.split
        if party_index == 0:
            record = self.lookup.add(choice.feature, choice.code, choice.missing_left,
                                     int(self.layouts[0].value_bins[choice.feature]))
            goes_left = self.lookup.goes_left(record, self.codes[node.rows])
        else:
            party = self.job.passives[party_index - 1]
            self.endpoint.send(party, TAG_STEP, {"op": "split", "node": node_id, "feature": choice.feature,
                                                 "code": choice.code, "missing_left": choice.missing_left})
            reply = self.endpoint.recv(party, TAG_SPLIT)
            if not isinstance(reply, dict) or not isinstance(reply.get("record"), int):
                raise ValueError(f"party {party!r} sent a split reply without a record id")
            record = reply["record"]
            goes_left = _unpack(reply.get("mask"), len(node.rows), f"party {party!r}")
            if int(goes_left.sum()) != choice.n_left:
                raise ValueError(f"party {party!r} sent {int(goes_left.sum())} rows left of node {node_id}; its "
                                 f"histogram counted {choice.n_left}")
        left_id = self._new_node(node.rows[goes_left], node.depth + 1)
        right_id = self._new_node(node.rows[~goes_left], node.depth + 1)
        self.owner[node_id], self.record[node_id] = party_index, record
        self.left[node_id], self.right[node_id] = left_id, right_id
        left, right = self.nodes[left_id], self.nodes[right_id]
        splittable = [c for c in (left_id, right_id) if self._splittable(self.nodes[c])]
        small, large = (left_id, right_id) if len(left.rows) <= len(right.rows) else (right_id, left_id)
        build = small if splittable else None
        for party in self.job.passives:
            self.endpoint.send(party, TAG_STEP, {"op": "children", "node": node_id, "mask": _pack(goes_left),
                                                 "build": "none" if build is None else ("left" if build == left_id
                                                                                        else "right")})
        node.rows = np.zeros(0, dtype=np.int64)  # the children hold them now
        if build is None:
            return ()
        self._collect(small)
        self.nodes[large].hists = {i: subtract(node.hists[i], self.nodes[small].hists[i]) for i in node.hists}
        node.hists = {}
        for child in splittable:
            self._choose(child)
        return tuple(splittable)

    def leaves(self) -> List[Tuple[int, np.ndarray]]:
        return [(i, n.rows) for i, n in enumerate(self.nodes) if self.owner[i] == LEAF]


def active_program(endpoint: Channel, job: TreeJob, data: TreePartyData) -> TreePartyResult:
    """The active party: labels and its own features; grows every tree."""
    clock = PhaseClock()
    data = data.checked(job, endpoint.name, needs_labels=True)
    y = data.y
    assert y is not None
    protection = get_protection(job.protection)
    protection.start(endpoint, job, "active")
    y = protection.training_labels(y, data.codes, job)
    baseline = protection.baseline(y)
    raw = np.full(job.n_samples, baseline)
    lookup = LookupTable()
    trees: List[Tree] = []
    history: Dict[str, List[float]] = {"train_loss": []}
    for _ in range(job.max_iter):
        g, h = protection.gradients(_sigmoid(raw), y, job)
        with clock.crypto():
            release = protection.release(g, h)
        for party in job.passives:
            endpoint.send(party, TAG_STEP, {"op": "tree"})
            endpoint.send(party, TAG_GRADIENTS, release)
        g, h = protection.grown_from(g, h, release)  # "dp": the released gradients, never the exact ones
        grower = _Grower(endpoint, job, data.codes, g, h, lookup, protection, clock)
        tree = grower.grow()
        for leaf, rows in grower.leaves():
            raw[rows] += tree.value[leaf]
        trees.append(tree)
        history["train_loss"].append(_log_loss(raw, y))
        for party in job.passives:
            endpoint.send(party, TAG_STEP, {"op": "end_tree"})
    for party in job.passives:
        endpoint.send(party, TAG_STEP, {"op": "end"})
    return TreePartyResult(endpoint.name, "active", lookup=lookup, trees=trees, baseline=baseline, history=history,
                           timings=clock.timings(endpoint), info={"seconds": dict(protection.seconds)})


def passive_program(endpoint: Channel, job: TreeJob, data: TreePartyData) -> TreePartyResult:
    """A passive party: its own features; builds the histograms asked for and makes its own splits."""
    clock = PhaseClock()
    data = data.checked(job, endpoint.name, needs_labels=False)
    codes = data.codes
    layout: BinLayout = job.layout(endpoint.name)
    protection = get_protection(job.protection)
    protection.start(endpoint, job, "passive")
    lookup = LookupTable()
    leader = job.active
    gradients: Any = None
    rows: Dict[int, np.ndarray] = {}
    next_node = 0
    while True:
        step = endpoint.recv(leader, TAG_STEP)
        op = step.get("op") if isinstance(step, dict) else None
        if op == "tree":
            with clock.crypto():
                gradients = protection.receive(endpoint.recv(leader, TAG_GRADIENTS), job.n_samples)
            rows, next_node = {0: np.arange(job.n_samples)}, 1
            endpoint.send(leader, TAG_HIST, {**_histogram(protection, gradients, codes, rows[0], layout, clock),
                                             "node": 0})
        elif op == "split":
            node, feature, code = step.get("node"), step.get("feature"), step.get("code")
            missing_left = step.get("missing_left")
            if node not in rows or not isinstance(feature, int) or not 0 <= feature < codes.shape[1] \
                    or not isinstance(code, int) or not isinstance(missing_left, bool) \
                    or not 0 <= code < _split_codes(layout, feature, missing_left):
                raise ValueError(f"party {leader!r} asked for a split this party cannot make: {step!r}")
            record = lookup.add(feature, code, missing_left, int(layout.value_bins[feature]))
            goes_left = lookup.goes_left(record, codes[rows[node]])
            endpoint.send(leader, TAG_SPLIT, {"record": record, "mask": _pack(goes_left)})
        elif op == "children":
            node = step.get("node")
            if node not in rows:
                raise ValueError(f"party {leader!r} split node {node!r}, which this party does not hold")
            parent = rows.pop(node)
            goes_left = _unpack(step.get("mask"), len(parent), f"party {leader!r}")
            left, right = next_node, next_node + 1
            next_node += 2
            rows[left], rows[right] = parent[goes_left], parent[~goes_left]
            build = step.get("build")
            if build in ("left", "right"):
                child = left if build == "left" else right
                endpoint.send(leader, TAG_HIST, {**_histogram(protection, gradients, codes, rows[child], layout,
                                                              clock), "node": child})
            elif build != "none":
                raise ValueError(f"party {leader!r} asked to build {build!r}")
        elif op == "end_tree":
            rows, gradients = {}, None
        elif op == "end":
            break
        else:
            raise ValueError(f"party {leader!r} sent a step this party does not know: {op!r}")
    return TreePartyResult(endpoint.name, "passive", lookup=lookup, timings=clock.timings(endpoint),
                           info={"seconds": dict(protection.seconds)})


def _split_codes(layout: BinLayout, feature: int, missing_left: bool) -> int:
    """How many thresholds ``feature`` can split at: below its last value bin, and at it too when its
    training missing values go right (the split "every value left, missing right")."""
    values = int(layout.value_bins[feature])
    has_missing = bool(layout.has_missing()[feature])
    return values - 1 + int(has_missing and not missing_left)


def _histogram(protection: Any, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout,
               clock: PhaseClock) -> Any:
    if gradients is None:
        raise ValueError("a histogram was asked for before the round's gradients arrived")
    with clock.crypto():
        return protection.aggregate(gradients, codes, rows, layout)
