"""One process pool per interpreter for the pure-Python big-integer work of Paillier.

phe and gmpy2 hold the GIL for every modular exponentiation, so threads do not
scale; processes do. The pool is created lazily, reused across calls (starting
workers costs far more than a chunk of work) and shut down at interpreter exit by
``concurrent.futures``. Workers are started with ``forkserver``: the federated
runner executes each party in a thread, and forking a multi-threaded process can
copy a lock held by another thread into the child. Work items are plain integers
and lists of integers, never key objects (decryption's items carry the factors
p and q: the pool's workers are this party's own child processes).

This pool is :class:`vflsec.he.executor.LocalPoolExecutor`, the default
executor; :mod:`vflsec.he.executor` chooses where an operation runs.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Callable, List, Optional, Sequence

from .._arrays import check_positive_int

_lock = threading.Lock()
_pool: Optional[ProcessPoolExecutor] = None
_pool_size = 0
_num_processes: Optional[int] = None
_warned_in_process = False


def _available_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def set_num_processes(n: int) -> None:
    """Set how many processes Paillier vector operations use (1 = no pool)."""
    global _num_processes
    _num_processes = check_positive_int(n, "n")


def get_num_processes() -> int:
    """Processes used by Paillier vector operations; defaults to the available cores."""
    return _num_processes if _num_processes is not None else _available_cores()


def resolve_processes(processes: Optional[int]) -> int:
    if processes is None:
        return get_num_processes()
    return check_positive_int(processes, "processes")


def _get_pool(size: int) -> ProcessPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size != size:
            if _pool is not None:
                _pool.shutdown(wait=True)
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["vflsec.he._paillier_math"])
            _pool = ProcessPoolExecutor(max_workers=size, mp_context=context)
            _pool_size = size
        return _pool


def shutdown_pool() -> None:
    """Stop the worker processes (a later call starts new ones)."""
    global _pool, _pool_size
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=True)
        _pool = None
        _pool_size = 0


def chunk_bounds(n_items: int, processes: int, min_chunk: int) -> List[tuple]:
    """Split ``range(n_items)`` into contiguous chunks: about two per process so a
    slow worker does not leave the others idle, but never smaller than ``min_chunk``."""
    if n_items <= 0:
        return []
    n_chunks = max(1, min(2 * processes, n_items // max(1, min_chunk)))
    step = -(-n_items // n_chunks)
    return [(start, min(start + step, n_items)) for start in range(0, n_items, step)]


def _workers_can_start() -> bool:
    """forkserver workers re-import ``__main__`` from its file; code piped to
    ``python -`` (``__file__ == "<stdin>"``) has none, and every worker would die."""
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None):
        return True
    path = getattr(main, "__file__", None)
    return path is None or os.path.isfile(path)


def runs_in_process(processes: int, n_chunks: int) -> bool:
    """Whether chunks run in this process: one process, one chunk, or workers that cannot start."""
    if processes > 1 and n_chunks > 1 and not _workers_can_start():
        global _warned_in_process
        if not _warned_in_process:
            warnings.warn("__main__ has no importable file (code read from stdin?): Paillier operations run "
                          "in this process only", RuntimeWarning, stacklevel=3)
            _warned_in_process = True
        return True
    return processes <= 1 or n_chunks <= 1


def submit_chunks(func: Callable[..., Any], args_per_chunk: Sequence[tuple], processes: int) -> List[Future]:
    """The chunks handed to the pool, one future each (collect them with :func:`collect`)."""
    pool = _get_pool(processes)
    return [pool.submit(func, *args) for args in args_per_chunk]


def collect(futures: Sequence[Future]) -> List[Any]:
    """The futures' results in order; RuntimeError naming the likely cause when a worker died."""
    try:
        return [future.result() for future in futures]
    except BrokenProcessPool as exc:
        shutdown_pool()
        raise RuntimeError(
            "Paillier worker processes died. Workers re-import the main script: a script that trains "
            "with protection='paillier' must put its top-level code under `if __name__ == \"__main__\":` "
            "(or call vflsec.he.set_num_processes(1))"
        ) from exc


def run_chunks(func: Callable[..., Any], args_per_chunk: Sequence[tuple], processes: int) -> List[Any]:
    """``[func(*args) for args in args_per_chunk]``, in the pool when it helps."""
    if runs_in_process(processes, len(args_per_chunk)):
        return [func(*args) for args in args_per_chunk]
    return collect(submit_chunks(func, args_per_chunk, processes))
