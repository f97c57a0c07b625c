"""What ``vflsec bench scale``'s report derives from the cells: growth exponents and the cost
model of a Paillier epoch on k nodes of c cores.

Growth: time ~ n^b fitted by least squares on log-log over a method's measured sizes (b = 1 is
linear). Cost model (Amdahl's law with a per-task overhead): an epoch on ``w`` workers takes
``T(w) = S + W / w`` on the local pool, where ``S`` is the work no worker does (the key holder's
decryptions, the active party's plaintext steps, messaging) and ``W`` the work the workers share
(encryption, encrypted products); two local runs (1 and 2 workers) give both. Through Ray each
of the epoch's tasks adds an overhead ``tau`` (scheduling, shipping public-key ciphertexts),
calibrated on the 1-node Ray run: ``T_ray(k, c) = S + W / (k c) + tasks * tau``. The 2-node Ray
run is then a prediction the measurement checks (the issue asks within 20%). Per row, ``S``,
``W`` and the tasks scale with n (one epoch touches every row once), which gives the predicted
epoch for 10^7 and 10^8 rows on 4 nodes of 16 cores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Optional, Sequence

import numpy as np

__all__ = ["CostModel", "fit_cost_model", "growth_exponent"]


def growth_exponent(sizes: Sequence[float], values: Sequence[float]) -> Optional[float]:
    """The slope b of log(value) against log(n) (None with fewer than two distinct sizes)."""
    pairs = [(math.log(n), math.log(v)) for n, v in zip(sizes, values) if n > 0 and v and v > 0]
    if len({p[0] for p in pairs}) < 2:
        return None
    x, y = np.array(pairs).T
    return float(np.polyfit(x, y, 1)[0])


@dataclass(frozen=True)
class CostModel:
    """A Paillier epoch's cost per row (seconds): serial ``s``, shared ``w``; ``tau`` per Ray task;
    ``tasks_per_row``: the Ray tasks an epoch submits per row."""

    s: float
    w: float
    tau: float
    tasks_per_row: float

    def predict(self, n: float, nodes: int, cores: int, ray: bool = True) -> float:
        """Seconds of one epoch on ``n`` rows with ``nodes`` x ``cores`` workers (``ray``: with the
        per-task overhead)."""
        overhead = self.tau * self.tasks_per_row * n if ray else 0.0
        return n * (self.s + self.w / (nodes * cores)) + overhead


def fit_cost_model(n: int, local_1: float, local_2: float, ray_1: float, tasks: float) -> CostModel:
    """The model from one epoch on ``n`` rows on the local pool with 1 and 2 workers
    (``local_1``, ``local_2`` seconds) and through Ray on one node of one core (``ray_1``),
    which submitted ``tasks`` tasks."""
    w = max(0.0, 2.0 * (local_1 - local_2)) / n
    s = max(0.0, local_1 / n - w)
    tau = max(0.0, (ray_1 - local_1) / tasks) if tasks else 0.0
    return CostModel(s=s, w=w, tau=tau, tasks_per_row=tasks / n if n else 0.0)


def relative_error(predicted: float, measured: float) -> float:
    return abs(predicted - measured) / measured if measured else float("inf")


def summarize_exponents(cells: Sequence[Dict], key: str = "wall_s") -> Dict[str, Optional[float]]:
    """Growth exponent of ``key`` per method over the cells without errors."""
    out: Dict[str, Optional[float]] = {}
    for method in sorted({c["method"] for c in cells}):
        rows = [c for c in cells if c["method"] == method and "error" not in c and c.get(key)]
        out[method] = growth_exponent([c["n"] for c in rows], [c[key] for c in rows])
    return out
