"""The CPU cells of ``vflsec bench kernels``: each kernel timed against the real
alternatives (torch, scipy, scikit-learn, faiss, scikit-fuzzy, numpy and, where
they import, OpenDP and diffprivlib), one row per (kernel, case, method).

Rows are appended to the results' ``"results"`` as they are timed, so a run
stopped midway keeps every finished row. The sizes are the grid's
(:class:`~.grid.KernelsGrid`); the data of each kernel comes from the grid's
seed, the DP noise from the OS CSPRNG (as deployed).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

import numpy as np

from .... import get_num_threads, kernels, set_num_threads
from ...common import median_cpu_time, median_time
from .analysis import NUMPY_RELEASE as _NUMPY
from .analysis import PURE_PYTHON_SAMPLER as _PURE_PYTHON
from .analysis import SECURE_RELEASE as _SECURE
from .analysis import release_criteria, summarize
from .grid import KernelsGrid

__all__ = ["Recorder", "bench_fcm", "bench_noise", "bench_pairwise", "bench_release", "bench_stats", "run_cells"]


class Recorder:
    """Appends one row per timed (kernel, case, method) to ``rows`` (the results' list)."""

    def __init__(self, rows: List[Dict[str, Any]]) -> None:
        self.rows = rows

    def add(self, kernel: str, case: str, method: str, seconds: Optional[float], **extra: Any) -> None:
        self.rows.append({"kernel": kernel, "case": case, "method": method, "seconds": seconds, **extra})



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


# ---------------------------------------------------------------------------
# pairwise distances
# ---------------------------------------------------------------------------

def bench_pairwise(rec: Recorder, sizes: List[int], n: int, repeats: int, accuracy_rows: int, seed: int = 0) -> None:
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
            # Callable[..., Any]: each thunk is called with no argument; its defaulted
            # parameters bind this iteration's arrays (the loop rebinds X and Y).
            methods: Dict[str, Callable[..., Any]] = {
                "vflsec": lambda X=X, Y=Y: kernels.pairwise_distances(X, Y),
                "scipy.cdist": lambda X=X, Y=Y: cdist(X, Y),
                "sklearn.pairwise_distances": lambda X=X, Y=Y: sk_pairwise(X, Y),
            }
            if torch is not None:
                Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
                methods["torch.cdist"] = lambda Xt=Xt, Yt=Yt: torch.cdist(Xt, Yt)
            if faiss is not None:
                def faiss_dist(X=X, Y=Y):
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
print(json.dumps({"seconds": secs, "extra_peak_mib": (after - before) / 1024.0,
                  "count": s.count, "mean": s.mean, "std": s.std}))
"""


def bench_stats(rec: Recorder, n: int, d: int, repeats: int, big_n: Optional[int], seed: int = 0,
                threads: int = 2) -> None:
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
        out = subprocess.run([sys.executable, "-c", _STATS_CHILD, str(big_n), str(d), str(threads), str(seed)],
                             capture_output=True, text=True, check=True)
        res = json.loads(out.stdout.strip().splitlines()[-1])
        rec.add("pairwise_distance_stats", f"float64 n={big_n} d={d}", "vflsec", res["seconds"],
                extra_peak_mib=res["extra_peak_mib"], pairs=res["count"])


# ---------------------------------------------------------------------------
# fuzzy c-means
# ---------------------------------------------------------------------------

def bench_fcm(rec: Recorder, n: int, d: int, c: int, iters: int, seed: int = 0) -> None:
    skfuzzy = _optional("skfuzzy")
    from ....kernels._reference import numpy_fuzzy_cmeans

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

def bench_noise(rec: Recorder, n: int, repeats: int, seed: int = 0, threads: int = 2) -> None:
    torch = _optional("torch")
    from ....kernels import NoiseGenerator

    case = f"float64 n={n}"
    secure = NoiseGenerator()
    seeded = NoiseGenerator(seed=seed)
    for count in (1, threads):
        set_num_threads(count)
        rec.add("gaussian_noise", case, f"vflsec secure ChaCha20 ({count} thr)",
                median_time(lambda: kernels.gaussian_noise(n, generator=secure), repeats=repeats), threads=count)
        rec.add("gaussian_noise", case, f"vflsec seeded ({count} thr)",
                median_time(lambda: kernels.gaussian_noise(n, generator=seeded), repeats=repeats), threads=count)
    set_num_threads(threads)
    rng = np.random.default_rng()
    rec.add("gaussian_noise", case, "numpy default_rng.standard_normal (1 thr)",
            median_time(lambda: rng.standard_normal(n), repeats=repeats), threads=1)
    if torch is not None:
        for count in (1, threads):
            torch.set_num_threads(count)
            rec.add("gaussian_noise", case, f"torch.randn ({count} thr)",
                    median_time(lambda: torch.randn(n, dtype=torch.float64), repeats=repeats), threads=count)
        torch.set_num_threads(threads)


# ---------------------------------------------------------------------------
# the DP release: x + N(0, sigma^2) on the lattice, against the alternatives
# ---------------------------------------------------------------------------

def bench_release(rec: Recorder, n: int, repeats: int, n_cks: int, n_python: int, n_baseline: int,
                  seed: int = 0, threads: int = 2, epsilon: float = 1.0, delta: float = 1e-5) -> None:
    """The secure release (vflsec.kernels.add_gaussian_noise) on n float64 values at the
    sigma of (epsilon = 1, delta = 1e-5, sensitivity 1), against plain float x + noise
    (numpy, torch, vflsec's old float path: NOT DP releases) and exact samplers.

    1 thread: CPU time (time.process_time), ratios against numpy in this run. 2
    threads: wall time. Per value: CPU seconds per released value / sample, 1 thread.
    """
    from fractions import Fraction

    from ....dp import gaussian_sigma
    from ....kernels import NoiseGenerator
    from ....kernels import _discrete_gaussian as dg

    torch = _optional("torch")
    sigma = gaussian_sigma(epsilon, delta, 1.0)
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

    # `threads` threads, wall time (numpy has no threads: its 1-thread wall time for reference)
    case2 = f"float64 n={n}, {threads} threads (wall s)"
    set_num_threads(threads)
    if torch is not None:
        torch.set_num_threads(threads)
    numpy_wall = median_time(numpy_release, repeats=repeats)
    rec.add("gaussian_release", case2, _NUMPY + " (1 thr)", numpy_wall, unit="wall s", threads=1,
            values_per_s=n / numpy_wall, vs_numpy=1.0, **sized)
    for name, fn in methods.items():
        wall = median_time(fn, repeats=repeats)
        rec.add("gaussian_release", case2, name, wall, unit="wall s", threads=threads, values_per_s=n / wall,
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
    set_num_threads(threads)
    for name, fn, count in _exact_baselines(sigma, s, n_baseline, epsilon, delta):
        cpu, _ = median_cpu_time(fn, repeats=3)
        rec.add("gaussian_release", case3, name, cpu / count, unit="CPU s/value", threads=1, samples=count,
                values_per_s=count / cpu, **params)


def _exact_baselines(sigma: float, s: float, n: int, epsilon: float, delta: float) -> List[tuple]:
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
            mech = mechanisms.GaussianDiscrete(epsilon=epsilon, delta=delta, sensitivity=1)
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
# the run: every kernel of the grid, in order
# ---------------------------------------------------------------------------

def run_cells(grid: KernelsGrid, result: Dict[str, Any]) -> None:
    """Time every case of ``grid``, appending rows to ``result["results"]`` as they finish;
    then add the per-case speed-ups (``"summary"``) and the release's targets as
    measured (``"release_criteria"``)."""
    from ...._progress import progress

    threads, seed = grid.threads, grid.seed
    previous_threads = get_num_threads()
    set_num_threads(threads)
    torch = _optional("torch")
    if torch is not None:
        torch.set_num_threads(threads)
    rows: List[Dict[str, Any]] = result.setdefault("results", [])
    rec = Recorder(rows)
    steps = [
        ("pairwise distances", lambda: bench_pairwise(rec, list(grid.pairwise_d), grid.pairwise_n, grid.repeats,
                                                      accuracy_rows=min(grid.pairwise_accuracy_rows, grid.pairwise_n),
                                                      seed=seed)),
        ("distance statistics", lambda: bench_stats(rec, grid.stats_n, grid.stats_d, grid.repeats, grid.stats_big_n,
                                                    seed=seed, threads=threads)),
        ("fuzzy c-means", lambda: bench_fcm(rec, grid.fcm_n, grid.fcm_d, grid.fcm_c, grid.fcm_iters, seed=seed)),
        ("gaussian noise", lambda: bench_noise(rec, grid.noise_n, grid.repeats, seed=seed, threads=threads)),
        ("gaussian release", lambda: bench_release(rec, grid.release_n, grid.repeats, grid.cks_n, grid.python_n,
                                                   grid.baseline_n, seed=seed, threads=threads,
                                                   epsilon=grid.release_epsilon, delta=grid.release_delta)),
    ]
    try:
        for _name, step in progress(steps, desc="bench kernels", unit="kernel"):
            step()
    finally:
        set_num_threads(previous_threads)
        if torch is not None:
            torch.set_num_threads(threads)
    result["summary"] = summarize(rows)
    result["release_criteria"] = release_criteria(rows)
