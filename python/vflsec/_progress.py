"""Per-epoch progress lines (estimators' ``verbose=`` and ``vflsec party``).

:class:`EpochProgress` is the ``progress`` hook of a party's data
(:class:`vflsec.glm.job.PartyData`, :class:`vflsec.splitnn.job.SplitPartyData`):
the party programs call it as ``progress(epoch, history)`` at the end of every
epoch, after the epoch's entries were appended to ``history`` (an empty dict
for a party without labels). It formats one line,
``epoch k/E: loss 0.4123, accuracy 0.871, 1.3 s[, epsilon 1.00 (...)]``, and
hands it to ``emit``.
"""
from __future__ import annotations

import time
from typing import Any, Callable, List, Mapping, Optional, Sequence

__all__ = ["EpochProgress", "format_epsilon", "progress", "time_left"]


def time_left(elapsed: float, done: int, total: int) -> str:
    """``"about 2.1 min left"`` (or ``"about 41 s left"``): the mean seconds per item so far times the
    items left, after ``done`` of ``total`` items took ``elapsed`` seconds."""
    rest = elapsed / max(int(done), 1) * max(int(total) - int(done), 0)
    return f"about {rest / 60:.1f} min left" if rest >= 60 else f"about {rest:.0f} s left"


def format_epsilon(spent: Any) -> Optional[str]:
    """``"epsilon 5.00 (delta 1e-05)"`` for a PrivacySpent-like object (or a
    mapping of them: the largest epsilon), ``"no DP guarantee"`` when one has
    no epsilon (a release without a proven bound: said, never left out), None
    when there is no report at all."""
    if isinstance(spent, Mapping):
        values = [s for s in spent.values() if s is not None]
        if not values:
            return None
        if any(s.epsilon is None for s in values):
            return "no DP guarantee"
        spent = max(values, key=lambda s: float(s.epsilon))
    if spent is None:
        return None
    if spent.epsilon is None:
        return "no DP guarantee"
    return f"epsilon {float(spent.epsilon):.2f} (delta {float(spent.delta):.3g})"


class EpochProgress:
    """``progress(epoch, history)`` hook emitting one line per epoch.

    ``epochs``: the job's epoch count; ``emit``: called with each line;
    ``epsilon``: optional zero-argument callable returning a PrivacySpent-like
    object (or a mapping of them, or None) -- errors in it are not fatal, the
    line is printed without it; ``prefix``: put before each line. Seconds are
    counted from the previous epoch's end (the first from construction or
    :meth:`restart`)."""

    def __init__(self, epochs: int, emit: Callable[[str], None], *, epsilon: Optional[Callable[[], Any]] = None,
                 prefix: str = ""):
        self.epochs = int(epochs)
        self.emit = emit
        self.epsilon = epsilon
        self.prefix = prefix
        self.lines: List[str] = []
        self.restart()

    def restart(self) -> None:
        self._last = time.perf_counter()

    def __call__(self, epoch: int, history: Mapping[str, Sequence[float]]) -> None:
        now = time.perf_counter()
        seconds, self._last = now - self._last, now
        parts = [f"{self.prefix}epoch {int(epoch) + 1}/{self.epochs}"]
        metrics = []
        for key in ("loss", "accuracy"):
            values = history.get(key) if history else None
            if values:
                metrics.append(f"{key} {float(values[-1]):.4f}")
        metrics.append(f"{seconds:.2f} s")
        if self.epsilon is not None:
            try:
                text = format_epsilon(self.epsilon())
            except Exception:  # noqa: BLE001 - progress output must never stop a run
                text = None
            if text is not None:
                metrics.append(text)
        line = parts[0] + ": " + ", ".join(metrics)
        self.lines.append(line)
        self.emit(line)


def progress(iterable: Any, *, desc: str, unit: str = "it", total: Optional[int] = None, leave: bool = True,
             disable: bool = False, every: float = 10.0) -> Any:
    """``iterable`` with progress shown: a tqdm bar where tqdm is installed (the
    ``bench`` extra), else log lines (``desc: 3/12 unit, 41 s, about 2.1 min
    left``) at most every ``every`` seconds and at the end, on stderr through the
    ``vflsec`` logger. Long work always says how far it is."""
    if disable:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:
        return _log_progress(iterable, desc=desc, unit=unit, total=total, every=every)
    return tqdm(iterable, desc=desc, unit=unit, total=total, leave=leave, mininterval=1.0)


def _log_progress(iterable: Any, *, desc: str, unit: str, total: Optional[int], every: float) -> Any:
    import logging

    log = logging.getLogger("vflsec")
    if not log.handlers and not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    if total is None:
        try:
            total = len(iterable)
        except TypeError:
            total = None
    start = last = time.perf_counter()
    done = 0
    for item in iterable:
        yield item
        done += 1
        now = time.perf_counter()
        if now - last >= every or done == total:
            last = now
            elapsed = now - start
            left = f", {time_left(elapsed, done, total)}" if total else ""
            log.info("%s: %d%s %s, %.0f s%s", desc, done, f"/{total}" if total else "", unit, elapsed, left)
