"""The two errors of ``vflsec bench``: a configuration that does not validate, and
a run that failed after writing its finished cells."""
from __future__ import annotations

from pathlib import Path

__all__ = ["BenchConfigError", "PartialRunError"]


class BenchConfigError(ValueError):
    """A benchmark configuration that does not validate (one line: file, table, key, what is allowed)."""


class PartialRunError(RuntimeError):
    """A benchmark failed mid-run after writing its finished cells to ``out``
    (the results file marked ``"partial": true``); the cause is chained."""

    def __init__(self, out: Path) -> None:
        super().__init__(f"the run failed; the finished cells are in {out} (marked partial)")
        self.out = out
