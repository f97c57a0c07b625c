"""Published claims and project targets as data, judged against a run's measurements.

A claim lives beside the published numbers it comes from, in
``vflsec/bench/papers/<paper>.toml``, as an array of tables::

    [[claims]]
    id = "runtime_hdp"                 # unique within the file
    statement = "HDP-VFL's runtime is about that of non-private VFL"
    quantity = "runtime_ratio.hdp"     # a measurement the benchmark's report computes
    op = "<="                          # <=, <, >=, >, or between (with low and high)
    threshold = 2.0
    reading = "'about' read as at most 2x"   # why this threshold (optional)

The benchmark's report computes its measurements (a mapping from quantity
names to numbers, None where not measured in this run) and :func:`judge`
turns every claim into a :class:`Verdict`: holds, does not hold, or not
measured. :func:`verdict_table` is the one way every report prints them.
Thresholds are data: changing what a claim is held to never touches code.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .errors import BenchConfigError

__all__ = ["Claim", "Verdict", "judge", "load_claims", "verdict_table"]

_OPS: Dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt,
}


@dataclass(frozen=True)
class Claim:
    id: str
    source: str
    statement: str
    quantity: str
    op: str
    threshold: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    reading: str = ""
    unit: str = ""

    def holds_if(self) -> str:
        if self.op == "between":
            return f"{self.low:g} to {self.high:g}{self.unit}"
        return f"{self.op} {self.threshold:g}{self.unit}"

    def test(self, value: float) -> bool:
        if self.op == "between":
            return float(self.low) <= value <= float(self.high)  # type: ignore[arg-type]
        return _OPS[self.op](value, float(self.threshold))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Verdict:
    claim: Claim
    measured: Optional[float]
    note: str = ""

    @property
    def holds(self) -> Optional[bool]:
        """True/False; None when the run did not measure the claim's quantity."""
        if self.measured is None or not math.isfinite(self.measured):
            return None
        return self.claim.test(self.measured)

    @property
    def word(self) -> str:
        return {True: "holds", False: "does not hold", None: "not measured"}[self.holds]


_KEYS = {"id", "statement", "quantity", "op", "threshold", "low", "high", "reading", "unit"}


def _claim(table: Mapping[str, Any], source: str, index: int) -> Claim:
    where = f"{source}: [[claims]] #{index + 1}"
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise BenchConfigError(f"{where}: unknown key {unknown[0]!r}; allowed: {', '.join(sorted(_KEYS))}")
    for key in ("id", "statement", "quantity", "op"):
        if not isinstance(table.get(key), str) or not table[key]:
            raise BenchConfigError(f"{where}: {key!r} must be a non-empty string")
    op = table["op"]

    def number(key: str) -> float:
        value = table.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise BenchConfigError(f"{where} ({table['id']}): {key!r} must be a finite number for op {op!r}")
        return float(value)

    if op == "between":
        low, high = number("low"), number("high")
        if low > high:
            raise BenchConfigError(f"{where} ({table['id']}): low {low:g} > high {high:g}")
        return Claim(table["id"], source, table["statement"], table["quantity"], op, low=low, high=high,
                     reading=str(table.get("reading", "")), unit=str(table.get("unit", "")))
    if op not in _OPS:
        raise BenchConfigError(f"{where} ({table['id']}): op {op!r}; allowed: {', '.join([*_OPS, 'between'])}")
    return Claim(table["id"], source, table["statement"], table["quantity"], op, threshold=number("threshold"),
                 reading=str(table.get("reading", "")), unit=str(table.get("unit", "")))


def load_claims(paper: str) -> Tuple[Claim, ...]:
    """The claims of ``papers/<paper>.toml`` (none if it has no ``[[claims]]``)."""
    from .config import read_document

    document, source = read_document(f"papers/{paper}")
    tables = document.get("claims", [])
    if not isinstance(tables, list) or not all(isinstance(t, Mapping) for t in tables):
        raise BenchConfigError(f"{source}: 'claims' must be an array of tables ([[claims]])")
    claims = tuple(_claim(t, f"papers/{paper}.toml", i) for i, t in enumerate(tables))
    ids = [c.id for c in claims]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise BenchConfigError(f"papers/{paper}.toml: claim id {duplicate!r} appears twice")
    return claims


def judge(claims: Sequence[Claim], measured: Mapping[str, Optional[float]],
          notes: Optional[Mapping[str, str]] = None) -> List[Verdict]:
    """Every claim against ``measured`` (quantity name -> value; absent or None: not measured).
    ``notes``: per claim id, what the measurement is (e.g. "median of 6 cells, 1.1x-1.9x")."""
    notes = notes or {}
    out = []
    for claim in claims:
        value = measured.get(claim.quantity)
        out.append(Verdict(claim, None if value is None else float(value), notes.get(claim.id, "")))
    return out


def _fmt(value: Optional[float], unit: str) -> str:
    if value is None or not math.isfinite(value):
        return "n/a"
    return (f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}") + unit


def verdict_table(verdicts: Sequence[Verdict]) -> str:
    """The markdown table every report prints its claims in."""
    lines = ["| claim | source | measured | holds if | verdict |", "|---|---|---|---|---|"]
    for v in verdicts:
        c = v.claim
        statement = c.statement + (f" ({c.reading})" if c.reading else "")
        measured = _fmt(v.measured, c.unit) + (f" ({v.note})" if v.note else "")
        lines.append(f"| {statement} | {c.source} | {measured} | {c.holds_if()} | **{v.word}** |")
    return "\n".join(lines)
