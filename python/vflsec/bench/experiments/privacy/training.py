"""What every split-learning cell of ``vflsec bench privacy`` trains: the rows each
party and the attacker hold (:func:`load_privacy_data`), the registered defense at
the cell's strength (:func:`make_defense`) and the two-party split MLP trained over
an ``InMemoryHub(keep_payloads=True)`` (:func:`train_split`), whose transcript the
attacks read."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np

from ...dp_sgd_clip import DEFAULT_CLIP_NORM

__all__ = ["DEFENSE_SETTINGS", "DP_SGD_CALIBRATION_STEPS", "EMBED_DIM", "PrivacyData", "TrainedSplit",
           "load_privacy_data", "make_defense", "train_split"]

EMBED_DIM = 16
# The window of DP-SGD's percentile clip (clip = "pNN" only) on these small training sets.
DP_SGD_CALIBRATION_STEPS = 10


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
    from ....data import PAPER_SPLITS, load_dataset, vertical_split

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


# Per registered defense: the parameter a cell's strength sets (None: no
# strength), the benchmark's fixed settings, and whether it takes the seed.
DEFENSE_SETTINGS: Dict[str, Tuple[Optional[str], Dict[str, Any], bool]] = {
    "none": (None, {}, False),
    "noise_embedding": ("scale", {}, True),
    "noise_gradient": ("scale", {}, True),
    "sparsify": ("keep_fraction", {}, False),
    # analytic: the paper's classic formula does not give epsilon >= ~6 and is refused there
    "vfl_afe": ("epsilon_per_release", {"t": 1.0, "delta": 1e-2, "calibration": "analytic"}, True),
    # A clip norm fixed before the run (the grid's [dp_sgd] clip may change it); no delta: DPSGD's rule,
    # min(1e-5, 1/(10 n)). calibration_steps is the percentile rule's window, used only by clip = "pNN".
    "dp_sgd": ("epsilon", {"clip_norm": DEFAULT_CLIP_NORM, "calibration_steps": DP_SGD_CALIBRATION_STEPS}, True),
    "fedpass": ("sigma2", {"n_range": 100.0}, True),
}


def make_defense(kind: str, strength: Optional[float], seed: int,
                 settings: Optional[Mapping[str, Any]] = None) -> Any:
    """The registered defense ``kind`` (:mod:`vflsec.splitnn.defenses.registry`)
    at ``strength`` with the benchmark's fixed settings, ``settings`` (the
    grid's, e.g. DP-SGD's clip and delta) replacing those it names."""
    from ....splitnn.defenses import make_defense as make_registered

    if kind not in DEFENSE_SETTINGS:
        raise ValueError(f"unknown defense {kind!r}")
    strength_param, fixed, seeded = DEFENSE_SETTINGS[kind]
    params: Dict[str, Any] = dict(fixed, **(settings or {}))
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
    delta: Optional[float] = None  # of the guarantee (a DP defense's privacy_spent)
    variant: Optional[str] = None  # DP-SGD's clip: "clip=1", "clip=p80" (no guarantee)
    privacy_warning: Optional[str] = None  # the PrivacyWarnings training raised (e.g. delta >= 1/n)

    def row_fields(self) -> Dict[str, Any]:
        """What every attack row on this model records about its defense's guarantee."""
        return {"epsilon_composed": self.epsilon, "delta": self.delta, "variant": self.variant,
                "privacy_warning": self.privacy_warning}

    def release(self, Xp: np.ndarray) -> np.ndarray:
        """What the passive party releases for rows ``Xp`` (its trained bottom
        and defense, batch by batch): the query oracle of the threat models."""
        import torch

        from ....splitnn.defenses.base import BatchInfo

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


def _sum_logits_head(n_classes: int) -> Any:
    import torch

    class SumLogits(torch.nn.Module):
        """Plain softmax head: logits = passive logits + active logits (no parameters)."""

        def forward(self, h):
            return h[:, :n_classes] + h[:, n_classes:]

    return SumLogits()


def train_split(kind: str, strength: Optional[float], Xp, Xa, y, *, epochs: int, batch_size: int, lr: float,
                seed: int, logits_head: bool = False,
                defense_settings: Optional[Mapping[str, Mapping[str, Any]]] = None) -> TrainedSplit:
    """The two-party split MLP trained with defense ``kind`` at ``strength``;
    ``defense_settings``: per defense, the grid's settings replacing
    :data:`DEFENSE_SETTINGS`' (e.g. ``{"dp_sgd": {"clip_norm": 1.0}}``)."""
    import torch

    from ....federation import InMemoryHub
    from ....splitnn import SplitJob, SplitPartyData, run_split_job
    from ....splitnn.defenses.base import DefenseContext
    from ....splitnn.job import SplitPartyResult
    from ....splitnn.models import linear_head, mlp_bottom
    from ...common import privacy_warnings, warning_text
    from ...dp_sgd_clip import clip_variant

    n_classes = 2
    width = n_classes if logits_head else EMBED_DIM
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bottom = mlp_bottom(Xp.shape[1], (64,), width)
        own = mlp_bottom(Xa.shape[1], (32,), width)
        head = _sum_logits_head(n_classes) if logits_head else linear_head(2 * width, n_classes)
    defense = make_defense(kind, strength, seed, (defense_settings or {}).get(kind))
    n = len(y)
    with privacy_warnings() as warned:  # e.g. delta >= 1/n: the rows are labelled, the warning still shown
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
                        None if spent is None or spent.epsilon is None else float(spent.epsilon),
                        delta=None if spent is None else spent.delta,
                        variant=clip_variant(defense.clip_norm, defense.clip_percentile) if kind == "dp_sgd" else None,
                        privacy_warning=warning_text(warned))
