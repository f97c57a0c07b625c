"""Vertical gradient boosting over a Channel: the active party's and a passive party's programs.

Per round (one tree), as in SecureBoost (Cheng et al. 2021) with the growth rules of
scikit-learn's ``HistGradientBoostingClassifier``:

1. The active party computes every row's gradient and hessian of the log loss,
   ``g = p - y``, ``h = p (1 - p)`` with ``p = sigmoid(raw score)`` (each times the
   row's weight, if any: :mod:`vflsec.trees.weights`), and hands them
   to each passive party through the job's protection (:mod:`vflsec.trees.protection`;
   "plain": as they are). The protection also says which labels the active party
   trains on, its baseline score and what it grows the tree from ("dp": the
   released noisy gradients, so the trees are post-processing of the releases;
   "label_dp": labels after randomized response; :mod:`vflsec.trees.dp`).
2. Every party builds its histograms of the root and the active party scores every
   party's splits (:func:`vflsec.trees.histogram.best_split`), the best over all
   parties first (active party's features, then each passive party's, in job order).
   Where a passive party holds the round's gradients in the clear (plain and the DP
   protections: ``Protection.passive_scores``) it scores its own splits with the
   node's totals the active party sends and sends only its best one (a few numbers
   instead of a value per bin: the same choice, bit for bit, as the active party's on
   its histogram); under SecureBoost it sends its encrypted histograms, which the
   active party opens and scores.
3. Best-first growth: the leaf with the largest gain is split until
   ``max_leaf_nodes`` leaves exist or no leaf can be split (``max_depth``, fewer
   than ``2 min_samples_leaf`` rows, no split gaining more than ``min_gain``). A
   passive party's split is made by that party: it records feature and threshold
   in its own lookup table and returns the record id and which of the node's rows
   go left. The active party then tells every passive party the node's partition
   (what SecureBoost shows passive parties: each node's instance space; the split's
   owner already has it) and which child to build a histogram of: the smaller one;
   the other is the parent's minus it (:func:`~vflsec.trees.histogram.subtract`).
4. Leaves get ``learning_rate * (-G / (H + l2))``; the active party adds them to
   the raw scores of the leaf's rows.

Messages (active to passive on ``TAG_STEP`` in order, each round's gradients on
``TAG_GRADIENTS``; passive to active on ``TAG_HIST`` or ``TAG_CANDIDATES``, and
``TAG_SPLIT``): ``{"op": "tree"}`` then the protection's release (float64 arrays
whose values are all float32 values travel as float32: exact, half the bytes),
``{"op": "split", "node", "feature", "code", "missing_left"}`` (to the owner only),
``{"op": "children", "node", "mask", "build"}`` (``mask``: packed bits, which of
the node's rows go left, left out for the split's owner; ``build``: "left",
"right" or "none"), ``{"op": "end_tree"}``, ``{"op": "end"}``. A histogram is the
protection's payload with its ``node``. Where passive parties score their splits,
"children" names the children to score in ``score`` ("left", "right", "both" or
"none": the splittable ones), and "tree" and "children" carry, when there is a node
to score, ``totals`` (float64 ``(k, 2)``: G and H of the root, or of those children,
left first); each such node's best split comes back on ``TAG_CANDIDATES``
(:func:`~vflsec.trees.histogram.encode_choices`).
Every party logs one line per tree and keeps each tree's seconds, leaves and bytes
in its result's ``history`` (:mod:`vflsec.trees.progress`).

Each party checks a message against what an honest sender's satisfies before it uses
it (:mod:`vflsec.trees.bounds`): the active party every histogram against the node's
totals, every best split's gain against its sums, a split's rows against the sums it
was chosen for; a passive party the round's gradients, every step against the job's
growth rules (``min_samples_leaf`` rows a child, ``max_depth``, ``max_leaf_nodes``,
the smaller child built, only the splits it proposed where it scores its own) and node
totals against its rows' sums. A deviation fails the job naming the sender.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..federation.channel import Channel
from ..vfl.clock import PhaseClock
from ..vfl.received import PeerMessageRefused
from .bounds import (
    Receipt,
    built_child,
    check_clear_gradients,
    check_histogram,
    check_may_split,
    check_scored,
    received_totals,
    same_sum,
    scored_children,
    splittable,
    unsplittable_reason,
)
from .histogram import (
    BinLayout,
    Histogram,
    SplitChoice,
    best_split,
    build_histogram,
    decode_choices,
    encode_choices,
    leaf_value,
    split_codes,
    subtract,
)
from .job import TreeJob, TreePartyData, TreePartyResult
from .progress import MeteredChannel, TreeMeter
from .protection import baseline_score, get_protection
from .tree import LEAF, LookupTable, Tree
from .weights import row_weights

__all__ = ["TAG_CANDIDATES", "TAG_GRADIENTS", "TAG_HIST", "TAG_SPLIT", "TAG_STEP", "active_program",
           "baseline_score", "passive_program"]

TAG_STEP = "trees_step"
TAG_GRADIENTS = "trees_gradients"
TAG_HIST = "trees_hist"
TAG_CANDIDATES = "trees_candidates"
TAG_SPLIT = "trees_split"


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return np.exp(-np.logaddexp(0.0, -z))


def _log_loss(raw: np.ndarray, y: np.ndarray, weight: Optional[np.ndarray] = None) -> float:
    return float(np.average(np.logaddexp(0.0, raw) - y * raw, weights=weight))


def _pack(mask: np.ndarray) -> bytes:
    return np.packbits(mask).tobytes()


def _unpack(data: Any, count: int, who: str) -> np.ndarray:
    if not isinstance(data, (bytes, bytearray)) or len(data) != (count + 7) // 8:
        raise ValueError(f"{who} sent a row mask that is not {(count + 7) // 8} bytes")
    return np.unpackbits(np.frombuffer(bytes(data), dtype=np.uint8), count=count).astype(bool)


def _narrowed(release: Any) -> Any:
    """The release as it travels: each float64 array whose values are all float32 values as float32 (exact)."""
    if not isinstance(release, dict):
        return release
    out = dict(release)
    for key, value in release.items():
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            narrow = value.astype(np.float32)
            if np.array_equal(narrow.astype(np.float64), value):  # NaN never compares equal: it stays float64
                out[key] = narrow
    return out


def _widened(release: Any) -> Any:
    """:func:`_narrowed`'s float32 arrays back to float64 (exact)."""
    if not isinstance(release, dict):
        return release
    return {key: value.astype(np.float64) if isinstance(value, np.ndarray) and value.dtype == np.float32 else value
            for key, value in release.items()}


@dataclass
class _Node:
    rows: np.ndarray
    depth: int
    totals: Tuple[float, float, int]
    hists: Dict[int, Histogram]
    split: Optional[Tuple[int, SplitChoice]] = None
    #: the passive parties' best splits (by party index), where they score their own
    choices: Dict[int, Optional[SplitChoice]] = field(default_factory=dict)


class _Grower:
    """The active party's state while it grows one tree."""

    def __init__(self, endpoint: Channel, job: TreeJob, codes: np.ndarray, g: np.ndarray, h: np.ndarray,
                 lookup: LookupTable, protection: Any, clock: PhaseClock):
        self.endpoint, self.job, self.codes, self.g, self.h = endpoint, job, codes, g, h
        self.lookup, self.protection, self.clock = lookup, protection, clock
        self.layouts = [job.layout(p) for p in job.data_parties]
        self.passive_scores = bool(protection.passive_scores)
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
        return splittable(node.totals[2], node.depth, self.job)

    def _node_totals(self, node_ids: Sequence[int]) -> np.ndarray:
        return np.array([self.nodes[i].totals[:2] for i in node_ids], dtype=np.float64).reshape(len(node_ids), 2)

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
            check_histogram(node.hists[i], self.layouts[i], node.totals, party, node_id)

    def _collect_choices(self, node_ids: Sequence[int]) -> None:
        """Each passive party's best split of each of ``node_ids`` (the nodes it was sent the totals of)."""
        counts = [self.nodes[i].totals[2] for i in node_ids]
        for i, party in enumerate(self.job.passives, start=1):
            choices = decode_choices(self.endpoint.recv(party, TAG_CANDIDATES), node_ids, counts, self.layouts[i],
                                     min_samples_leaf=self.job.min_samples_leaf, min_gain=self.job.min_gain,
                                     who=f"party {party!r}")
            for node_id, choice in zip(node_ids, choices):
                if choice is not None:
                    check_scored(choice, self.nodes[node_id].totals, l2=self.job.l2_regularization,
                                 min_hessian=self.job.min_hessian, who=f"party {party!r}", node=node_id)
                self.nodes[node_id].choices[i] = choice

    def _choose(self, node_id: int) -> None:
        node = self.nodes[node_id]
        job = self.job
        best: Optional[Tuple[int, SplitChoice]] = None
        for i in range(len(self.layouts)):
            if i in node.choices:
                choice = node.choices[i]
            else:
                choice = best_split(node.hists[i], self.layouts[i], node.totals, l2=job.l2_regularization,
                                    min_samples_leaf=job.min_samples_leaf, min_hessian=job.min_hessian,
                                    min_gain=job.min_gain)
            if choice is not None and (best is None or choice.gain > best[1].gain):
                best = (i, choice)
        node.split = best

    def grow(self, release: Any) -> Tree:
        """Announce the tree and send ``release`` (the round's gradients) to every passive party, then grow."""
        job = self.job
        root = self._new_node(np.arange(job.n_samples), 0)
        scored = self._splittable(self.nodes[root])
        step: Dict[str, Any] = {"op": "tree"}
        if self.passive_scores and scored:
            step["totals"] = self._node_totals([root])
        wire = _narrowed(release)
        for party in job.passives:
            self.endpoint.send(party, TAG_STEP, step)
            self.endpoint.send(party, TAG_GRADIENTS, wire)
        if self.passive_scores:
            self.nodes[root].hists[0] = build_histogram(self.codes, self.nodes[root].rows, self.g, self.h,
                                                        self.layouts[0])
            if scored:
                self._collect_choices([root])
        else:
            self._collect(root)
        heap: List[Tuple[float, int]] = []
        if scored:
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
        owner: Optional[str] = None
        if party_index == 0:
            record = self.lookup.add(choice.feature, choice.code, choice.missing_left,
                                     int(self.layouts[0].value_bins[choice.feature]))
            goes_left = self.lookup.goes_left(record, self.codes[node.rows])
        else:
            owner = self.job.passives[party_index - 1]
            self.endpoint.send(owner, TAG_STEP, {"op": "split", "node": node_id, "feature": choice.feature,
                                                 "code": choice.code, "missing_left": choice.missing_left})
            reply = self.endpoint.recv(owner, TAG_SPLIT)
            if not isinstance(reply, dict) or not isinstance(reply.get("record"), int):
                raise ValueError(f"party {owner!r} sent a split reply without a record id")
            record = reply["record"]
            goes_left = _unpack(reply.get("mask"), len(node.rows), f"party {owner!r}")
            if int(goes_left.sum()) != choice.n_left:
                raise ValueError(f"party {owner!r} sent {int(goes_left.sum())} rows left of node {node_id}; its "
                                 f"histogram counted {choice.n_left}")
            left_rows = node.rows[goes_left]
            # the rows it sends left must carry the sums the chosen split was scored with
            for what, values, claimed in (("gradient", self.g, choice.G_left), ("hessian", self.h, choice.H_left)):
                if not same_sum(float(values[left_rows].sum()), float(claimed), values[left_rows]):
                    raise ValueError(f"party {owner!r} sent rows left of node {node_id} whose {what} sum "
                                     f"{float(values[left_rows].sum()):.6g} is not the {float(claimed):.6g} its "
                                     "histogram gave that split")
        left_id = self._new_node(node.rows[goes_left], node.depth + 1)
        right_id = self._new_node(node.rows[~goes_left], node.depth + 1)
        self.owner[node_id], self.record[node_id] = party_index, record
        self.left[node_id], self.right[node_id] = left_id, right_id
        left, right = self.nodes[left_id], self.nodes[right_id]
        splittable = [c for c in (left_id, right_id) if self._splittable(self.nodes[c])]
        small, large = (left_id, right_id) if len(left.rows) <= len(right.rows) else (right_id, left_id)
        build = small if splittable else None
        step: Dict[str, Any] = {"op": "children", "node": node_id,
                                "build": "none" if build is None else ("left" if build == left_id else "right")}
        if self.passive_scores:
            step["score"] = {(): "none", (left_id,): "left", (right_id,): "right",
                             (left_id, right_id): "both"}[tuple(splittable)]
            if splittable:
                step["totals"] = self._node_totals(splittable)
        mask = _pack(goes_left)
        for party in self.job.passives:
            # The split's owner computed the mask itself: it is not sent back.
            self.endpoint.send(party, TAG_STEP, step if party == owner else {**step, "mask": mask})
        node.rows = np.zeros(0, dtype=np.int64)  # the children hold them now
        if build is None:
            return ()
        if self.passive_scores:
            self.nodes[small].hists[0] = build_histogram(self.codes, self.nodes[small].rows, self.g, self.h,
                                                         self.layouts[0])
            self._collect_choices(splittable)
        else:
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
    metered = MeteredChannel(endpoint)
    protection = get_protection(job.protection)
    protection.start(metered, job, "active")
    y = protection.training_labels(y, data.codes, job)
    weight = row_weights(y, data.sample_weight, data.class_weight)  # class weights: of the labels trained on
    baseline = protection.baseline(y, weight)
    raw = np.full(job.n_samples, baseline)
    lookup = LookupTable()
    trees: List[Tree] = []
    history: Dict[str, List[float]] = {"train_loss": []}
    meter = TreeMeter(metered, job.max_iter)
    for _ in range(job.max_iter):
        g, h = protection.gradients(_sigmoid(raw), y, job, weight)
        with clock.crypto():
            release = protection.release(g, h)
        g, h = protection.grown_from(g, h, release)  # "dp": the released gradients, never the exact ones
        grower = _Grower(metered, job, data.codes, g, h, lookup, protection, clock)
        tree = grower.grow(release)
        for leaf, rows in grower.leaves():
            raw[rows] += tree.value[leaf]
        trees.append(tree)
        history["train_loss"].append(_log_loss(raw, y, weight))
        for party in job.passives:
            metered.send(party, TAG_STEP, {"op": "end_tree"})
        meter.tree_done(tree.n_leaves)
    for party in job.passives:
        metered.send(party, TAG_STEP, {"op": "end"})
    history.update(meter.record)
    return TreePartyResult(endpoint.name, "active", lookup=lookup, trees=trees, baseline=baseline, history=history,
                           timings=clock.timings(endpoint), info={"seconds": dict(protection.seconds)})


class _PassiveTree:
    """A passive party's state within one tree: the rows and depth of each node it may be asked about, the
    histograms it keeps to score children by subtraction, the best split it proposed for each node it
    scored, the splits made so far and the row mask of the split it last made."""

    def __init__(self, gradients: Any, n_samples: int):
        self.gradients = gradients
        self.rows: Dict[int, np.ndarray] = {0: np.arange(n_samples)}
        self.depth: Dict[int, int] = {0: 0}
        self.hists: Dict[int, Histogram] = {}
        self.proposed: Dict[int, Optional[SplitChoice]] = {}
        self.next_node = 1
        self.splits = 0
        self.made: Optional[Tuple[int, np.ndarray]] = None


def passive_program(endpoint: Channel, job: TreeJob, data: TreePartyData) -> TreePartyResult:
    """A passive party: its own features; builds the histograms asked for (or scores its own splits)
    and makes its own splits. Every step of the active party is checked against the job's growth rules
    before it is followed (:mod:`vflsec.trees.bounds`), a deviation refused naming the active party."""
    clock = PhaseClock()
    data = data.checked(job, endpoint.name, needs_labels=False)
    codes = data.codes
    layout: BinLayout = job.layout(endpoint.name)
    metered = MeteredChannel(endpoint)
    protection = get_protection(job.protection)
    protection.start(metered, job, "passive")
    scores = bool(protection.passive_scores)
    bounds = protection.received_bounds(job) if scores else (None, None)
    lookup = LookupTable()
    leader = job.active
    receipt = Receipt(endpoint.name, leader)
    meter = TreeMeter(metered, job.max_iter)
    tree: Optional[_PassiveTree] = None
    rounds = 0
    while True:
        step = metered.recv(leader, TAG_STEP)
        op = step.get("op") if isinstance(step, dict) else None
        if op == "tree":
            if tree is not None or rounds == job.max_iter:
                raise receipt.refuse(TAG_STEP, f"began tree {rounds + 1} " + (
                    "before ending the last one" if tree is not None else f"of a job of max_iter {job.max_iter}"))
            receipt.step, rounds = rounds, rounds + 1
            with clock.crypto():
                gradients = _received_gradients(protection, metered.recv(leader, TAG_GRADIENTS), job, receipt,
                                                 bounds)
            tree = _PassiveTree(gradients, job.n_samples)
            if not scores:
                metered.send(leader, TAG_HIST, {**_histogram(protection, gradients, codes, tree.rows[0], layout,
                                                             clock), "node": 0})
                continue
            if "totals" in step:  # the root can be split: score it (and keep its histogram for its children)
                totals = received_totals(step["totals"], [0], tree.rows, gradients, receipt, TAG_STEP)
                g, h = gradients
                tree.hists[0] = build_histogram(codes, tree.rows[0], g, h, layout)
                metered.send(leader, TAG_CANDIDATES, _scored(job, layout, tree, [0], totals))
        elif op == "split":
            if tree is None:
                raise receipt.refuse(TAG_STEP, "asked for a split outside a tree")
            metered.send(leader, TAG_SPLIT, _split(job, step, tree, lookup, codes, layout, receipt, scores))
        elif op == "children":
            if tree is None:
                raise receipt.refuse(TAG_STEP, "split a node outside a tree")
            _children(metered, job, step, tree, protection, codes, layout, clock, receipt)
        elif op == "end_tree":
            if tree is not None:
                meter.tree_done(tree.splits + 1)
            tree = None
        elif op == "end":
            break
        else:
            raise receipt.refuse(TAG_STEP, f"sent a step this party does not know: {op!r}")
    history: Dict[str, List[float]] = dict(meter.record)
    return TreePartyResult(endpoint.name, "passive", lookup=lookup, history=history, timings=clock.timings(endpoint),
                           info={"seconds": dict(protection.seconds)})


def _received_gradients(protection: Any, payload: Any, job: TreeJob, receipt: Receipt,
                        bounds: Tuple[Optional[float], Optional[float]]) -> Any:
    """The round's gradients as the protection receives them; what it refuses of the payload, and clear
    gradients beyond what an honest release satisfies (``bounds``), refused naming the sender."""
    try:
        gradients = protection.receive(_widened(payload), job.n_samples)
    except PeerMessageRefused:
        raise
    except ValueError as exc:  # receive reads nothing but the payload: what it refuses is the sender's
        raise receipt.refuse(TAG_GRADIENTS, str(exc)) from exc
    if protection.passive_scores:
        check_clear_gradients(gradients, job.n_samples, receipt, TAG_GRADIENTS, bounds)
    return gradients


def _split(job: TreeJob, step: Dict[str, Any], tree: _PassiveTree, lookup: LookupTable, codes: np.ndarray,
           layout: BinLayout, receipt: Receipt, scores: bool) -> Dict[str, Any]:
    """A passive party's side of ``{"op": "split"}``: the split recorded in its lookup table, the reply
    (record id, which of the node's rows go left). A split it cannot make, of a node the growth rules keep
    a leaf, with fewer than ``min_samples_leaf`` rows a side or (where it scores its own splits) other than
    the one it proposed for the node is refused: each such mask would show the active party a partition
    of this party's rows no honest run shows it."""
    node, feature, code = step.get("node"), step.get("feature"), step.get("code")
    missing_left = step.get("missing_left")
    if not isinstance(node, int) or node not in tree.rows or not isinstance(feature, int) \
            or not 0 <= feature < codes.shape[1] \
            or not isinstance(code, int) or not isinstance(missing_left, bool) \
            or not 0 <= code < split_codes(layout, feature, missing_left):
        raise receipt.refuse(TAG_STEP, f"asked for a split this party cannot make: {step!r}")
    if tree.made is not None:
        raise receipt.refuse(TAG_STEP, f"asked for a split of node {node} before announcing the children of "
                                       f"node {tree.made[0]}, which this party split")
    check_may_split(job, node, len(tree.rows[node]), tree.depth[node], tree.splits, receipt, TAG_STEP)
    rows = tree.rows[node]
    record = lookup.add(feature, code, missing_left, int(layout.value_bins[feature]))
    goes_left = lookup.goes_left(record, codes[rows])
    n_left, least = int(goes_left.sum()), job.min_samples_leaf
    if not least <= n_left <= len(rows) - least:
        raise receipt.refuse(TAG_STEP, f"asked for a split of node {node} that sends {n_left} of its {len(rows)} "
                                       f"rows left; min_samples_leaf {least} keeps {least} to {len(rows) - least}")
    if scores:
        proposed = tree.proposed.get(node)
        if proposed is None or (proposed.feature, proposed.code, proposed.missing_left) != (feature, code,
                                                                                           missing_left):
            offer = "no split" if proposed is None else (f"feature {proposed.feature}, code {proposed.code}, "
                                                         f"missing_left {proposed.missing_left}")
            raise receipt.refuse(TAG_STEP, f"asked for the split feature {feature}, code {code}, missing_left "
                                           f"{missing_left} of node {node}; this party proposed {offer}")
    tree.made = (node, goes_left)
    return {"record": record, "mask": _pack(goes_left)}


def _children(endpoint: Channel, job: TreeJob, step: Dict[str, Any], tree: _PassiveTree, protection: Any,
              codes: np.ndarray, layout: BinLayout, clock: PhaseClock, receipt: Receipt) -> None:
    """A passive party's side of ``{"op": "children"}``: the node's rows split, then the smaller child's
    histogram sent, or (where it scores its own splits) the children asked for scored and their best splits
    sent. The split, the child built and those scored are checked against the growth rules first."""
    leader = job.active
    node = step.get("node")
    if not isinstance(node, int) or node not in tree.rows:
        raise receipt.refuse(TAG_STEP, f"split node {node!r}, which this party does not hold")
    if tree.made is not None and tree.made[0] != node:
        raise receipt.refuse(TAG_STEP, f"split node {node} before announcing the children of node {tree.made[0]}, "
                                       "which this party split")
    check_may_split(job, node, len(tree.rows[node]), tree.depth[node], tree.splits, receipt, TAG_STEP)
    parent, depth = tree.rows.pop(node), tree.depth.pop(node)
    if "mask" in step:
        if tree.made is not None:
            raise receipt.refuse(TAG_STEP, f"sent a row mask of node {node}, whose split this party made")
        mask = step["mask"]
        if not isinstance(mask, (bytes, bytearray)) or len(mask) != (len(parent) + 7) // 8:
            raise receipt.refuse(TAG_STEP, f"sent a row mask that is not {(len(parent) + 7) // 8} bytes")
        goes_left = _unpack(mask, len(parent), f"party {leader!r}")
    elif tree.made is not None:
        goes_left = tree.made[1]  # this party's own split: it made the mask
    else:
        raise receipt.refuse(TAG_STEP, f"split node {node!r} without saying which rows go left")
    tree.made = None
    n_left = int(goes_left.sum())
    n_right = len(parent) - n_left
    if min(n_left, n_right) < job.min_samples_leaf:
        raise receipt.refuse(TAG_STEP, f"split node {node} into children of {n_left} and {n_right} rows; "
                                       f"min_samples_leaf {job.min_samples_leaf} keeps at least "
                                       f"{job.min_samples_leaf} in each")
    left, right = tree.next_node, tree.next_node + 1
    tree.next_node += 2
    tree.splits += 1
    tree.rows[left], tree.rows[right] = parent[goes_left], parent[~goes_left]
    tree.depth[left] = tree.depth[right] = depth + 1
    tree.proposed.pop(node, None)
    parent_hist = tree.hists.pop(node, None)
    reasons = [unsplittable_reason(count, depth + 1, job) for count in (n_left, n_right)]
    can_split = [reason is None for reason in reasons]
    build = built_child(n_left, n_right, *can_split)
    if step.get("build") != build:
        why = ("neither child can be split (left: " + "; right: ".join(str(r) for r in reasons) + ")"
               if build == "none" else "the smaller child, the left one on a tie")
        raise receipt.refuse(TAG_STEP, f"asked to build {step.get('build')!r} of node {node}'s children ({n_left} "
                                       f"and {n_right} rows); the protocol builds {build!r}: {why}")
    if not protection.passive_scores:
        if build != "none":
            child = left if build == "left" else right
            endpoint.send(leader, TAG_HIST, {**_histogram(protection, tree.gradients, codes, tree.rows[child], layout,
                                                          clock), "node": child})
        return
    asked = scored_children(*can_split)
    if step.get("score") != asked:
        raise receipt.refuse(TAG_STEP, f"asked to score {step.get('score')!r} of node {node}'s children; the "
                                       f"splittable ones are {asked!r}")
    if build == "none":
        return
    if parent_hist is None:
        raise receipt.refuse(TAG_STEP, f"asked for the children of node {node!r}, which this party never scored")
    score = {"left": [left], "right": [right], "both": [left, right]}[asked]
    totals = received_totals(step.get("totals"), score, tree.rows, tree.gradients, receipt, TAG_STEP)
    small, large = (left, right) if build == "left" else (right, left)
    g, h = tree.gradients
    tree.hists[small] = build_histogram(codes, tree.rows[small], g, h, layout)
    tree.hists[large] = subtract(parent_hist, tree.hists[small])
    for child in (left, right):
        if child not in score:
            del tree.hists[child]  # a leaf for good: never split, never a parent
    endpoint.send(leader, TAG_CANDIDATES, _scored(job, layout, tree, score, totals))


def _scored(job: TreeJob, layout: BinLayout, tree: _PassiveTree, nodes: List[int], totals: np.ndarray) -> Any:
    """The best split of each of ``nodes`` among this party's features (``totals``: their G, H) as sent;
    each kept as the split this party proposed for its node."""
    choices = [best_split(tree.hists[node], layout, (float(G), float(H), len(tree.rows[node])),
                          l2=job.l2_regularization, min_samples_leaf=job.min_samples_leaf,
                          min_hessian=job.min_hessian, min_gain=job.min_gain)
               for node, (G, H) in zip(nodes, totals)]
    tree.proposed.update(zip(nodes, choices))
    return encode_choices(nodes, choices)


def _histogram(protection: Any, gradients: Any, codes: np.ndarray, rows: np.ndarray, layout: BinLayout,
               clock: PhaseClock) -> Any:
    if gradients is None:
        raise ValueError("a histogram was asked for before the round's gradients arrived")
    with clock.crypto():
        return protection.aggregate(gradients, codes, rows, layout)
