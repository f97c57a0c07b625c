"""Benchmark of the C++ kernels against the real alternatives, in one run.

``vflsec bench kernels [--quick] [--out DIR] [--device cpu|cuda]`` (or ``python benchmarks/kernels.py``)
times pairwise distances, fused distance statistics, fuzzy c-means and Gaussian
noise against torch, scipy, scikit-learn, faiss, scikit-fuzzy and numpy, prints
markdown tables of medians and ratios, and writes ``DIR/kernels.json`` and
``DIR/kernels.png``.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
from tqdm import tqdm

from .. import get_num_threads, kernels, set_num_threads
from .common import machine_info, markdown_table, median_time, package_versions, pyplot, write_json, git_revision

THREADS = 2


def _optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def _max_rel_error(approx: np.ndarray, exact: np.ndarray) -> float:
    """Largest |approx - exact| / exact over off-diagonal-safe entries (exact > 0)."""
    approx = np.asarray(approx, dtype=np.float64)
    mask = exact > 0
    return float(np.max(np.abs(approx[mask] - exact[mask]) / exact[mask])) if mask.any() else 0.0


def _diag_max(D: np.ndarray) -> float:
    return float(np.max(np.abs(np.diag(np.asarray(D, dtype=np.float64)))))


class _Recorder:
    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []

    def add(self, kernel: str, case: str, method: str, seconds: Optional[float], **extra: Any) -> None:
        self.rows.append({"kernel": kernel, "case": case, "method": method, "seconds": seconds, **extra})


# ---------------------------------------------------------------------------
# pairwise distances
# ---------------------------------------------------------------------------

def bench_pairwise(rec: _Recorder, sizes: List[int], n: int, repeats: int, accuracy_rows: int) -> None:
    torch = _optional("torch")
    faiss = _optional("faiss")
    from scipy.spatial.distance import cdist
    from sklearn.metrics import pairwise_distances as sk_pairwise

    rng = np.random.default_rng(0)
    for d in sizes:
        # Offset data: where the GEMM expansion loses precision.
        X = (rng.standard_normal((n, d)) + 100.0).astype(np.float32)
        Y_other = (rng.standard_normal((n, d)) + 100.0).astype(np.float32)
        # Y = a copy of X (the diagonal must be exactly zero; vflsec detects equal
        # operands and computes each pair once) and an independent Y (general path).
        for label, Y in (("Y=X", X.copy()), ("Y independent", Y_other)):
            case = f"float32 n=m={n} d={d} {label}"
            exact = cdist(X[:accuracy_rows].astype(np.float64), Y.astype(np.float64))
            methods: Dict[str, Callable[[], Any]] = {
                "vflsec": lambda: kernels.pairwise_distances(X, Y),
                "scipy.cdist": lambda: cdist(X, Y),
                "sklearn.pairwise_distances": lambda: sk_pairwise(X, Y),
            }
            if torch is not None:
                Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
                methods["torch.cdist"] = lambda: torch.cdist(Xt, Yt)
            if faiss is not None:
                def faiss_dist():
                    out = faiss.pairwise_distances(X, Y)  # squared L2
                    np.sqrt(np.maximum(out, 0, out=out), out=out)
                    return out
                methods["faiss.pairwise_distances+sqrt"] = faiss_dist
            for name, fn in methods.items():
                result = fn()
                result = result.numpy() if not isinstance(result, np.ndarray) else result
                err = _max_rel_error(np.asarray(result)[:accuracy_rows], exact)
                extra = {"max_rel_error": err}
                if label == "Y=X":
                    extra["max_abs_diagonal"] = _diag_max(np.asarray(result)[:accuracy_rows, :accuracy_rows])
                del result
                secs = median_time(fn, repeats=repeats, warmup=1)
                rec.add("pairwise_distances", case, name, secs, **extra)


# ---------------------------------------------------------------------------
# pairwise distance statistics
# ---------------------------------------------------------------------------

_STATS_CHILD = r"""
import json, resource, sys, time
import numpy as np
import vflsec
from vflsec import kernels
n, d = int(sys.argv[1]), int(sys.argv[2])
vflsec.set_num_threads(int(sys.argv[3]))
X = np.random.default_rng(1).standard_normal((n, d))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
s = kernels.pairwise_distance_stats(X)
secs = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": secs, "extra_peak_mib": (after - before) / 1024.0, "count": s.count, "mean": s.mean, "std": s.std}))
"""


def bench_stats(rec: _Recorder, n: int, d: int, repeats: int, big_n: Optional[int]) -> None:
    from scipy.spatial.distance import pdist

    X = np.random.default_rng(1).standard_normal((n, d))
    case = f"float64 n={n} d={d}"

    def scipy_stats():
        v = pdist(X)
        return v.mean(), v.std(), v.min(), v.max()

    ours = kernels.pairwise_distance_stats(X)
    ref = scipy_stats()
    rel = max(abs(ours.mean - ref[0]) / ref[0], abs(ours.std - ref[1]) / ref[1])
    rec.add("pairwise_distance_stats", case, "vflsec",
            median_time(lambda: kernels.pairwise_distance_stats(X), repeats=repeats), max_rel_error=rel)
    rec.add("pairwise_distance_stats", case, "scipy.pdist+numpy", median_time(scipy_stats, repeats=repeats))
    if big_n:
        # A child process, so the peak-RSS delta belongs to the kernel alone.
        out = subprocess.run([sys.executable, "-c", _STATS_CHILD, str(big_n), str(d), str(THREADS)],
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rec.add("pairwise_distance_stats", f"float64 n={big_n} d={d}", "vflsec", res["seconds"],
                extra_peak_mib=res["extra_peak_mib"], pairs=res["count"])


# ---------------------------------------------------------------------------
# fuzzy c-means
# ---------------------------------------------------------------------------

def bench_fcm(rec: _Recorder, n: int, d: int, c: int, iters: int) -> None:
    skfuzzy = _optional("skfuzzy")
    from ..kernels._reference import numpy_fuzzy_cmeans

    rng = np.random.default_rng(2)
    centers = rng.standard_normal((c, d)) * 4
    X = centers[rng.integers(0, c, n)] + rng.standard_normal((n, d))
    u0 = rng.random((n, c))
    u0 /= u0.sum(axis=1, keepdims=True)
    case = f"float64 n={n} d={d} c={c}"
    tiny = 1e-300  # never reached: every method runs exactly `iters` iterations

    def per_iter(fn: Callable[[], int]) -> float:
        t0 = time.perf_counter()
        done = fn()
        return (time.perf_counter() - t0) / done

    def ours() -> int:
        return kernels.fuzzy_cmeans(X, c, m=2.0, max_iter=iters, tol=tiny, init=u0).n_iter

    def numpy_ref() -> int:
        numpy_fuzzy_cmeans(X, c, 2.0, iters, tiny, u0)
        return iters

    ours()  # warm-up
    rec.add("fuzzy_cmeans", case, "vflsec", min(per_iter(ours) for _ in range(3)), unit="s/iter")
    rec.add("fuzzy_cmeans", case, "numpy (vectorized)", min(per_iter(numpy_ref) for _ in range(2)), unit="s/iter")
    if skfuzzy is not None:
        def sk() -> int:
            *_, p, _fpc = skfuzzy.cluster.cmeans(X.T, c, 2.0, error=0.0, maxiter=iters, init=u0.T)
            return p
        rec.add("fuzzy_cmeans", case, "scikit-fuzzy", per_iter(sk), unit="s/iter")


# ---------------------------------------------------------------------------
# Gaussian noise
# ---------------------------------------------------------------------------

def bench_noise(rec: _Recorder, n: int, repeats: int, n_discrete: int) -> None:
    torch = _optional("torch")
    from ..kernels import NoiseGenerator

    case = f"float64 n={n}"
    secure = NoiseGenerator()
    seeded = NoiseGenerator(seed=0)
    for threads in (1, THREADS):
        set_num_threads(threads)
        rec.add("gaussian_noise", case, f"vflsec secure ChaCha20 ({threads} thr)",
                median_time(lambda: kernels.gaussian_noise(n, generator=secure), repeats=repeats), threads=threads)
        rec.add("gaussian_noise", case, f"vflsec seeded ({threads} thr)",
                median_time(lambda: kernels.gaussian_noise(n, generator=seeded), repeats=repeats), threads=threads)
    set_num_threads(THREADS)
    rng = np.random.default_rng()
    rec.add("gaussian_noise", case, "numpy default_rng.standard_normal (1 thr)",
            median_time(lambda: rng.standard_normal(n), repeats=repeats), threads=1)
    if torch is not None:
        for threads in (1, THREADS):
            torch.set_num_threads(threads)
            rec.add("gaussian_noise", case, f"torch.randn ({threads} thr)",
                    median_time(lambda: torch.randn(n, dtype=torch.float64), repeats=repeats), threads=threads)
        torch.set_num_threads(THREADS)
    rec.add("discrete_gaussian", f"n={n_discrete} sigma=10", "vflsec exact (CKS 2020)",
            median_time(lambda: kernels.discrete_gaussian(n_discrete, 10.0, generator=secure), repeats=3, warmup=0))


# ---------------------------------------------------------------------------
# summary, output
# ---------------------------------------------------------------------------

def _summaries(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Per case: vflsec's time and its speed-up over each alternative (>1: vflsec faster)."""
    out = []
    cases: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in rows:
        cases.setdefault((r["kernel"], r["case"]), []).append(r)
    for (kernel, case), rs in cases.items():
        ours = [r for r in rs if r["method"].startswith("vflsec")]
        others = [r for r in rs if not r["method"].startswith("vflsec")]
        if not ours or not others:
            continue
        best_ours = min(ours, key=lambda r: r["seconds"])
        best_other = min(others, key=lambda r: r["seconds"])
        out.append({
            "kernel": kernel, "case": case,
            "vflsec_method": best_ours["method"], "vflsec_seconds": best_ours["seconds"],
            "fastest_alternative": best_other["method"], "alternative_seconds": best_other["seconds"],
            "speedup_vs_fastest": best_other["seconds"] / best_ours["seconds"],
            "speedup_vs_each": {r["method"]: r["seconds"] / best_ours["seconds"] for r in others},
        })
    return out


def _report(rows: List[Dict[str, Any]], summary: List[Dict[str, Any]]) -> str:
    parts = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        kr = [r for r in rows if r["kernel"] == kernel]
        extra_keys = [k for k in ("max_rel_error", "max_abs_diagonal", "extra_peak_mib", "unit") if any(k in r for r in kr)]
        parts.append(f"### {kernel}\n")
        headers = ["case", "method", "median s"] + extra_keys
        parts.append(markdown_table(headers, [[r["case"], r["method"], r["seconds"]] + [r.get(k) for k in extra_keys] for r in kr]))
        parts.append("")
    parts.append("### speed-up of vflsec (time of alternative / time of vflsec; > 1 means vflsec is faster)\n")
    parts.append(markdown_table(
        ["kernel", "case", "vflsec s", "fastest alternative", "its s", "speed-up"],
        [[s["kernel"], s["case"], s["vflsec_seconds"], s["fastest_alternative"], s["alternative_seconds"],
          s["speedup_vs_fastest"]] for s in summary]))
    return "\n".join(parts)


def _plot(summary: List[Dict[str, Any]], path: Path) -> None:
    plt = pyplot()
    labels, values, colors = [], [], []
    for s in summary:
        for method, ratio in s["speedup_vs_each"].items():
            labels.append(f"{s['kernel']} | {s['case']}\nvs {method}")
            values.append(ratio)
            colors.append("tab:green" if ratio >= 1 else "tab:red")
    fig, ax = plt.subplots(figsize=(10, 0.42 * len(labels) + 1.5))
    ax.barh(range(len(labels)), values, color=colors)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.axvline(1.0, color="black", lw=1)
    ax.set_xscale("log")
    ax.set_xlabel("speed-up of vflsec (alternative time / vflsec time, log scale)")
    ax.invert_yaxis()
    ax.set_title("vflsec kernels vs alternatives (green: vflsec faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(quick: bool = False, out: Optional[Path] = None, device: str = "cpu") -> Dict[str, Any]:
    out = Path(out) if out is not None else Path("bench-out") / "kernels"
    if device == "cuda":
        from . import kernels_cuda

        return kernels_cuda.run(quick, out, _Recorder, _summaries, _report, _plot)
    if device != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    previous_threads = get_num_threads()
    set_num_threads(THREADS)
    torch = _optional("torch")
    if torch is not None:
        torch.set_num_threads(THREADS)
    if quick:
        config = dict(pairwise_n=1000, pairwise_d=[16, 64], stats_n=2000, stats_d=64, stats_big_n=None,
                      fcm_n=20000, fcm_d=16, fcm_c=10, fcm_iters=5, noise_n=10**6, discrete_n=1000, repeats=3)
    else:
        config = dict(pairwise_n=4000, pairwise_d=[16, 64, 256], stats_n=10000, stats_d=64, stats_big_n=100000,
                      fcm_n=100000, fcm_d=16, fcm_c=10, fcm_iters=10, noise_n=10**7, discrete_n=5000, repeats=7)
    config["threads"] = THREADS
    rec = _Recorder()
    steps = [
        ("pairwise distances", lambda: bench_pairwise(rec, config["pairwise_d"], config["pairwise_n"],
                                                      config["repeats"], accuracy_rows=min(500, config["pairwise_n"]))),
        ("distance statistics", lambda: bench_stats(rec, config["stats_n"], config["stats_d"], config["repeats"],
                                                    config["stats_big_n"])),
        ("fuzzy c-means", lambda: bench_fcm(rec, config["fcm_n"], config["fcm_d"], config["fcm_c"], config["fcm_iters"])),
        ("gaussian noise", lambda: bench_noise(rec, config["noise_n"], config["repeats"], config["discrete_n"])),
    ]
    try:
        for _name, step in tqdm(steps, desc="bench kernels", unit="kernel"):
            step()
    finally:
        set_num_threads(previous_threads)
    summary = _summaries(rec.rows)
    result = {
        "machine": machine_info(),
        "versions": package_versions(["vflsec", "numpy", "scipy", "scikit-learn", "torch", "faiss-cpu", "scikit-fuzzy"]),
        "git": git_revision(),
        "config": config,
        "results": rec.rows,
        "summary": summary,
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "kernels.json", result)
    report = _report(rec.rows, summary)
    (out / "kernels.md").write_text(
        f"# vflsec kernel benchmark\n\nMachine: {result['machine']['cpu']}, {result['machine']['logical_cores']} "
        f"logical cores, {THREADS} threads for every multi-threaded library.\n\n{report}\n")
    _plot(summary, out / "kernels.png")
    print(report)
    print(f"\nwrote {out / 'kernels.json'}, {out / 'kernels.md'}, {out / 'kernels.png'}")
    return result


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="vflsec bench kernels", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    run(quick=args.quick, out=args.out, device=args.device)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "kernels", help="output directory")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: the C++ kernels against CPU libraries; cuda: the CUDA kernels against torch on "
                             "the same GPU (writes kernels-cuda.*; exits with a message where there is no GPU)")
