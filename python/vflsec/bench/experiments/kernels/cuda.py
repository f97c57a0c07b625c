"""The GPU cells of ``vflsec bench kernels --device cuda``: the CUDA kernels against
torch on the same GPU (torch.cdist, torch.pdist, a vectorised torch fuzzy
c-means, torch.randn). Every timed call ends with torch.cuda.synchronize().

The data of the pairwise, statistics and fuzzy c-means cells come from
``numpy.random.default_rng(seed)``, ``(seed + 1)`` and ``(seed + 2)`` and the
seeded noise generator from ``seed`` (seed 0: the data of every GPU run before
the seed was a grid key). Rows are appended to the results as they are timed.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .... import kernels
from ...common import median_time
from .analysis import summarize
from .cells import Recorder
from .grid import CudaKernelsGrid, require_gpu

__all__ = ["bench_fcm", "bench_noise", "bench_pairwise", "bench_stats", "run_cells"]


def _synced(torch: Any, fn: Callable[..., Any]) -> Callable[[], Any]:
    """``fn()`` then a CUDA synchronize (``fn`` may bind loop variables as defaulted parameters)."""
    def call() -> Any:
        out = fn()
        torch.cuda.synchronize()
        return out
    return call


def bench_pairwise(rec: Any, torch: Any, n: int, sizes: List[int], repeats: int, accuracy_rows: int,
                   seed: int = 0) -> None:
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(seed)
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


def bench_stats(rec: Any, torch: Any, n: int, d: int, repeats: int, big_n: Optional[int], seed: int = 0) -> None:
    X = torch.from_numpy(np.random.default_rng(seed + 1).standard_normal((n, d))).cuda()
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
        Xb = torch.from_numpy(np.random.default_rng(seed + 1).standard_normal((big_n, d))).cuda()
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


def bench_fcm(rec: Any, torch: Any, n: int, d: int, c: int, iters: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed + 2)
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


def bench_noise(rec: Any, torch: Any, n: int, repeats: int, seed: int = 0) -> None:
    from ....kernels import NoiseGenerator

    secure, seeded = NoiseGenerator(), NoiseGenerator(seed=seed)
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


def run_cells(grid: CudaKernelsGrid, result: Dict[str, Any]) -> None:
    """Time every GPU case of ``grid``, appending rows to ``result["results"]`` as they
    finish, then the per-case speed-ups (``"summary"``). The GPU's name goes into the
    results' ``"machine"`` and torch's CUDA version into ``"versions"``."""
    from ...._progress import progress

    torch = require_gpu()
    torch.backends.cuda.matmul.allow_tf32 = False  # the baselines in full float32
    result.setdefault("machine", {})["gpu"] = torch.cuda.get_device_name()
    result.setdefault("versions", {})["torch_cuda"] = torch.version.cuda
    rows: List[Dict[str, Any]] = result.setdefault("results", [])
    rec = Recorder(rows)
    seed = grid.seed
    steps = [
        lambda: bench_pairwise(rec, torch, grid.pairwise_n, list(grid.pairwise_d), grid.repeats,
                               accuracy_rows=min(grid.pairwise_accuracy_rows, grid.pairwise_n), seed=seed),
        lambda: bench_stats(rec, torch, grid.stats_n, grid.stats_d, grid.repeats, grid.stats_big_n, seed=seed),
        lambda: bench_fcm(rec, torch, grid.fcm_n, grid.fcm_d, grid.fcm_c, grid.fcm_iters, seed=seed),
        lambda: bench_noise(rec, torch, grid.noise_n, grid.repeats, seed=seed),
    ]
    for step in progress(steps, desc="bench kernels (cuda)", unit="kernel"):
        step()
    result["summary"] = summarize(rows)
