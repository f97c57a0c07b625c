"""The measurements of ``vflsec bench privacy``: every cell of the grid, added to the
results as it finishes.

Split learning: for each defense and strength the same two-party split MLP is
trained (:mod:`.training`) and each attack gets only what its adversary sees
(:mod:`vflsec.attacks.views`: the messages addressed to it, plus the released
models and auxiliary data its threat model grants), :func:`split_attacks` and
:func:`direct_label_rows`. Vertical LR: equality solving by the active party on
the passive IRs of plain, HDP-VFL and encrypted training, :func:`glm_cells`.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, cast

import numpy as np

from ...._progress import progress
from ...common import DP_LAYER
from .grid import PrivacyGrid
from .scoring import cap_table
from .training import (
    DP_SGD_CALIBRATION_STEPS,
    EMBED_DIM,
    PrivacyData,
    TrainedSplit,
    load_privacy_data,
    train_split,
)

__all__ = ["GRADIENT_DEFENSES", "N_AUX_LABELS", "N_ESA_AUX", "direct_label_rows", "glm_cells", "run_cells",
           "settings", "split_attacks"]

# Defenses whose effect is on the gradients returned to the passive party (the
# only ones for which the direct-label model is retrained).
GRADIENT_DEFENSES = ("none", "noise_gradient", "sparsify")
N_AUX_LABELS = 40
N_ESA_AUX = 30


# -- attacks on one trained split model ------------------------------------------------------
def split_attacks(model: TrainedSplit, data: PrivacyData, *, kind: str, strength: Optional[float],
                  train_kw: Dict[str, Any], n_targets: int, shadow_models: int, seed: int) -> List[Dict[str, Any]]:
    """The rows of every attack on ``model``: feature inversion and membership by the active
    party, label inference by the passive party."""
    from .... import attacks as A

    rows: List[Dict[str, Any]] = []
    main_acc = model.accuracy(data.Xp_test, data.Xa_test, data.y_test)

    def add(attack: str, metric: str, value: float) -> None:
        rows.append({"dataset": data.name, "defense": kind, "strength": strength, **model.row_fields(),
                     "attack": attack, "metric": metric, "value": float(value), "main_accuracy": main_acc})

    # Active party: the embeddings it received in the last epoch (one per training row).
    emb = A.active_party_embeddings(model.transcript, model.job)
    rows_seen, H = A.last_epoch(emb)
    pick = np.sort(np.random.default_rng(seed).permutation(rows_seen.size)[:n_targets])
    target_rows, target_H = rows_seen[pick], H[pick]
    truth = data.Xp_train[target_rows]
    # Black-box: auxiliary rows (the attacker's shadow pool) and what the passive party releases for them.
    rec = A.blackbox_model_inversion(data.Xp_shadow, model.release(data.Xp_shadow), target_H,
                                     hidden=(128, 128), epochs=150, batch_size=32, seed=seed)
    add("model_inversion_blackbox", "mse", A.feature_mse(truth, rec))
    add("model_inversion_blackbox", "normalized_mse", A.normalized_feature_mse(truth, rec))
    # White-box: the released bottom model, started from the auxiliary mean; the public
    # preprocessing puts every passive feature in [0, 1].
    rec = A.whitebox_model_inversion(model.bottom, target_H, (data.Xp_train.shape[1],), steps=100,
                                     optimizer="lbfgs", init=data.Xp_shadow.mean(0), bounds=(0.0, 1.0),
                                     seed=seed)
    add("model_inversion_whitebox", "mse", A.feature_mse(truth, rec))
    add("model_inversion_whitebox", "normalized_mse", A.normalized_feature_mse(truth, rec))

    # Passive party: the gradients it received; the class prior (which label is the minority).
    grads = A.passive_party_gradients(model.transcript, model.job)
    g_rows, G = A.last_epoch(grads)
    minority = int(np.argmin(np.bincount(data.y_train, minlength=2)))
    is_minority = (data.y_train == minority).astype(np.int64)
    norm = A.norm_scoring(G)
    add("norm_scoring", "accuracy", A.label_attack_accuracy(is_minority[g_rows], norm.labels))
    if np.unique(is_minority[g_rows]).size == 2:
        scores = cast(np.ndarray, norm.scores)  # norm_scoring always returns scores (some label attacks have none)
        add("norm_scoring", "auc", A.membership_scores(is_minority[g_rows], scores / max(scores.max(), 1e-300))["auc"])
    aux = A.choose_auxiliary(data.y_train, N_AUX_LABELS, seed=seed)
    known_minority = set(aux[data.y_train[aux] == minority].tolist())
    correct = total = 0
    for epoch, idx, g in grads:
        if epoch != model.job.epochs - 1 or not np.any(np.linalg.norm(g, axis=1) > 0):
            continue
        refs = [j for j, r in enumerate(idx) if r in known_minority and np.linalg.norm(g[j]) > 0]
        pred = A.direction_scoring(g, reference=refs[0] if refs else None).labels
        correct += int(np.sum(pred == is_minority[idx]))
        total += idx.size
    if total:
        add("direction_scoring", "accuracy", correct / total)
    mc = A.model_completion(model.bottom, data.Xp_train[aux], data.y_train[aux], data.Xp_test, n_classes=2,
                            hidden=(), epochs=300, seed=seed)
    add("model_completion", "accuracy", A.label_attack_accuracy(data.y_test, mc.labels))

    # Membership: shadow split models trained like the target on the attacker's shadow rows.
    if shadow_models > 0:
        def train_shadow(X_in, y_in, shadow_seed):
            Xp_in, Xa_in = X_in[:, :data.Xp_shadow.shape[1]], X_in[:, data.Xp_shadow.shape[1]:]
            kw = dict(train_kw, batch_size=min(train_kw["batch_size"], len(y_in)))
            shadow = train_split(kind, strength, np.ascontiguousarray(Xp_in), np.ascontiguousarray(Xa_in), y_in,
                                 seed=shadow_seed, **kw)
            return lambda Xq, yq: shadow.release(np.ascontiguousarray(Xq[:, :data.Xp_shadow.shape[1]]))

        X_shadow = np.hstack([data.Xp_shadow, data.Xa_shadow])
        attack = A.ShadowModelAttack(train_shadow, n_shadow=shadow_models, seed=seed).fit(X_shadow, data.y_shadow)
        m = min(len(data.y_test), len(data.y_train))
        members = np.random.default_rng(seed + 5).permutation(len(data.y_train))[:m]
        outs = np.vstack([model.release(data.Xp_train[members]), model.release(data.Xp_test[:m])])
        labels = np.concatenate([data.y_train[members], data.y_test[:m]])
        scores = attack.predict_proba(outs, labels)
        res = A.membership_scores(np.r_[np.ones(m), np.zeros(m)], scores)
        add("membership_shadow", "accuracy", res["accuracy"])
        add("membership_shadow", "auc", res["auc"])
    return rows


def direct_label_rows(data: PrivacyData, kind: str, strength: Optional[float], train_kw: Dict[str, Any],
                      seed: int) -> List[Dict[str, Any]]:
    """Direct label inference on a second model whose head is a plain softmax over summed
    party logits (the attack's precondition)."""
    from .... import attacks as A

    model = train_split(kind, strength, data.Xp_train, data.Xa_train, data.y_train, seed=seed, logits_head=True,
                        **train_kw)
    rows, G = A.last_epoch(A.passive_party_gradients(model.transcript, model.job))
    acc = A.label_attack_accuracy(data.y_train[rows], A.direct_label_inference(G).labels)
    return [{"dataset": data.name, "defense": kind, "strength": strength, **model.row_fields(),
             "attack": "direct_label", "metric": "accuracy", "value": acc,
             "main_accuracy": model.accuracy(data.Xp_test, data.Xa_test, data.y_test),
             "note": "plain softmax head over summed party logits"}]


# -- vertical LR: equality solving ----------------------------------------------------------------
def glm_cells(name: str, *, data_dir: Optional[Path], max_rows: Optional[int], epochs: int,
              hdp_epsilons: Sequence[float], encrypted: Sequence[str], seed: int) -> Iterator[List[Dict[str, Any]]]:
    """Equality solving on dataset ``name``: the rows of one protocol (plain, HDP-VFL at each
    epsilon, each encrypted protocol) at a time, as each training finishes."""
    from .... import attacks as A
    from ....data import PAPER_SPLITS, load_dataset, vertical_split
    from ....federation import InMemoryHub
    from ....glm.job import GLMJob, GLMPartyResult, PartyData
    from ....glm.runner import run_job

    ds = load_dataset(name, data_dir=data_dir)
    if max_rows is not None and ds.n_samples > max_rows:
        import dataclasses

        idx = np.random.default_rng(seed).permutation(ds.n_samples)[:max_rows]
        ds = dataclasses.replace(ds, X=ds.X[idx], y=ds.y[idx])
    split = vertical_split(ds, PAPER_SPLITS[name], test_size=0.2, seed=seed)
    XA, XB = split.X_train
    y = np.where(split.y_train == 1, 1.0, -1.0)
    n = len(y)
    aux = np.sort(np.random.default_rng(seed).permutation(n)[:N_ESA_AUX])
    rest = np.setdiff1d(np.arange(n), aux)
    cells = [("plain", None)] + [("hdp", e) for e in hdp_epsilons] + [(p, None) for p in encrypted]
    for protocol, eps in progress(cells, desc=f"equality solving {name}", unit="fit"):
        extra: Dict[str, Any] = {}
        if protocol in ("ckks", "paillier"):
            extra["coordinator"] = "coordinator"
        if protocol == "paillier":
            extra["key_bits"] = 2048
        if protocol == "hdp":
            extra.update(epsilon=eps, noise_seed=seed)
        # Full-batch GD (the paper's b = 3200 exceeds these training sets), the bench glm learning rate.
        job = GLMJob(protocol=protocol, n_samples=n, epochs=epochs, batch_size=n, lr=2.0, seed=seed, **extra)
        hub = InMemoryHub(keep_payloads=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 2048-bit Paillier and classic-calibration warnings
            result = run_job(job, {"active": PartyData(XA, y), "passive": PartyData(XB)}, hub)
        results = cast(Dict[str, GLMPartyResult], result.results)  # GLM party programs return GLMPartyResult
        theta = split.X_test[0] @ results["active"].coef + split.X_test[1] @ results["passive"].coef
        acc = float(np.mean(np.where(theta >= 0, 1, 0) == split.y_test))
        esa = A.equality_solving_attack(A.active_party_view(hub.transcript, job), aux, XB[aux])
        yield [{"dataset": name, "defense": protocol, "strength": eps, "epsilon_composed": eps,
                "attack": "equality_solving", "metric": metric, "value": float(value), "main_accuracy": acc,
                "note": f"{N_ESA_AUX} auxiliary rows, {epochs} full-batch epochs, "
                        f"{esa.solved_steps} of {job.total_steps} steps solved"}
               for metric, value in (("mse", A.feature_mse(XB[rest], esa.features[rest])),
                                     ("normalized_mse", A.normalized_feature_mse(XB[rest], esa.features[rest])),
                                     ("full_rank_rows_fraction", esa.exact_rows.size / rest.size))]


# -- the grid ----------------------------------------------------------------------------------
def _train_kw(grid: PrivacyGrid) -> Dict[str, Any]:
    return dict(epochs=grid.train.epochs, batch_size=grid.train.batch_size, lr=grid.train.lr)


def _cell_kw(grid: PrivacyGrid) -> Dict[str, Any]:
    """What every training of a cell takes (its shadow models' too): the split MLP's settings and
    the grid's defense settings (DP-SGD's clip and delta)."""
    return dict(_train_kw(grid), defense_settings={"dp_sgd": grid.dp_sgd.defense_kwargs()})


def settings(grid: PrivacyGrid, quick: bool) -> Dict[str, Any]:
    """``results.json``'s ``"settings"``: the grid as the report describes it, and the
    benchmark's fixed choices (model shape, auxiliary rows, the percentile clip's
    window) that are not grid keys."""
    return {"quick": quick, "datasets": list(grid.datasets), "seed": grid.seed, "grid": grid.cells(),
            "split": dict(_train_kw(grid), passive_bottom=f"MLP 64 -> {EMBED_DIM}", head="linear"),
            "dp_sgd": dict(clip=grid.dp_sgd.clip, delta=grid.dp_sgd.delta,
                           calibration_steps=DP_SGD_CALIBRATION_STEPS),
            "n_aux_labels": N_AUX_LABELS, "esa_aux_rows": N_ESA_AUX, "max_rows": grid.max_rows}


def run_cells(grid: PrivacyGrid, result: Dict[str, Any], *, data_dir: Optional[Path] = None) -> None:
    """Every cell of ``grid``, its rows added to ``result["attacks"]`` (and ``result["cap"]``
    brought up to date) as each finishes, so an interrupted run keeps them."""
    import logging

    result["settings"] = settings(grid, bool(result.get("quick")))  # first: a partial run's report reads it
    result["dp_layer"] = DP_LAYER
    rows: List[Dict[str, Any]] = result.setdefault("attacks", [])
    result.setdefault("cap", [])

    import torch

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP convergence chatter
    torch.set_num_threads(1)  # tiny models: threads cost more than they give on a shared machine
    seed, cells_by_defense = grid.seed, grid.cells()
    train_kw = _cell_kw(grid)

    def add(new_rows: List[Dict[str, Any]]) -> None:
        rows.extend(new_rows)
        result["cap"] = cap_table(rows)

    for name in grid.datasets:
        data = load_privacy_data(name, data_dir=data_dir, max_rows=grid.max_rows, seed=seed)
        cells = [(k, s) for k, strengths in cells_by_defense.items() for s in strengths]
        for kind, strength in progress(cells, desc=f"split attacks {name}", unit="defense"):
            model = train_split(kind, strength, data.Xp_train, data.Xa_train, data.y_train, seed=seed, **train_kw)
            cell_rows = split_attacks(model, data, kind=kind, strength=strength, train_kw=train_kw,
                                      n_targets=grid.n_targets, shadow_models=grid.shadow_models, seed=seed)
            if kind in GRADIENT_DEFENSES:
                cell_rows += direct_label_rows(data, kind, strength, train_kw, seed)
            add(cell_rows)
        for protocol_rows in glm_cells(name, data_dir=data_dir, max_rows=grid.max_rows, epochs=grid.glm.epochs,
                                       hdp_epsilons=list(grid.glm.hdp_epsilons), encrypted=list(grid.glm.encrypted),
                                       seed=seed):
            add(protocol_rows)
