"""Bounds on receipt in vertical boosting (issue 39): what an honest sender's message satisfies, checked
by its receiver before use.

A message from a peer is data the receiver did not produce (:mod:`vflsec.vfl.received`). What each side
of :mod:`vflsec.trees.protocol` knows, and so checks:

A passive party, of the active party's steps (refused with :class:`~vflsec.vfl.received.PeerMessageRefused`
naming the active party, the tag and the round):

* the round's gradients: one finite value per row, hessians ``>= 0`` (weights are non-negative); where the
  job fixes more (:meth:`vflsec.trees.protection.Protection.received_bounds`; "dp": ``|g~| <= 1`` plus the
  lattice noise's support, ``h <= 1/4``) those bounds too. Under "plain" and "label_dp" the job does not
  say whether the active party weights its rows (the weights are its own data: :mod:`vflsec.trees.weights`),
  so ``|g| <= 1``, ``h <= 1/4`` cannot be asked of them;
* the growth rules (:func:`splittable`): at most ``max_iter`` trees, one at a time; a node is split at
  depth below ``max_depth``, at most ``max_leaf_nodes - 1`` times a tree, one split at a time; both
  children keep ``min_samples_leaf`` rows; the child built is the smaller one (the left one on a tie)
  and none when neither child can be split (:func:`built_child`); those scored are the splittable ones
  (:func:`scored_children`);
* where it scores its own splits (its gradients in the clear): each node's totals the active party sends
  are the sums of the round's gradients over the node's rows, and a split asked of it is the one it
  proposed for that node.

The active party, of a passive party's answers (ValueError naming the party): every histogram's bins
count the node's rows and sum to its totals, feature by feature (:func:`check_histogram`); every best
split's gain is the one its ``G_left``, ``H_left`` and the node's totals give, and both children keep
``min_hessian`` (:func:`check_scored`); the rows sent left of a chosen split carry the sums it was
chosen for (:mod:`vflsec.trees.protocol`).

What no check here can see: the rows of a split the active party makes on its own features (a passive
party cannot know them), so in two rounds it can still announce nodes whose rows differ by one row
(under SecureBoost the difference of their histograms' counts is that row's bins); and whether the
rows a passive party sends left are a threshold split of its columns at all.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..vfl.received import PeerMessageRefused, Step, check_received_array
from .histogram import BinLayout, Histogram, SplitChoice

__all__ = ["Receipt", "built_child", "check_clear_gradients", "check_histogram", "check_may_split", "check_scored",
           "received_totals", "same_sum", "scored_children", "split_gain", "splittable", "unsplittable_reason"]


class Receipt:
    """A receiving party's refusals of one peer's messages: :class:`PeerMessageRefused` naming
    ``receiver``, ``sender``, the tag and ``step`` (the round, once the first tree began)."""

    def __init__(self, receiver: str, sender: str):
        self.receiver, self.sender = receiver, sender
        self.step: Step = "before the first tree"

    def refuse(self, tag: str, reason: str) -> PeerMessageRefused:
        return PeerMessageRefused(self.receiver, self.sender, tag, self.step, reason)


def splittable(count: int, depth: int, job: Any) -> bool:
    """Whether the growth rules let a node of ``count`` rows at ``depth`` be split: below ``max_depth``
    and at least ``2 min_samples_leaf`` rows (each child keeps ``min_samples_leaf``)."""
    return unsplittable_reason(count, depth, job) is None


def unsplittable_reason(count: int, depth: int, job: Any) -> Optional[str]:
    """Why a node of ``count`` rows at ``depth`` cannot be split (None: it can)."""
    if job.max_depth is not None and depth >= job.max_depth:
        return f"it is at depth {depth}, max_depth {job.max_depth}"
    if count < 2 * job.min_samples_leaf:
        return f"it has {count} rows, fewer than 2 min_samples_leaf = {2 * job.min_samples_leaf}"
    return None


def check_may_split(job: Any, node: int, count: int, depth: int, splits: int, receipt: Receipt, tag: str) -> None:
    """The growth rules let ``node`` (``count`` rows at ``depth``) be split as split number ``splits + 1``
    of its tree: below ``max_depth``, rows enough, within ``max_leaf_nodes``; else refused."""
    reason = unsplittable_reason(count, depth, job)
    if reason is None and job.max_leaf_nodes is not None and splits >= job.max_leaf_nodes - 1:
        reason = f"this tree has had {splits} splits, all that max_leaf_nodes {job.max_leaf_nodes} allows"
    if reason is not None:
        raise receipt.refuse(tag, f"split node {node}, which the growth rules keep a leaf: {reason}")


def built_child(n_left: int, n_right: int, left_splittable: bool, right_splittable: bool) -> str:
    """The child whose histogram the protocol builds: the smaller one (left on a tie), "none" when neither
    child can be split (the other is its parent's minus it)."""
    if not (left_splittable or right_splittable):
        return "none"
    return "left" if n_left <= n_right else "right"


def scored_children(left_splittable: bool, right_splittable: bool) -> str:
    """The children a passive party that scores its own splits is asked to score: the splittable ones."""
    return {(False, False): "none", (True, False): "left", (False, True): "right",
            (True, True): "both"}[(left_splittable, right_splittable)]


def check_clear_gradients(gradients: Tuple[np.ndarray, np.ndarray], n_samples: int, receipt: Receipt, tag: str,
                          bounds: Tuple[Optional[float], Optional[float]]) -> None:
    """A round's gradients and hessians in the clear (``bounds``: ``|g| <=`` the first, ``h <=`` the
    second, None: no bound known) as an honest active party sends them, else refused."""
    g_bound, h_bound = bounds
    g, h = gradients
    for what, values, bound in (("gradient g", g, g_bound), ("hessian h", h, h_bound)):
        check_received_array(values, receiver=receipt.receiver, sender=receipt.sender, tag=tag, step=receipt.step,
                             dtype=np.float64, shape=(n_samples,), bound=bound, what=what)
    if h.size and float(h.min()) < 0.0:
        raise receipt.refuse(tag, f"hessian h: a hessian of {float(h.min()):.6g}; an honest one is p (1 - p) times "
                                  "a non-negative weight, never below 0")


def same_sum(actual: float, claimed: float, values: np.ndarray) -> bool:
    """Equal up to float64 summation order (the gradients sit on the job's fixed-point grid, where
    every sum is exact; the slack covers releases off that grid)."""
    return abs(actual - claimed) <= 1e-9 * (float(np.abs(values).sum()) + 1.0)


def received_totals(value: Any, nodes: Sequence[int], rows: Mapping[int, np.ndarray],
                    gradients: Tuple[np.ndarray, np.ndarray], receipt: Receipt, tag: str) -> np.ndarray:
    """The (G, H) of ``nodes`` the active party sent, each the sums of the round's ``gradients`` (held by
    the receiver in the clear) over the node's ``rows``; else refused."""
    count = len(nodes)
    if not isinstance(value, np.ndarray) or value.dtype != np.float64 or value.shape != (count, 2) \
            or not np.isfinite(value).all():
        raise receipt.refuse(tag, f"node totals that are not {count} finite (G, H) pairs")
    g, h = gradients
    for node, pair in zip(nodes, value.tolist()):
        for what, values, claimed in (("gradient", g, pair[0]), ("hessian", h, pair[1])):
            own = values[rows[node]]
            if not same_sum(float(own.sum()), claimed, own):
                raise receipt.refuse(tag, f"node {node}'s {what} total {claimed:.17g}; the round's {what}s of its "
                                          f"{len(own)} rows sum to {float(own.sum()):.17g}")
    return value


def check_histogram(hist: Histogram, layout: BinLayout, totals: Tuple[float, float, int], party: str,
                    node_id: int) -> None:
    """What the active party knows of a node checks every histogram a passive party sends for it: per
    feature, the bins' row counts are non-negative and sum to the node's rows, and their gradient and
    hessian sums to the node's totals (the bins of a feature partition the node's rows). A crafted bin
    (a row's ciphertext raised to a power, sums made up) fails here, naming the party."""
    G, H, count = totals
    bound = float(np.abs(hist.G).sum() + np.abs(hist.H).sum())
    offsets = layout.offsets
    for feature in range(len(layout.n_bins)):
        a, b = int(offsets[feature]), int(offsets[feature + 1])
        counts = hist.C[a:b]
        if np.any(counts < 0) or int(counts.sum()) != int(count):
            raise ValueError(f"party {party!r} sent a histogram of node {node_id} whose feature {feature} counts "
                             f"{int(counts.sum())} rows; the node has {int(count)}")
        for what, sums, total in (("gradient", hist.G[a:b], G), ("hessian", hist.H[a:b], H)):
            if abs(float(sums.sum()) - total) > 1e-9 * (bound + abs(total) + 1.0):
                raise ValueError(f"party {party!r} sent a histogram of node {node_id} whose feature {feature} "
                                 f"{what}s sum to {float(sums.sum()):.6g}; the node's sum to {total:.6g}")


def split_gain(G_left: float, H_left: float, G: float, H: float, l2: float) -> Tuple[float, float, float]:
    """The three terms of the gain of a split with left sums ``G_left``, ``H_left`` of a node of totals
    ``G``, ``H``: ``G_L^2 / (H_L + lam)``, ``G_R^2 / (H_R + lam)``, ``G^2 / (H + lam)`` (the gain: the first
    two added, the third subtracted), in :func:`vflsec.trees.histogram.best_split`'s order of operations,
    so the same float64 values (a zero denominator gives inf or nan, as there)."""
    GL, HL, G64, H64 = np.float64(G_left), np.float64(H_left), np.float64(G), np.float64(H)
    GR, HR = G64 - GL, H64 - HL
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(GL * GL / (HL + l2)), float(GR * GR / (HR + l2)), float(G64 * G64 / (H64 + l2))


def check_scored(choice: SplitChoice, totals: Tuple[float, float, int], *, l2: float, min_hessian: float,
                 who: str, node: int) -> None:
    """A best split a passive party scored on a node of ``totals`` (G, H, n), as
    :func:`~vflsec.trees.histogram.best_split` finds it: both children's hessians at least ``min_hessian``
    and the gain its left sums give; ValueError naming ``who`` otherwise. (The left sums themselves are
    checked against the rows once the split is chosen: :mod:`vflsec.trees.protocol`.)"""
    G, H, _ = totals
    H_right = H - choice.H_left
    if not (choice.H_left >= min_hessian and H_right >= min_hessian):
        raise ValueError(f"{who} sent a best split of node {node} whose children's hessians "
                         f"({choice.H_left:.6g}, {H_right:.6g}) are not both at least min_hessian {min_hessian:g}")
    left, right, parent = split_gain(choice.G_left, choice.H_left, G, H, l2)
    gain = left + right - parent
    # The same operations on the same float64 values give the same gain: the slack (a few ulps of the
    # terms) only spares a reordering of them, far below any gain that could change a choice.
    if not abs(gain - choice.gain) <= 1e-12 * (abs(left) + abs(right) + abs(parent)):
        raise ValueError(f"{who} sent a best split of node {node} with gain {choice.gain:.17g}; its G_left "
                         f"{choice.G_left:.6g}, H_left {choice.H_left:.6g} and the node's totals ({G:.6g}, "
                         f"{H:.6g}) give {gain:.17g}")
