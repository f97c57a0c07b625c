"""The vertical rows of one split of ``vflsec bench trees``: ``VerticalGradientBoostingClassifier``
with each protection of the grid, and the passive party's label-leakage attack on each.

* plain: the estimator's model (accuracy, program seconds, bytes), then the attack on a run of
  the party programs over a hub that keeps every payload (the same job, hence the same trees:
  checked), on all its trees and on its first ``secureboost_trees`` ones;
* secureboost: the party programs on ``secureboost_trees`` trees (its trees are plain's bit for
  bit, checked here, so its accuracy is plain's), seconds and bytes per tree broken into the
  protocol's steps, and the attack on its own transcript;
* dp / label_dp at every epsilon: the estimator's model with its ``privacy_spent_``, then the
  attack on a run of the programs with the same noise seed (the same trees where the seed fixes
  them: checked and recorded).

The attack (:func:`vflsec.attacks.label_leakage`) scores the training rows the attacker does not
know, beside its reference: a model on the passive party's own features.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from ...common import derived_seed
from .cells import scores, warnings_of
from .data import PARTIES, PartySplit
from .grid import TreesGrid

__all__ = ["breakdown", "vertical_rows", "warm_paillier_pool"]

#: the steps of one SecureBoost tree, in protocol order (``breakdown``)
STEPS = ("encrypt", "receive", "aggregate", "pack", "decrypt", "active_compute", "passive_compute", "messaging")


def vertical_rows(name: str, split: int, data: PartySplit, grid: TreesGrid, cells: List[Dict[str, Any]]
                  ) -> Iterator[Dict[str, Any]]:
    """Every vertical row of split ``split`` of dataset ``name``, one at a time."""
    known_seed = int(derived_seed(grid.seed, name, split, "attack") or 0)
    base = {"dataset": name, "split": split}
    plain_row, plain_trees = _estimator_row("plain", None, data, grid, known_seed, None)
    yield {**base, **plain_row}
    if grid.secureboost_trees:
        yield {**base, **_secureboost_row(data, grid, known_seed, plain_trees)}
    for protection in grid.dp_protections:
        for epsilon in grid.epsilons:
            noise_seed = derived_seed(grid.seed, name, split, protection, float(epsilon))
            row, _ = _estimator_row(protection, float(epsilon), data, grid, known_seed, noise_seed)
            yield {**base, **row}


def _privacy_arguments(protection: str, epsilon: Optional[float], grid: TreesGrid,
                       noise_seed: Optional[int]) -> Dict[str, Any]:
    if epsilon is None:
        return {}
    out: Dict[str, Any] = {"epsilon": epsilon, "noise_seed": noise_seed}
    if protection == "dp":
        out["delta"] = grid.dp_delta
    return out


def _estimator_row(protection: str, epsilon: Optional[float], data: PartySplit, grid: TreesGrid, known_seed: int,
                   noise_seed: Optional[int]) -> Any:
    from ....trees import VerticalGradientBoostingClassifier

    privacy = _privacy_arguments(protection, epsilon, grid, noise_seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = VerticalGradientBoostingClassifier(protection, **grid.hyper_parameters(protection), **privacy)
        model.fit(data.raw_train, data.y_train)
        p1 = model.predict_proba(data.raw_test)[:, 1]
        attack = _attack_run(protection, data, grid, known_seed, privacy, model.trees_,
                             first=grid.secureboost_trees if protection == "plain" else 0)
    trees = len(model.trees_)
    seconds = float(model.timings_[PARTIES[0]]["total"])
    row = {"method": protection, "protection": protection, "epsilon": epsilon, **scores(data.y_test, p1),
           "trees": trees, "seconds": seconds, "seconds_per_tree": seconds / trees,
           "bytes": int(model.bytes_), "bytes_per_tree": model.bytes_ / trees,
           "timings": model.timings_, "privacy": _spent(getattr(model, "privacy_spent_", None)),
           "noise_seed": noise_seed if epsilon is not None else None, **attack,
           "warnings": warnings_of(caught)}
    return row, model.trees_


def _job(protection: str, data: PartySplit, grid: TreesGrid, max_iter: int, privacy: Dict[str, Any]) -> Any:
    """The job the estimator builds for these rows (``privacy``: the DP fields the job has)."""
    from ....trees import TreeJob

    fields = {f.name for f in dataclasses.fields(TreeJob)}
    hyper = {k: v for k, v in grid.hyper_parameters(protection).items() if k not in ("max_iter", "max_bins")}
    extra = {k: v for k, v in privacy.items() if k in fields}
    return TreeJob(n_samples=len(data.y_train), active=PARTIES[0], passives=(PARTIES[1],), n_bins=data.n_bins,
                   protection=protection, max_iter=max_iter, key_bits=grid.key_bits, **hyper, **extra)


def _programs_run(job: Any, data: PartySplit) -> Any:
    """The party programs over a hub that keeps every payload: ``(run, hub)``."""
    from ....federation.channel import InMemoryHub
    from ....trees import TreePartyData
    from ....trees.protocol import active_program, passive_program
    from ....vfl.runner import run_programs

    hub = InMemoryHub(keep_payloads=True)
    party_data = {PARTIES[0]: TreePartyData(data.codes_train[0], data.y_train),
                  PARTIES[1]: TreePartyData(data.codes_train[1])}
    run = run_programs(job, {"active": active_program, "passive": passive_program}, party_data, hub=hub,
                       label="trees")
    return run, hub


def _leakage(view: Any, data: PartySplit, grid: TreesGrid, known_seed: int) -> Dict[str, Dict[str, float]]:
    from ....attacks import label_leakage

    return label_leakage(view, data.y_train, n_known=grid.attack_known, seed=known_seed,
                         features=data.passive_standardized)


def _attack_run(protection: str, data: PartySplit, grid: TreesGrid, known_seed: int, privacy: Dict[str, Any],
                model_trees: Sequence[Any], *, first: int) -> Dict[str, Any]:
    """The attack on a run of the programs with the model's job: ``leakage`` (all trees),
    ``leakage_first`` (its first ``first`` trees, plain), ``attack_same_trees`` (the run grew the
    model's trees) and the run's bytes per message kind."""
    from ....attacks import TreeView, passive_tree_view
    from ....trees import TreeJob

    fields = {f.name for f in dataclasses.fields(TreeJob)}
    if privacy and "epsilon" not in fields:
        return {"leakage": None, "attack_note": "vflsec.trees.TreeJob takes no epsilon: the attack's run cannot be "
                                                "built from this vflsec"}
    job = _job(protection, data, grid, grid.hyper_parameters(protection)["max_iter"], privacy)
    run, hub = _programs_run(job, data)
    view = passive_tree_view(hub.transcript, job)
    out: Dict[str, Any] = {"leakage": _leakage(view, data, grid, known_seed),
                           "attack_same_trees": same_trees(run.results[PARTIES[0]].trees, model_trees),
                           "bytes_by_kind": bytes_by_kind(hub)}
    if privacy and "noise_seed" not in fields:
        out["attack_note"] = "the attack's run draws its own noise (TreeJob takes no noise seed)"
    if first and first <= len(view.leaves):
        head = TreeView(view.n_samples, view.leaves[:first], view.gradients[:first])
        out["leakage_first"] = {"trees": first, **_leakage(head, data, grid, known_seed)}
    return out


def _secureboost_row(data: PartySplit, grid: TreesGrid, known_seed: int, plain_trees: Sequence[Any]
                     ) -> Dict[str, Any]:
    """SecureBoost on ``secureboost_trees`` trees: seconds and bytes per tree, the steps, the attack."""
    from ....attacks import passive_tree_view

    k = grid.secureboost_trees
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # the 2048-bit key's strength warning labels the row
        job = _job("secureboost", data, grid, k, {})
        run, hub = _programs_run(job, data)
        view = passive_tree_view(hub.transcript, job)
        leakage = _leakage(view, data, grid, known_seed)
    active, passive = run.results[PARTIES[0]], run.results[PARTIES[1]]
    kinds = bytes_by_kind(hub)
    steps = breakdown(active.timings, active.info.get("seconds", {}), passive.timings,
                      passive.info.get("seconds", {}))
    keygen = float(active.info.get("seconds", {}).get("keygen", 0.0))
    seconds = float(active.timings["total"])
    total_bytes = int(hub.total_bytes())
    return {"method": "secureboost", "protection": "secureboost", "epsilon": None, "accuracy": None, "auc": None,
            "accuracy_of": "plain", "trees": k, "trees_equal_plain": same_trees(active.trees, plain_trees[:k]),
            "seconds": seconds, "keygen_seconds": keygen, "seconds_per_tree": (seconds - keygen) / k,
            "steps_per_tree": {step: value / k for step, value in steps.items()},
            "bytes": total_bytes, "key_bytes": kinds.get("key", 0),
            "bytes_per_tree": (total_bytes - kinds.get("key", 0)) / k, "bytes_by_kind": kinds,
            "timings": {PARTIES[0]: active.timings, PARTIES[1]: passive.timings},
            "protection_seconds": {PARTIES[0]: dict(active.info.get("seconds", {})),
                                   PARTIES[1]: dict(passive.info.get("seconds", {}))},
            "key_bits": grid.key_bits, "privacy": None, "noise_seed": None, "leakage": leakage,
            "warnings": warnings_of(caught)}


def warm_paillier_pool(key_bits: int) -> float:
    """Start the Paillier worker processes once per run, before any SecureBoost row, so that no row's
    encryption carries their start-up (seconds on 2 cores); returns the seconds it took."""
    import time

    from ....he.paillier import generate_keypair

    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a throwaway key that encrypts nothing: its strength warning says nothing
        public, _ = generate_keypair(key_bits)
    public.encrypt_encoded([1] * 512)
    return time.perf_counter() - started


def breakdown(active: Dict[str, float], active_steps: Dict[str, float], passive: Dict[str, float],
              passive_steps: Dict[str, float]) -> Dict[str, float]:
    """A SecureBoost run's wall seconds (the active party's program, key generation left out) by step:
    encryption, the passive party's reading of the ciphertexts, aggregation, packing (with
    re-randomization), decryption, the rest of each party's own work, and ``messaging``: what is
    left of the wall time (the channel: encoding and copying every message, and any wait that no
    party's work covers). The parties alternate, so their steps add up to about the wall time."""
    keygen = active_steps.get("keygen", 0.0)
    encrypt, decrypt = active_steps.get("encrypt", 0.0), active_steps.get("decrypt", 0.0)
    aggregate, pack = passive_steps.get("aggregate", 0.0), passive_steps.get("pack", 0.0)
    out = {"encrypt": encrypt, "receive": max(0.0, passive["crypto"] - aggregate - pack), "aggregate": aggregate,
           "pack": pack, "decrypt": decrypt,
           "active_compute": max(0.0, active["compute"] - keygen) + max(0.0, active["crypto"] - encrypt - decrypt),
           "passive_compute": passive["compute"]}
    out["messaging"] = max(0.0, active["total"] - keygen - sum(out.values()))
    return out


def bytes_by_kind(hub: Any) -> Dict[str, int]:
    """The run's bytes per message kind: the round's gradients, the histograms, the key, and the
    control messages (steps, splits and their row masks)."""
    from ....trees.protocol import TAG_GRADIENTS, TAG_HIST

    out = {"gradients": 0, "histograms": 0, "key": 0, "control": 0}
    for tag, nbytes in hub.bytes_by_tag().items():
        kind = {TAG_GRADIENTS: "gradients", TAG_HIST: "histograms", "trees_public_key": "key"}.get(tag, "control")
        out[kind] += int(nbytes)
    return out


def same_trees(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether two lists of trees are equal node for node (structure, owners, records, values)."""
    return len(a) == len(b) and all(
        all(np.array_equal(getattr(x, key), getattr(y, key)) for key in ("owner", "record", "left", "right", "value"))
        for x, y in zip(a, b))


def _spent(spent: Any) -> Optional[Dict[str, Any]]:
    """A ``privacy_spent_`` (a PrivacySpent, or a mapping of them per party) as JSON."""
    if spent is None:
        return None
    if isinstance(spent, dict):
        parts = {str(k): _spent(v) for k, v in spent.items()}
        return {"per_party": parts}
    keys = ("epsilon", "delta", "releases", "epsilon_per_release", "accountant", "neighbours", "caveat")
    out = {k: getattr(spent, k) for k in keys if hasattr(spent, k)}
    for k, v in list(out.items()):
        if isinstance(v, (np.floating, np.integer)):
            out[k] = v.item()
    return out
