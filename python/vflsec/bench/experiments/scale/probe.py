"""One measurement of ``vflsec bench scale`` in a process of its own: ``python -m
vflsec.bench.experiments.scale.probe KIND 'JSON'`` prints one JSON line.

Its own process so that the peak resident memory (``VmHWM``) is the cell's alone. The
resident memory after the imports and before the data exists (``base_rss_bytes``) is reported
beside the peak, so the report can state both the peak and the part of it the cell added.

Kinds: ``estimator`` (one ``VerticalLogisticRegression`` fit on synthetic blocks: wall and CPU
seconds, peak memory, the data's bytes), ``psi`` (two-party PSI with both parties on threads
of this process: bucketed on every core, or the unbucketed sequential protocol) and
``paillier_epoch`` (one Paillier epoch on the local pool or through Ray on a cluster it starts).
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from typing import Any, Dict, Iterator, List

import numpy as np

from ...._process_memory import current_rss_bytes, peak_rss_bytes

__all__ = ["current_rss", "make_blocks", "operation_overhead", "peak_rss", "run_probe"]


def current_rss() -> int:
    """This process's resident memory now, in bytes (Linux /proc; 0 where absent)."""
    return current_rss_bytes()


def peak_rss() -> int:
    """This process's peak resident memory so far, in bytes: its own program's (VmHWM), not the
    bench process's size at fork that ``ru_maxrss`` carries (:mod:`vflsec._process_memory`)."""
    return peak_rss_bytes()


def make_blocks(n: int, widths: List[int], seed: int):
    """Synthetic party blocks (float64, standard normal) and 0/1 labels from a logistic model
    over every block, so every party's columns carry signal."""
    rng = np.random.default_rng(seed)
    blocks = [rng.standard_normal((n, d)) for d in widths]
    theta = np.zeros(n)
    for X in blocks:
        theta += X @ (rng.standard_normal(X.shape[1]) / np.sqrt(X.shape[1]))
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-theta))).astype(np.int64)
    return blocks, y


def _estimator(args: Dict[str, Any]) -> Dict[str, Any]:
    from vflsec.glm import VerticalLogisticRegression

    if args["method"] == "ckks":
        import tenseal  # noqa: F401  # imported before the base is read: the library is not the cell
    if args["method"] == "paillier":
        import gmpy2  # noqa: F401
        import phe  # noqa: F401
    base = current_rss()
    blocks, y = make_blocks(args["n"], args["widths"], args["seed"])
    data_bytes = int(sum(X.nbytes for X in blocks))
    options: Dict[str, Any] = dict(epochs=1, batch_size=min(args["batch_size"], args["n"]), lr=args["lr"],
                                   random_state=args["seed"])
    if args["method"] == "hdp":
        options.update(epsilon=args["epsilon"], noise_seed=args["seed"] + 1)
    if args["method"] == "paillier":
        options.update(key_bits=args["key_bits"])
    model = VerticalLogisticRegression(args["method"], **options)
    wall, cpu = time.perf_counter(), time.process_time()
    model.fit(blocks, y)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_bytes": peak_rss(), "base_rss_bytes": base,
            "data_bytes": data_bytes, "train_accuracy": float(model.score(blocks, y))}


def _psi(args: Dict[str, Any]) -> Dict[str, Any]:
    from vflsec.federation.channel import InMemoryHub
    from vflsec.federation.psi import align_ids

    n, overlap = args["n"], args["overlap"]
    rng = np.random.default_rng(args["seed"])
    shared = int(round(n * overlap))
    pool = rng.choice(10 ** 12, size=2 * n - shared, replace=False)
    ids = {"a": [f"id{v:012d}" for v in pool[:n]], "b": [f"id{v:012d}" for v in pool[n - shared:]]}
    hub = InMemoryHub(default_timeout=4 * 3600)
    endpoints = {name: hub.endpoint(name) for name in ids}  # both exist before either sends
    found: Dict[str, int] = {}
    failed: Dict[str, str] = {}
    options: Dict[str, Any] = ({"workers": 1, "bucket_target": 10 ** 12} if args["sequential"] else {})

    def party(name: str) -> None:
        try:
            common = align_ids(endpoints[name], ids[name], leader="a", members=["b"] if name == "a" else (),
                               **options)
            found[name] = len(common)
        except Exception as exc:  # noqa: BLE001 - reported, and the peer is released
            failed[name] = f"{type(exc).__name__}: {exc}"
            hub.abort(failed[name])

    threads = [threading.Thread(target=party, args=(name,)) for name in ids]
    wall = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall
    if failed:
        raise RuntimeError(f"PSI failed: {failed}")
    if found != {"a": shared, "b": shared}:
        raise RuntimeError(f"PSI found {found}, expected {shared} shared IDs")
    return {"wall_s": wall, "shared": shared, "bytes": int(hub.total_bytes())}


@contextlib.contextmanager
def local_cluster(nodes: int) -> Iterator[Any]:
    """A Ray cluster of ``nodes`` nodes of one CPU each on 127.0.0.1 only, in a temporary folder
    of its own (as tests/he/test_executor_ray.py starts one), for the ``with`` block; then shut
    down, its folder removed, and ``RAY_TMPDIR`` and Ray's loopback rule as they were."""
    import shutil
    import tempfile

    import ray
    from ray.cluster_utils import Cluster

    folder = tempfile.mkdtemp(prefix="vs", dir="/tmp")  # short: Ray's socket paths must stay < 108 characters
    saved_tmpdir = os.environ.get("RAY_TMPDIR")
    saved_rule = ray._private.ray_constants.ENABLE_RAY_CLUSTER
    os.environ["RAY_TMPDIR"] = folder
    # Ray swaps a loopback address for the machine's IP (its rule for real clusters): keep 127.0.0.1.
    ray._private.ray_constants.ENABLE_RAY_CLUSTER = False
    cluster = None
    try:
        node: Dict[str, Any] = dict(num_cpus=1, object_store_memory=200 * 2**20, node_ip_address="127.0.0.1")
        cluster = Cluster(initialize_head=True, connect=False,
                          head_node_args=dict(node, include_dashboard=False, temp_dir=f"{folder}/ray"))
        for _ in range(nodes - 1):
            cluster.add_node(**node)
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        if cluster is not None:
            cluster.shutdown()
        ray._private.ray_constants.ENABLE_RAY_CLUSTER = saved_rule
        if saved_tmpdir is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved_tmpdir
        shutil.rmtree(folder, ignore_errors=True)


def operation_overhead(timeline: Any, background_tasks: Any = ()) -> float:
    """Seconds the operations of a ``RayExecutor.timeline`` spent beyond their tasks' work, summed:
    per operation, its wall time (submitted to done) less the longest time one of its workers was
    working between the submission and the end of the operation's task there (that task, and the
    tasks of other operations that held the worker first, those run in the background included:
    ``RayExecutor.background_tasks``). What is left is the round trip: submitting, shipping
    arguments and results, scheduling, waiting for the results."""
    import bisect
    from collections import defaultdict

    runs: Dict[str, List[Any]] = defaultdict(list)
    for _, _, tasks in timeline:
        for worker, start, end in tasks:
            runs[worker].append((start, end))
    for worker, start, end in background_tasks:
        runs[worker].append((start, end))
    for intervals in runs.values():
        intervals.sort()
    starts = {worker: [start for start, _ in intervals] for worker, intervals in runs.items()}
    total = 0.0
    for submitted, done, tasks in timeline:
        needed = 0.0
        for worker, _, end in tasks:
            intervals, busy = runs[worker], 0.0
            i = bisect.bisect_left(starts[worker], end) - 1  # this task, then the ones before it
            while i >= 0 and intervals[i][1] > submitted:
                busy += min(intervals[i][1], end) - max(intervals[i][0], submitted)
                i -= 1
            needed = max(needed, busy)
        total += max(0.0, done - submitted - needed)
    return total


def _paillier_epoch(args: Dict[str, Any]) -> Dict[str, Any]:
    """One Paillier epoch of ``VerticalLogisticRegression`` on the local pool (``workers``
    processes) or through Ray on a cluster of ``nodes`` nodes of one CPU each that this process
    starts on 127.0.0.1 and stops (``ray.cluster_utils.Cluster``; never ``ray stop``).

    Reported: wall and CPU seconds of the fit (CPU: this process's, not its workers'), the
    1-minute load average before and after it (the machine may be shared), and through Ray the
    tasks, the operations they came from (waited for; and those run in the background: the
    offline randomizers) and the seconds the waited-for ones spent beyond their tasks' work
    (:func:`operation_overhead`; the cost model's unit and overhead), and the nodes used."""
    import os

    from vflsec import he
    from vflsec.glm import VerticalLogisticRegression

    blocks, y = make_blocks(args["n"], args["widths"], args["seed"])
    options = dict(epochs=1, batch_size=min(args["batch_size"], args["n"]), lr=args["lr"], key_bits=args["key_bits"],
                   random_state=args["seed"])
    executor = None
    with contextlib.ExitStack() as stack:
        if args["engine"] == "local":
            he.set_num_processes(args["workers"])
        else:
            cluster = stack.enter_context(local_cluster(args["nodes"]))
            executor = he.RayExecutor(address=cluster.address)
            stack.callback(executor.close)
        stack.callback(he.shutdown_pool)
        model = VerticalLogisticRegression("paillier", executor=executor, **options)
        load_before = os.getloadavg()[0]
        wall, cpu = time.perf_counter(), time.process_time()
        model.fit(blocks, y)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        out = {"wall_s": wall, "cpu_s": cpu, "train_accuracy": float(model.score(blocks, y)),
               "load_before": load_before, "load_after": os.getloadavg()[0]}
        if executor is not None:
            out.update(tasks=int(sum(executor.task_counts.values())), operations=executor.operations,
                       background_operations=executor.background_operations,
                       operation_overhead_s=operation_overhead(executor.timeline, executor.background_tasks),
                       nodes_used=len(executor.task_counts))
        return out


def run_probe(kind: str, args: Dict[str, Any]) -> Dict[str, Any]:
    if kind == "estimator":
        return _estimator(args)
    if kind == "psi":
        return _psi(args)
    if kind == "paillier_epoch":
        return _paillier_epoch(args)
    raise ValueError(f"unknown probe {kind!r}")


if __name__ == "__main__":
    print(json.dumps(run_probe(sys.argv[1], json.loads(sys.argv[2]))))
