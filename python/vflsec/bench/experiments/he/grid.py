"""``vflsec bench he``'s grid (one variant of ``he.toml`` as a typed, validated
record) and the :class:`HEExperiment` the runner runs."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ...config import load_variant, spec
from ...errors import BenchConfigError
from ...experiment import Experiment, Override, comma_list

__all__ = ["EXPERIMENT", "HEExperiment", "HEGrid", "load_grid"]


@dataclass(frozen=True)
class HEGrid:
    """One variant of ``he.toml`` (``[full]`` or ``[quick]``): the sections that run,
    and the sizes and sampling of every row."""

    seed: int = field(metadata=spec(low=0))
    key_bits: Tuple[int, ...] = field(metadata=spec(low=2048, non_empty=True))
    n_exp: int = field(metadata=spec(low=1))
    n_add: int = field(metadata=spec(low=1))
    n_mul: int = field(metadata=spec(low=1))
    dot_rows: int = field(metadata=spec(low=1))
    dot_cols: int = field(metadata=spec(low=1))
    repeats: int = field(metadata=spec(low=1))
    min_total: float = field(metadata=spec(low=0))
    max_total: float = field(metadata=spec(low=0, low_inclusive=False))
    ckks_rows: int = field(metadata=spec(low=1))
    tenseal_matmul_rows: int = field(metadata=spec(low=1))
    epoch_n: int = field(metadata=spec(low=2))
    epoch_batch: int = field(metadata=spec(low=1))
    ckks: bool     # the CKKS rows (TenSEAL)
    epoch: bool    # one HE-VFL epoch, new path against old

    def __post_init__(self) -> None:
        if any(bits % 2 for bits in self.key_bits):
            raise BenchConfigError(f"key_bits must be even integers >= 2048, got {list(self.key_bits)}")
        if len(set(self.key_bits)) != len(self.key_bits):
            raise BenchConfigError(f"key_bits lists a size twice: {list(self.key_bits)}")

    def sizes(self) -> Dict[str, Any]:
        """The sizes as ``results.json`` records them (``key_bits`` a list), without the seed and the sections."""
        out = asdict(self)
        for key in ("seed", "ckks", "epoch"):
            del out[key]
        out["key_bits"] = list(self.key_bits)
        return out


def load_grid(quick: bool, path: Optional[Path] = None) -> HEGrid:
    """``[quick]`` or ``[full]`` of the shipped ``he.toml`` or of the user's copy ``path``."""
    return load_variant(HEGrid, "he", "quick" if quick else "full", path)


class HEExperiment(Experiment):
    name = "he"
    versions = ("phe", "gmpy2", "sf-heu", "tenseal", "numpy")
    quick_help = ("the [quick] variant: Paillier-2048 only, small sizes (X 400 x 10; epoch n = 2000, batch 400), "
                  "about 2 minutes on 2 cores")
    seed_key = "seed"
    overrides = (
        Override("--key-bits", "key_bits", comma_list(int),
                 "Paillier modulus sizes, comma-separated even integers >= 2048 (e.g. 2048,3072)", "BITS"),
    )

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> HEGrid:
        return load_grid(quick, path)

    def check(self, grid: HEGrid, options: Dict[str, Any]) -> None:
        from ....errors import require_extra

        # phe and gmpy2 for every Paillier row and the epoch, TenSEAL for the CKKS rows, matplotlib for he.png:
        # refused here, before minutes of measurements, not when the report is drawn.
        require_extra("phe", "gmpy2", *(("tenseal",) if grid.ckks else ()), "matplotlib")

    def record_grid(self, grid: HEGrid) -> Dict[str, Any]:
        """The sizes, then the seed and the sections that ran (the keys earlier runs recorded)."""
        return {**grid.sizes(), "seed": grid.seed, "epoch": grid.epoch, "ckks": grid.ckks}

    def run_cells(self, grid: HEGrid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        from .cells import run_cells

        run_cells(grid, result)

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)


EXPERIMENT = HEExperiment()
