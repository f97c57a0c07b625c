"""GPU half of ``vflsec bench kernels --device cuda``: the CUDA kernels against
torch on the same GPU (torch.cdist, torch.pdist, a vectorised torch fuzzy
c-means, torch.randn). Every timed call ends with torch.cuda.synchronize().
Writes ``DIR/kernels-cuda.json``, ``.md`` and ``.png``.
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
from tqdm import tqdm

from .. import cuda_available, kernels
from .common import git_revision, machine_info, median_time, package_versions, write_json
from .config import optional_field, spec
from .kernels_report import render_cuda, summarize


def require_gpu() -> Any:
    """torch, or SystemExit with the reason there is nothing to benchmark."""
    try:
        import torch
    except ImportError:
        raise SystemExit("vflsec bench kernels --device cuda: torch is not installed") from None
    if not torch.cuda.is_available():
        raise SystemExit("vflsec bench kernels --device cuda: torch sees no CUDA device "
                         f"(torch {torch.__version__}, built with CUDA {torch.version.cuda}); run it on a GPU machine")
    if not cuda_available():
        raise SystemExit("vflsec bench kernels --device cuda: this vflsec build has no CUDA kernels; "
                         "reinstall with pip install . -Ccmake.define.VFLSEC_CUDA=ON")
    return torch


def _synced(torch: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    """``fn()`` then a CUDA synchronize (``fn`` may bind loop variables as defaulted parameters)."""
    def call() -> Any:
        out = fn()
        torch.cuda.synchronize()
        return out
    return call


def bench_pairwise(rec: Any, torch: Any, n: int, sizes: List[int], repeats: int, accuracy_rows: int) -> None:
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(0)
    for d in sizes:
        X = (rng.standard_normal((n, d)) + 100.0).astype(np.float32)  # offset: where the GEMM expansion cancels
        Xg = torch.from_numpy(X).cuda()
        exact = cdist(X[:accuracy_rows].astype(np.float64), X.astype(np.float64))
        case = f"float32 n=m={n} d={d} Y=X (GPU)"
        methods = {
            "vflsec cuda": lambda Xg=Xg: kernels.pairwise_distances(Xg, Xg),
            "torch.cdist cuda": lambda Xg=Xg: torch.cdist(Xg, Xg),
            "torch.cdist cuda (donot_use_mm)": lambda Xg=Xg: torch.cdist(Xg, Xg,
                                                                          compute_mode="donot_use_mm_for_euclid_dist"),
        }
        for name, fn in methods.items():
            result = fn()[:accuracy_rows].double().cpu().numpy()
            mask = exact > 0
            err = float(np.max(np.abs(result[mask] - exact[mask]) / exact[mask]))
            diag = float(np.max(np.abs(np.diag(result[:, :accuracy_rows]))))
            del result
            rec.add("pairwise_distances", case, name, median_time(_synced(torch, fn), repeats=repeats, warmup=2),
                    max_rel_error=err, max_abs_diagonal=diag)


def bench_stats(rec: Any, torch: Any, n: int, d: int, repeats: int, big_n: Optional[int]) -> None:
    X = torch.from_numpy(np.random.default_rng(1).standard_normal((n, d))).cuda()
    ours = kernels.pairwise_distance_stats(X)

    def torch_stats():
        v = torch.pdist(X)
        return torch.stack([v.mean(), v.std(unbiased=False), v.min(), v.max()]).tolist()

    ref = torch_stats()
    rel = max(abs(ours.mean - ref[0]) / ref[0], abs(ours.std - ref[1]) / ref[1])
    case = f"float64 n={n} d={d} (GPU)"
    rec.add("pairwise_distance_stats", case, "vflsec cuda",
            median_time(lambda: kernels.pairwise_distance_stats(X), repeats=repeats), max_rel_error=rel)
    rec.add("pairwise_distance_stats", case, "torch.pdist+reductions cuda", median_time(torch_stats, repeats=repeats))
    if big_n:
        Xb = torch.from_numpy(np.random.default_rng(1).standard_normal((big_n, d))).cuda()
        rec.add("pairwise_distance_stats", f"float64 n={big_n} d={d} (GPU)", "vflsec cuda",
                median_time(lambda: kernels.pairwise_distance_stats(Xb), repeats=3))


def _torch_fcm(torch: Any, X: Any, u0: Any, iters: int) -> Any:
    """Textbook vectorised fuzzy c-means (m = 2) in torch: the GPU baseline."""
    u = u0
    for _ in range(iters):
        um = u * u
        centers = (um.T @ X) / um.sum(dim=0)[:, None]
        d2 = torch.cdist(X, centers).square().clamp_min(1e-300)
        inv = 1.0 / d2
        u = inv / inv.sum(dim=1, keepdim=True)
    return centers, u


def bench_fcm(rec: Any, torch: Any, n: int, d: int, c: int, iters: int) -> None:
    import time

    rng = np.random.default_rng(2)
    centers = rng.standard_normal((c, d)) * 4
    X = centers[rng.integers(0, c, n)] + rng.standard_normal((n, d))
    u0 = rng.random((n, c))
    u0 /= u0.sum(axis=1, keepdims=True)
    Xg, ug = torch.from_numpy(X).cuda(), torch.from_numpy(u0).cuda()
    case = f"float64 n={n} d={d} c={c} (GPU)"

    def per_iter(fn: Callable[[], int]) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        done = fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / done

    def ours() -> int:
        return kernels.fuzzy_cmeans(Xg, c, m=2.0, max_iter=iters, tol=1e-300, init=ug).n_iter

    def baseline() -> int:
        _torch_fcm(torch, Xg, ug, iters)
        return iters

    ours(), baseline()  # warm-up
    rec.add("fuzzy_cmeans", case, "vflsec cuda", min(per_iter(ours) for _ in range(3)), unit="s/iter")
    rec.add("fuzzy_cmeans", case, "torch vectorised (cdist) cuda", min(per_iter(baseline) for _ in range(3)),
            unit="s/iter")


def bench_noise(rec: Any, torch: Any, n: int, repeats: int) -> None:
    from ..kernels import NoiseGenerator

    secure, seeded = NoiseGenerator(), NoiseGenerator(seed=0)
    for dtype, tdtype in (("float64", torch.float64), ("float32", torch.float32)):
        case = f"{dtype} n={n} (GPU)"
        rec.add("gaussian_noise", case, "vflsec cuda secure ChaCha20", median_time(_synced(
            torch, lambda dtype=dtype: kernels.gaussian_noise(n, dtype=dtype, generator=secure, device="cuda")),
            repeats=repeats))
        rec.add("gaussian_noise", case, "vflsec cuda seeded ChaCha20", median_time(_synced(
            torch, lambda dtype=dtype: kernels.gaussian_noise(n, dtype=dtype, generator=seeded, device="cuda")),
            repeats=repeats))
        rec.add("gaussian_noise", case, "torch.randn cuda (Philox, not cryptographic)", median_time(_synced(
            torch, lambda tdtype=tdtype: torch.randn(n, dtype=tdtype, device="cuda")), repeats=repeats))


@dataclass(frozen=True)
class CudaKernelsGrid:
    """``[cuda.full]`` or ``[cuda.quick]`` of ``configs/kernels.toml``: the GPU cases' sizes."""

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
        out = asdict(self)
        out["pairwise_d"] = list(self.pairwise_d)
        return out


def run(grid: CudaKernelsGrid, out: Path, recorder: Any) -> Dict[str, Any]:
    """Time every GPU case of ``grid`` (rows collected by a ``recorder()``), write
    ``kernels-cuda.json`` and render it."""
    torch = require_gpu()
    torch.backends.cuda.matmul.allow_tf32 = False  # the baselines in full float32
    load_before = os.getloadavg()
    rec = recorder()
    steps = [
        lambda: bench_pairwise(rec, torch, grid.pairwise_n, list(grid.pairwise_d), grid.repeats,
                               accuracy_rows=min(grid.pairwise_accuracy_rows, grid.pairwise_n)),
        lambda: bench_stats(rec, torch, grid.stats_n, grid.stats_d, grid.repeats, grid.stats_big_n),
        lambda: bench_fcm(rec, torch, grid.fcm_n, grid.fcm_d, grid.fcm_c, grid.fcm_iters),
        lambda: bench_noise(rec, torch, grid.noise_n, grid.repeats),
    ]
    for step in tqdm(steps, desc="bench kernels (cuda)", unit="kernel"):
        step()
    machine = machine_info()
    machine["gpu"] = torch.cuda.get_device_name()
    result = {
        "machine": machine,
        "versions": package_versions(["vflsec", "numpy", "scipy", "torch"]) | {"torch_cuda": torch.version.cuda},
        "git": git_revision(),
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "config": grid.as_dict(),
        "results": rec.rows,
        "summary": summarize(rec.rows),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "kernels-cuda.json", result)
    text = render_cuda(result, out)
    print(text)
    print(f"\nwrote {out / 'kernels-cuda.json'}, {out / 'kernels-cuda.md'}, {out / 'kernels-cuda.png'}")
    return result
