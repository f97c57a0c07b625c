"""Equality-solving feature inference on vertical linear models.

Threat model: the attacker is the honest-but-curious **active party** of a
vertical GLM. What it sees of a passive party B is only the messages
addressed to it (:func:`active_party_view` extracts them from a transcript):
per training step the batch rows (the public schedule of the job) and B's
intermediate result ``u_t = X_B[s_t] w_t`` -- in the clear ("plain"),
noised ("hdp") or encrypted under a key it does not hold ("paillier",
"ckks"). Each observed ``u_t[j]`` is one linear equation
``x_i . w_t = u_t[j]`` in the unknown features of row ``i = s_t[j]``.

* :func:`solve_linear_features` is the equality-solving attack of Luo et al.
  (2021): knowing the weights ``W`` that produced a sample's outputs, solve
  ``W x = z`` (least squares; exact when ``W`` has full column rank, i.e.
  the attacker has at least ``d_B`` independent equations). Where the
  system is short of equations the minimum-norm correction of a prior
  guess (the auxiliary mean) is returned, so no equations means "the mean".
* :func:`equality_solving_attack` applies it to training IRs (the reverse
  multiplication idea of Weng et al. 2020: products ``X_B w`` leak ``X_B``
  once enough of them are collected). The attacker does not know ``w_t``;
  it learns it from the rows it already knows: with auxiliary data ``X_aux``
  (B's features of ``m >= d_B`` customers the attacker also serves), every
  step whose batch holds known rows spanning ``R^{d_B}`` pins down
  ``w_t = lstsq(X_aux[known], u_t[known])``. Over ``e`` epochs every other
  row gets one equation per such step, so ``e >= d_B`` epochs of full-batch
  training recover it exactly from plain IRs. Needs: auxiliary rows of B
  (``d_B`` of them, in general position, in the same batches).

HDP-VFL's Gaussian noise makes both ``w_t`` and the equations noisy; HE
leaves the attacker no plaintext equation at all.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._arrays import as_float_array

__all__ = [
    "ActivePartyView",
    "EqualitySolvingResult",
    "active_party_view",
    "equality_solving_attack",
    "solve_linear_features",
]

TAG_IR_PASSIVE = "ir_passive"  # vflsec.glm.ir_exchange: plain / hdp
TAG_HE_U_PASSIVE = "he_u_passive"  # vflsec.glm.he_vfl: paillier / ckks


def solve_linear_features(weights: Any, outputs: Any, *, prior: Any = None, rcond: float = 1e-10) -> np.ndarray:
    """Luo et al.'s equality solving: ``x_i = argmin ||W x - z_i||``.

    ``weights`` (m, d): the m weight vectors behind each sample's m outputs
    (e.g. one row per class of a released multi-class linear model);
    ``outputs`` (n, m): the observed outputs. With rank(W) = d the solution is
    exact; otherwise the minimum-norm deviation from ``prior`` (d,) (default
    zeros) that fits the equations. Returns (n, d) float64."""
    W, _ = as_float_array(weights, "weights", ndim=2, dtype=np.float64)
    Z, _ = as_float_array(outputs, "outputs", dtype=np.float64)
    if Z.ndim == 1:
        Z = Z[:, None]
    if Z.ndim != 2 or Z.shape[1] != W.shape[0]:
        raise ValueError(f"outputs must be (n, {W.shape[0]}) to match weights {W.shape}, got {Z.shape}")
    p = np.zeros(W.shape[1]) if prior is None else as_float_array(prior, "prior", ndim=1, dtype=np.float64)[0]
    if p.shape != (W.shape[1],):
        raise ValueError(f"prior must have shape ({W.shape[1]},), got {p.shape}")
    W_pinv = np.linalg.pinv(W, rcond=rcond)
    return np.ascontiguousarray(p + (Z - W @ p) @ W_pinv.T)


@dataclass
class ActivePartyView:
    """What the active party observed of one passive party during training.

    ``steps``: one ``(batch_rows, ir)`` per training step, ``ir`` the received
    plaintext IR vector, or None when what arrived is not plaintext numbers
    (ciphertexts). ``n_samples``: training rows."""

    passive: str
    n_samples: int
    steps: List[Tuple[np.ndarray, Optional[np.ndarray]]] = field(default_factory=list)

    @property
    def n_plaintext_steps(self) -> int:
        return sum(ir is not None for _, ir in self.steps)


def active_party_view(transcript: Sequence[Tuple[Any, Any]], job: Any, *,
                      passive: Optional[str] = None) -> ActivePartyView:
    """Collect the IR messages ``passive`` sent to the active party of ``job``
    (a :class:`vflsec.glm.GLMJob`) from ``transcript`` (``hub.transcript`` of
    an ``InMemoryHub(keep_payloads=True)``). Only messages whose receiver is
    the active party are read; batch rows come from the job's public
    schedule."""
    passive = job.passives[0] if passive is None else passive
    if passive not in job.passives:
        raise ValueError(f"{passive!r} is not a passive party of the job {job.passives}")
    received = [payload for record, payload in transcript
                if record.receiver == job.active and record.sender == passive
                and record.tag in (TAG_IR_PASSIVE, TAG_HE_U_PASSIVE)]
    schedule = [idx for _, _, idx in job.batches()]
    if not received:
        raise ValueError(
            f"the transcript holds no IR message from {passive!r} to {job.active!r} "
            "(was the hub created with keep_payloads=True?)"
        )
    if len(received) != len(schedule):
        raise ValueError(f"found {len(received)} IR messages but the job has {len(schedule)} steps")
    view = ActivePartyView(passive, job.n_samples)
    for idx, payload in zip(schedule, received):
        plain = isinstance(payload, np.ndarray) and payload.dtype.kind == "f" and payload.shape == (len(idx),)
        view.steps.append((np.asarray(idx, dtype=np.int64), payload.astype(np.float64) if plain else None))
    return view


@dataclass
class EqualitySolvingResult:
    """Recovered features of every training row (auxiliary rows copied as
    known), and how much the attacker had to work with."""

    features: np.ndarray
    solved_steps: int             # steps whose w_t was pinned down
    equations_per_row: np.ndarray  # usable equations for each row
    exact_rows: np.ndarray         # rows (not auxiliary) with >= d independent equations

    def info(self) -> Dict[str, Any]:
        return {"solved_steps": self.solved_steps, "exact_rows": int(self.exact_rows.size),
                "median_equations": float(np.median(self.equations_per_row))}


def equality_solving_attack(view: ActivePartyView, aux_index: Any, aux_features: Any, *,
                            rcond: float = 1e-10) -> EqualitySolvingResult:
    """Recover passive features from the IRs in ``view``.

    ``aux_index`` (m,) training rows whose passive features ``aux_features``
    (m, d) the attacker already knows. Rows with too few equations get the
    minimum-norm deviation from the auxiliary mean; rows with none get the
    auxiliary mean (so with encrypted IRs the attack degrades to the best
    data-independent guess)."""
    if not isinstance(view, ActivePartyView):
        raise TypeError(f"view must be an ActivePartyView, got {type(view).__name__}")
    aux_index = np.asarray(aux_index)
    if aux_index.ndim != 1 or aux_index.size == 0 or not np.issubdtype(aux_index.dtype, np.integer):
        raise ValueError("aux_index must be a non-empty 1-D array of row indices")
    if aux_index.min() < 0 or aux_index.max() >= view.n_samples or np.unique(aux_index).size != aux_index.size:
        raise ValueError(f"aux_index must hold distinct rows in [0, {view.n_samples})")
    Xa, _ = as_float_array(aux_features, "aux_features", ndim=2, dtype=np.float64)
    if Xa.shape[0] != aux_index.size:
        raise ValueError(f"aux_features has {Xa.shape[0]} rows but aux_index has {aux_index.size}")
    n, d = view.n_samples, Xa.shape[1]
    known_pos = np.full(n, -1, dtype=np.int64)
    known_pos[aux_index] = np.arange(aux_index.size)

    # Equations x_i . w_t = u per row, from every step whose w_t the known rows determine.
    rows: List[List[np.ndarray]] = [[] for _ in range(n)]
    values: List[List[float]] = [[] for _ in range(n)]
    solved = 0
    for idx, ir in view.steps:
        if ir is None:
            continue
        in_aux = known_pos[idx] >= 0
        if in_aux.sum() < d:
            continue
        A = Xa[known_pos[idx[in_aux]]]
        if np.linalg.matrix_rank(A) < d:
            continue
        w_t = np.linalg.lstsq(A, ir[in_aux], rcond=None)[0]
        solved += 1
        for j in np.flatnonzero(~in_aux):
            rows[idx[j]].append(w_t)
            values[idx[j]].append(ir[j])

    prior = Xa.mean(axis=0)
    X_hat = np.tile(prior, (n, 1))
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    exact = []
    for i in np.flatnonzero(counts):
        W = np.asarray(rows[i])
        X_hat[i] = solve_linear_features(W, np.asarray(values[i])[None, :], prior=prior, rcond=rcond)[0]
        if np.linalg.matrix_rank(W) == d:
            exact.append(i)
    X_hat[aux_index] = Xa
    return EqualitySolvingResult(X_hat, solved, counts, np.asarray(exact, dtype=np.int64))
