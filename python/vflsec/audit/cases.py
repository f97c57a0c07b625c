"""Audit cases: for each DP mechanism of :data:`vflsec.dp.MECHANISMS`, one or more
worst-case neighbouring pairs run through the product's own release code.

An :class:`AuditCase` knows

* the mechanism it audits (a :data:`~vflsec.dp.MECHANISMS` name) and the pair
  of neighbouring inputs in words (``pair``);
* the guarantee the product *claims* for one release on that pair, read from
  the product's own report (``privacy_spent()``, the mechanism's guarantee):
  :meth:`AuditCase.claim`;
* how to run the release once per run in either world and reduce each output
  to a score (:meth:`AuditCase.run`): a linear distinguisher, the projection
  of the released vector on the difference of the two worlds' noiseless
  outputs where those are fixed (the likelihood-ratio test of a Gaussian
  release), else on the difference of the worlds' mean outputs estimated
  from separate calibration runs.

``CASES`` is the registry; :func:`register_case` adds to it. The case modules
(:mod:`.cases_lattice`, :mod:`.cases_glm`, :mod:`.cases_splitnn`,
:mod:`.cases_central_dp`, :mod:`.cases_mpc_dp`, :mod:`.cases_trees`) register theirs on import
(:func:`load_cases`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

import numpy as np

__all__ = ["CASES", "FITS", "AuditCase", "Claim", "Scores", "case_seed", "load_cases", "project", "register_case"]

#: how a case's scores are fitted (:mod:`.statistics`: ``fit_gaussian_dp``, ``fit_discrete_dp``)
FITS = ("gaussian", "discrete")


@dataclass(frozen=True)
class Claim:
    """What the product reports for one release on the case's pair: ``epsilon``
    (None: no guarantee claimed) at ``delta`` under ``neighbours``; ``source``
    names where the product reports it."""

    epsilon: Optional[float]
    delta: float
    neighbours: str
    source: str


@dataclass(frozen=True)
class Scores:
    """The distinguisher's scores in world 0 and world 1 (one per run), and,
    where the case can compute it, the distance between the two worlds'
    noiseless outputs over the mechanism's stated sensitivity (> 1: the
    stated bound does not hold on this pair).

    ``stated_mu``: where the release is one Gaussian of a sigma the mechanism
    states and the pair's noiseless outputs are fixed, the Gaussian-DP ``mu``
    that noise gives this very pair (their distance over sigma): the scores
    of an honest release separate by that much, whatever the pair's strength
    (the auditor's noise check, :func:`vflsec.audit.runner.violations`)."""

    world0: np.ndarray
    world1: np.ndarray
    realized_sensitivity_ratio: Optional[float] = None
    notes: Dict[str, Any] = field(default_factory=dict)
    stated_mu: Optional[float] = None


@dataclass(frozen=True)
class AuditCase:
    """One audit: ``name`` (unique), ``mechanism`` (a MECHANISMS name), ``pair``
    (the worst-case neighbouring inputs in words), ``claim()``, ``run(runs,
    seed) -> Scores``, the runs per world of a full and a ``--quick`` audit, and
    ``fit``: how the fitted epsilon reads the scores ("gaussian": Gaussian DP's
    mu; "discrete": a release of few output values, such as randomized
    response, by its outputs' frequencies). ``limit``: why the case cannot
    catch a copy of the mechanism with half its noise (its best known pair
    stays below half the claim and its release has no stated per-pair
    noise to check), or None: it must (``vflsec audit --self-test``)."""

    name: str
    mechanism: str
    pair: str
    claim: Callable[[], Claim]
    run: Callable[[int, int], Scores]
    runs_full: int
    runs_quick: int
    fit: str = "gaussian"
    limit: Optional[str] = None

    def __post_init__(self) -> None:
        if self.fit not in FITS:
            raise ValueError(f"fit must be one of {FITS}, got {self.fit!r}")


CASES: Dict[str, AuditCase] = {}
CASE_MODULES = ("cases_lattice", "cases_glm", "cases_splitnn", "cases_central_dp", "cases_mpc_dp", "cases_trees")


def register_case(case: AuditCase) -> AuditCase:
    from ..dp.mechanisms import mechanism_info

    mechanism_info(case.mechanism)  # a case audits a catalogued mechanism
    if case.name in CASES:
        raise ValueError(f"audit case {case.name!r} is already registered")
    CASES[case.name] = case
    return case


def load_cases() -> Dict[str, AuditCase]:
    """Every registered case (imports the case modules once)."""
    import importlib

    for module in CASE_MODULES:  # each registers its cases on import
        importlib.import_module(f"{__package__}.{module}")
    return CASES


def case_seed(seed: int, *parts: Any) -> int:
    """A 63-bit seed for one stream of one case, derived from the audit's ``--seed``."""
    text = "/".join(str(p) for p in (seed, *parts)).encode()
    return int.from_bytes(hashlib.sha256(b"vflsec.audit/" + text).digest()[:8], "little") >> 1


def project(outputs0: np.ndarray, outputs1: np.ndarray, direction: np.ndarray) -> Scores:
    """Scores: each run's released vector projected on ``direction`` (rows = runs)."""
    direction = np.asarray(direction, dtype=np.float64).ravel()
    norm = float(np.linalg.norm(direction))
    if not norm > 0.0:
        raise ValueError("the two worlds' outputs do not differ: no direction to test")
    u = direction / norm
    a0 = np.asarray(outputs0, dtype=np.float64).reshape(len(outputs0), -1)
    a1 = np.asarray(outputs1, dtype=np.float64).reshape(len(outputs1), -1)
    return Scores(a0 @ u, a1 @ u)


def learned_direction(sample: Callable[[int, int, int], np.ndarray], calibration_runs: int, seed: int) -> np.ndarray:
    """``mean(world 1) - mean(world 0)`` of ``calibration_runs`` runs per world drawn
    with their own seeds (never reused for scoring). ``sample(world, runs, seed)``
    returns the released vectors, one row per run."""
    m0 = np.asarray(sample(0, calibration_runs, case_seed(seed, "calibration", 0)), dtype=np.float64)
    m1 = np.asarray(sample(1, calibration_runs, case_seed(seed, "calibration", 1)), dtype=np.float64)
    return m1.reshape(calibration_runs, -1).mean(axis=0) - m0.reshape(calibration_runs, -1).mean(axis=0)


def sampled_scores(sample: Callable[[int, int, int], np.ndarray], runs: int, seed: int, *,
                   direction: Optional[np.ndarray] = None, calibration_runs: Optional[int] = None,
                   realized: Optional[float] = None, notes: Optional[Dict[str, Any]] = None,
                   stated_mu: Optional[float] = None) -> Scores:
    """Runs ``sample`` in both worlds and projects on ``direction`` (or one learned
    from separate calibration runs: a fifth of ``runs`` unless given)."""
    if direction is None:
        direction = learned_direction(sample, calibration_runs or max(50, runs // 5), seed)
    out0 = sample(0, runs, case_seed(seed, "world", 0))
    out1 = sample(1, runs, case_seed(seed, "world", 1))
    scores = project(out0, out1, direction)
    return Scores(scores.world0, scores.world1, realized, dict(notes or {}), stated_mu)


def stack_runs(run_once: Callable[[Any], np.ndarray], runs: int, state: Any, desc: str = "runs") -> np.ndarray:
    """``runs`` outputs of ``run_once(state)`` as rows of one array (a progress bar
    on stderr for the long ones)."""
    from .._progress import progress

    rows: List[np.ndarray] = []
    for _ in progress(range(runs), desc=desc, unit="run", leave=False, disable=runs < 500):
        rows.append(np.asarray(run_once(state), dtype=np.float64).ravel())
    return np.stack(rows)
