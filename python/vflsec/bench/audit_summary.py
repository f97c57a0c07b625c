"""The last ``vflsec audit``'s verdict per mechanism, for the benchmarks' reports
(read from its ``audit.json``, the file format being the contract: the
benchmarks do not import the auditor, which sits above them).

``vflsec bench splitnn``, ``bench privacy`` and ``bench glm`` print, beside
each claimed epsilon, how the mechanism behind it fared in a ``vflsec audit``
run: the largest empirical lower bound over the claim among its cases. The
audit read is the first found of: ``$VFLSEC_AUDIT`` (an ``audit.json`` or its
folder), ``bench-out/audit/audit.json`` under the current directory, and the
committed full run of a source checkout (``benchmarks/results/audit/``).
Nothing found: the reports say so (run ``vflsec audit``); nothing is estimated.
"""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any, Dict, Iterable, Optional

__all__ = ["AuditSummary", "audit_summary"]


class AuditSummary:
    """Per mechanism: the worst (largest) lower bound / claim of its cases with a claim."""

    def __init__(self, result: Dict[str, Any], source: Path):
        self.source = source
        self.git = result.get("git")
        self.quick = bool(result.get("quick"))
        self.ratios: Dict[str, float] = {}
        self.runs: Dict[str, int] = {}
        for row in result.get("cases", []):
            ratio = row.get("lower_bound_over_claim")
            if ratio is None:
                continue
            name = row["mechanism"]
            if ratio >= self.ratios.get(name, -1.0):
                self.ratios[name] = float(ratio)
                self.runs[name] = int(row.get("runs_per_world", 0))

    def ratio(self, mechanisms: Iterable[str]) -> Optional[float]:
        """The worst ratio over ``mechanisms`` (None if none of them was audited with a claim)."""
        found = [self.ratios[m] for m in mechanisms if m in self.ratios]
        return max(found) if found else None

    def cell(self, mechanisms: Iterable[str]) -> str:
        """``"audit 0.62x"`` (lower bound / claim) or ``"not audited"``."""
        ratio = self.ratio(list(mechanisms))
        return "not audited" if ratio is None else f"audit {ratio:.2f}x"

    def describe(self) -> str:
        mode = "quick" if self.quick else "full"
        return (f"\"audit r x\" beside an epsilon: the largest empirical lower bound over the claimed epsilon "
                f"among that mechanism's worst-case audits (r <= 1: no violation found; {mode} `vflsec audit`"
                f"{' at ' + self.git if self.git else ''}, {self.source})")


def _candidates() -> Iterable[Path]:
    env = os.environ.get("VFLSEC_AUDIT")
    if env:
        path = Path(env)
        yield path / "audit.json" if path.is_dir() else path
    yield Path("bench-out") / "audit" / "audit.json"
    yield Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "audit" / "audit.json"  # a source checkout


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Optional[Dict[str, Any]]:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def audit_summary() -> Optional[AuditSummary]:
    """The first readable audit result (module docstring), or None."""
    for path in _candidates():
        if path.is_file():
            result = _load(str(path), path.stat().st_mtime)
            if isinstance(result, dict) and isinstance(result.get("cases"), list):
                return AuditSummary(result, path)
    return None
