"""Job kind "trees": vertical gradient-boosted trees (:mod:`vflsec.trees`) under ``vflsec party``.

``[job]`` (with ``kind = "trees"``) holds the public hyper-parameters of a
:class:`~vflsec.trees.job.TreeJob`: ``active``, ``passives``, ``protection``
("plain", "secureboost", "dp" or "label_dp"), ``max_iter``, ``learning_rate``,
``max_leaf_nodes``, ``max_depth`` (leave it out: no limit), ``min_samples_leaf``,
``l2_regularization``, ``min_hessian``, ``min_gain``, ``key_bits`` ("secureboost"),
``epsilon`` and ``delta`` (the label-DP guarantee of the whole run: "dp" takes both,
"label_dp" epsilon only), ``seed`` (label_dp's public split of the rows), and
``max_bins`` (at most this many bins per feature, 255 by default), with the defaults of
:class:`~vflsec.trees.VerticalGradientBoostingClassifier`, and ``class_weight`` (a rare
label's weight: "balanced", each class weighing ``n / (2 * count)`` of the active party's
aligned training labels, or a table ``{ "0" = 1.0, "1" = 10.0 }`` keyed by the labels as
the active party's file codes them, 0 and 1 for a text label with ``positive_label``;
the estimator's ``class_weight``, :mod:`vflsec.trees.weights`: "plain" and "secureboost"
take it, "label_dp" computes it from the labels it released, "dp" refuses the job before
any party connects, naming why; the active party's output has the weights it used).
Two keys are refused:

* ``n_bins``: each party bins its own aligned training rows
  (:class:`~vflsec.trees.binning.FeatureBins` with ``max_bins``; the thresholds stay
  with it) and the bin counts per feature -- public: the sizes of the histograms the
  parties exchange -- are agreed at the start of the training program
  (:func:`agree_on_bins`, tag ``trees_bins``): each passive party sends the active
  party its counts, the active party sends every passive party the counts of all
  parties, each checks its own entry, and only then is the
  :class:`~vflsec.trees.job.TreeJob` built. Until then the job is an
  :class:`UnbinnedTreeJob` (every TreeJob check already made, on the CSV's row count
  at start-up);
* ``noise_seed``: the job file is every party's, and whoever knows the seed knows the
  DP noise, so a party run always draws its noise from the OS-entropy CSPRNG (a
  seeded run is for the in-process estimator's tests and experiments only).

The active party's labels are any two classes (the larger one is class 1, as
the estimator's ``classes_``); ``row_norm`` is "none" by default (trees need no
scaling). A job trains the model the estimator trains on the same aligned rows:
the same bins, the same trees.

Output: every party writes its own lookup table (the splits it owns: feature and
bin code per record) and its own bin ``thresholds`` (never sent), the agreed
``n_bins`` and, for the DP protections, ``privacy_spent``; the active party also the
``trees`` (:meth:`~vflsec.trees.tree.Tree.to_dict`: owner, record, children, leaf
values), the ``baseline`` score and the label ``classes``; its ``history`` holds
``train_loss`` per tree. Every party's ``history`` holds each tree's seconds, leaves and
bytes sent and received (:data:`vflsec.trees.progress.TREE_RECORD`), and
``bytes_per_tree`` their means (``sent``, ``received``, ``total``); while training,
each party logs one line per tree (:mod:`vflsec.trees.progress`). No party's output
holds another party's thresholds or rows. The programs write no checkpoints: a trees job
does not resume. A ``kind = "predict"`` job scores new customers with these outputs
(:mod:`.predict_trees`).

Held-out evaluation (``evaluate = true``): each party bins its aligned held-out
rows with its own training bins; each passive party sends the active party, in
one message, for every node it owns which held-out rows go left (packed bit
masks, :mod:`vflsec.trees.prediction`, tag ``trees_masks``); the active party
walks the trees and reports accuracy (beside the majority rate) and the AUC.
That message is ``ceil(n / 8)`` bytes per node the passive party owns, within
``[network] max_message_bytes`` (256 MiB by default: e.g. 3,000 owned nodes of
10^6 held-out rows would need a larger limit).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, FrozenSet, Mapping, Optional, Set, Tuple

import numpy as np

from .._arrays import check_positive_int
from ..federation.channel import Channel
from ..trees.binning import MAX_BINS, FeatureBins
from ..trees.job import TreeJob, TreePartyData, TreePartyResult
from ..trees.prediction import TAG_MASKS, predict_raw, send_split_masks
from ..trees.protection import get_protection
from ..trees.protocol import (
    TAG_CANDIDATES,
    TAG_GRADIENTS,
    TAG_HIST,
    TAG_SPLIT,
    TAG_STEP,
    active_program,
    passive_program,
)
from ..trees.weights import check_weights_for, resolve_class_weight
from ..vfl.job import VFLJob
from ..vfl.received import PeerMessageRefused, check_received_array, describe_payload
from .class_weight_field import class_weight_field
from .deadlines import PHASE_EVALUATION
from .kinds import JobKind, register_job_kind

__all__ = ["TAG_BINS", "TreesJobKind", "TreesPartyInput", "UnbinnedTreeJob", "agree_on_bins", "job_class_weight",
           "tree_metrics"]

TAG_BINS = "trees_bins"
#: TreeJob's fields a job file may set (n_samples comes from the alignment, n_bins from the parties' bins)
TREE_FIELDS = tuple(f.name for f in dataclasses.fields(TreeJob) if f.init and f.name not in ("n_samples", "n_bins"))
#: [job] keys that are refused with a reason of their own
_REFUSED = {
    "noise_seed": "noise_seed is not a [job] key of a trees job: the job file is every party's, and whoever knows "
                  "the seed knows the DP noise -- remove noise_seed (a party draws its noise from the OS CSPRNG)",
    "n_bins": "n_bins is not a [job] key: each party bins its own aligned training rows (at most max_bins bins per "
              "feature) and the parties agree on the bin counts when training starts -- remove n_bins",
}




def job_class_weight(fields: Mapping[str, Any]) -> Any:
    """``[job] class_weight``: None, "balanced", or ``{label: weight}`` with the table's keys read as the
    labels' numbers (what the active party's 0/1 or numeric labels are); checked again against the
    active party's classes by :func:`vflsec.trees.weights.resolve_class_weight`."""
    return class_weight_field(fields, codes='"0" and "1"; 0 and 1 for a text label with positive_label',
                              allow_empty=False)


class UnbinnedTreeJob(VFLJob):
    """A trees job before the parties' bins are known: every :class:`~vflsec.trees.job.TreeJob`
    parameter but ``n_bins`` (``settings``, checked and normalised by TreeJob's own checks,
    made on a stand-in of one two-bin feature per party), and ``max_bins``. Its schedule is
    the TreeJob's (``epochs = max_iter`` rounds of one batch of every row);
    :meth:`tree_job` builds the job once the bins are agreed."""

    def __init__(self, n_samples: int, *, max_bins: int = MAX_BINS, **settings: Any):
        max_bins = check_positive_int(max_bins, "max_bins", minimum=2)
        if max_bins > MAX_BINS:
            raise ValueError(f"max_bins must be <= {MAX_BINS} (a bin code is one byte), got {max_bins}")
        passives = settings.get("passives")
        parties = 1 + len(passives) if isinstance(passives, (list, tuple)) else 2  # a bad one: TreeJob names it
        checked = TreeJob(n_samples=n_samples, n_bins=((2,),) * parties, **settings)
        self.n_samples, self.epochs, self.batch_size = checked.n_samples, checked.epochs, checked.batch_size
        self.seed, self.active, self.passives = checked.seed, checked.active, checked.passives
        self.max_bins = max_bins
        self.settings: Dict[str, Any] = {name: getattr(checked, name) for name in settings}

    @property
    def protection(self) -> str:
        return str(self.settings.get("protection", "plain"))

    def tree_job(self, n_bins: Tuple[Tuple[int, ...], ...]) -> TreeJob:
        """The job with every data party's bins per feature (active first)."""
        return TreeJob(n_samples=self.n_samples, n_bins=n_bins, **self.settings)

    def __repr__(self) -> str:
        return f"UnbinnedTreeJob(n_samples={self.n_samples}, max_bins={self.max_bins}, {self.settings})"


@dataclass
class TreesPartyInput:
    """A data party's program input: its bins (fitted on its aligned training rows), the
    rows' codes and, at the active party, the 0/1 labels and the two classes they encode.
    ``job``: the TreeJob, set by the program once the bins are agreed."""

    bins: FeatureBins
    codes: np.ndarray
    y: Optional[np.ndarray] = None
    classes: Optional[np.ndarray] = None
    job: Optional[TreeJob] = None
    class_weight: Any = None  # the active party's, resolved for the 0/1 labels (vflsec.trees.weights)


def _binary_classes(y: np.ndarray, what: str) -> np.ndarray:
    classes = np.unique(np.asarray(y))
    if len(classes) != 2:
        raise ValueError(f"a trees job trains a binary classifier: {what} must hold exactly 2 classes, they hold "
                         f"{len(classes)} ({classes[:5].tolist()})")
    return classes


def agree_on_bins(endpoint: Channel, job: UnbinnedTreeJob, own: np.ndarray) -> TreeJob:
    """Agree on every data party's bins per feature (public: the histograms' sizes) and
    build the TreeJob. A passive party sends its counts (int64) to the active party,
    which checks them (1 to ``max_bins`` per feature, or refused naming the sender) and
    sends each passive party the counts of all parties (``{party: int64 array}``); a
    passive party checks that map and its own entry. A passive party's program uses only
    its own counts, so a leader that told two passive parties different maps changes
    nothing they compute."""
    own = np.asarray(own, dtype=np.int64)
    step = "the bin agreement"
    if endpoint.name != job.active:
        endpoint.send(job.active, TAG_BINS, own)
        agreed = endpoint.recv(job.active, TAG_BINS)
        if not isinstance(agreed, dict) or set(agreed) != set(job.data_parties):
            raise PeerMessageRefused(endpoint.name, job.active, TAG_BINS, step,
                                     f"expected the bins of {list(job.data_parties)}, got {describe_payload(agreed)}")
        counts = {party: _checked_bins(endpoint.name, job.active, agreed[party], job.max_bins, f"bins of {party!r}")
                  for party in job.data_parties}
        if not np.array_equal(counts[endpoint.name], own):
            raise PeerMessageRefused(endpoint.name, job.active, TAG_BINS, step,
                                     f"announced the bins {counts[endpoint.name].tolist()} for this party, which has "
                                     f"{own.tolist()}")
        return job.tree_job(tuple(tuple(int(c) for c in counts[p]) for p in job.data_parties))
    counts = {job.active: own}
    for party in job.passives:
        counts[party] = _checked_bins(endpoint.name, party, endpoint.recv(party, TAG_BINS), job.max_bins,
                                      "bins per feature")
    tree_job = job.tree_job(tuple(tuple(int(c) for c in counts[p]) for p in job.data_parties))
    for party in job.passives:
        endpoint.send(party, TAG_BINS, {p: counts[p] for p in job.data_parties})
    return tree_job


def _checked_bins(receiver: str, sender: str, value: Any, max_bins: int, what: str) -> np.ndarray:
    counts = check_received_array(value, receiver=receiver, sender=sender, tag=TAG_BINS, step="the bin agreement",
                                  dtype=np.int64, shape=(None,), what=what)
    if counts.min() < 1 or counts.max() > max_bins:
        raise PeerMessageRefused(receiver, sender, TAG_BINS, "the bin agreement",
                                 f"{what}: {counts.tolist()[:10]} is not 1 to max_bins={max_bins} per feature")
    return counts


def _active(endpoint: Channel, job: UnbinnedTreeJob, data: TreesPartyInput) -> TreePartyResult:
    data.job = agree_on_bins(endpoint, job, data.bins.n_bins_)
    return active_program(endpoint, data.job, TreePartyData(data.codes, data.y, class_weight=data.class_weight))


def _passive(endpoint: Channel, job: UnbinnedTreeJob, data: TreesPartyInput) -> TreePartyResult:
    data.job = agree_on_bins(endpoint, job, data.bins.n_bins_)
    return passive_program(endpoint, data.job, TreePartyData(data.codes))


def _bytes_per_tree(history: Mapping[str, Any]) -> Dict[str, Any]:
    """This party's mean bytes per tree, sent and received (each tree's own are in ``history``)."""
    sent, received = history.get("tree_bytes_sent") or [], history.get("tree_bytes_received") or []
    if not sent:
        return {"bytes_per_tree": None}
    return {"bytes_per_tree": {"sent": float(np.mean(sent)), "received": float(np.mean(received)),
                               "total": float(np.mean(sent) + np.mean(received))}}


def tree_metrics(raw: np.ndarray, y: np.ndarray, classes: np.ndarray) -> Dict[str, Any]:
    """Held-out accuracy (beside the majority rate), AUC and, where positives are below 20%,
    PR AUC (:func:`vflsec.glm.classification.ranking_metrics`) of the raw scores ``raw``
    against the labels ``y`` as the active party's CSV has them (``classes``: the
    training labels' two classes; a held-out label of another class is a ValueError).
    The AUC is None when the held-out rows hold one class only."""
    from ..glm.classification import ranking_metrics

    y = np.asarray(y)
    unknown = sorted(set(np.unique(y).tolist()) - set(classes.tolist()))
    if unknown:
        raise ValueError(f"the held-out labels hold {unknown[:5]}, not among the training labels' classes "
                         f"{classes.tolist()}")
    positive = y == classes[1]
    n = len(y)
    accuracy = float(np.mean((raw > 0) == positive))
    majority = float(max(positive.sum(), n - positive.sum()) / n)
    return {"metric": "accuracy", "value": accuracy, "n": int(n), "baseline": majority,
            "baseline_name": "majority rate", **ranking_metrics(raw, positive)}


class TreesJobKind(JobKind[UnbinnedTreeJob]):
    name = "trees"
    default_row_norm = "none"

    def job_fields(self) -> Set[str]:
        return set(TREE_FIELDS) | {"max_bins", "class_weight"} | set(_REFUSED)

    def make_job(self, fields: Mapping[str, Any], n_samples: int, start_epoch: int = 0) -> UnbinnedTreeJob:
        for key, reason in _REFUSED.items():
            if key in fields:
                raise ValueError(reason)
        settings = {k: v for k, v in fields.items() if k not in ("max_bins", "class_weight")}
        if isinstance(settings.get("passives"), list):  # TOML's array; anything else is the job's to refuse
            settings["passives"] = tuple(settings["passives"])
        return UnbinnedTreeJob(n_samples, max_bins=fields.get("max_bins", MAX_BINS), **settings)

    def check_job(self, job: UnbinnedTreeJob, fields: Mapping[str, Any]) -> None:
        get_protection(job.protection)  # its module (SecureBoost's HE stack) imports here
        given = job_class_weight(fields)
        try:
            check_weights_for(job.protection, sample_weight=False, class_weight=given is not None)
        except ValueError as exc:  # the estimator's wording names its keyword; a job file has a key
            raise ValueError(str(exc).replace("; or leave class_weight=None", "; or remove class_weight")) from None
        if isinstance(given, dict):  # the weights' own checks here; the labels' at the active party (check_party)
            for label, weight in given.items():
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not np.isfinite(weight) \
                        or weight < 0:
                    raise ValueError(f"class_weight of label {label:g} must be a finite non-negative number, got "
                                     f"{weight!r}")

    def check_party(self, job: UnbinnedTreeJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                    y: Optional[np.ndarray]) -> None:
        if X is None:
            return
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"party {party!r} has no feature columns: every party of a trees job splits on its own")
        if not np.isfinite(X).all():
            raise ValueError("the features hold NaN or inf")
        if job.role_of(party) == "active":
            if y is None:
                raise ValueError(f"the active party {party!r} has no labels")
            resolve_class_weight(job_class_weight(fields), _binary_classes(y, "the label column"))

    def party_data(self, job: UnbinnedTreeJob, fields: Mapping[str, Any], party: str, X: Optional[np.ndarray],
                   y: Optional[np.ndarray], checkpoint: Any) -> Optional[TreesPartyInput]:
        if X is None:
            return None
        bins = FeatureBins(job.max_bins).fit(X)  # this party's thresholds, of its aligned training rows
        codes = bins.transform(X)
        if y is None:
            return TreesPartyInput(bins, codes)
        classes = _binary_classes(y, "the aligned training rows' labels")
        class_weight = resolve_class_weight(job_class_weight(fields), classes)
        return TreesPartyInput(bins, codes, (np.asarray(y) == classes[1]).astype(np.float64), classes,
                               class_weight=class_weight)

    def program(self, job: UnbinnedTreeJob, role: str):
        return {"active": _active, "passive": _passive}[role]

    def receive_tags(self, job: UnbinnedTreeJob) -> Optional[FrozenSet[str]]:
        tags = {TAG_BINS, TAG_STEP, TAG_GRADIENTS, TAG_HIST, TAG_CANDIDATES, TAG_SPLIT}
        if job.protection == "secureboost":
            from ..trees.secureboost import TAG_KEY

            tags.add(TAG_KEY)
        return frozenset(tags)

    def default_step_timeout(self, job: UnbinnedTreeJob) -> float:
        # SecureBoost: the key generation, or a passive party's encrypted histograms of a node, in one wait.
        return 900.0 if job.protection == "secureboost" else 300.0

    def summary(self, job: UnbinnedTreeJob, result: TreePartyResult, output: Optional[Path],
                data: Any = None) -> Dict[str, Any]:
        from ..trees.dp import privacy_spent

        assert isinstance(data, TreesPartyInput) and data.job is not None  # set by the program
        tree_job = data.job
        out: Dict[str, Any] = {
            "protection": tree_job.protection, "max_bins": job.max_bins,
            "n_bins": {p: list(c) for p, c in zip(tree_job.data_parties, tree_job.n_bins)},
            "lookup": result.lookup.to_dict(),
            "thresholds": [[float(v) for v in cuts] for cuts in data.bins.thresholds_],  # this party's own
            "protection_seconds": dict(result.info.get("seconds", {})),
            **_bytes_per_tree(result.history),
        }
        if result.role == "active":
            assert data.classes is not None
            out["trees"] = [tree.to_dict() for tree in result.trees]
            out["baseline"] = float(result.baseline)
            out["classes"] = data.classes.tolist()
            weight = data.class_weight
            out["class_weight"] = list(weight) if isinstance(weight, tuple) else weight  # of the 0/1 labels
        spent = privacy_spent(tree_job)
        out["privacy_spent"] = None if spent is None else str(spent)
        return out

    def evaluation_tags(self, job: UnbinnedTreeJob) -> FrozenSet[str]:
        return frozenset({TAG_MASKS})

    def evaluate(self, channel: Any, job: UnbinnedTreeJob, role: str, result: TreePartyResult,
                 X: Optional[np.ndarray], y: Optional[np.ndarray], data: Any = None) -> Optional[Dict[str, Any]]:
        if X is None or not isinstance(data, TreesPartyInput):
            return None
        codes = data.bins.transform(X)  # the held-out rows in this party's training bins
        if role == "passive":
            send_split_masks(channel, job.active, result.lookup, codes)
            return None
        if y is None or data.classes is None:
            raise ValueError("the active party has no held-out labels")
        raw = predict_raw(channel, job.passives, result.trees, result.baseline, result.lookup, codes,
                          step=PHASE_EVALUATION)
        return tree_metrics(raw, y, data.classes)


register_job_kind(TreesJobKind(), replace=True)
