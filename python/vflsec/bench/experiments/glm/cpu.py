"""CPU seconds of one fit in ``vflsec bench glm``: every party's thread and every worker process.

An in-process fit runs every party as a thread of this process, so ``time.process_time``
counts them all (an MPC engine's threads and its link included). Paillier's big-integer work
runs in a pool of worker processes (:mod:`vflsec.he._pool`, started by a forkserver: grandchildren
of this process), which ``process_time`` does not count and ``RUSAGE_CHILDREN`` counts only once
they exit. On Linux the CPU of every live descendant is read from ``/proc/<pid>/stat`` before and
after the fit and its difference added; where ``/proc`` is missing only this process is counted
(:attr:`CPUClock.scope` says which).
"""
from __future__ import annotations

import glob
import os
import time
from typing import Any, Dict, List, Optional

__all__ = ["CPUClock", "descendants_cpu_seconds"]

_TICKS = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


def descendants_cpu_seconds() -> Optional[float]:
    """User + system CPU seconds of every live descendant of this process (None without ``/proc``)."""
    if not os.path.isdir("/proc/self"):
        return None
    children: Dict[int, List[int]] = {}
    used: Dict[int, float] = {}
    for path in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:  # the process ended while the table was read
            continue
        # "pid (comm) state ppid ... utime stime ...": comm may hold spaces and parentheses.
        head, _, rest = text.rpartition(")")
        fields = rest.split()
        try:
            pid, ppid = int(head.split("(", 1)[0]), int(fields[1])
            used[pid] = (int(fields[11]) + int(fields[12])) / _TICKS  # fields 14 and 15 of stat(5)
        except (ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0.0, list(children.get(os.getpid(), ())), set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += used.get(pid, 0.0)
        todo.extend(children.get(pid, ()))
    return total


class CPUClock:
    """``with CPUClock() as clock: fit()`` -> ``clock.seconds``: CPU seconds of the block, this
    process's threads and its live worker processes together. The ``/proc`` scans sit outside the
    window of this process's own clock, so they do not count in a millisecond-long fit."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.scope = "this process"
        self._children: Optional[float] = None
        self._own = 0.0

    def __enter__(self) -> "CPUClock":
        self._children = descendants_cpu_seconds()
        self._own = time.process_time()
        return self

    def __exit__(self, *exc: Any) -> None:
        own = time.process_time() - self._own
        after = descendants_cpu_seconds()
        if self._children is None or after is None:
            self.seconds = own
            return
        # A worker that exited during the fit leaves the sum: never let it subtract.
        self.seconds = own + max(0.0, after - self._children)
        self.scope = "this process and its worker processes"
