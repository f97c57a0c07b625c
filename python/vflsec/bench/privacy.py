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
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

import numpy as np
from tqdm import tqdm

from .common import (
    DP_LAYER,
    PartialRunError,
    add_rerender_argument,
    git_revision,
    machine_info,
    package_versions,
    read_results,
    write_json,
)
from .config import load_variant, spec, with_overrides
from .privacy_report import FEATURE_ATTACKS, LABEL_ATTACKS, recovery_error, render  # noqa: F401 (re-exported)

# Defenses whose effect is on the gradients returned to the passive party (the
# only ones for which the direct-label model is retrained).
GRADIENT_DEFENSES = ("none", "noise_gradient", "sparsify")

DEFENSES = ("noise_embedding", "noise_gradient", "sparsify", "vfl_afe", "dp_sgd", "fedpass")
EMBED_DIM = 16
N_AUX_LABELS = 40
N_ESA_AUX = 30


@dataclass(frozen=True)
class TrainSettings:
    """The two-party split MLP of every cell (``[<variant>.train]``)."""

    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class GLMAttackSettings:
    """Equality solving on vertical LR (``[<variant>.glm]``)."""

    epochs: int = field(metadata=spec(low=1))
    hdp_epsilons: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False))
    encrypted: Tuple[str, ...] = field(metadata=spec(choices=("ckks", "paillier")))


@dataclass(frozen=True)
class PrivacyGrid:
    """One variant of ``configs/privacy.toml`` (``[full]`` or ``[quick]``)."""

    datasets: Tuple[str, ...] = field(metadata=spec(non_empty=True))
    seed: int = field(metadata=spec(low=0))
    max_rows: int = field(metadata=spec(low=8))
    undefended: bool
    n_targets: int = field(metadata=spec(low=1))
    shadow_models: int = field(metadata=spec(low=0))
    train: TrainSettings
    strengths: Dict[str, Tuple[float, ...]] = field(metadata=spec(keys=DEFENSES, low=0, low_inclusive=False,
                                                                   non_empty=True))
    glm: GLMAttackSettings

    def cells(self) -> Dict[str, List[Optional[float]]]:
        """Defense -> strengths, in run order ("none": the undefended reference, no strength)."""
        out: Dict[str, List[Optional[float]]] = {"none": [None]} if self.undefended else {}
        out.update({kind: list(values) for kind, values in self.strengths.items()})
        return out


def load_grid(quick: bool, path: Optional[Path] = None) -> PrivacyGrid:
    """``[quick]`` or ``[full]`` of the shipped ``privacy.toml`` or of the user's copy ``path``."""
    return load_variant(PrivacyGrid, "privacy", "quick" if quick else "full", path)


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
# Per registered defense: the parameter a cell's strength sets (None: no
# strength), the benchmark's fixed settings, and whether it takes the seed.
DEFENSE_SETTINGS: Dict[str, Tuple[Optional[str], Dict[str, Any], bool]] = {
    "none": (None, {}, False),
    "noise_embedding": ("scale", {}, True),
    "noise_gradient": ("scale", {}, True),
    "sparsify": ("keep_fraction", {}, False),
    # analytic: the paper's classic formula does not give epsilon >= ~6 and is refused there
    "vfl_afe": ("epsilon", {"t": 1.0, "delta": 1e-2, "calibration": "analytic"}, True),
    "dp_sgd": ("epsilon", {"delta": 1e-3, "calibration_steps": 10}, True),
    "fedpass": ("sigma2", {"n_range": 100.0}, True),
}


def make_defense(kind: str, strength: Optional[float], seed: int):
    """The registered defense ``kind`` (:mod:`vflsec.splitnn.defenses.registry`)
    at ``strength`` with the benchmark's fixed settings."""
    from ..splitnn.defenses import make_defense as make_registered

    if kind not in DEFENSE_SETTINGS:
        raise ValueError(f"unknown defense {kind!r}")
    strength_param, fixed, seeded = DEFENSE_SETTINGS[kind]
    params: Dict[str, Any] = dict(fixed)
    if strength_param is not None:
        params[strength_param] = strength
    if seeded:
        params["seed"] = seed
    return make_registered(kind, **params)


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
    from ..splitnn.job import SplitPartyResult
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
    # cast: split-learning party programs return SplitPartyResult (JobResult holds the base type).
    results = cast(Dict[str, SplitPartyResult], result.results)
    passive, active = results["passive"], results["active"]
    spent = passive.defense.privacy_spent()
    return TrainedSplit(job, hub.transcript, passive.bottom, passive.defense, active.bottom, active.head,
                        None if spent is None or spent.epsilon is None else float(spent.epsilon))


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
    from ..glm.job import GLMJob, GLMPartyResult, PartyData
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
        results = cast(Dict[str, GLMPartyResult], result.results)  # GLM party programs return GLMPartyResult
        theta = split.X_test[0] @ results["active"].coef + split.X_test[1] @ results["passive"].coef
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


# -- scoring (stored in results.json) ---------------------------------------------------------
def cap_table(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    from ..attacks import calibrated_averaged_performance

    groups: Dict[Tuple[str, str, str], List[Tuple[Any, float, float]]] = {}
    for r in rows:
        err = recovery_error(r)
        if err is None or r["defense"] == "none":
            continue
        groups.setdefault((r["dataset"], r["defense"], r["attack"]), []).append(
            (r["strength"], r["main_accuracy"], err))
    out = []
    for (dataset, defense, attack), cells in sorted(groups.items()):
        cap = calibrated_averaged_performance([c[1] for c in cells], [c[2] for c in cells])
        out.append({"dataset": dataset, "defense": defense, "attack": attack, "cap": cap,
                    "strengths": [c[0] for c in cells]})
    return out


# -- driver: grid -> cells -> results.json (the renderer is .privacy_report) -------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small grid on Breast (under 5 minutes): the [quick] grid")
    parser.add_argument("--datasets", default=None,
                        help="comma-separated (default: the config's; breast quick, breast,credit full)")
    parser.add_argument("--data-dir", type=Path, default=None, help="directory of the real datasets")
    parser.add_argument("--out", type=Path, default=Path("bench-out/privacy"),
                        help="output directory (default bench-out/privacy)")
    parser.add_argument("--seed", type=int, default=None, help="seed of data splits, models and attacks "
                                                               "(default: the config's, 0)")
    add_rerender_argument(parser)


def run(*, quick: bool = False, datasets: Optional[str] = None, data_dir: Optional[Path] = None,
        out: Path = Path("bench-out/privacy"), seed: Optional[int] = None,
        config: Optional[Path] = None, rerender: Optional[Path] = None) -> Dict[str, Any]:
    """Run the grid (``config``: a user's copy of ``privacy.toml``; ``datasets``
    and ``seed`` override it), write ``results.json`` and render it.
    ``rerender``: no run; write the report and plots of ``rerender/results.json`` again."""
    if rerender is not None:
        saved = read_results(Path(rerender))
        render(saved, Path(rerender))
        return saved
    grid = load_grid(quick, config)
    overrides: Dict[str, Any] = {}
    if datasets is not None:
        overrides["datasets"] = tuple(d.strip() for d in datasets.split(",") if d.strip())
    if seed is not None:
        overrides["seed"] = seed
    if overrides:
        grid = with_overrides(grid, "command line (--datasets, --seed)", **overrides)
    out = Path(out)
    rows: List[Dict[str, Any]] = []
    start = time.perf_counter()
    try:
        payload = run_grid(grid, quick=quick, data_dir=data_dir, rows=rows)
    except (KeyboardInterrupt, Exception) as exc:
        # The finished cells are written (marked partial) before stopping.
        payload = dict(_payload(grid, quick, rows, time.perf_counter() - start), partial=True)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "results.json", payload)
        render(payload, out)
        if isinstance(exc, KeyboardInterrupt):
            print(f"vflsec bench privacy: interrupted; the finished cells are in {out}", file=sys.stderr)
            raise SystemExit(130) from None
        raise PartialRunError(out) from exc
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", payload)
    plots = render(payload, out)
    print(f"wrote {out / 'results.json'}, {out / 'report.md'} and {len(plots)} plots in {payload['elapsed_s']:.0f} s")
    return payload


def run_grid(grid: PrivacyGrid, *, quick: bool, data_dir: Optional[Path] = None,
             rows: Optional[List[Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Every cell of ``grid``: the content of ``results.json`` (``rows``: a list
    the finished rows are appended to as they come, kept if the run stops)."""
    import logging

    import torch

    logging.getLogger("absl").setLevel(logging.ERROR)  # dp-accounting's RDP convergence chatter
    torch.set_num_threads(1)  # tiny models: threads cost more than they give on a shared machine
    start = time.perf_counter()
    seed, names, cells_by_defense = grid.seed, list(grid.datasets), grid.cells()
    train_kw = _train_kw(grid)
    rows = [] if rows is None else rows
    for name in names:
        data = load_privacy_data(name, data_dir=data_dir, max_rows=grid.max_rows, seed=seed)
        cells = [(k, s) for k, strengths in cells_by_defense.items() for s in strengths]
        for kind, strength in tqdm(cells, desc=f"split attacks {name}", unit="defense"):
            model = train_split(kind, strength, data.Xp_train, data.Xa_train, data.y_train, seed=seed, **train_kw)
            rows += split_attacks(model, data, kind=kind, strength=strength, train_kw=train_kw,
                                  n_targets=grid.n_targets, shadow_models=grid.shadow_models, seed=seed)
            if kind in GRADIENT_DEFENSES:
                rows += direct_label_rows(data, kind, strength, train_kw, seed)
        rows += glm_rows(name, data_dir=data_dir, max_rows=grid.max_rows, epochs=grid.glm.epochs,
                         hdp_epsilons=list(grid.glm.hdp_epsilons), encrypted=list(grid.glm.encrypted), seed=seed)
    return _payload(grid, quick, rows, time.perf_counter() - start)


def _train_kw(grid: PrivacyGrid) -> Dict[str, Any]:
    return dict(epochs=grid.train.epochs, batch_size=grid.train.batch_size, lr=grid.train.lr)


def _payload(grid: PrivacyGrid, quick: bool, rows: List[Dict[str, Any]], elapsed: float) -> Dict[str, Any]:
    """The content of ``results.json`` for the finished ``rows``."""
    return {
        "benchmark": "privacy",
        "settings": {"quick": quick, "datasets": list(grid.datasets), "seed": grid.seed, "grid": grid.cells(),
                     "split": dict(_train_kw(grid), passive_bottom=f"MLP 64 -> {EMBED_DIM}", head="linear"),
                     "n_aux_labels": N_AUX_LABELS, "esa_aux_rows": N_ESA_AUX, "max_rows": grid.max_rows},
        "machine": machine_info(), "git": git_revision(), "dp_layer": DP_LAYER,
        "versions": package_versions(["vflsec", "torch", "numpy", "scikit-learn", "tenseal", "phe"]),
        "attacks": rows, "cap": cap_table(rows), "elapsed_s": elapsed,
    }
