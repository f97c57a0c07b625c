"""``vflsec bench trees``'s grid (one variant of ``trees.toml`` as a typed, validated record)
and the :class:`TreesExperiment` the runner runs."""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...config import load_variant, optional_field, spec
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["DP_PROTECTIONS", "EXPERIMENT", "TreesExperiment", "TreesGrid", "data_folder", "load_grid"]

#: the DP variants a grid may list (rows at every epsilon of the grid)
DP_PROTECTIONS = ("dp", "label_dp")
#: hyper-parameters the "dp" variant may take from the grid's dp_<name> keys
DP_OVERRIDES = ("max_iter", "learning_rate", "max_leaf_nodes", "min_samples_leaf", "l2_regularization")


@dataclass(frozen=True)
class TreesGrid:
    """One variant of ``trees.toml`` (``[full]`` or ``[quick]``): the data, the boosting
    hyper-parameters (shared by every model, centralized and vertical), and the variants."""

    seed: int = field(metadata=spec(low=0))
    datasets: Tuple[str, ...] = field(metadata=spec(non_empty=True))
    split_seeds: int = field(metadata=spec(low=1))
    test_size: float = field(metadata=spec(low=0, low_inclusive=False, high=0.9))
    max_iter: int = field(metadata=spec(low=1))
    learning_rate: float = field(metadata=spec(low=0, low_inclusive=False))
    max_leaf_nodes: int = field(metadata=spec(low=2))
    min_samples_leaf: int = field(metadata=spec(low=1))
    l2_regularization: float = field(metadata=spec(low=0))
    max_bins: int = field(metadata=spec(low=2, high=255))
    secureboost_trees: int = field(metadata=spec(low=0))
    key_bits: int = field(metadata=spec(low=2048))
    dp_protections: Tuple[str, ...] = field(metadata=spec(choices=DP_PROTECTIONS))
    epsilons: Tuple[float, ...] = field(metadata=spec(low=0, low_inclusive=False))
    dp_delta: float = field(metadata=spec(low=0, low_inclusive=False, high=0.5))
    attack_known: int = field(metadata=spec(low=2))
    aggregation_rows: int = field(metadata=spec(low=0))
    aggregation_features: int = field(metadata=spec(low=1))
    aggregation_phe_rows: int = field(metadata=spec(low=1))
    max_depth: Optional[int] = field(default=None, metadata=optional_field(low=1))
    max_rows: Optional[int] = field(default=None, metadata=optional_field(low=20))
    dp_l2_regularization: Optional[float] = field(default=None, metadata=optional_field(low=0))
    dp_max_iter: Optional[int] = field(default=None, metadata=optional_field(low=1))
    dp_learning_rate: Optional[float] = field(default=None, metadata=optional_field(low=0, low_inclusive=False))
    dp_max_leaf_nodes: Optional[int] = field(default=None, metadata=optional_field(low=2))
    dp_min_samples_leaf: Optional[int] = field(default=None, metadata=optional_field(low=1))

    def __post_init__(self) -> None:
        if len(set(self.datasets)) != len(self.datasets):
            raise BenchConfigError(f"datasets lists a name twice: {list(self.datasets)}")
        if self.secureboost_trees > self.max_iter:
            raise BenchConfigError(f"secureboost_trees ({self.secureboost_trees}) must be at most max_iter "
                                   f"({self.max_iter}): its trees are compared with plain's first ones")
        if self.dp_protections and not self.epsilons:
            raise BenchConfigError("dp_protections needs at least one epsilon in epsilons")
        if self.aggregation_phe_rows > max(1, self.aggregation_rows):
            raise BenchConfigError(f"aggregation_phe_rows ({self.aggregation_phe_rows}) must be at most "
                                   f"aggregation_rows ({self.aggregation_rows})")
        if len(set(self.dp_protections)) != len(self.dp_protections):
            raise BenchConfigError(f"dp_protections lists a variant twice: {list(self.dp_protections)}")

    def hyper_parameters(self, protection: str = "plain") -> Dict[str, Any]:
        """The boosting hyper-parameters every model of the run shares (scikit-learn's names); the
        "dp" variant (noisy gradients) takes the grid's ``dp_*`` values where it sets them: its noise
        grows with the rounds and shrinks with a leaf's rows, so fewer, shallower trees with more
        regularisation suit it (DP_OVERRIDES; chosen before the run, not from its results)."""
        params = {"max_iter": self.max_iter, "learning_rate": self.learning_rate,
                  "max_leaf_nodes": self.max_leaf_nodes, "max_depth": self.max_depth,
                  "min_samples_leaf": self.min_samples_leaf, "l2_regularization": self.l2_regularization,
                  "max_bins": self.max_bins}
        if protection == "dp":
            for key in DP_OVERRIDES:
                value = getattr(self, f"dp_{key}")
                if value is not None:
                    params[key] = value
        return params


def load_grid(quick: bool, path: Optional[Path] = None) -> TreesGrid:
    """``[quick]`` or ``[full]`` of the shipped ``trees.toml`` or of the user's copy ``path``."""
    return load_variant(TreesGrid, "trees", "quick" if quick else "full", path)


def data_folder(given: Optional[Path]) -> Optional[Path]:
    """Where the file-backed datasets are read: ``--data-dir``, else ``$VFLSEC_DATA``, else
    ``../shared/datasets`` beside the current folder or beside the source checkout (None: nowhere)."""
    if given is not None:
        return Path(given)
    env = os.environ.get("VFLSEC_DATA")
    if env:
        return Path(env)
    checkout = Path(__file__).resolve().parents[5]
    for candidate in (Path.cwd().parent / "shared" / "datasets", checkout.parent / "shared" / "datasets"):
        if candidate.is_dir():
            return candidate
    return None


class TreesExperiment(Experiment):
    """Vertical gradient boosting, plain / SecureBoost / DP / label-DP, beside the centralized and
    single-party boosters on the same bins, with the passive party's label-leakage attack per variant."""

    name = "trees"
    versions = ("numpy", "scikit-learn", "gmpy2")
    quick_help = ("the [quick] grid: built-in Breast data, 2 splits, 20 trees on 32 bins, SecureBoost on 2 "
                  "trees, DP at 3 epsilons (under a minute on 2 cores)")
    seed_key = "seed"
    seed_help = ("base seed: the train/test splits (seed + k), the attacker's known rows and every DP noise "
                 "draw (seeded generators, labelled in the report as an experiment setting)")
    overrides = (
        Override("--datasets", "datasets", comma_list(str),
                 "comma-separated dataset names (shipped: breast,credit,adult; --quick: breast)", "NAMES"),
        Override("--split-seeds", "split_seeds", int, "train/test splits per dataset", "K"),
        Override("--max-iter", "max_iter", int, "trees per model (every model of the run)", "N"),
        Override("--secureboost-trees", "secureboost_trees", int,
                 "trees SecureBoost is timed on per split (0: no SecureBoost rows)", "K"),
        Override("--epsilons", "epsilons", comma_list(float), "the DP variants' epsilon grid", "E,E,..."),
        Override("--dp-protections", "dp_protections", comma_list(str),
                 "the DP variants (dp, label_dp)", "P,P"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--data-dir", type=Path, default=None, metavar="DIR",
                            help="folder with the real datasets (default: $VFLSEC_DATA, else ../shared/datasets "
                                 "when present); a dataset not found there is reported as skipped")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> TreesGrid:
        return load_grid(quick, path)

    def check(self, grid: TreesGrid, options: Dict[str, Any]) -> None:
        """Known dataset names, the protections this vflsec has, and the libraries the rows need."""
        from ....data import dataset_names, is_dataset_name
        from ....errors import require_extra
        from ....trees import PROTECTIONS

        for name in grid.datasets:
            if not is_dataset_name(name):
                raise BenchConfigError(f"unknown dataset {name!r} -- choose from {', '.join(dataset_names())}, "
                                       "csv:PATH or parquet:PATH (a table with a label column)")
        missing = [p for p in grid.dp_protections if p not in PROTECTIONS]
        if missing:
            raise BenchConfigError(f"protection {missing[0]!r} is not in this vflsec (vflsec.trees.PROTECTIONS: "
                                   f"{', '.join(PROTECTIONS)}) -- leave it out of dp_protections")
        require_extra("matplotlib", *(("gmpy2",) if grid.secureboost_trees else ()),
                      *(("gmpy2", "phe") if grid.aggregation_rows else ()))

    def record_grid(self, grid: TreesGrid) -> Dict[str, Any]:
        from dataclasses import asdict

        out = asdict(grid)
        for key in ("datasets", "dp_protections", "epsilons"):
            out[key] = list(out[key])
        return out

    def run_cells(self, grid: TreesGrid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        run_cells(grid, result, data_dir=data_folder(options.get("data_dir")))

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = TreesExperiment()
