"""``vflsec bench he``'s grid: one variant of ``configs/he.toml`` as a typed, validated record."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from ..config import BenchConfigError, load_variant, spec

__all__ = ["HEGrid", "load_grid"]


@dataclass(frozen=True)
class HEGrid:
    """One variant of ``configs/he.toml`` (``[full]`` or ``[quick]``): sizes and sampling of every row."""

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

    def __post_init__(self) -> None:
        if any(bits % 2 for bits in self.key_bits):
            raise BenchConfigError(f"key_bits must be even integers >= 2048, got {list(self.key_bits)}")

    def sizes(self) -> Dict[str, Any]:
        """The sizes as ``results.json`` records them (``key_bits`` a list), without the seed."""
        out = asdict(self)
        del out["seed"]
        out["key_bits"] = list(self.key_bits)
        return out


def load_grid(quick: bool, path: Optional[Path] = None) -> HEGrid:
    """``[quick]`` or ``[full]`` of the shipped ``he.toml`` or of the user's copy ``path``."""
    return load_variant(HEGrid, "he", "quick" if quick else "full", path)
