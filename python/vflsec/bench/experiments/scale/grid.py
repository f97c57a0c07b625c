"""The grid of ``vflsec bench scale`` (``scale.toml``) and its :class:`~vflsec.bench.experiment.Experiment`."""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...config import load_variant, spec
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["EXPERIMENT", "ScaleExperiment", "ScaleGrid", "load_grid"]

ESTIMATOR_METHODS = ("plain", "hdp", "ckks", "paillier")
PARTY_METHODS = ("plain", "hdp")
#: what ``vflsec bench scale`` measures, in the order it runs them (``--stages``)
STAGES = ("psi", "estimator", "party", "ray", "ray_party")


@dataclass(frozen=True)
class ScaleGrid:
    """One variant of ``scale.toml`` (``[full]`` or ``[quick]``)."""

    seed: int = field(metadata=spec(low=0))
    features_per_party: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    batch_size: int = field(metadata=spec(low=1))
    lr: float = field(metadata=spec(low=0, low_inclusive=False))
    hdp_epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    key_bits: int = field(metadata=spec(low=1024))
    estimator_methods: Tuple[str, ...] = field(metadata=spec(choices=ESTIMATOR_METHODS))
    estimator_sizes: Tuple[int, ...] = field(metadata=spec(low=100))
    wide_features_per_party: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    wide_sizes: Tuple[int, ...] = field(metadata=spec(low=100))
    paillier_max_rows: int = field(metadata=spec(low=1))
    ckks_max_rows: int = field(metadata=spec(low=1))
    party_methods: Tuple[str, ...] = field(metadata=spec(choices=PARTY_METHODS))
    party_sizes: Tuple[int, ...] = field(metadata=spec(low=100))
    psi_sizes: Tuple[int, ...] = field(metadata=spec(low=10))
    psi_sequential_max: int = field(metadata=spec(low=0))
    psi_overlap: float = field(metadata=spec(low=0, high=1))
    ray_rows: int = field(metadata=spec(low=0))
    ray_batch_size: int = field(metadata=spec(low=1))
    ray_party_rows: int = field(metadata=spec(low=0))
    sharded_party_rows: int = field(metadata=spec(low=0))
    party_shard_rows: int = field(metadata=spec(low=1))

    def __post_init__(self) -> None:
        for key in ("features_per_party", "wide_features_per_party"):
            if len(getattr(self, key)) < 2:
                raise BenchConfigError(f"{key} needs an active and at least one passive party, got "
                                       f"{list(getattr(self, key))}")
        if self.sharded_party_rows and self.party_shard_rows < self.batch_size:
            raise BenchConfigError(f"party_shard_rows ({self.party_shard_rows}) must be at least batch_size "
                                   f"({self.batch_size}): a shard holds at least one batch")


def load_grid(quick: bool, path: Optional[Path] = None) -> ScaleGrid:
    return load_variant(ScaleGrid, "scale", "quick" if quick else "full", path)


class ScaleExperiment(Experiment):
    name = "scale"
    versions = ("numpy", "phe", "gmpy2", "tenseal", "ray", "openmined-psi", "pyarrow")
    seed_key = "seed"
    seed_help = "seed of the synthetic data and every job (HDP noise: seed + 1, labelled seeded)"
    overrides = (
        Override("--estimator-sizes", "estimator_sizes", comma_list(int), "rows for the estimator cells",
                 "N,N,..."),
        Override("--party-sizes", "party_sizes", comma_list(int), "rows per party for the vflsec party cells",
                 "N,N,..."),
        Override("--psi-sizes", "psi_sizes", comma_list(int), "IDs per party for the PSI cells", "N,N,..."),
        Override("--ray-rows", "ray_rows", int, "rows of the Paillier epoch through Ray (0: no Ray cells)", "N"),
        Override("--ray-party-rows", "ray_party_rows", int, "rows per party of the Paillier `vflsec party` job on "
                 "the local pools and through Ray (0: none)", "N"),
        Override("--sharded-party-rows", "sharded_party_rows", int, "rows per party of the plain `vflsec party` job "
                 "that streams Parquet shards (0: none)", "N"),
    )

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--stages", type=comma_list(str), default=None, metavar="S,S,...",
                            help=f"run only these stages, in the usual order ({', '.join(STAGES)}; default: "
                                 "all): e.g. the Ray stages on their own, as a run of their own")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> ScaleGrid:
        return load_grid(quick, path)

    def stages(self, options: Dict[str, Any]) -> Tuple[str, ...]:
        chosen = options.get("stages") or STAGES
        unknown = [s for s in chosen if s not in STAGES]
        if unknown:
            raise BenchConfigError(f"--stages: unknown stage {unknown[0]!r} -- choose from {', '.join(STAGES)}")
        return tuple(s for s in STAGES if s in chosen)

    def check(self, grid: ScaleGrid, options: Dict[str, Any]) -> None:
        """Every library a cell needs imports, before any cell runs."""
        from ....errors import require_extra

        self.stages(options)
        require_extra("private_set_intersection.python", "grpc")
        if "paillier" in grid.estimator_methods or grid.ray_rows or grid.ray_party_rows:
            require_extra("phe", "gmpy2")
        if "ckks" in grid.estimator_methods:
            require_extra("tenseal")
        if grid.ray_rows or grid.ray_party_rows:
            require_extra("ray")

    def run_cells(self, grid: ScaleGrid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        result["stages"] = list(self.stages(options))
        run_cells(grid, result, stages=self.stages(options))

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = ScaleExperiment()
