"""Private hyperparameter selection cells of ``vflsec bench glm``.

Papernot & Steinke (ICLR 2022) random stopping: K ~ Poisson(mean) runs,
each on a uniformly drawn configuration of the wide grid, trained with
HDP-VFL on 80% of the training rows and scored by a noisy count of correct
predictions on the other 20%; the best run's model is released
(:func:`vflsec.glm.tuning.private_select`). Every run is calibrated to one
per-run budget ``epsilon_0``, solved here so that the selection's accounted
total (Theorem 6) is the row's epsilon at delta = :data:`DELTA`. The model
evaluated on the test set is the selected run's own (no refit: a refit would
be one more, unaccounted, mechanism).
"""
from __future__ import annotations

import functools
import math
from typing import Any, Dict, Optional, Sequence, cast

import numpy as np

from .fits import PreparedSplit
from .grid import DELTA, LAM, HyperParams

__all__ = ["VALIDATION_FRACTION", "per_run_epsilon", "private_selection_cell"]

VALIDATION_FRACTION = 0.2


@functools.lru_cache(maxsize=None)
def per_run_epsilon(epsilon: float, mean_candidates: float) -> Optional[float]:
    """The per-run budget whose Poisson(mean_candidates) random-stopping
    selection is (epsilon, DELTA)-DP (Theorem 6), by bisection on log epsilon_0
    (the selection's epsilon grows with epsilon_0); None when no per-run
    budget is small enough (the selection's epsilon has a floor: ~0.087 for
    10 expected runs at delta = 0.01, where the analytic calibration's sigma
    saturates as epsilon_0 -> 0)."""
    from ....dp import GaussianMechanism
    from ....dp.selection import PoissonRepetitions, selection_epsilon

    reps = PoissonRepetitions(mean_candidates)

    def total(log_eps0: float) -> float:
        # A run's mechanism calibrated to (epsilon_0, DELTA) (its multiplier does not depend on the sensitivity).
        run = GaussianMechanism.calibrated("hdp_passive_ir", epsilon=math.exp(log_eps0), delta=DELTA,
                                           sensitivity=1.0, method="analytic")
        return selection_epsilon(run.noise_multiplier, reps, DELTA)[0]

    lo, hi = math.log(epsilon) - 30.0, math.log(epsilon)
    if total(lo) > epsilon:
        return None
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if total(mid) <= epsilon:
            lo = mid
        else:
            hi = mid
    return math.exp(lo)


def private_selection_cell(prep: PreparedSplit, grid: Sequence[HyperParams], *, epsilon: float,
                           mean_candidates: float, seed: Optional[int]) -> Dict[str, Any]:
    """Test accuracy of the selected run and what the selection spent."""
    from ....glm import GLMJob
    from ....glm.tuning import PoissonRepetitions, private_select

    eps0 = per_run_epsilon(float(epsilon), float(mean_candidates))
    if eps0 is None:
        return {"accuracy": None, "chosen": None, "unreachable": True, "runs": 0}
    n = prep.n_train
    n_fit = n - int(round(VALIDATION_FRACTION * n))
    passives = tuple(f"passive{i}" for i in range(1, prep.n_parties))
    candidates = []
    for hp in grid:
        h = hp.for_rows(n_fit)
        candidates.append(GLMJob("hdp", n_samples=n, lr=h.lr, epochs=h.epochs, batch_size=h.batch_size, k=h.k,
                                 lam=LAM, seed=prep.split_seed, passives=passives, epsilon=eps0, delta=DELTA,
                                 calibration="analytic"))
    out = private_select(prep.train, prep.y_train, candidates, PoissonRepetitions(mean_candidates), delta=DELTA,
                         validation_fraction=VALIDATION_FRACTION, seed=seed)
    cell: Dict[str, Any] = {
        "epsilon_per_run": eps0, "accounted_epsilon": out.privacy.epsilon, "runs": out.n_runs,
        "theorem": out.privacy.theorem,
        "transcript_epsilon": max(out.privacy.transcript_epsilon_by_party.values()),
    }
    if out.coef is None:  # K = 0: nothing released; a model must then guess
        cell.update(accuracy=None, chosen=None)
        return cell
    from .fits import auc

    theta = sum(X @ w for X, w in zip(prep.test, out.coef))
    cell["accuracy"] = float(np.mean(np.where(theta > 0, 1.0, -1.0) == prep.y_test))
    cell["auc"] = auc(theta, prep.y_test)
    cell["chosen"] = grid[cast(int, out.index)].for_rows(n_fit)  # an index whenever a model was released
    return cell
