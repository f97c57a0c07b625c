"""This process's resident memory: now and its peak since it started its program.

The peak is Linux's ``VmHWM`` (the high-water mark of the process's own address space),
not ``ru_maxrss``: Linux carries the parent's resident memory at ``fork`` into a child's
``ru_maxrss`` across ``exec``, so a small process started by a large one reports the
large one's size. Elsewhere ``ru_maxrss`` is the fallback.
"""
from __future__ import annotations

import resource
import sys

__all__ = ["current_rss_bytes", "peak_rss_bytes"]


def _status_kib(field: str) -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return -1


def current_rss_bytes() -> int:
    """Resident memory now, in bytes (0 where /proc is absent)."""
    return max(0, _status_kib("VmRSS")) * 1024


def peak_rss_bytes() -> int:
    """Peak resident memory of this process's program, in bytes."""
    kib = _status_kib("VmHWM")
    if kib >= 0:
        return kib * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # macOS reports bytes, Linux KiB
