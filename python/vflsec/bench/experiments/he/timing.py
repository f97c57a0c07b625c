"""Timing machinery of ``vflsec bench he``: CPU and wall measurement
(in-process and across vflsec's Paillier pool workers), and the timed-method
runner that spot-checks every result by decryption."""
from __future__ import annotations

import os
import statistics
import time
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from .grid import HEGrid

_PROG = "vflsec bench he"


def _worker_cpu() -> Optional[float]:
    """Total CPU seconds (user + system) of vflsec's Paillier pool workers, from
    /proc; None where that cannot be read. The workers are children of the
    forkserver, not of this process, so getrusage cannot see them."""
    from ....he import _pool

    pool = _pool._pool
    pids = list(getattr(pool, "_processes", None) or {}) if pool is not None else []
    if not pids:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        for pid in pids:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
    except (OSError, ValueError, IndexError):
        return None
    return total


class _Timing:
    __slots__ = ("cpu_s", "wall_s", "samples", "cpu_source", "result")

    def __init__(self, cpu_s, wall_s, samples, cpu_source, result):
        self.cpu_s, self.wall_s, self.samples, self.cpu_source, self.result = cpu_s, wall_s, samples, cpu_source, result


def _measure(thunk: Callable[[], Any], *, repeats: int, min_total: float, max_total: float,
             pool: bool = False) -> _Timing:
    """Median CPU and wall time of ``thunk()``: at least ``repeats`` runs and
    ``min_total`` wall seconds (up to 5x ``repeats``), but stop once
    ``max_total`` wall seconds are spent (slow baselines get fewer samples).
    In-process runs: median ``time.process_time`` (every thread of this
    process). Pool runs: the mean over all runs of this process's CPU time plus
    the workers' (read from /proc in 10 ms ticks, so summed over the runs
    rather than per run)."""
    cpu: List[float] = []
    wall: List[float] = []
    result = None
    k_start = _worker_cpu() if pool else None
    while True:
        c0, w0 = time.process_time(), time.perf_counter()
        result = thunk()
        wall.append(time.perf_counter() - w0)
        cpu.append(time.process_time() - c0)
        spent = sum(wall)
        if spent >= max_total:
            break
        if len(wall) >= repeats and (spent >= min_total or len(wall) >= 5 * repeats):
            break
    if not pool:
        return _Timing(statistics.median(cpu), statistics.median(wall), len(wall), "process_time", result)
    k_end = _worker_cpu()
    if k_start is None or k_end is None:
        return _Timing(None, statistics.median(wall), len(wall), "unavailable", result)
    return _Timing((sum(cpu) + k_end - k_start) / len(cpu), statistics.median(wall), len(wall),
                   "process_time + pool workers (/proc), mean over runs", result)


class _Method:
    """One timed method: ``make(k)`` prepares inputs for ``k`` items (untimed)
    and returns the thunk to time; ``check(result, k)`` decrypts a spot check."""

    # make(k) and check(result, k): Callable[..., ...] because the callers bind loop
    # variables as defaulted lambda parameters (``lambda k, kit=kit: ...``).
    def __init__(self, name: str, family: str, make: Callable[..., Callable[[], Any]],
                 check: Callable[..., bool], *, workers: Optional[int] = 1, warm_full: bool = False,
                 note: str = ""):
        self.name, self.family, self.make, self.check = name, family, make, check
        self.workers, self.warm_full, self.note = workers, warm_full, note


def _run_methods(rows: List[Dict[str, Any]], base: Dict[str, Any], methods: Sequence[_Method], items: int,
                 warm_items: int, per_item: int, cfg: HEGrid) -> None:
    for m in methods:
        # vflsec's fast rows warm up at full size so both pool workers have built
        # their fixed-base tables (an offline cost, reported on its own).
        m.make(items if m.warm_full else warm_items)()
        thunk = m.make(items)
        t = _measure(thunk, repeats=cfg.repeats, min_total=cfg.min_total, max_total=cfg.max_total,
                     pool=(m.workers or 1) > 1)
        verified = bool(m.check(t.result, items))
        if not verified:
            message = f"{base['op']} / {m.name}: the spot-check decryption does not match"
            if m.family.startswith("vflsec"):
                raise RuntimeError(f"{_PROG}: {message}")
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        n_items = items * per_item
        rows.append({
            **base, "method": m.name, "family": m.family, "workers": m.workers, "items": n_items,
            "cpu_s": t.cpu_s, "wall_s": t.wall_s, "samples": t.samples, "cpu_source": t.cpu_source,
            "items_per_s": n_items / t.wall_s,
            "items_per_cpu_s": n_items / t.cpu_s if t.cpu_s else None,
            "verified": verified, **({"note": m.note} if m.note else {}),
        })
