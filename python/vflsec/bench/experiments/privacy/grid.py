"""The grid of ``vflsec bench privacy`` (``privacy.toml``) and its :class:`~vflsec.bench.experiment.Experiment`."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from ....data.partition import PAPER_SPLITS
from ...config import load_variant, optional_field, spec
from ...dp_sgd_clip import CLIP_RULE, check_clip, clip_kwargs
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["DATASETS", "DEFENSES", "DPSGDSettings", "EXPERIMENT", "GLMAttackSettings", "PrivacyExperiment",
           "PrivacyGrid", "TrainSettings", "load_grid"]

DEFENSES = ("noise_embedding", "noise_gradient", "sparsify", "vfl_afe", "dp_sgd", "fedpass")
# Every cell splits the columns between the parties as HDP-VFL did: only its datasets have that split.
DATASETS = tuple(PAPER_SPLITS)


@dataclass(frozen=True)
class TrainSettings:
    """The two-party split MLP of every cell (``[<variant>.train]``)."""

    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))


@dataclass(frozen=True)
class DPSGDSettings:
    """DP-SGD's settings in every dp_sgd cell (``[<variant>.dp_sgd]``)."""

    # A clip norm C fixed before the run, or "pNN": the paper's percentile rule (no guarantee).
    clip: Union[float, str] = field(metadata=spec(low=0, low_inclusive=False, help=CLIP_RULE))
    # Left out: DPSGD's rule, min(1e-5, 1/(10 n)) for n training rows.
    delta: Optional[float] = field(metadata=optional_field(low=0, low_inclusive=False, high=1))

    def __post_init__(self) -> None:
        try:
            check_clip(self.clip)
        except ValueError as exc:
            raise BenchConfigError(str(exc)) from None
        if self.delta is not None and self.delta >= 1:
            raise BenchConfigError(f"delta: expected a number > 0 and < 1 (or the key left out), got {self.delta!r}")

    def defense_kwargs(self) -> Dict[str, Any]:
        """The :class:`~vflsec.splitnn.defenses.dp_sgd.DPSGD` arguments these settings fix."""
        return dict(clip_kwargs(self.clip), **({} if self.delta is None else {"delta": self.delta}))


@dataclass(frozen=True)
class GLMAttackSettings:
    """Equality solving on vertical LR (``[<variant>.glm]``)."""

    epochs: int = field(metadata=spec(low=1))
    hdp_epsilons: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False))
    encrypted: Tuple[str, ...] = field(metadata=spec(choices=("ckks", "paillier")))


@dataclass(frozen=True)
class PrivacyGrid:
    """One variant of ``privacy.toml`` (``[full]`` or ``[quick]``)."""

    datasets: Tuple[str, ...] = field(metadata=spec(non_empty=True, choices=DATASETS))
    seed: int = field(metadata=spec(low=0))
    max_rows: int = field(metadata=spec(low=8))
    undefended: bool
    n_targets: int = field(metadata=spec(low=1))
    shadow_models: int = field(metadata=spec(low=0))
    train: TrainSettings
    strengths: Dict[str, Tuple[float, ...]] = field(metadata=spec(keys=DEFENSES, low=0, low_inclusive=False,
                                                                   non_empty=True))
    dp_sgd: DPSGDSettings
    glm: GLMAttackSettings

    def cells(self) -> Dict[str, List[Optional[float]]]:
        """Defense -> strengths, in run order ("none": the undefended reference, no strength)."""
        out: Dict[str, List[Optional[float]]] = {"none": [None]} if self.undefended else {}
        out.update({kind: list(values) for kind, values in self.strengths.items()})
        return out


def load_grid(quick: bool, path: Optional[Path] = None) -> PrivacyGrid:
    """``[quick]`` or ``[full]`` of the shipped ``privacy.toml`` or of the user's copy ``path``."""
    return load_variant(PrivacyGrid, "privacy", "quick" if quick else "full", path)


class PrivacyExperiment(Experiment):
    """Every split-learning defense at each strength of the grid, scored against the attacks
    it should stop, and equality solving on vertical LR IRs (plain, HDP-VFL, encrypted)."""

    name = "privacy"
    quick_help = "small grid on Breast (under 5 minutes): the [quick] grid"
    versions = ("torch", "dp-accounting", "numpy", "scikit-learn", "tenseal", "phe")
    overrides = (
        Override("--datasets", "datasets", comma_list(str),
                 f"comma-separated datasets, among {', '.join(DATASETS)}", metavar="NAMES"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                            help="directory of the real datasets (credit, adult; default: $VFLSEC_DATA)")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> PrivacyGrid:
        return load_grid(quick, path)

    def check(self, grid: PrivacyGrid, options: Dict[str, Any]) -> None:
        """Every dataset loads and every encrypted protocol's library imports, before any cell runs."""
        from ....data import load_dataset
        from ....errors import missing_dataset, require_extra

        if "ckks" in grid.glm.encrypted:
            require_extra("tenseal")
        if "paillier" in grid.glm.encrypted:
            require_extra("phe", "gmpy2")
        for name in grid.datasets:
            try:
                load_dataset(name, data_dir=options.get("data_dir"))
            except FileNotFoundError as exc:
                raise missing_dataset(exc) from None

    def run_cells(self, grid: PrivacyGrid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        run_cells(grid, result, data_dir=options.get("data_dir"))

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = PrivacyExperiment()
