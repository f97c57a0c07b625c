"""``vflsec bench splitnn``'s grid and the split-learning papers' numbers, as data.

:class:`SplitnnGrid` is one variant of ``configs/splitnn.toml``; the
published numbers are ``configs/papers/vfl_afe.toml`` (:data:`VFL_AFE`),
``papers/dp_vfl.toml`` (:data:`DP_VFL`) and ``papers/fedpass.toml``
(:data:`FEDPASS`). The sections of :mod:`.splitnn` still read the run's
settings as the dict :meth:`SplitnnGrid.run_settings` builds (the shape
``results.json`` records under ``"config"``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from .config import BenchConfigError, load_paper, load_variant, optional_field, spec

__all__ = ["DP_VFL", "FEDPASS", "PAPER_TABLE2", "VFL_AFE", "SplitnnGrid", "load_grid"]

DATA_KINDS = ("tabular", "image")


@dataclass(frozen=True)
class AFESettings:
    """VFL-AFE's settings shared by every Table 2 / Table 3 / rescale cell."""

    t: float = field(metadata=spec(low=0, low_inclusive=False))
    calibration: str = field(metadata=spec(choices=("classic", "analytic")))
    kl_weight: float = field(metadata=spec(low=0))
    contrastive_weight: float = field(metadata=spec(low=0))


@dataclass(frozen=True)
class KindSettings:
    """Per data kind (tabular: Adult with MLP bottoms; image: MNIST halves with CNN bottoms)."""

    epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    confidence_threshold: float = field(metadata=spec(low=0, high=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class DPVFLSection:
    datasets: Tuple[str, ...] = field(metadata=spec(choices=("adult", "energy", "california_housing"),
                                                    non_empty=True))
    owners: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    epsilons: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    max_rows: int = field(metadata=spec(low=10))


@dataclass(frozen=True)
class FedPassSection:
    settings: Tuple[Tuple[float, ...], ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    epochs: int = field(metadata=spec(low=1))
    max_rows: int = field(metadata=spec(low=10))

    def __post_init__(self) -> None:
        bad = [list(s) for s in self.settings if len(s) != 2]
        if bad:
            raise BenchConfigError(f"fedpass.settings: each setting is [N, sigma2], got {bad[0]}")


@dataclass(frozen=True)
class RescaleSection:
    seeds: int = field(metadata=spec(low=1))


@dataclass(frozen=True)
class SplitnnGrid:
    """One variant of ``configs/splitnn.toml`` (``[full]`` or ``[quick]``)."""

    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    seeds: int = field(metadata=spec(low=1))
    adult_max_train: Optional[int] = field(metadata=optional_field(low=10))
    adult_max_test: Optional[int] = field(metadata=optional_field(low=10))
    mnist_max_train: Optional[int] = field(metadata=optional_field(low=10))
    mnist_max_test: Optional[int] = field(metadata=optional_field(low=10))
    timing_rows: int = field(metadata=spec(low=10))
    timing_batch_size: int = field(metadata=spec(low=1))
    timing_epochs: int = field(metadata=spec(low=1))
    timing_rounds: int = field(metadata=spec(low=1))
    afe: AFESettings
    tabular: KindSettings
    image: KindSettings
    dp_vfl: DPVFLSection
    fedpass: FedPassSection
    rescale: RescaleSection

    def run_settings(self, *, quick: bool, device: str) -> Dict[str, Any]:
        """The settings dict the sections read (and ``results.json`` records)."""
        kinds = {"tabular": self.tabular, "image": self.image}
        return dict(
            t=self.afe.t, epsilon={k: v.epsilon for k, v in kinds.items()}, calibration=self.afe.calibration,
            kl_weight=self.afe.kl_weight, contrastive_weight=self.afe.contrastive_weight,
            confidence_threshold={k: v.confidence_threshold for k, v in kinds.items()},
            lr={k: v.lr for k, v in kinds.items()}, device=device, quick=quick,
            epochs=self.epochs, batch_size=self.batch_size, seeds=self.seeds,
            adult_rows=(self.adult_max_train, self.adult_max_test),
            mnist_rows=(self.mnist_max_train, self.mnist_max_test), timing_rows=self.timing_rows,
            timing_batch_size=self.timing_batch_size, timing_epochs=self.timing_epochs,
            timing_rounds=self.timing_rounds,
            dp_vfl=dict(datasets=self.dp_vfl.datasets, owners=self.dp_vfl.owners, epsilons=self.dp_vfl.epsilons,
                        epochs=self.dp_vfl.epochs, batch_size=self.dp_vfl.batch_size, lr=self.dp_vfl.lr,
                        max_rows=self.dp_vfl.max_rows),
            fedpass=dict(settings=self.fedpass.settings, epochs=self.fedpass.epochs,
                         max_rows=self.fedpass.max_rows),
            rescale=dict(seeds=self.rescale.seeds))


def load_grid(quick: bool, path: Optional[Path] = None) -> SplitnnGrid:
    """``[quick]`` or ``[full]`` of the shipped ``splitnn.toml`` or of the user's copy ``path``."""
    return load_variant(SplitnnGrid, "splitnn", "quick" if quick else "full", path)


# -- the papers -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StepTime:
    ms: float = field(metadata=spec(low=0))
    percent: float = field(metadata=spec(low=0, high=100))


_VARIANT_KEYS = ("vanilla", "R", "D", "full")


@dataclass(frozen=True)
class VFLAFEPaper:
    """``papers/vfl_afe.toml``: Table 2 accuracies (%) and Table 3 step times."""

    table2: Dict[str, Dict[str, float]] = field(metadata=spec(low=0, high=100))
    table3: Dict[str, StepTime] = field(metadata=spec(keys=("base", "noise", "rescale", "adjust")))

    def __post_init__(self) -> None:
        for dataset, cells in self.table2.items():
            if set(cells) != set(_VARIANT_KEYS):
                raise BenchConfigError(f"table2.{dataset}: needs exactly the keys {', '.join(_VARIANT_KEYS)}")


@dataclass(frozen=True)
class TrainingSettings:
    optimizer: str = field(metadata=spec(choices=("sgd", "adam")))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    batch_size: int = field(metadata=spec(low=1))
    epochs: int = field(metadata=spec(low=1))


@dataclass(frozen=True)
class DPVFLPaper:
    """``papers/dp_vfl.toml``: the DP-VFL experiment's budgets, owners and training."""

    epsilons: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    owners: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    delta: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    training: TrainingSettings


@dataclass(frozen=True)
class FedPassPaper:
    """``papers/fedpass.toml``: the passport sweeps (N, sigma^2) and training settings."""

    table8: Tuple[Tuple[float, ...], ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    table9: Tuple[Tuple[float, ...], ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True))
    training: TrainingSettings

    @property
    def settings(self) -> Tuple[Tuple[float, float], ...]:
        """Both sweeps, Table 8's first."""
        return tuple((float(n), float(s)) for n, s in self.table8 + self.table9)


VFL_AFE = load_paper(VFLAFEPaper, "vfl_afe")
DP_VFL = load_paper(DPVFLPaper, "dp_vfl")
FEDPASS = load_paper(FedPassPaper, "fedpass")

# VFL-AFE Table 2 (test accuracy, %): UCI Adult and MNIST rows of the paper (configs/papers/vfl_afe.toml).
PAPER_TABLE2 = {name: dict(cells) for name, cells in VFL_AFE.table2.items()}
