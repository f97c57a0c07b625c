"""Audits of the central-DP reference (:mod:`vflsec.glm.central_dp`): its three releases
run on a worst-case neighbouring pair through the product's own code.

The pair: 8 signed rows ``z_i = y_i x_i`` of 2 coordinates, all equal to the unit
vector ``u = (0.6, 0.8)`` except row 0, which is ``+u`` in world 0 and ``-u`` in
world 1 (the row's features moved from x to -x with its label kept: its loss
gradient flips direction; moving x to -x *and* flipping the label leaves
``y theta . x``, hence the loss, unchanged).

* ``central_output_perturbation``: the exact minimisers ``theta_0``, ``theta_1``
  of the two worlds (:func:`~vflsec.glm.central_dp.solve_erm`, lam = 1) are
  released by the product's mechanism, all runs of a world in one call (runs
  independent releases); the distinguisher projects on ``theta_1 - theta_0``,
  whose norm over the stated sensitivity ``2 / (n lam)`` is reported (the
  logistic loss realises about half the generic bound here: ``|phi'(m)| +
  |phi'(-m)| = 1``).
* ``central_objective_perturbation``: one full release per run
  (:func:`~vflsec.glm.central_dp.release_objective_perturbation`: a noise draw,
  then the solve) at the theorem's minimum lam, where the Jacobian takes half of
  epsilon; the distinguisher projects on the difference of the noiseless minimisers.
* ``central_dp_sgd``: one DP-SGD step with every row taking part (q = 1), clip
  ``C = 1/4`` below the rows' gradient norm ``1/2`` at ``theta = 0``, so the
  released sums of the two worlds are exactly ``2C`` apart
  (:func:`~vflsec.glm.central_dp.release_dp_sgd`, lr 1: the model after the step
  is minus the noisy mean gradient).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .cases import AuditCase, Claim, Scores, case_seed, project, register_case, stack_runs

N, EPSILON, DELTA = 8, 2.0, 1e-5
ROW = np.array([0.6, 0.8])
OUTPUT_LAM, SGD_CLIP = 1.0, 0.25


def _rows(world: int) -> np.ndarray:
    Z = np.tile(ROW, (N, 1))
    if world == 1:
        Z[0] = -ROW
    return Z


def _output_mechanism() -> Any:
    from ..glm.central_dp import output_perturbation_mechanism

    return output_perturbation_mechanism(epsilon=EPSILON, delta=DELTA, n=N, lam=OUTPUT_LAM, coordinates=ROW.size)


def _objective_lam() -> float:
    from ..dp.objective_perturbation import minimum_lam
    from ..glm.central_dp import HESSIAN_BOUND

    return minimum_lam(EPSILON, N, HESSIAN_BOUND)


def _objective_mechanism() -> Any:
    from ..glm.central_dp import objective_perturbation_mechanism

    return objective_perturbation_mechanism(epsilon=EPSILON, delta=DELTA, n=N, lam=_objective_lam(),
                                            coordinates=ROW.size)


def _sgd_mechanism() -> Any:
    from ..glm.central_dp import dp_sgd_mechanism

    return dp_sgd_mechanism(epsilon=EPSILON, delta=DELTA, n=N, sampling_rate=1.0, epochs=1, coordinates=ROW.size)


def _claim(mechanism: Callable[[], Any], source: str) -> Callable[[], Claim]:
    def claim() -> Claim:
        spent = mechanism().privacy_spent()
        return Claim(spent.epsilon, spent.delta, spent.neighbours, source)
    return claim


def _output_run(runs: int, seed: int) -> Scores:
    from ..glm.central_dp import solve_erm
    from ..kernels import NoiseGenerator

    mechanism = _output_mechanism()
    clean = [solve_erm(_rows(world), OUTPUT_LAM) for world in (0, 1)]
    outs = [mechanism.release(np.tile(clean[world], (runs, 1)), generator=NoiseGenerator(case_seed(seed, "out", world)))
            for world in (0, 1)]
    scores = project(outs[0], outs[1], clean[1] - clean[0])
    distance = float(np.linalg.norm(clean[1] - clean[0]))
    return Scores(scores.world0, scores.world1, distance / mechanism.sensitivity,
                  {"clean distance": distance, "stated sensitivity": mechanism.sensitivity},
                  stated_mu=distance / mechanism.sigma)


def _objective_run(runs: int, seed: int) -> Scores:
    from ..glm.central_dp import release_objective_perturbation, solve_erm
    from ..kernels import NoiseGenerator

    mechanism, lam = _objective_mechanism(), _objective_lam()
    clean = [solve_erm(_rows(world), lam) for world in (0, 1)]
    outs = []
    for world in (0, 1):
        state = (_rows(world), NoiseGenerator(case_seed(seed, "obj", world)))
        outs.append(stack_runs(lambda s: release_objective_perturbation(s[0], lam, mechanism, generator=s[1]), runs,
                               state, desc=f"objective perturbation world {world}"))
    scores = project(outs[0], outs[1], clean[1] - clean[0])
    # The stated bound is on the gradient shift ||grad l(theta; z_0) - grad l(theta; z_0')|| <= 2 zeta.
    shifts = [float(np.linalg.norm(_row_gradient(theta, ROW) - _row_gradient(theta, -ROW))) for theta in clean]
    return Scores(scores.world0, scores.world1, max(shifts) / (2.0 * mechanism.gradient_bound),
                  {"lam": lam, "jacobian epsilon": mechanism.jacobian_epsilon, "sigma of b": mechanism.sigma})


def _row_gradient(theta: np.ndarray, z: np.ndarray) -> np.ndarray:
    from ..glm.central_dp import clipped_gradient_sum

    return clipped_gradient_sum(z[None, :], theta, np.inf)


def _sgd_run(runs: int, seed: int) -> Scores:
    from ..glm.central_dp import clipped_gradient_sum, release_dp_sgd
    from ..kernels import NoiseGenerator

    mechanism = _sgd_mechanism()
    outs = []
    for world in (0, 1):
        state = (_rows(world), NoiseGenerator(case_seed(seed, "sgd", world)))
        outs.append(stack_runs(lambda s: release_dp_sgd(s[0], mechanism, clip=SGD_CLIP, lr=1.0, momentum=0.0,
                                                        lam=0.0, generator=s[1]), runs, state,
                               desc=f"dp-sgd world {world}"))
    sums = [clipped_gradient_sum(_rows(world), np.zeros(ROW.size), SGD_CLIP) for world in (0, 1)]
    scores = project(outs[0], outs[1], -(sums[1] - sums[0]))  # the step moves against the sum
    distance = float(np.linalg.norm(sums[1] - sums[0]))
    return Scores(scores.world0, scores.world1, distance / (2.0 * SGD_CLIP),
                  {"clean distance": f"{distance:g} (2C = {2 * SGD_CLIP:g})"},
                  stated_mu=distance / mechanism.sigma(SGD_CLIP))


register_case(AuditCase(
    name="central_output_perturbation", mechanism="central_output_perturbation",
    pair="8 signed rows u = (0.6, 0.8), row 0 = +u or -u; the exact minimisers (lam = 1) released",
    claim=_claim(_output_mechanism, "output_perturbation_mechanism(...).privacy_spent()"),
    run=_output_run, runs_full=2_000_000, runs_quick=200_000))
register_case(AuditCase(
    name="central_objective_perturbation", mechanism="central_objective_perturbation",
    pair="8 signed rows u = (0.6, 0.8), row 0 = +u or -u; lam at the theorem's minimum",
    claim=_claim(_objective_mechanism, "objective_perturbation_mechanism(...).privacy_spent()"),
    run=_objective_run, runs_full=20_000, runs_quick=2_000,
    limit=("the release is the minimiser of an objective perturbed by b ~ N(0, sigma^2 I), not a Gaussian of a "
           "stated sigma, so there is no per-pair noise to check; and the claim (Kifer, Smith & Thakurta, Theorem "
           "2) charges a Jacobian term (the map from b to the minimiser stretching densities, jacobian epsilon in "
           "the pair's notes) plus b's part at the worst gradient shift 2 zeta over every theta. The best pair "
           "known realizes half of that shift (pair / stated sensitivity) and a Jacobian ratio near 1, so its "
           "empirical epsilon stays well below half of the claim, and halving b's noise does not lift it above "
           "the claim. Catching a 2x break here needs a pair that realizes the Jacobian term, not more runs.")))
register_case(AuditCase(
    name="central_dp_sgd[one step, q = 1]", mechanism="central_dp_sgd",
    pair="8 signed rows u = (0.6, 0.8), row 0 = +u or -u, theta = 0, clip 1/4: clipped sums 2C apart",
    claim=_claim(_sgd_mechanism, "dp_sgd_mechanism(...).privacy_spent()"),
    run=_sgd_run, runs_full=20_000, runs_quick=2_000))
