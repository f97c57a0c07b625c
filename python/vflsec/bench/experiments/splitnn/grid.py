"""``vflsec bench splitnn``'s grid (one variant of ``splitnn.toml``) and its
:class:`~vflsec.bench.experiment.Experiment`.

The cells (:mod:`.cells`) read the run's settings as the dict
:meth:`SplitnnGrid.run_settings` builds plus the run's inputs that are not
grid keys (device, mode, data folder, data sources): the shape
``results.json`` records under ``"config"``, which the report reads.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from ...config import load_variant, optional_field, spec, with_overrides
from ...dp_sgd_clip import CLIP_RULE, check_clip
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["EXPERIMENT", "SECTION_NAMES", "SplitnnExperiment", "SplitnnGrid", "load_grid"]

# Every section a run can contain, in the order of the report (rescale is in no shipped variant's default).
SECTION_NAMES = ("table2", "table3", "dp_vfl", "fedpass", "rescale")


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
    # DP-SGD's per-sample clip, each entry one run of every epsilon cell: a clip norm C fixed before the
    # run, or "pNN", the paper's percentile rule (no guarantee; vflsec.bench.dp_sgd_clip).
    clips: Tuple[Union[float, str], ...] = field(metadata=spec(low=0, low_inclusive=False, non_empty=True,
                                                               help=CLIP_RULE))
    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    max_rows: int = field(metadata=spec(low=10))

    def __post_init__(self) -> None:
        for i, clip in enumerate(self.clips):
            try:
                check_clip(clip, f"clips[{i}]")
            except ValueError as exc:
                raise BenchConfigError(str(exc)) from None
        if len(set(self.clips)) != len(self.clips):
            raise BenchConfigError(f"clips: each clip at most once, got {list(self.clips)}")


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
    """One variant of ``splitnn.toml`` (``[full]`` or ``[quick]``)."""

    sections: Tuple[str, ...] = field(metadata=spec(choices=SECTION_NAMES, non_empty=True))
    epochs: int = field(metadata=spec(low=1))
    batch_size: int = field(metadata=spec(low=1))
    seeds: int = field(metadata=spec(low=1))
    # Seeds the DP noise of the VFL-AFE (Table 2) and DP-SGD (dp_vfl) cells: an experiment setting
    # (None, the key left out: OS-entropy noise, as deployed).
    noise_seed: Optional[int] = field(metadata=optional_field(low=0))
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

    def run_settings(self) -> Dict[str, Any]:
        """The settings dict the cells read (and ``results.json`` records under ``"config"``)."""
        kinds = {"tabular": self.tabular, "image": self.image}
        return dict(
            t=self.afe.t, epsilon={k: v.epsilon for k, v in kinds.items()}, calibration=self.afe.calibration,
            kl_weight=self.afe.kl_weight, contrastive_weight=self.afe.contrastive_weight,
            confidence_threshold={k: v.confidence_threshold for k, v in kinds.items()},
            lr={k: v.lr for k, v in kinds.items()},
            epochs=self.epochs, batch_size=self.batch_size, seeds=self.seeds,
            adult_rows=(self.adult_max_train, self.adult_max_test),
            mnist_rows=(self.mnist_max_train, self.mnist_max_test), timing_rows=self.timing_rows,
            timing_batch_size=self.timing_batch_size, timing_epochs=self.timing_epochs,
            timing_rounds=self.timing_rounds,
            dp_vfl=dict(datasets=self.dp_vfl.datasets, owners=self.dp_vfl.owners, epsilons=self.dp_vfl.epsilons,
                        clips=self.dp_vfl.clips, epochs=self.dp_vfl.epochs, batch_size=self.dp_vfl.batch_size,
                        lr=self.dp_vfl.lr, max_rows=self.dp_vfl.max_rows),
            fedpass=dict(settings=self.fedpass.settings, epochs=self.fedpass.epochs,
                         max_rows=self.fedpass.max_rows),
            rescale=dict(seeds=self.rescale.seeds), sections=self.sections, noise_seed=self.noise_seed)


def load_grid(quick: bool, path: Optional[Path] = None, *, seeds: Optional[int] = None) -> SplitnnGrid:
    """``[quick]`` or ``[full]`` of the shipped ``splitnn.toml`` or of the user's copy ``path``;
    ``seeds`` (``--seeds``) sets the seeds of both Table 2 and the rescale section."""
    grid = load_variant(SplitnnGrid, "splitnn", "quick" if quick else "full", path)
    if seeds is not None:
        grid = with_overrides(grid, "command line (--seeds)", seeds=seeds,
                              rescale=dataclasses.replace(grid.rescale, seeds=seeds))
    return grid


class SplitnnExperiment(Experiment):
    name = "splitnn"
    quick_help = "the [quick] grid: subsets and 3 epochs (< 5 minutes on 2 cores)"
    versions = ("torch", "numpy", "dp-accounting")
    # --seed seeds the DP noise only (the data splits, batch orders and models are seeded by the
    # repetitions 0..seeds-1): the grid's noise_seed.
    seed_key = "noise_seed"
    seed_help = ("seed the DP noise of VFL-AFE and DP-SGD through explicitly seeded generators, so runs reproduce "
                 "(an experiment setting, not for deployment; sets the grid's noise_seed; default: OS entropy)")
    overrides = (
        Override("--sections", "sections", comma_list(str),
                 f"comma-separated sections to run (known: {', '.join(SECTION_NAMES)})"),
        Override("--seeds", "seeds", int,
                 "seeds per Table 2 cell and per rescale cell (the configuration's: 1, and 2 for rescale in the "
                 "full run)"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=None,
                            help="folder with the real datasets (or $VFLSEC_DATA)")
        parser.add_argument("--device", default=None, help="torch device (default: CUDA when available, else CPU)")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> SplitnnGrid:
        return load_grid(quick, path, seeds=options.get("seeds"))

    def check(self, grid: Any, options: Dict[str, Any]) -> None:
        from ....splitnn.estimator import resolve_device

        try:
            resolve_device(options.get("device"))
        except (TypeError, ValueError) as exc:
            raise BenchConfigError(f"--device: {exc} -- give an available torch device (e.g. --device cpu) "
                                   "or leave the flag out") from None

    def record_grid(self, grid: Any) -> Dict[str, Any]:
        return grid.run_settings()

    def run_cells(self, grid: Any, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        run_cells(grid, options, result)

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = SplitnnExperiment()
