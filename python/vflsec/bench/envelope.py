"""The results envelope: what every benchmark run records besides its cells.

One envelope for every ``vflsec bench`` run (written by :mod:`.runner`):
the benchmark's name and command line, the machine (CPU model and the SIMD
features the dispatcher sees, cores, memory, OS, Python), the versions of
the packages it measured, the git revision, the seed, whether it is the
``--quick`` variant, and the machine's load (``uptime``: load averages and
uptime) at the start and at the end, because other processes on a shared
machine slow every measured row. :func:`load_text` reads it back for a
report, including from results written before this envelope existed.
"""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from typing import Any, Dict, Iterable, List, Optional, Tuple

__all__ = ["close_envelope", "cpu_model", "git_revision", "load_averages", "load_snapshot", "load_text", "machine_info",
           "open_envelope", "package_versions"]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> Dict[str, Any]:
    """CPU model, SIMD flags the dispatcher sees, cores, memory, OS."""
    from .. import cpu_features, get_num_threads

    mem_gib: Optional[float] = None
    try:
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "cpu": cpu_model(),
        "cpu_features": cpu_features(),
        "logical_cores": os.cpu_count(),
        "vflsec_threads": get_num_threads(),
        "memory_gib": mem_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def package_versions(names: Iterable[str]) -> Dict[str, Optional[str]]:
    out: Dict[str, Optional[str]] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_revision() -> Optional[str]:
    """The checkout's short commit; ``$VFLSEC_GIT_REVISION`` where the tree is a
    copy without ``.git`` (a run on a borrowed GPU machine, .ci/gpu-check)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return os.environ.get("VFLSEC_GIT_REVISION") or None


def load_snapshot() -> Dict[str, Any]:
    """``uptime`` as data: the time (UTC), the 1/5/15-minute load averages and the uptime in seconds."""
    snap: Dict[str, Any] = {"time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        snap["loadavg"] = [round(v, 2) for v in os.getloadavg()]
    except OSError:  # pragma: no cover - not on Linux
        snap["loadavg"] = None
    try:
        with open("/proc/uptime") as fh:
            snap["uptime_s"] = float(fh.read().split()[0])
    except (OSError, ValueError, IndexError):  # pragma: no cover
        snap["uptime_s"] = None
    return snap


def open_envelope(benchmark: str, *, versions: Iterable[str], seed: Optional[int], quick: bool,
                  argv: Optional[List[str]] = None) -> Dict[str, Any]:
    """A new run's results, envelope only; its cells are added by the experiment."""
    words = list(sys.argv[1:] if argv is None else argv)
    return {
        "benchmark": benchmark,
        "command": " ".join(["vflsec"] + words) if words else f"vflsec bench {benchmark}",
        "machine": machine_info(),
        "versions": package_versions(["vflsec", *versions]),
        "git": git_revision(),
        "seed": seed,
        "quick": bool(quick),
        "load": {"start": load_snapshot()},
        "_started": time.perf_counter(),
    }


def close_envelope(result: Dict[str, Any], *, partial: bool = False) -> None:
    """Record the end: the machine's load, the run's wall seconds, and ``"partial": true``
    when the run stopped before its last cell."""
    started = result.pop("_started", None)
    if started is not None:
        result["seconds"] = time.perf_counter() - started
    result.setdefault("load", {})["end"] = load_snapshot()
    if partial:
        result["partial"] = True


def _loadavg_text(values: Any) -> str:
    return "/".join(f"{float(v):.2f}" for v in values) if values else "n/a"


def load_averages(result: Dict[str, Any]) -> Tuple[Optional[List[float]], Optional[List[float]]]:
    """The 1/5/15-minute load averages at the start and at the end of the run of ``result``
    (None where not recorded); also reads the keys results had before this envelope
    (``machine.load_average_start``/``_end``, ``load_average_before``/``_after``)."""
    load = result.get("load") or {}
    machine = result.get("machine") or {}
    start = (load.get("start") or {}).get("loadavg") if isinstance(load, dict) else None
    end = (load.get("end") or {}).get("loadavg") if isinstance(load, dict) else None
    start = start or machine.get("load_average_start") or result.get("load_average_before")
    end = end or machine.get("load_average_end") or result.get("load_average_after")
    return start, end


def load_text(result: Dict[str, Any]) -> str:
    """``"load average (1/5/15 min) 0.10/0.20/0.30 at the start, 1.02/0.55/0.40 at the end"``
    for a report (from new and older results alike: :func:`load_averages`)."""
    start, end = load_averages(result)
    if start is None and end is None:
        return "load average not recorded"
    return f"load average (1/5/15 min) {_loadavg_text(start)} at the start, {_loadavg_text(end)} at the end"
