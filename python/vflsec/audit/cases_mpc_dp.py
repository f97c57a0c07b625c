"""Audit of DP-SGD inside MPC (protocol "mpc_dp", :mod:`vflsec.glm.mpc_dp`): one step of the
engine's release, computed in the clear by the product's own function
(:func:`~vflsec.glm.mpc_dp.noisy_gradient_sums`) on the values the engine holds, as one party
sees it.

The job: two parties (P = 2) with blocks of width 2 each, 8 rows, ``batch_size = n`` and one
epoch, so the Poisson rate is q = 1 and there is one step; epsilon 2 at delta 1e-5 (the
central case's budget). The claim is the product's report for that job
(:func:`~vflsec.glm.mpc_dp.mpc_dp_privacy_spent`); sigma, the lattice spacing ``g`` (the
engine's fixed point) and ``C`` are the job's plan (:func:`~vflsec.glm.mpc_dp.mpc_dp_plan`).

The pair: row 0's blocks are ``(c, -s)`` and ``(c, -s)`` in world 0 and ``(-c, -s)`` and
``(-c, -s)`` in world 1 (``s = 2^-6``, ``c = sqrt(1 - s^2)`` on the grid: each block in the
unit ball, checked by :func:`~vflsec.glm.mpc_dp.check_party_rows`), label +1, the other 7 rows
equal in both worlds. The step's weights put ``2048`` on each block's second coordinate, so
row 0's margin is ``-64`` in both worlds and its clamped slope is exactly -1 in float64: the
row's joined gradient moves by ``2 sqrt(2) c`` of the stated ``2C = 2 (sqrt(2) ROW_BOUND + 1.5
sqrt(d) 2^-12)``, short of it by the fixed-point slack (which a run in float64 does not meet)
and by ``1 - c ~ s^2 / 2`` (the slant that lets one weight vector saturate the row's slope in
both worlds). Weights that large are reachable (the job's ``k`` is None) and the guarantee
holds for any weights (the clamp on the slope, not the weights, bounds a row's gradient).

A party's view: the released sum minus the noise share it added itself, i.e. the clean sum
plus the *other* party's share ``g K``, drawn as :meth:`~vflsec.glm.mpc_dp.MPCDPTraining.
run_private` draws it (``lattice_gaussian((S, d), sigma) * g``, one row per run: S = 1 here).
All runs of a world are one call of the release function with a (runs, width) noise block per
party (it adds the noise by broadcasting), so a quick audit of 2e5 runs per world is seconds.
"""
from __future__ import annotations

import math
from typing import Any, List, Tuple

import numpy as np

from .cases import AuditCase, Claim, Scores, case_seed, project, register_case

N, EPSILON, DELTA = 8, 2.0, 1e-5
WIDTHS = {"active": 2, "passive": 2}
#: row 0's small coordinate and the weight on it: margin -2 * WEIGHT * SLANT = -64, sigmoid(64) == 1.0
SLANT, WEIGHT = 2.0 ** -6, 2048.0


def _job() -> Any:
    from ..glm.job import GLMJob

    return GLMJob(protocol="mpc_dp", n_samples=N, loss="logistic", penalty="l2", lam=0.0, epochs=1,
                  batch_size=N, k=None, epsilon=EPSILON, delta=DELTA, widths=dict(WIDTHS))


def _plan() -> Any:
    from ..glm.mpc_dp import mpc_dp_plan

    job = _job()
    return mpc_dp_plan(job, [job.widths[name] for name in job.data_parties])


def _claim() -> Claim:
    from ..glm.mpc_dp import mpc_dp_privacy_spent

    spent = mpc_dp_privacy_spent(_job())
    return Claim(spent.epsilon, spent.delta, spent.neighbours, "mpc_dp_privacy_spent(job)")


def _on_grid(x: np.ndarray, spacing: float) -> np.ndarray:
    """The engine's fixed-point value of ``x``, rounded toward zero (a row stays in its ball)."""
    return np.trunc(np.asarray(x, dtype=np.float64) / spacing) * spacing


def _inputs(world: int, spacing: float) -> Tuple[List[np.ndarray], np.ndarray, List[np.ndarray]]:
    """Both parties' blocks, the labels and the step's weight blocks, on the engine's grid."""
    c = math.sqrt(1.0 - SLANT ** 2)
    active = np.tile([0.6, 0.8], (N, 1))
    passive = np.tile([0.8, -0.6], (N, 1))
    active[1::2], passive[1::2] = [-0.8, 0.6], [0.0, 1.0]
    sign = 1.0 if world == 0 else -1.0
    active[0] = passive[0] = [sign * c, -SLANT]
    y = np.where(np.arange(N) % 3 == 0, 1.0, -1.0)
    weights = [np.array([0.0, WEIGHT]), np.array([0.0, WEIGHT])]
    return ([_on_grid(active, spacing), _on_grid(passive, spacing)], y,
            [_on_grid(w, spacing) for w in weights])


def _noise_share(plan: Any, runs: int, generator: Any) -> np.ndarray:
    """``runs`` draws of one party's noise share, as ``MPCDPTraining.run_private`` draws it."""
    from ..kernels import lattice_gaussian

    return lattice_gaussian((runs * plan.steps_per_run, plan.coordinates), plan.sigma,
                            generator=generator) * plan.spacing


def _run(runs: int, seed: int) -> Scores:
    import jax.numpy as jnp
    from jax.experimental import enable_x64

    from ..glm.mpc_dp import SAMPLING_BITS, check_party_rows, noisy_gradient_sums, poisson_selection
    from ..kernels import NoiseGenerator

    job, plan = _job(), _plan()
    if plan.sampling_rate != 1.0 or plan.steps != 1 or plan.parties != 2:
        raise RuntimeError(f"the case needs one step at q = 1 with two parties, the plan has {plan}")
    offsets = np.cumsum([0, *WIDTHS.values()])
    views, clean = [], []
    with enable_x64():
        for world in (0, 1):
            blocks, y, weights = _inputs(world, plan.spacing)
            for name, X in zip(job.data_parties, blocks):
                check_party_rows(job, name, X, None)  # the pair is admissible: each party's own check
            own = NoiseGenerator(case_seed(seed, "mpc_dp", "own share", world))
            other = NoiseGenerator(case_seed(seed, "mpc_dp", "other share", world))
            grid = 2 ** SAMPLING_BITS
            draws = [jnp.asarray(gen.integers_below(grid, N) / grid) for gen in (own, other)]
            selected = poisson_selection(draws, plan.sampling_rate)  # everyone at q = 1
            shares = [_noise_share(plan, runs, gen) for gen in (own, other)]
            total = shares[0] + shares[1]
            noise = [jnp.asarray(total[:, offsets[r]:offsets[r + 1]]) for r in range(2)]
            args = ([jnp.asarray(X) for X in blocks], jnp.asarray(y), [jnp.asarray(w) for w in weights])
            released = noisy_gradient_sums(*args, selected, noise)  # (runs, width) per block: runs releases
            views.append(np.hstack([np.asarray(r) for r in released]) - shares[0])  # minus its own share
            sums = noisy_gradient_sums(*args, jnp.ones(N, dtype=bool), [jnp.zeros(w) for w in WIDTHS.values()])
            clean.append(np.concatenate([np.asarray(s) for s in sums]))
    scores = project(views[0], views[1], clean[1] - clean[0])
    distance = float(np.linalg.norm(clean[1] - clean[0]))
    return Scores(scores.world0, scores.world1, distance / (2.0 * plan.clip),
                  {"clean distance": f"{distance:.6g} (2C = {2 * plan.clip:.6g})",
                   "sigma per share": plan.sigma, "lattice spacing (engine fixed point)": plan.spacing},
                  stated_mu=distance / plan.sigma)  # the view keeps the other party's share: one sigma


register_case(AuditCase(
    name="mpc_dp_sgd[one step, q = 1, a party's view]", mechanism="mpc_dp_sgd",
    pair="2 parties, 8 rows of unit blocks; row 0's blocks (c, -s) or (-c, -s), margin -64 (slope -1): "
         "joined gradients 2 sqrt(2) c apart; the release minus the viewer's own noise share",
    claim=_claim, run=_run, runs_full=2_000_000, runs_quick=200_000))
