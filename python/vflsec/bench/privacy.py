"""Privacy benchmark: every defense scored against the attacks it should stop.

``vflsec bench privacy [--quick] [--datasets breast,credit] [--data-dir DIR] [--out DIR]``

Split learning (:mod:`vflsec.splitnn`): for each defense and strength the same
two-party split MLP is trained on the same data, split and seeds over an
``InMemoryHub(keep_payloads=True)``; each attack then gets only what its
adversary sees (:mod:`vflsec.attacks.views`: the messages addressed to it,
plus the released models and auxiliary data its threat model grants):

* active party -> passive features: ``model_inversion_blackbox`` (decoder
  trained on the attacker's auxiliary rows and their released embeddings),
  ``model_inversion_whitebox`` (optimize inputs against the released bottom);
* passive party -> labels: ``norm_scoring``, ``direction_scoring`` (the
  gradients it received in the last epoch), ``model_completion`` (its own
  bottom + 40 auxiliary labels), ``direct_label`` (on a second model whose
  head is a plain softmax over summed party logits, the attack's precondition);
* active party -> membership: ``membership_shadow`` (Shokri et al. shadow
  models trained like the target on the attacker's shadow rows, attack on the
  released embeddings of training rows vs held-out rows).

Vertical logistic regression (:mod:`vflsec.glm`): ``equality_solving`` by the
active party on the passive IRs it receives in plain, HDP-VFL and encrypted
(CKKS, Paillier in full mode) training, knowing 30 auxiliary rows.

Writes ``results.json`` ("attacks": one row per dataset x defense x strength x
attack x metric; "cap": FedPass's calibrated averaged performance), ``report.md``
and PNG plots (accuracy vs recovery error like FedPass Fig. 4; ESA errors).
"""
from __future__ import annotations

import argparse
import copy
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
from tqdm import tqdm

from .common import git_revision, machine_info, markdown_table, package_versions, pyplot, write_json

FEATURE_ATTACKS = ("model_inversion_blackbox", "model_inversion_whitebox")
LABEL_ATTACKS = ("direct_label", "norm_scoring", "direction_scoring", "model_completion")
# Defenses whose effect is on the gradients returned to the passive party (the
# only ones for which the direct-label model is retrained).
GRADIENT_DEFENSES = ("none", "noise_gradient", "sparsify")

QUICK_GRID = {
    "none": [None],
    "noise_embedding": [0.3, 3.0],
    "noise_gradient": [0.003, 0.03],
    "sparsify": [0.5, 0.1],
    "vfl_afe": [10.0, 1.0],
    "dp_sgd": [10.0, 1.0],
    "fedpass": [1.0, 9.0],
}
FULL_GRID = {
    "none": [None],
    "noise_embedding": [0.1, 0.3, 1.0, 3.0],
    "noise_gradient": [0.001, 0.003, 0.01, 0.03],
    "sparsify": [0.75, 0.5, 0.25, 0.1],
    "vfl_afe": [100.0, 10.0, 1.0, 0.1],
    "dp_sgd": [100.0, 10.0, 1.0, 0.5],
    "fedpass": [1.0, 5.0, 9.0, 25.0],
}
STRENGTH_NAMES = {"none": "-", "noise_embedding": "noise std", "noise_gradient": "noise std",
                  "sparsify": "kept fraction", "vfl_afe": "epsilon per release", "dp_sgd": "epsilon (run)",
                  "fedpass": "passport sigma^2", "plain": "-", "hdp": "epsilon (run)", "ckks": "-",
                  "paillier": "-"}
EMBED_DIM = 16
N_AUX_LABELS = 40
N_ESA_AUX = 30


# -- data ------------------------------------------------------------------------------
@dataclass
class PrivacyData:
    """Train rows (members), test rows (non-members, accuracy) and the
    attacker's shadow pool; passive and active blocks of each."""

    name: str
    Xp_train: np.ndarray
    Xa_train: np.ndarray
    y_train: np.ndarray
    Xp_test: np.ndarray
    Xa_test: np.ndarray
    y_test: np.ndarray
    Xp_shadow: np.ndarray
    Xa_shadow: np.ndarray
    y_shadow: np.ndarray


def load_privacy_data(name: str, *, data_dir: Optional[Path], max_rows: Optional[int], seed: int = 0) -> PrivacyData:
    from ..data import PAPER_SPLITS, load_dataset, vertical_split

    ds = load_dataset(name, data_dir=data_dir)
    if max_rows is not None and ds.n_samples > max_rows:
        import dataclasses

        idx = np.random.default_rng(seed).permutation(ds.n_samples)[:max_rows]
        ds = dataclasses.replace(ds, X=ds.X[idx], y=ds.y[idx])
    split = vertical_split(ds, PAPER_SPLITS[name], test_size=0.5, seed=seed)
    order = np.random.default_rng(seed + 1).permutation(len(split.y_test))
    test, shadow = order[: len(order) // 2], order[len(order) // 2:]
    f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)  # noqa: E731
    return PrivacyData(
        name, f32(split.X_train[1]), f32(split.X_train[0]), split.y_train.astype(np.int64),
        f32(split.X_test[1][test]), f32(split.X_test[0][test]), split.y_test[test].astype(np.int64),
        f32(split.X_test[1][shadow]), f32(split.X_test[0][shadow]), split.y_test[shadow].astype(np.int64))


# -- split-learning training -------------------------------------------------------------
def make_defense(kind: str, strength: Optional[float], seed: int):
    from ..splitnn.defenses import (VFLAFE, GaussianEmbeddingNoise, GaussianGradientNoise, GradientSparsification,
                                    NoDefense)

    if kind == "none":
        return NoDefense()
    if kind == "noise_embedding":
        return GaussianEmbeddingNoise(strength, seed=seed)
    if kind == "noise_gradient":
        return GaussianGradientNoise(strength, seed=seed)
    if kind == "sparsify":
        return GradientSparsification(strength)
    if kind == "vfl_afe":
        return VFLAFE(t=1.0, epsilon=strength, delta=1e-2, seed=seed)
    if kind == "dp_sgd":
        from ..splitnn.defenses.dp_sgd import DPSGD

        return DPSGD(strength, delta=1e-3, calibration_steps=10, seed=seed)
    if kind == "fedpass":
        from ..splitnn.defenses.fedpass import FedPass

        return FedPass(n_range=100.0, sigma2=strength, seed=seed)
    raise ValueError(f"unknown defense {kind!r}")


@dataclass
class TrainedSplit:
    job: Any
    transcript: List[Tuple[Any, Any]]
    bottom: Any          # the passive party's trained (possibly wrapped) bottom: its released model
    defense: Any         # the passive party's defense copy (its release function)
    own_bottom: Any
    head: Any
    epsilon: Optional[float]

    def release(self, Xp: np.ndarray) -> np.ndarray:
        """What the passive party releases for rows ``Xp`` (its trained bottom
        and defense, batch by batch): the query oracle of the threat models."""
        import torch

        from ..splitnn.defenses.base import BatchInfo

        out = []
        self.bottom.eval()
        with torch.no_grad():
            for step, start in enumerate(range(0, Xp.shape[0], self.job.batch_size)):
                idx = np.arange(start, min(Xp.shape[0], start + self.job.batch_size))
                batch = BatchInfo(epoch=self.job.epochs, step=step, global_step=-1, indices=idx)
                h = self.bottom(torch.from_numpy(Xp[idx]))
                out.append(self.defense.transform_embedding("passive", h, batch).float().numpy())
        self.bottom.train()
        return np.concatenate(out).astype(np.float64)

    def accuracy(self, Xp: np.ndarray, Xa: np.ndarray, y: np.ndarray) -> float:
        import torch

        h = torch.from_numpy(self.release(Xp).astype(np.float32))
        self.own_bottom.eval()
        self.head.eval()
        with torch.no_grad():
            logits = self.head(torch.cat([h, self.own_bottom(torch.from_numpy(Xa))], dim=1))
        self.own_bottom.train()
        self.head.train()
        return float(np.mean(logits.argmax(1).numpy() == y))


def _sum_logits_head(n_classes: int):
    import torch

    class SumLogits(torch.nn.Module):
        """Plain softmax head: logits = passive logits + active logits (no parameters)."""

        def forward(self, h):
            return h[:, :n_classes] + h[:, n_classes:]

    return SumLogits()


def train_split(kind: str, strength: Optional[float], Xp, Xa, y, *, epochs: int, batch_size: int, lr: float,
                seed: int, logits_head: bool = False) -> TrainedSplit:
    import torch

    from ..federation import InMemoryHub
    from ..splitnn import SplitJob, SplitPartyData, run_split_job
    from ..splitnn.defenses.base import DefenseContext
    from ..splitnn.models import linear_head, mlp_bottom

    n_classes = 2
    width = n_classes if logits_head else EMBED_DIM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bottom = mlp_bottom(Xp.shape[1], (64,), width)
        own = mlp_bottom(Xa.shape[1], (32,), width)
        head = _sum_logits_head(n_classes) if logits_head else linear_head(2 * width, n_classes)
    defense = make_defense(kind, strength, seed)
    n = len(y)
    defense.setup(DefenseContext(n_classes=n_classes, passive_parties=("passive",), n_samples=n,
                                 batch_size=batch_size, epochs=epochs, seed=None,
                                 extra={"model_seed": seed, "embedding_dims": {"passive": width}}))
    job = SplitJob(n_samples=n, n_classes=n_classes, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                   passives=("passive",), active_features=True)
    data = {"passive": SplitPartyData(X=Xp, bottom=bottom, defense=copy.deepcopy(defense)),
            "active": SplitPartyData(X=Xa, bottom=own, defense=copy.deepcopy(defense), y=y, head=head)}
    hub = InMemoryHub(keep_payloads=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        result = run_split_job(job, data, hub)
    passive, active = result.results["passive"], result.results["active"]
    spent = passive.defense.privacy_spent()
    return TrainedSplit(job, hub.transcript, passive.bottom, passive.defense, active.bottom, active.head,
                        None if spent is None else float(spent.epsilon))


# -- attacks on one trained split model ------------------------------------------------------
def split_attacks(model: TrainedSplit, data: PrivacyData, *, kind: str, strength: Optional[float],
                  train_kw: Dict[str, Any], n_targets: int, shadow_models: int, seed: int) -> List[Dict[str, Any]]:
    from .. import attacks as A

    rows: List[Dict[str, Any]] = []
    main_acc = model.accuracy(data.Xp_test, data.Xa_test, data.y_test)

    def add(attack: str, metric: str, value: float) -> None:
        rows.append({"dataset": data.name, "defense": kind, "strength": strength, "epsilon_composed": model.epsilon,
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
        add("norm_scoring", "auc", A.membership_scores(is_minority[g_rows], norm.scores / max(norm.scores.max(), 1e-300))["auc"])
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
    from .. import attacks as A

    model = train_split(kind, strength, data.Xp_train, data.Xa_train, data.y_train, seed=seed, logits_head=True,
                        **train_kw)
    rows, G = A.last_epoch(A.passive_party_gradients(model.transcript, model.job))
    acc = A.label_attack_accuracy(data.y_train[rows], A.direct_label_inference(G).labels)
    return [{"dataset": data.name, "defense": kind, "strength": strength, "epsilon_composed": model.epsilon,
             "attack": "direct_label", "metric": "accuracy", "value": acc,
             "main_accuracy": model.accuracy(data.Xp_test, data.Xa_test, data.y_test),
             "note": "plain softmax head over summed party logits"}]


# -- vertical LR: equality solving ----------------------------------------------------------------
def glm_rows(name: str, *, data_dir: Optional[Path], max_rows: Optional[int], epochs: int,
             hdp_epsilons: Sequence[float], encrypted: Sequence[str], seed: int) -> List[Dict[str, Any]]:
    from .. import attacks as A
    from ..data import PAPER_SPLITS, load_dataset, vertical_split
    from ..federation import InMemoryHub
    from ..glm.job import GLMJob, PartyData
    from ..glm.runner import run_job

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
    out = []
    for protocol, eps in tqdm(cells, desc=f"equality solving {name}", unit="fit"):
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
        theta = split.X_test[0] @ result.results["active"].coef + split.X_test[1] @ result.results["passive"].coef
        acc = float(np.mean(np.where(theta >= 0, 1, 0) == split.y_test))
        esa = A.equality_solving_attack(A.active_party_view(hub.transcript, job), aux, XB[aux])
        for metric, value in (("mse", A.feature_mse(XB[rest], esa.features[rest])),
                              ("normalized_mse", A.normalized_feature_mse(XB[rest], esa.features[rest])),
                              ("full_rank_rows_fraction", esa.exact_rows.size / rest.size)):
            out.append({"dataset": name, "defense": protocol, "strength": eps,
                        "epsilon_composed": eps, "attack": "equality_solving", "metric": metric,
                        "value": float(value), "main_accuracy": acc,
                        "note": f"{N_ESA_AUX} auxiliary rows, {epochs} full-batch epochs, "
                                f"{esa.solved_steps} of {job.total_steps} steps solved"})
    return out


# -- scoring, report, plots --------------------------------------------------------------------------
def recovery_error(row: Dict[str, Any]) -> Optional[float]:
    """FedPass's recovery error: feature MSE, or the fraction of wrong labels."""
    if row["attack"] in FEATURE_ATTACKS and row["metric"] == "mse":
        return row["value"]
    if row["attack"] in LABEL_ATTACKS and row["metric"] == "accuracy":
        return 1.0 - row["value"]
    return None


def cap_table(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    from ..attacks import calibrated_averaged_performance

    groups: Dict[Tuple[str, str, str], List[Tuple[Any, float, float]]] = {}
    for r in rows:
        err = recovery_error(r)
        if err is None or r["defense"] == "none":
            continue
        groups.setdefault((r["dataset"], r["defense"], r["attack"]), []).append((r["strength"], r["main_accuracy"], err))
    out = []
    for (dataset, defense, attack), cells in sorted(groups.items()):
        cap = calibrated_averaged_performance([c[1] for c in cells], [c[2] for c in cells])
        out.append({"dataset": dataset, "defense": defense, "attack": attack, "cap": cap,
                    "strengths": [c[0] for c in cells]})
    return out


def plot_tradeoffs(rows: List[Dict[str, Any]], out: Path) -> List[str]:
    plt = pyplot()
    files = []
    attacks = list(FEATURE_ATTACKS) + ["model_completion", "norm_scoring"]
    for dataset in sorted({r["dataset"] for r in rows if r["attack"] in attacks}):
        fig, axes = plt.subplots(1, len(attacks), figsize=(4.2 * len(attacks), 3.8))
        for ax, attack in zip(axes, attacks):
            cells = [r for r in rows if r["dataset"] == dataset and r["attack"] == attack and recovery_error(r) is not None]
            for defense in sorted({r["defense"] for r in cells}):
                pts = sorted(((r["main_accuracy"], recovery_error(r)) for r in cells if r["defense"] == defense))
                xs, ys = zip(*pts)
                ax.plot(xs, ys, marker="*" if defense == "none" else "o", ms=10 if defense == "none" else 5,
                        ls="" if defense == "none" else "-", label=defense)
            ax.set_title(attack, fontsize=9)
            ax.set_xlabel("main task accuracy")
            ax.set_ylabel("feature MSE" if attack in FEATURE_ATTACKS else "label recovery error")
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle(f"{dataset}: accuracy vs recovery error (top-right is better)")
        fig.tight_layout()
        name = f"tradeoff_{dataset}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(name)
    esa = [r for r in rows if r["attack"] == "equality_solving" and r["metric"] == "normalized_mse"]
    if esa:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        labels = [r["defense"] if r["strength"] is None else f"hdp eps={r['strength']:g}" for r in esa]
        ax.bar(range(len(esa)), [max(r["value"], 1e-16) for r in esa], color="tab:red")
        ax.set_yscale("log")
        ax.axhline(1.0, color="k", ls="--", lw=1, label="auxiliary-mean guess")
        ax.set_xticks(range(len(esa)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("normalized feature MSE")
        ax.set_title("equality solving on vertical LR IRs")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "equality_solving.png", dpi=110)
        plt.close(fig)
        files.append("equality_solving.png")
    return files


def _value(rows, dataset, defense, strength, attack, metric):
    for r in rows:
        if (r["dataset"], r["defense"], r["strength"], r["attack"], r["metric"]) == (dataset, defense, strength, attack, metric):
            return r["value"]
    return None


def write_report(payload: Dict[str, Any], out: Path, plots: List[str]) -> None:
    rows, caps = payload["attacks"], payload["cap"]
    s = payload["settings"]
    lines = ["# Privacy benchmark: defenses vs attacks", "",
             f"Mode: {'quick' if s['quick'] else 'full'}; git {payload['git']}; {payload['elapsed_s']:.0f} s on "
             f"{payload['machine']['cpu']} ({payload['machine']['logical_cores']} logical cores, shared with other jobs).",
             "",
             f"Split learning: passive party = HDP-VFL's passive columns, active party = the active columns + labels; "
             f"half of the rows train (members), a quarter test (non-members, main accuracy), a quarter is the "
             f"attacker's auxiliary / shadow pool. Passive bottom {s['split']['passive_bottom']}, "
             f"{s['split']['epochs']} epochs, batch {s['split']['batch_size']}, Adam lr {s['split']['lr']}, seed {s['seed']}. "
             "Every attack reads only the messages addressed to its adversary (hub transcript), the models "
             "released to it and the auxiliary data its threat model grants (see `vflsec.attacks`). "
             "Recovery errors are on the parties' scaled features (each row of a party has L2 norm <= 1).", ""]
    split_sets = sorted({(r["dataset"], r["defense"], r["strength"]) for r in rows if r["attack"] != "equality_solving"},
                        key=lambda t: (t[0], list(payload["settings"]["grid"]).index(t[1]) if t[1] in payload["settings"]["grid"] else 99, t[2] or 0))
    cols = [("model_inversion_blackbox", "normalized_mse"), ("model_inversion_whitebox", "normalized_mse"),
            ("direct_label", "accuracy"), ("norm_scoring", "accuracy"), ("direction_scoring", "accuracy"),
            ("model_completion", "accuracy"), ("membership_shadow", "accuracy"), ("membership_shadow", "auc")]
    if split_sets:
        lines += ["## Split learning: attack success per defense", "",
                  "Inversion columns: normalized MSE (1 = no better than the auxiliary mean, 0 = exact). "
                  "Label columns: attack accuracy (norm/direction: which samples are of the minority class). "
                  "direct_label is measured on a second model with a plain softmax head (its precondition), "
                  "retrained only for the defenses that act on gradients.", ""]
        table = []
        for dataset, defense, strength in split_sets:
            acc = next(r["main_accuracy"] for r in rows if (r["dataset"], r["defense"], r["strength"]) == (dataset, defense, strength)
                       and r["attack"] != "direct_label")
            eps = next(r["epsilon_composed"] for r in rows if (r["dataset"], r["defense"], r["strength"]) == (dataset, defense, strength))
            table.append([dataset, defense, strength, eps, acc] + [_value(rows, dataset, defense, strength, a, m) for a, m in cols])
        lines += [markdown_table(["dataset", "defense", "strength", "epsilon (composed)", "main acc"]
                                 + [f"{a} {m}".replace("model_inversion_", "MI ").replace("_", " ") for a, m in cols], table), ""]
        lines += ["Strength: " + "; ".join(f"{k}: {STRENGTH_NAMES[k]}" for k in payload["settings"]["grid"]), ""]
    if caps:
        lines += ["## Calibrated averaged performance (FedPass Table 3)", "",
                  "CAP = mean over the defense's strengths of main accuracy x recovery error (feature MSE for the "
                  "inversion attacks, fraction of wrong labels for label attacks); higher is a better trade-off.", ""]
        attacks = [a for a in FEATURE_ATTACKS + LABEL_ATTACKS if any(c["attack"] == a for c in caps)]
        for dataset in sorted({c["dataset"] for c in caps}):
            defenses = sorted({c["defense"] for c in caps if c["dataset"] == dataset})
            table = [[d] + [next((c["cap"] for c in caps if (c["dataset"], c["defense"], c["attack"]) == (dataset, d, a)), None)
                            for a in attacks] for d in defenses]
            lines += [f"**{dataset}**", "", markdown_table(["defense"] + attacks, table), ""]
    mem = [r for r in rows if r["attack"] == "membership_shadow" and r["metric"] == "accuracy"]
    if mem:
        lines += ["## Membership inference on released embeddings (VFL-AFE Table 1)", "",
                  "Shadow-model attack (Shokri et al.) by the active party; balanced members / non-members, "
                  "so 0.5 is chance.", ""]
        table = [[r["dataset"], r["defense"], r["strength"], r["value"],
                  _value(rows, r["dataset"], r["defense"], r["strength"], "membership_shadow", "auc")] for r in mem]
        lines += [markdown_table(["dataset", "defense", "strength", "attack accuracy", "attack AUC"], table), ""]
    esa = [r for r in rows if r["attack"] == "equality_solving" and r["metric"] == "mse"]
    if esa:
        lines += ["## Vertical LR: equality solving on plain vs HDP-VFL vs encrypted IRs", "",
                  f"The active party knows the passive features of {N_ESA_AUX} training rows; from every step whose "
                  "batch they span it solves the passive weights, then each other row's features from its IRs "
                  "(one equation per epoch). HE leaves it no plaintext IR: it can only guess the auxiliary mean.", ""]
        table = [[r["dataset"], r["defense"], r["strength"], r["main_accuracy"], r["value"],
                  _value(rows, r["dataset"], r["defense"], r["strength"], "equality_solving", "normalized_mse"),
                  _value(rows, r["dataset"], r["defense"], r["strength"], "equality_solving", "full_rank_rows_fraction"),
                  r.get("note", "")] for r in esa]
        lines += [markdown_table(["dataset", "protection", "epsilon", "test acc", "feature MSE", "normalized MSE",
                                  "rows with full-rank equations (fraction)", "note"], table), "",
                  "A row with full-rank equations is recovered exactly from plain IRs; under HDP-VFL its equations "
                  "are noisy, so full rank does not mean recovery (see the MSE). With plain IRs on real data the "
                  "per-step weights become nearly collinear as descent converges, which leaves the systems "
                  "rank-deficient.", ""]
    lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    (out / "report.md").write_text("\n".join(lines))


# -- driver -----------------------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small grid on Breast (under 5 minutes)")
    parser.add_argument("--datasets", default=None, help="comma-separated (default: breast quick, breast,credit full)")
    parser.add_argument("--data-dir", type=Path, default=None, help="directory of the real datasets")
    parser.add_argument("--out", type=Path, default=Path("bench-out/privacy"), help="output directory")
    parser.add_argument("--seed", type=int, default=0)


def run(*, quick: bool = False, datasets: Optional[str] = None, data_dir: Optional[Path] = None,
        out: Path = Path("bench-out/privacy"), seed: int = 0) -> Dict[str, Any]:
    import logging

    import torch

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP convergence chatter
    torch.set_num_threads(1)  # tiny models: threads cost more than they give on a shared machine
    start = time.perf_counter()
    names = [d.strip() for d in (datasets or ("breast" if quick else "breast,credit")).split(",") if d.strip()]
    grid = QUICK_GRID if quick else FULL_GRID
    train_kw = dict(epochs=15 if quick else 30, batch_size=32, lr=5e-3)
    max_rows = 1200 if quick else 4000
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rows: List[Dict[str, Any]] = []
    for name in names:
        data = load_privacy_data(name, data_dir=data_dir, max_rows=max_rows, seed=seed)
        cells = [(k, s) for k, strengths in grid.items() for s in strengths]
        for kind, strength in tqdm(cells, desc=f"split attacks {name}", unit="defense"):
            model = train_split(kind, strength, data.Xp_train, data.Xa_train, data.y_train, seed=seed, **train_kw)
            rows += split_attacks(model, data, kind=kind, strength=strength, train_kw=train_kw,
                                  n_targets=100 if quick else 300, shadow_models=2 if quick else 4, seed=seed)
            if kind in GRADIENT_DEFENSES:
                rows += direct_label_rows(data, kind, strength, train_kw, seed)
        rows += glm_rows(name, data_dir=data_dir, max_rows=max_rows, epochs=25,
                         hdp_epsilons=[1.0, 100.0] if quick else [0.1, 1.0, 10.0, 100.0, 1000.0],
                         encrypted=["ckks"] if quick else ["ckks", "paillier"], seed=seed)
    caps = cap_table(rows)
    plots = plot_tradeoffs(rows, out)
    payload = {
        "benchmark": "privacy",
        "settings": {"quick": quick, "datasets": names, "seed": seed, "grid": grid,
                     "split": dict(train_kw, passive_bottom=f"MLP 64 -> {EMBED_DIM}", head="linear"),
                     "n_aux_labels": N_AUX_LABELS, "esa_aux_rows": N_ESA_AUX, "max_rows": max_rows},
        "machine": machine_info(), "git": git_revision(),
        "versions": package_versions(["vflsec", "torch", "numpy", "scikit-learn", "tenseal", "phe"]),
        "attacks": rows, "cap": caps, "elapsed_s": time.perf_counter() - start,
    }
    write_json(out / "results.json", payload)
    write_report(payload, out, plots)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'} and {len(plots)} plots in {payload['elapsed_s']:.0f} s")
    return payload
