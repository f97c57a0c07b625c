"""Benchmark of the C++ kernels against the real alternatives, in one run.

``vflsec bench kernels [--quick] [--out DIR] [--device cpu|cuda]`` (or ``python benchmarks/kernels.py``)
times pairwise distances, fused distance statistics, fuzzy c-means, Gaussian
noise and the secure DP release (``add_gaussian_noise``) against torch, scipy,
scikit-learn, faiss, scikit-fuzzy, numpy and, where they import, OpenDP and
diffprivlib, prints markdown tables of medians and ratios, and writes
``DIR/kernels.json``, ``DIR/kernels.md`` and ``DIR/kernels.png``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
from tqdm import tqdm

from .. import get_num_threads, kernels, set_num_threads
from .common import (git_revision, machine_info, markdown_table, median_cpu_time, median_time, package_versions,
                     pyplot, write_json)

THREADS = 2


def _optional(name: str):
    try:
        return __import__(name)
    except ImportError:
        return None


def _optional_baseline(name: str):
    """An optional comparison library, or None when it is absent or does not import
    (diffprivlib 0.6 fails to import with scikit-learn >= 1.8, for example)."""
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - any import failure means: skip this baseline
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

def bench_pairwise(rec: _Recorder, sizes: List[int], n: int, repeats: int, accuracy_rows: int, seed: int = 0) -> None:
    torch = _optional("torch")
    faiss = _optional("faiss")
    from scipy.spatial.distance import cdist
    from sklearn.metrics import pairwise_distances as sk_pairwise

    rng = np.random.default_rng([seed, 0])
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
X = np.random.default_rng([int(sys.argv[4]), 1]).standard_normal((n, d))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
s = kernels.pairwise_distance_stats(X)
secs = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": secs, "extra_peak_mib": (after - before) / 1024.0, "count": s.count, "mean": s.mean, "std": s.std}))
"""


def bench_stats(rec: _Recorder, n: int, d: int, repeats: int, big_n: Optional[int], seed: int = 0) -> None:
    from scipy.spatial.distance import pdist

    X = np.random.default_rng([seed, 1]).standard_normal((n, d))
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
        out = subprocess.run([sys.executable, "-c", _STATS_CHILD, str(big_n), str(d), str(THREADS), str(seed)],
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rec.add("pairwise_distance_stats", f"float64 n={big_n} d={d}", "vflsec", res["seconds"],
                extra_peak_mib=res["extra_peak_mib"], pairs=res["count"])


# ---------------------------------------------------------------------------
# fuzzy c-means
# ---------------------------------------------------------------------------

def bench_fcm(rec: _Recorder, n: int, d: int, c: int, iters: int, seed: int = 0) -> None:
    skfuzzy = _optional("skfuzzy")
    from ..kernels._reference import numpy_fuzzy_cmeans

    rng = np.random.default_rng([seed, 2])
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

def bench_noise(rec: _Recorder, n: int, repeats: int, seed: int = 0) -> None:
    torch = _optional("torch")
    from ..kernels import NoiseGenerator

    case = f"float64 n={n}"
    secure = NoiseGenerator()
    seeded = NoiseGenerator(seed=seed)
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


# ---------------------------------------------------------------------------
# the DP release: x + N(0, sigma^2) on the lattice, against the alternatives
# ---------------------------------------------------------------------------

RELEASE_EPSILON, RELEASE_DELTA = 1.0, 1e-5
_NUMPY = "numpy default_rng.standard_normal * sigma + x"
_SECURE = "vflsec add_gaussian_noise (secure lattice release)"
_PURE_PYTHON = "pure-Python exact discrete Gaussian (vflsec, CKS 2020)"


def _release_criteria(rows: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The two done-criteria of the secure release, from the rows of one run."""
    one = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("threads") == 1
           and r.get("unit") == "CPU s"}
    per = {r["method"]: r for r in rows if r["kernel"] == "gaussian_release" and r.get("unit") == "CPU s/value"}
    out: Dict[str, Any] = {}
    if _SECURE in one and _NUMPY in one:
        ratio = one[_NUMPY]["seconds"] / one[_SECURE]["seconds"]
        out["vs_numpy_1_thread"] = {"ratio": ratio, "target": 1.0, "met": ratio >= 1.0}
    if _SECURE in per and _PURE_PYTHON in per:
        ratio = per[_PURE_PYTHON]["seconds"] / per[_SECURE]["seconds"]
        out["vs_pure_python_discrete"] = {"ratio": ratio, "target": 1000.0, "met": ratio >= 1000.0}
        multi = [r for r in rows if r["kernel"] == "gaussian_release" and r["method"] == _SECURE
                 and r.get("threads", 1) > 1]
        if multi:  # the release's wall time per value with its threads, against the 1-thread sampler
            per_value = multi[0]["seconds"] / multi[0]["samples"]
            out["vs_pure_python_discrete_threads"] = {"ratio": per[_PURE_PYTHON]["seconds"] / per_value,
                                                      "threads": multi[0]["threads"]}
    return out


def bench_release(rec: _Recorder, n: int, repeats: int, n_cks: int, n_python: int, n_baseline: int,
                  seed: int = 0) -> None:
    """The secure release (vflsec.kernels.add_gaussian_noise) on n float64 values at the
    sigma of (epsilon = 1, delta = 1e-5, sensitivity 1), against plain float x + noise
    (numpy, torch, vflsec's old float path: NOT DP releases) and exact samplers.

    1 thread: CPU time (time.process_time), ratios against numpy in this run. 2
    threads: wall time. Per value: CPU seconds per released value / sample, 1 thread.
    """
    from fractions import Fraction

    from ..dp import gaussian_sigma
    from ..kernels import NoiseGenerator
    from ..kernels import _discrete_gaussian as dg

    torch = _optional("torch")
    sigma = gaussian_sigma(RELEASE_EPSILON, RELEASE_DELTA, 1.0)
    g = kernels.lattice_spacing(sigma)
    s = sigma / g  # the integer noise's scale, in [2^20, 2^21)
    x = np.random.default_rng([seed, 3]).standard_normal(n)
    secure = NoiseGenerator()
    rng = np.random.default_rng()
    params = {"sigma": sigma, "lattice_spacing": g}
    sized = dict(params, samples=n)

    def numpy_release() -> np.ndarray:
        z = rng.standard_normal(n)
        z *= sigma
        z += x
        return z

    methods: Dict[str, Callable[[], Any]] = {
        _SECURE: lambda: kernels.add_gaussian_noise(x, sigma, generator=secure),
        "vflsec float x + noise (INSECURE, not DP)": lambda: secure._add_normal(x, sigma),
    }
    if torch is not None:
        xt = torch.from_numpy(x)

        def torch_release() -> Any:
            return torch.randn(n, dtype=torch.float64).mul_(sigma).add_(xt)

        methods["torch.randn * sigma + x"] = torch_release

    # 1 thread, CPU time; the secure release's rows carry "primary" for the summary.
    case1 = f"float64 n={n}, 1 thread (CPU s)"
    set_num_threads(1)
    if torch is not None:
        torch.set_num_threads(1)
    one: Dict[str, float] = {}
    for name, fn in [(_NUMPY, numpy_release)] + list(methods.items()):
        cpu, wall = median_cpu_time(fn, repeats=repeats, warmup=1)
        one[name] = cpu
        rec.add("gaussian_release", case1, name, cpu, unit="CPU s", wall_s=wall, threads=1,
                values_per_s=n / cpu, vs_numpy=None, primary=name == _SECURE, **sized)
    for r in rec.rows:
        if r["case"] == case1:
            r["vs_numpy"] = one[_NUMPY] / r["seconds"]

    # THREADS threads, wall time (numpy has no threads: its 1-thread wall time for reference)
    case2 = f"float64 n={n}, {THREADS} threads (wall s)"
    set_num_threads(THREADS)
    if torch is not None:
        torch.set_num_threads(THREADS)
    numpy_wall = median_time(numpy_release, repeats=repeats)
    rec.add("gaussian_release", case2, _NUMPY + " (1 thr)", numpy_wall, unit="wall s", threads=1,
            values_per_s=n / numpy_wall, vs_numpy=1.0, **sized)
    for name, fn in methods.items():
        wall = median_time(fn, repeats=repeats)
        rec.add("gaussian_release", case2, name, wall, unit="wall s", threads=THREADS, values_per_s=n / wall,
                vs_numpy=numpy_wall / wall, primary=name == _SECURE, **sized)

    # Per value, 1 thread, CPU time: the exact samplers (the lattice's integer
    # scale s for the integer ones; OpenDP's float mechanism at sigma).
    case3 = "per value, 1 thread (CPU s/value)"
    set_num_threads(1)
    per = {_SECURE: one[_SECURE] / n}
    rec.add("gaussian_release", case3, _SECURE, per[_SECURE], unit="CPU s/value", threads=1,
            values_per_s=1.0 / per[_SECURE], primary=True, **sized)
    cks_cpu, _ = median_cpu_time(lambda: kernels.discrete_gaussian(n_cks, s, generator=secure), repeats=3)
    rec.add("gaussian_release", case3, "vflsec discrete_gaussian (C++ exact CKS, scale s)", cks_cpu / n_cks,
            unit="CPU s/value", threads=1, samples=n_cks, values_per_s=n_cks / cks_cpu, **params)
    sigma2 = Fraction(s) ** 2
    py_cpu, _ = median_cpu_time(lambda: dg.sample_discrete_gaussian(secure, n_python, sigma2), repeats=3)
    rec.add("gaussian_release", case3, _PURE_PYTHON, py_cpu / n_python, unit="CPU s/value", threads=1,
            samples=n_python, values_per_s=n_python / py_cpu, **params)
    set_num_threads(THREADS)
    for name, fn, count in _exact_baselines(sigma, s, n_baseline):
        cpu, _ = median_cpu_time(fn, repeats=3)
        rec.add("gaussian_release", case3, name, cpu / count, unit="CPU s/value", threads=1, samples=count,
                values_per_s=count / cpu, **params)


def _exact_baselines(sigma: float, s: float, n: int) -> List[tuple]:
    """(name, fn, samples) for the optional secure samplers of other libraries
    that import here: OpenDP's Gaussian mechanism on floats (sigma) and on
    integers (scale s), diffprivlib's discrete Gaussian (scale sigma)."""
    out: List[tuple] = []
    opendp = _optional_baseline("opendp.prelude")
    if opendp is not None:
        try:
            opendp.enable_features("contrib")
            floats = opendp.m.make_gaussian(opendp.vector_domain(opendp.atom_domain(T=float, nan=False)),
                                            opendp.l2_distance(T=float), scale=sigma)
            ints = opendp.m.make_gaussian(opendp.vector_domain(opendp.atom_domain(T=int)),
                                          opendp.l2_distance(T=int), scale=s)
            xf, xi = [0.0] * n, [0] * n
            floats(xf[:8])
            ints(xi[:8])
            out.append(("OpenDP make_gaussian, floats", lambda: floats(xf), n))
            out.append(("OpenDP make_gaussian, integers (scale s)", lambda: ints(xi), n))
        except Exception as exc:  # noqa: BLE001 - an API change in an optional baseline: skip it
            print(f"bench kernels: OpenDP baseline skipped ({type(exc).__name__}: {exc})")
    mechanisms = _optional_baseline("diffprivlib.mechanisms")
    if mechanisms is not None:
        try:
            # At sensitivity 1 (scale ~ sigma on the integers): its scale search
            # fails at the lattice's s, and its sampling time grows with the scale.
            mech = mechanisms.GaussianDiscrete(epsilon=RELEASE_EPSILON, delta=RELEASE_DELTA, sensitivity=1)
            mech.randomise(0)
            count = max(1, n // 10)

            def dpl() -> None:
                for _ in range(count):
                    mech.randomise(0)

            out.append(("diffprivlib GaussianDiscrete (scale sigma)", dpl, count))
        except Exception as exc:  # noqa: BLE001
            print(f"bench kernels: diffprivlib baseline skipped ({type(exc).__name__}: {exc})")
    return out


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
        # A case may name its subject ("primary"); otherwise every vflsec method is.
        ours = [r for r in rs if r.get("primary")] or [r for r in rs if r["method"].startswith("vflsec")]
        others = [r for r in rs if r not in ours]
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


_EXTRA_COLUMNS = ("max_rel_error", "max_abs_diagonal", "extra_peak_mib", "unit", "wall_s", "values_per_s", "vs_numpy",
                  "samples")


def _release_text(rows: List[Dict[str, Any]]) -> List[str]:
    """The release section's preamble and its done-criteria as measured."""
    release = [r for r in rows if r["kernel"] == "gaussian_release"]
    if not release:
        return []
    sigma, g = release[0]["sigma"], release[0]["lattice_spacing"]
    parts = [
        f"x + N(0, sigma^2) on float64 values, sigma = {sigma:.6g} (epsilon = {RELEASE_EPSILON:g}, delta = "
        f"{RELEASE_DELTA:g}, sensitivity 1; lattice spacing g = 2^{round(math.log2(g))}, integer scale s = sigma / g "
        f"= {sigma / g:.6g}). `{_SECURE}` is the DP release; numpy, torch and `vflsec float x + noise` add "
        "float noise in floating point, which is NOT a DP release (it leaks x through the float grid: "
        "Mironov 2012; Jin et al. 2022) and is timed as the speed reference. 1-thread rows: median CPU time "
        "(time.process_time); `vs_numpy` = numpy's time / the row's (> 1: faster than numpy). Per-value rows: "
        "CPU seconds per released value or exact sample, 1 thread; vflsec's C++ and pure-Python exact discrete "
        "Gaussians and OpenDP's integer mechanism draw at scale s (the release's integer noise), OpenDP's float "
        "mechanism at sigma, diffprivlib's discrete Gaussian at scale sigma (its scale search fails at s and its "
        "time grows with the scale). OpenDP and diffprivlib rows appear only where they import.\n",
    ]
    criteria = _release_criteria(rows)
    lines = []
    c = criteria.get("vs_numpy_1_thread")
    if c:
        lines.append(f"- secure release vs numpy standard_normal + add, 1 thread (CPU time): **{c['ratio']:.3g}x** "
                     f"(target >= {c['target']:g}x: {'met' if c['met'] else 'NOT met'})")
    c = criteria.get("vs_pure_python_discrete")
    if c:
        lines.append(f"- secure release vs the pure-Python exact discrete sampler, per value, 1 thread each (CPU "
                     f"time): **{c['ratio']:.4g}x** (target >= {c['target']:g}x: {'met' if c['met'] else 'NOT met'})")
    c = criteria.get("vs_pure_python_discrete_threads")
    if c:
        lines.append(f"- (the same with the release on {c['threads']} threads, its wall time per value: "
                     f"{c['ratio']:.4g}x)")
    if lines:
        parts += ["Done criteria, as measured in this run:\n"] + lines + [""]
    return parts


def _report(rows: List[Dict[str, Any]], summary: List[Dict[str, Any]]) -> str:
    parts = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        kr = [r for r in rows if r["kernel"] == kernel]
        extra_keys = [k for k in _EXTRA_COLUMNS if any(k in r for r in kr)]
        parts.append(f"### {kernel}\n")
        if kernel == "gaussian_release":
            parts += _release_text(rows)
        headers = ["case", "method", "median" if "unit" in extra_keys else "median s"] + extra_keys
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
    fig, ax = plt.subplots(figsize=(12, 0.42 * len(labels) + 1.5))
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


def run(quick: bool = False, out: Optional[Path] = None, device: str = "cpu", seed: int = 0) -> Dict[str, Any]:
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
                      fcm_n=20000, fcm_d=16, fcm_c=10, fcm_iters=5, noise_n=10**6, release_n=10**6, cks_n=10**5,
                      python_n=2000, baseline_n=2000, repeats=3)
    else:
        config = dict(pairwise_n=4000, pairwise_d=[16, 64, 256], stats_n=10000, stats_d=64, stats_big_n=100000,
                      fcm_n=100000, fcm_d=16, fcm_c=10, fcm_iters=10, noise_n=10**7, release_n=10**7, cks_n=10**6,
                      python_n=20000, baseline_n=20000, repeats=7)
    config["threads"] = THREADS
    config["seed"] = seed
    load_before = os.getloadavg()
    rec = _Recorder()
    steps = [
        ("pairwise distances", lambda: bench_pairwise(rec, config["pairwise_d"], config["pairwise_n"],
                                                      config["repeats"], accuracy_rows=min(500, config["pairwise_n"]),
                                                      seed=seed)),
        ("distance statistics", lambda: bench_stats(rec, config["stats_n"], config["stats_d"], config["repeats"],
                                                    config["stats_big_n"], seed=seed)),
        ("fuzzy c-means", lambda: bench_fcm(rec, config["fcm_n"], config["fcm_d"], config["fcm_c"], config["fcm_iters"],
                                                  seed=seed)),
        ("gaussian noise", lambda: bench_noise(rec, config["noise_n"], config["repeats"], seed=seed)),
        ("gaussian release", lambda: bench_release(rec, config["release_n"], config["repeats"], config["cks_n"],
                                                   config["python_n"], config["baseline_n"], seed=seed)),
    ]
    try:
        for _name, step in tqdm(steps, desc="bench kernels", unit="kernel"):
            step()
    finally:
        set_num_threads(previous_threads)
        if torch is not None:
            torch.set_num_threads(THREADS)
    summary = _summaries(rec.rows)
    result = {
        "machine": machine_info(),
        "versions": package_versions(["vflsec", "numpy", "scipy", "scikit-learn", "torch", "faiss-cpu", "scikit-fuzzy",
                                      "opendp", "diffprivlib"]),
        "git": git_revision(),
        "config": config,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "results": rec.rows,
        "summary": summary,
        "release_criteria": _release_criteria(rec.rows),
    }
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "kernels.json", result)
    report = _report(rec.rows, summary)
    (out / "kernels.md").write_text(
        f"# vflsec kernel benchmark\n\nMachine: {result['machine']['cpu']}, {result['machine']['logical_cores']} "
        f"logical cores, {THREADS} threads for every multi-threaded library (1-thread comparisons of the "
        f"DP release in CPU time). Seed {seed} (the data; DP noise from the OS CSPRNG, as deployed). Load "
        f"average (1/5/15 min) {_load_text(load_before)} before, {_load_text(result['load_average_after'])} "
        f"after.\n\n{report}\n")
    _plot(summary, out / "kernels.png")
    print(report)
    print(f"\nwrote {out / 'kernels.json'}, {out / 'kernels.md'}, {out / 'kernels.png'}")
    return result


def _load_text(load: Any) -> str:
    return "/".join(f"{v:.2f}" for v in load)


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--seed must be a non-negative integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"--seed must be a non-negative integer, got {value}")
    return value


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="vflsec bench kernels", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    run(quick=args.quick, out=args.out, device=args.device, seed=args.seed)
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--quick", action="store_true", help="small sizes (about a minute)")
    parser.add_argument("--out", type=Path, default=Path("bench-out") / "kernels", help="output directory")
    parser.add_argument("--seed", type=_non_negative_int, default=0,
                        help="seed of the benchmark's data (default 0); DP noise stays on the OS CSPRNG")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="cpu: the C++ kernels against CPU libraries; cuda: the CUDA kernels against torch on "
                             "the same GPU (writes kernels-cuda.*; exits with a message where there is no GPU)")
