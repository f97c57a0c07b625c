"""The encoded-dataset record and where dataset files are found.

Shared by :mod:`.loaders` (Breast, Adult, Credit, synthetic, and the
``load_dataset`` dispatch) and the loaders it dispatches to
(:mod:`.mnist`, :mod:`.regression`), so none of them imports another.
"""
from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["DATA_ENV", "Dataset"]

DATA_ENV = "VFLSEC_DATA"


@dataclass(frozen=True, eq=False)
class Dataset:
    """An encoded tabular dataset.

    ``X``: float64 ``(n, p)``; ``y``: int64 labels (0/1 for ``task="binary"``);
    ``feature_names``: the ``p`` column names; ``attributes``: tuple of
    ``(attribute_name, column_indices)`` in column order, covering every
    column once; ``coef``: the true weights when known (synthetic data).
    """

    X: np.ndarray
    y: np.ndarray
    feature_names: Tuple[str, ...]
    attributes: Tuple[Tuple[str, Tuple[int, ...]], ...]
    name: str
    task: str = "binary"
    coef: Optional[np.ndarray] = None

    @property
    def n_samples(self) -> int:
        return int(self.X.shape[0])

    @property
    def attribute_names(self) -> Tuple[str, ...]:
        return tuple(name for name, _ in self.attributes)


def _one_column_attributes(names: Sequence[str]) -> Tuple[Tuple[str, Tuple[int, ...]], ...]:
    return tuple((name, (j,)) for j, name in enumerate(names))


# --------------------------------------------------------------------- files

def _search_dirs(data_dir: Any) -> List[Path]:
    if data_dir is not None:
        if not isinstance(data_dir, (str, os.PathLike)):
            raise TypeError(f"data_dir must be a path, got {type(data_dir).__name__}")
        return [Path(data_dir)]
    env = os.environ.get(DATA_ENV)
    return [Path(env)] if env else []


def _find_file(dataset: str, subdir: str, basename: str, data_dir: Any) -> Path:
    """First existing file among ``<dir>/<subdir>/<basename>[.gz]`` and ``<dir>/<basename>[.gz]``."""
    dirs = _search_dirs(data_dir)
    tried: List[Path] = []
    for d in dirs:
        for folder in (d / subdir, d):
            for name in (basename + ".gz", basename):
                path = folder / name
                tried.append(path)
                if path.is_file():
                    return path
    where = ("\n  " + "\n  ".join(str(p) for p in tried)) if tried else " nowhere (no directory given)"
    raise FileNotFoundError(
        f"{dataset} dataset: file {basename!r} (or {basename}.gz) not found; looked in:{where}\n"
        f"Pass data_dir= (--data-dir on the command line) or set the {DATA_ENV} environment "
        f"variable to a folder holding {subdir}/{basename}[.gz] or {basename}[.gz]."
    )


def _read_text(path: Path) -> str:
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", newline="") as fh:
            return fh.read()
    return path.read_text(encoding="utf-8")
