"""A passive party's budget for predict jobs on its model, and its ledger of what it answered.

Every customer a predict job scores shows the active party the passive party's partial score
``x_p . w_p`` (GLM) or its split masks (trees) of that customer, which no training epsilon covers.
Nothing else limits how many customers, how many jobs or how many repeats an active party asks
about, so the passive party sets it in its party file (``[predict]``, defaults below: finite)::

    [predict]
    max_ids_per_job = 100000       # aligned customers one predict job may be answered for
    max_jobs = 1000                # predict jobs answered on this model, over its life
    max_scores = 10000000          # customers answered on this model, over every job
    repeat_window_days = 0.0       # a customer answered less than this long ago is not answered again; 0
                                   # (the default) turns it off: the same model and row give the same score

Before any score leaves it, the passive party checks the aligned customers of the job against
the budget and the ledger (:meth:`PredictBudget.refusal`); past it, the job stops at every party
with one line naming the limit and the key that raises it. After it answered, it appends one line
to the ledger beside its model (``<model>.predict-ledger.jsonl``, 0600, append-only JSON lines:
the time, the predict job's digest, how many customers, and a digest of each customer's ID
under the model's training run, kept while a repeat window is set). Its summary names what it
released and what is left.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence

__all__ = ["BUDGET_KEYS", "DEFAULTS", "PredictBudget", "budget_from_table", "ledger_path"]

DEFAULTS: Dict[str, float] = {"max_ids_per_job": 100_000, "max_jobs": 1_000, "max_scores": 10_000_000,
                              "repeat_window_days": 0.0}
BUDGET_KEYS = tuple(DEFAULTS)
_DAY_S = 86_400.0


def ledger_path(model: Path) -> Path:
    """The ledger of what this party answered about ``model``, beside it."""
    return Path(f"{model}.predict-ledger.jsonl")


def budget_from_table(table: Mapping[str, Any], where: str) -> Dict[str, float]:
    """``[predict]`` checked (ValueError naming ``where`` and the key): the limits, defaults filled in."""
    unknown = sorted(set(table) - set(BUDGET_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown [predict] keys {unknown} (known: {', '.join(BUDGET_KEYS)})")
    out = dict(DEFAULTS)
    for key, value in table.items():
        integral = key != "repeat_window_days"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or (integral and (not float(value).is_integer() or value < 1)) or (not integral and value < 0):
            what = "an integer >= 1" if integral else "a number of days >= 0"
            raise ValueError(f"{where}: [predict] {key} must be {what} (a budget is finite), got {value!r}")
        out[key] = float(value)
    return out


def _digest(run: str, item: str) -> str:
    return hashlib.sha256(f"{run}\n{item}".encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class PredictBudget:
    """The limits of ``[predict]`` (:func:`budget_from_table`) for the model at ``model``, whose
    training run is ``run`` (the digest every party's model agrees on)."""

    limits: Mapping[str, float]
    model: Path
    run: str
    job_sha256: str = ""  # the predict job's digest, recorded with each answer

    @property
    def ledger(self) -> Path:
        return ledger_path(self.model)

    def _entries(self) -> Iterator[Dict[str, Any]]:
        try:
            with open(self.ledger, "r", encoding="utf-8") as fh:
                lines = fh.read().splitlines()
        except FileNotFoundError:
            return
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                raise ValueError(f"the predict ledger {self.ledger} has an unreadable line {number}: it records what "
                                 "this party answered, so no job is answered until it is repaired") from None
            if not isinstance(entry, dict) or not isinstance(entry.get("ids"), int):
                raise ValueError(f"the predict ledger {self.ledger} line {number} is not a ledger entry")
            yield entry

    def spent(self, now: Optional[float] = None) -> Dict[str, Any]:
        """What the ledger records: jobs, customers answered, and the digests answered within the window."""
        now = time.time() if now is None else now
        window = self.limits["repeat_window_days"] * _DAY_S
        jobs = scores = 0
        recent: set = set()
        for entry in self._entries():
            jobs += 1
            scores += int(entry["ids"])
            if window > 0 and now - float(entry.get("time_s", 0.0)) < window:
                recent.update(entry.get("id_digests") or ())
        return {"jobs": jobs, "scores": scores, "recent": recent}

    def refusal(self, ids: Sequence[str], now: Optional[float] = None) -> Optional[str]:
        """Why this party will not answer for the aligned customers ``ids`` (None: it will)."""
        spent = self.spent(now)
        limits, n = self.limits, len(ids)
        if n > limits["max_ids_per_job"]:
            return (f"the job asks for {n} customers, more than [predict] max_ids_per_job = "
                    f"{int(limits['max_ids_per_job'])}")
        if spent["jobs"] + 1 > limits["max_jobs"]:
            return (f"{spent['jobs']} predict jobs were already answered on this model ([predict] max_jobs = "
                    f"{int(limits['max_jobs'])}; ledger {self.ledger})")
        if spent["scores"] + n > limits["max_scores"]:
            return (f"{spent['scores']} customers were already answered on this model and the job asks for {n} "
                    f"more ([predict] max_scores = {int(limits['max_scores'])}; ledger {self.ledger})")
        if spent["recent"]:
            repeated = sum(_digest(self.run, item) in spent["recent"] for item in ids)
            if repeated:
                return (f"{repeated} of the job's {n} customers were answered less than [predict] "
                        f"repeat_window_days = {limits['repeat_window_days']:g} ago (ledger {self.ledger})")
        return None

    def record(self, ids: Sequence[str], now: Optional[float] = None) -> Dict[str, Any]:
        """Append what was answered to the ledger; what the summary shows (released, left)."""
        now = time.time() if now is None else now
        entry: Dict[str, Any] = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)), "time_s": now,
                                 "job_sha256": self.job_sha256, "run": self.run, "ids": len(ids)}
        if self.limits["repeat_window_days"] > 0:
            entry["id_digests"] = [_digest(self.run, item) for item in ids]
        self.ledger.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        spent = self.spent(now)
        return {"customers": len(ids), "ledger": str(self.ledger),
                "left": {"jobs": int(self.limits["max_jobs"]) - spent["jobs"],
                         "scores": int(self.limits["max_scores"]) - spent["scores"]}}
