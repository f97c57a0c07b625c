"""The grids of ``vflsec bench kernels`` (``kernels.toml``) and its :class:`~vflsec.bench.experiment.Experiment`.

One file, two kinds of grid: ``[full]``/``[quick]`` (:class:`KernelsGrid`, the C++
kernels against CPU libraries) and ``[cuda.full]``/``[cuda.quick]``
(:class:`CudaKernelsGrid`, the CUDA kernels against torch on the same GPU),
chosen by ``--device``.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

from ...config import load_variant, optional_field, spec
from ...errors import BenchConfigError
from ...experiment import Experiment

__all__ = ["CUDA_RESULTS", "CPU_RESULTS", "EXPERIMENT", "CudaKernelsGrid", "KernelsExperiment", "KernelsGrid",
           "load_grid"]

CPU_RESULTS = "kernels.json"
CUDA_RESULTS = "kernels-cuda.json"


@dataclass(frozen=True)
class KernelsGrid:
    """``[full]`` or ``[quick]`` of ``kernels.toml``: the size of every timed CPU case."""

    seed: int = field(metadata=spec(low=0))
    threads: int = field(metadata=spec(low=1))
    repeats: int = field(metadata=spec(low=1))
    pairwise_n: int = field(metadata=spec(low=2))
    pairwise_d: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    pairwise_accuracy_rows: int = field(metadata=spec(low=1))
    stats_n: int = field(metadata=spec(low=2))
    stats_d: int = field(metadata=spec(low=1))
    stats_big_n: Optional[int] = field(metadata=optional_field(low=2))
    fcm_n: int = field(metadata=spec(low=2))
    fcm_d: int = field(metadata=spec(low=1))
    fcm_c: int = field(metadata=spec(low=2))
    fcm_iters: int = field(metadata=spec(low=1))
    noise_n: int = field(metadata=spec(low=1))
    release_n: int = field(metadata=spec(low=1))
    release_epsilon: float = field(metadata=spec(low=0, low_inclusive=False))
    release_delta: float = field(metadata=spec(low=0, low_inclusive=False, high=1))
    cks_n: int = field(metadata=spec(low=1))
    python_n: int = field(metadata=spec(low=1))
    baseline_n: int = field(metadata=spec(low=1))

    def as_dict(self) -> Dict[str, Any]:
        """The grid as recorded in ``kernels.json``'s ``"config"``."""
        out = asdict(self)
        out["pairwise_d"] = list(self.pairwise_d)
        return out


@dataclass(frozen=True)
class CudaKernelsGrid:
    """``[cuda.full]`` or ``[cuda.quick]`` of ``kernels.toml``: the GPU cases' sizes."""

    seed: int = field(metadata=spec(low=0))
    repeats: int = field(metadata=spec(low=1))
    pairwise_n: int = field(metadata=spec(low=2))
    pairwise_d: Tuple[int, ...] = field(metadata=spec(low=1, non_empty=True))
    pairwise_accuracy_rows: int = field(metadata=spec(low=1))
    stats_n: int = field(metadata=spec(low=2))
    stats_d: int = field(metadata=spec(low=1))
    stats_big_n: Optional[int] = field(metadata=optional_field(low=2))
    fcm_n: int = field(metadata=spec(low=2))
    fcm_d: int = field(metadata=spec(low=1))
    fcm_c: int = field(metadata=spec(low=2))
    fcm_iters: int = field(metadata=spec(low=1))
    noise_n: int = field(metadata=spec(low=1))

    def as_dict(self) -> Dict[str, Any]:
        """The grid as recorded in ``kernels-cuda.json``'s ``"config"``."""
        out = asdict(self)
        out["pairwise_d"] = list(self.pairwise_d)
        return out


Grid = Union[KernelsGrid, CudaKernelsGrid]

# Every table of kernels.toml and its class: a user's copy is validated whole.
_VARIANTS = {"full": KernelsGrid, "quick": KernelsGrid, "cuda.full": CudaKernelsGrid, "cuda.quick": CudaKernelsGrid}


def load_grid(quick: bool, path: Optional[Path] = None, device: str = "cpu") -> Grid:
    """The grid of the shipped ``kernels.toml`` or of the user's copy ``path``: ``[quick]``
    or ``[full]`` (a :class:`KernelsGrid`), ``[cuda.quick]`` or ``[cuda.full]`` for
    ``device="cuda"`` (a :class:`CudaKernelsGrid`)."""
    if device not in ("cpu", "cuda"):
        raise BenchConfigError(f"--device must be cpu or cuda, got {device!r}")
    variant = ("cuda." if device == "cuda" else "") + ("quick" if quick else "full")
    grid: Grid = load_variant(_VARIANTS[variant], "kernels", variant, path, variants=_VARIANTS)
    return grid


def require_gpu() -> Any:
    """torch with a usable CUDA device and vflsec's CUDA kernels, or a one-line
    :class:`~vflsec.errors.CommandError` saying which is missing."""
    from .... import cuda_available
    from ....errors import CommandError, require_extra

    require_extra("torch")
    import torch

    if not torch.cuda.is_available():
        raise CommandError(f"--device cuda: torch sees no CUDA device (torch {torch.__version__}, built with CUDA "
                           f"{torch.version.cuda})", "run it on a GPU machine, or leave out --device cuda")
    if not cuda_available():
        raise CommandError("--device cuda: this vflsec build has no CUDA kernels",
                           "reinstall with pip install . -Ccmake.define.VFLSEC_CUDA=ON")
    return torch


class KernelsExperiment(Experiment):
    """The C++ kernels (pairwise distances, their statistics, fuzzy c-means, Gaussian
    noise, the secure DP release) against the libraries a user would otherwise
    call; with ``--device cuda``, the CUDA kernels against torch on the same GPU."""

    name = "kernels"
    results_file = CPU_RESULTS
    quick_help = "small sizes (about a minute): the [quick] grid ([cuda.quick] with --device cuda)"
    versions = ("numpy", "scipy", "scikit-learn", "torch", "faiss-cpu", "scikit-fuzzy", "opendp", "diffprivlib")
    seed_key = "seed"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                            help=f"cpu: the C++ kernels against CPU libraries ({CPU_RESULTS}, .md, .png); cuda: the "
                                 f"CUDA kernels against torch on the same GPU, grid [cuda.full]/[cuda.quick] "
                                 f"({CUDA_RESULTS}, .md, .png; a one-line error where there is no GPU); with "
                                 f"--rerender, which of the two results files to render")

    def load_grid(self, *, quick: bool, path: Optional[Path], options: Dict[str, Any]) -> Grid:
        return load_grid(quick, path, device=options.get("device") or "cpu")

    def check(self, grid: Grid, options: Dict[str, Any]) -> None:
        """A GPU run needs a GPU, CUDA torch and a CUDA build of vflsec, before anything is timed."""
        if isinstance(grid, CudaKernelsGrid):
            require_gpu()

    def run_cells(self, grid: Grid, options: Dict[str, Any], result: Dict[str, Any]) -> None:
        if isinstance(grid, CudaKernelsGrid):
            from .cuda import run_cells as run_cuda_cells

            run_cuda_cells(grid, result)
        else:
            from .cells import run_cells

            run_cells(grid, result)

    def render(self, result: Dict[str, Any], out: Path) -> List[str]:
        from .report import render

        return render(result, out)

    def results_name(self, options: Dict[str, Any]) -> str:
        """``kernels.json``, or ``kernels-cuda.json`` with ``--device cuda``."""
        if options.get("device") == "cuda":
            return CUDA_RESULTS
        folder = options.get("rerender")
        if folder is not None and not (Path(folder) / CPU_RESULTS).exists() and (Path(folder) / CUDA_RESULTS).exists():
            raise BenchConfigError(f"--rerender {folder}: it has {CUDA_RESULTS} (a GPU run) but no {CPU_RESULTS} -- "
                                   f"add --device cuda to render the GPU run")
        return CPU_RESULTS


EXPERIMENT = KernelsExperiment()
