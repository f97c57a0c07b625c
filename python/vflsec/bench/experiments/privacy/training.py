"""What every split-learning cell of ``vflsec bench privacy`` trains: the rows each
party and the attacker hold (:func:`load_privacy_data`), the registered defense at
the cell's strength (:func:`make_defense`) and the two-party split MLP trained over
an ``InMemoryHub(keep_payloads=True)`` (:func:`train_split`), whose transcript the
attacks read."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, cast

import numpy as np

__all__ = ["DEFENSE_SETTINGS", "EMBED_DIM", "PrivacyData", "TrainedSplit", "load_privacy_data", "make_defense",
           "train_split"]

EMBED_DIM = 16


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
    "dp_sgd": ("epsilon", {"delta": 1e-3, "calibration_steps": 10}, True),
    "fedpass": ("sigma2", {"n_range": 100.0}, True),
}


def make_defense(kind: str, strength: Optional[float], seed: int) -> Any:
    """The registered defense ``kind`` (:mod:`vflsec.splitnn.defenses.registry`)
    at ``strength`` with the benchmark's fixed settings."""
    from ....splitnn.defenses import make_defense as make_registered

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
                seed: int, logits_head: bool = False) -> TrainedSplit:
    import torch

    from ....federation import InMemoryHub
    from ....splitnn import SplitJob, SplitPartyData, run_split_job
    from ....splitnn.defenses.base import DefenseContext
    from ....splitnn.job import SplitPartyResult
    from ....splitnn.models import linear_head, mlp_bottom

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
