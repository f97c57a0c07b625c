"""The split-learning papers' published numbers and settings, as data:
``papers/vfl_afe.toml`` (:data:`VFL_AFE`), ``papers/dp_vfl.toml``
(:data:`DP_VFL`) and ``papers/fedpass.toml`` (:data:`FEDPASS`). Their
``[[claims]]`` are read and judged by :mod:`vflsec.bench.claims`
(:mod:`.verdicts`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Tuple

from ...config import load_paper, spec
from ...errors import BenchConfigError

__all__ = ["DP_VFL", "FEDPASS", "PAPER_TABLE2", "PAPER_TABLE3", "TIMING_STEPS", "VFL_AFE"]


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

# VFL-AFE Table 2 (test accuracy, %): UCI Adult and MNIST rows of the paper.
PAPER_TABLE2 = {name: dict(cells) for name, cells in VFL_AFE.table2.items()}
# VFL-AFE Table 3 (5000 CIFAR-10 samples): ms and share of training time, per component.
PAPER_TABLE3 = {step: (t.ms, t.percent) for step, t in VFL_AFE.table3.items()}
TIMING_STEPS = ("base", "noise", "rescale", "adjust")
