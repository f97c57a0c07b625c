"""Audit of the bare lattice release (``lattice_gaussian``), float64 and float32.

The pair: a vector x0 = 0 of 8 coordinates and x1 = x0 shifted by exactly the
stated sensitivity, spread evenly over the coordinates (the release adds
independent noise per coordinate, so any direction is as hard). The product's
claim is the guarantee of ``GaussianMechanism.calibrated`` for epsilon 2 at
delta 1e-5; all runs of a world are one call of the real release
(:func:`vflsec.kernels.add_gaussian_noise`) on a (runs, 8) array, which is
runs independent releases.
"""
from __future__ import annotations

import math

import numpy as np

from .cases import AuditCase, Claim, Scores, case_seed, project, register_case

EPSILON, DELTA, SENSITIVITY, WIDTH = 2.0, 1e-5, 1.0, 8


def _mechanism():
    from ..dp import GaussianMechanism

    return GaussianMechanism.calibrated("lattice_gaussian", epsilon=EPSILON, delta=DELTA, sensitivity=SENSITIVITY,
                                        coordinates=WIDTH)


def _claim() -> Claim:
    mechanism = _mechanism()
    spent = mechanism.privacy_spent()
    return Claim(spent.epsilon, spent.delta, spent.neighbours, "GaussianMechanism.privacy_spent()")


def _runner(dtype):
    def run(runs: int, seed: int) -> Scores:
        from ..kernels import NoiseGenerator

        mechanism = _mechanism()
        # Off the origin, so the float32 grid near the values is the one a real query meets.
        x0 = np.full(WIDTH, 3.0, dtype=dtype)
        shift = np.full(WIDTH, SENSITIVITY / math.sqrt(WIDTH))
        x1 = (x0.astype(np.float64) + shift).astype(dtype)
        realized = float(np.linalg.norm(x1.astype(np.float64) - x0.astype(np.float64))) / SENSITIVITY
        outs = []
        for world, x in ((0, x0), (1, x1)):
            batch = np.broadcast_to(x, (runs, WIDTH)).copy()
            generator = NoiseGenerator(case_seed(seed, "lattice", str(batch.dtype), world))
            outs.append(mechanism.release(batch, generator=generator))
        scores = project(outs[0], outs[1], x1.astype(np.float64) - x0.astype(np.float64))
        return Scores(scores.world0, scores.world1, realized, {"sigma": mechanism.sigma},
                      stated_mu=realized * SENSITIVITY / mechanism.sigma)
    return run


for _dtype, _label in ((np.float64, "float64"), (np.float32, "float32")):
    register_case(AuditCase(
        name=f"lattice_gaussian[{_label}]", mechanism="lattice_gaussian",
        pair=f"x and x + Delta u ({_label}, 8 coordinates, Delta = 1, u a unit vector)",
        claim=_claim, run=_runner(_dtype), runs_full=2_000_000, runs_quick=200_000))
