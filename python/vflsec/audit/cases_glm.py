"""Audits of the vertical-GLM mechanisms: HDP-VFL's passive and active IR
sequences against a malicious peer, and private selection's noisy score.

HDP-VFL. The real role programs (``vflsec.glm.hdp``'s "hdp" protocol) run
against a scripted peer that plays the other party as badly as the protocol
lets it: the audited party's whole released IR sequence (every step of every
epoch, the unit the Lemma 3/4 bound and the claimed epsilon cover) is
collected per run. A small job keeps runs cheap: 16 rows, batches of 2, one
epoch (8 steps), one feature column per party, logistic loss, lr 3.9 (just
under the non-expansive limit 2 / (P beta + lambda) = 3.99), k = 10.

* Passive party (``hdp_passive_ir``): rows ``x_j = 1``, the changed row 0 is
  ``+1`` or ``-1``. The malicious active party sends, per step, one IR_A value
  in {-L, 0, L} (L = 1) for the changed row and one for the others, searched
  (random search, then coordinate ascent) to make the two worlds' noiseless
  sequences as far apart as it can: it steers the passive weights apart
  through the changed row's gradient, which every later IR shows.
* Active party (``hdp_active_ir``): rows ``x_j = 1, y_j = 1``; the changed row
  0 is ``(1, +1)`` or ``(-1, -1)``. The malicious passive party sends, per
  step, IR_B values in k x {-1, -1/2, -1/4, 0, 1/4, 1/2, 1} (an honest
  passive party with ``||w_B|| <= k`` on unit rows releases up to k before
  its noise, and the active party refuses more without noise), searched the
  same way: it can hold theta where the logistic loss is steepest, so the
  active weights' divergence shows in every IR.

The noiseless sequences are computed by the same programs with the job's
noise off, so the distance between them over the stated (Lemma) sensitivity
is reported as how close the construction comes to the bound (must be <= 1),
and the distinguisher is the projection on their difference.

Private selection (``selection_score``): one run's noisy validation count,
released by the product's score mechanism; the pair is counts c and c + 1.

HE-VFL with a DP model (``he_dp_gradient``): one step's masked gradients of
both blocks of a two-party job through the real party scheme (mask, unmask)
and key holder (lattice rounding and noise) of "taylor_dp" and "paillier_dp",
on the pair of :func:`_he_dp_pair` (weights at the clip bound, the changed
row tilted against them: the largest change a search finds).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from ..federation.channel import Channel
from .cases import AuditCase, Claim, Scores, case_seed, project, register_case

N, BATCH, EPOCHS, LR, K, EPSILON, DELTA = 16, 2, 1, 3.9, 10.0, 4.0, 1e-2
SEARCH_TRIALS, SEARCH_PASSES = 300, 3
IR_BOUND = 1.0  # L of the logistic loss: |dl/dtheta| <= 1


def _job(noise: bool = True, noise_seed: Optional[int] = None):
    from ..glm.job import GLMJob

    return GLMJob(protocol="hdp", n_samples=N, loss="logistic", lr=LR, epochs=EPOCHS, batch_size=BATCH, k=K,
                  epsilon=EPSILON, delta=DELTA, noise=noise, noise_seed=noise_seed, active="active",
                  passives=("passive",))


class _ScriptedPeer(Channel):
    """The other party of a two-party job, played by a script: ``reply(step, idx)``
    gives what it sends at each step; what the audited party sends is kept."""

    def __init__(self, name: str, reply: Callable[[int, np.ndarray], np.ndarray], batches: List[np.ndarray]):
        super().__init__()
        self._name = name
        self._reply = reply
        self._batches = batches
        self._step = 0
        self.sent: List[np.ndarray] = []

    @property
    def name(self) -> str:
        return self._name

    def _send(self, receiver: str, tag: str, payload: Any) -> None:
        self.sent.append(np.array(payload, dtype=np.float64))

    def _recv(self, sender: str, tag: str, timeout: Optional[float]) -> Any:
        idx = self._batches[self._step]
        self._step += 1
        return np.asarray(self._reply(self._step - 1, idx), dtype=np.float64)


def _schedule(job) -> List[np.ndarray]:
    return [np.asarray(idx) for _, _, idx in job.batches()]


def _mechanisms(job) -> Dict[str, Any]:
    from ..glm import hdp

    return hdp.hdp_mechanisms(job)


def _claim(role: str) -> Callable[[], Claim]:
    def claim() -> Claim:
        spent = _mechanisms(_job())[role].privacy_spent()
        return Claim(spent.epsilon, spent.delta, spent.neighbours,
                     f"hdp_mechanisms(job)[{role!r}].privacy_spent() (the job's whole IR sequence)")
    return claim


# -- the passive party's releases, a malicious active party ------------------------------------
def _passive_x(world: int) -> np.ndarray:
    x = np.ones((N, 1))
    x[0, 0] = 1.0 if world == 0 else -1.0
    return x


def _pattern_reply(pattern: List[Tuple[float, float]], scale: float) -> Callable[[int, np.ndarray], np.ndarray]:
    """A peer that sends, at step t, ``pattern[t][0] * scale`` for the changed row 0
    and ``pattern[t][1] * scale`` for every other row of the batch."""
    return lambda step, idx: np.where(idx == 0, pattern[step][0] * scale, pattern[step][1] * scale)


def _worst_pattern(sequence, job, scale: float, seed: int,
                   values: Tuple[float, ...] = (-1.0, 0.0, 1.0)) -> Tuple[float, str, Any, np.ndarray]:
    """The malicious peer's per-step values (each ``scale`` times one of ``values``,
    one for the changed row and one for the others) that put the two worlds'
    noiseless sequences furthest apart: random search, then coordinate ascent."""
    steps = len(_schedule(job))

    def gap(pattern):
        reply = _pattern_reply(pattern, scale)
        return float(np.linalg.norm(sequence(1, reply, job) - sequence(0, reply, job)))

    rng = np.random.default_rng(seed)
    best = max(([(float(rng.choice(values)), float(rng.choice(values))) for _ in range(steps)]
                for _ in range(SEARCH_TRIALS)), key=gap)
    best_gap = gap(best)
    for _ in range(SEARCH_PASSES):
        for t in range(steps):
            for a in values:
                for b in values:
                    trial = list(best)
                    trial[t] = (a, b)
                    g = gap(trial)
                    if g > best_gap:
                        best, best_gap = trial, g
    reply = _pattern_reply(best, scale)
    label = "per step (changed row, others): " + " ".join(f"({a:+g},{b:+g})" for a, b in best)
    return best_gap, label, reply, sequence(1, reply, job) - sequence(0, reply, job)


def _passive_sequence(world: int, reply, job) -> np.ndarray:
    from ..glm.hdp import PROTOCOL
    from ..glm.job import PartyData

    peer = _ScriptedPeer("passive", reply, _schedule(job))
    PROTOCOL["passive"](peer, job, PartyData(_passive_x(world)))
    return np.concatenate(peer.sent)


# -- the active party's releases, a malicious passive party ------------------------------------
def _active_data(world: int) -> Tuple[np.ndarray, np.ndarray]:
    x, y = np.ones((N, 1)), np.ones(N)
    if world == 1:
        x[0, 0] = -1.0
    return x, y


def _active_sequence(world: int, reply, job) -> np.ndarray:
    from ..glm.hdp import PROTOCOL
    from ..glm.job import PartyData

    peer = _ScriptedPeer("active", reply, _schedule(job))
    x, y = _active_data(world)
    PROTOCOL["active"](peer, job, PartyData(x, y))
    return np.concatenate(peer.sent)


def _hdp_runner(role: str, sequence, scale: float, values: Tuple[float, ...]) -> Callable[[int, int], Scores]:
    def run(runs: int, seed: int) -> Scores:
        from .._progress import progress

        clean = _job(noise=False)
        gap, label, reply, direction = _worst_pattern(sequence, clean, scale, case_seed(seed, role, "search"),
                                                      values)
        sensitivity = _mechanisms(clean)[role].sensitivity
        outs = []
        for world in (0, 1):
            rows = []
            for r in progress(range(runs), desc=f"hdp {role} world {world}", unit="run", leave=False,
                              disable=runs < 500):
                job = _job(noise=True, noise_seed=case_seed(seed, role, world, r))
                rows.append(sequence(world, reply, job))
            outs.append(np.stack(rows))
        scores = project(outs[0], outs[1], direction)
        return Scores(scores.world0, scores.world1, gap / sensitivity,
                      {"malicious peer": label, "clean distance": gap, "stated sensitivity": sensitivity},
                      stated_mu=gap / _mechanisms(clean)[role].sigma)
    return run


register_case(AuditCase(
    name="hdp_passive_ir[malicious active]", mechanism="hdp_passive_ir",
    pair="passive rows x_j = 1, row 0 = +1 or -1; the active party sends per step IR_A values in {-L, 0, L} "
         "searched to separate the worlds most",
    claim=_claim("passive"), run=_hdp_runner("passive", _passive_sequence, IR_BOUND, (-1.0, 0.0, 1.0)),
    runs_full=20_000, runs_quick=2_000))
register_case(AuditCase(
    name="hdp_active_ir[malicious passive]", mechanism="hdp_active_ir",
    pair="active rows (x_j, y_j) = (1, 1), row 0 = (1, 1) or (-1, -1); the passive party sends per step IR_B "
         "values in k x {-1, -1/2, -1/4, 0, 1/4, 1/2, 1} searched to separate the worlds most",
    claim=_claim("active"), run=_hdp_runner("active", _active_sequence, K, (-1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0)),
    runs_full=20_000, runs_quick=2_000))


# -- private selection's score ---------------------------------------------------------------
SCORE_MULTIPLIER, SCORE_COUNT = 2.0, 37.0


def _score_mechanism():
    from ..glm import tuning

    return tuning.score_mechanism(SCORE_MULTIPLIER)


def _score_claim() -> Claim:
    spent = _score_mechanism().privacy_spent(DELTA)
    return Claim(spent.epsilon, spent.delta, spent.neighbours,
                 "tuning.score_mechanism(z).privacy_spent(delta) (one run's score)")


def _score_run(runs: int, seed: int) -> Scores:
    from ..glm import tuning
    from ..kernels import NoiseGenerator

    mechanism = _score_mechanism()
    outs = [tuning.release_scores(np.full(runs, SCORE_COUNT + world), mechanism,
                                  NoiseGenerator(case_seed(seed, "score", world))).reshape(runs, 1)
            for world in (0, 1)]
    scores = project(outs[0], outs[1], np.ones(1))
    return Scores(scores.world0, scores.world1, 1.0 / mechanism.sensitivity, stated_mu=1.0 / mechanism.sigma)


register_case(AuditCase(
    name="selection_score", mechanism="selection_score",
    pair=f"a validation count of {SCORE_COUNT:g} or {SCORE_COUNT + 1:g} correct rows (one row changed)",
    claim=_score_claim, run=_score_run, runs_full=1_000_000, runs_quick=200_000))



# -- HE-VFL with a DP model: the key holder's noisy gradients ---------------------------------
# A one-epoch job of two parties with two columns each, weights at the clip bound k, the changed row
# tilted against them (_he_dp_pair), every other row of the batch zero. The release is one step's masked
# gradients of both blocks through the real party scheme (mask, unmask) and key holder (lattice
# rounding and noise); the distinguisher projects the unmasked values on the worlds' difference.
HE_DP_K, HE_DP_ROWS, HE_DP_WIDTH = 5.0, 8, 2
HE_DP_PARTIES = ("active", "passive")


def _he_dp_job(protocol: str, noise_seed: Optional[int] = None):
    from ..glm.job import GLMJob

    return GLMJob(protocol=protocol, n_samples=HE_DP_ROWS, batch_size=HE_DP_ROWS, epochs=1, lr=1.0, k=HE_DP_K,
                  epsilon=EPSILON, delta=DELTA, noise_seed=noise_seed, key_bits=2048, active="active",
                  passives=("passive",), coordinator="coordinator",
                  widths={party: HE_DP_WIDTH for party in HE_DP_PARTIES})


def _he_dp_classes(protocol: str) -> Tuple[Any, Any, Any, Callable[[Any, np.ndarray], Any]]:
    """``(party scheme, key holder, noise units, encrypt)`` of an HE-DP protocol; ``encrypt`` is the
    scheme's plain encryption of the batch residual, as the active party forms it (the DP scheme's own
    ``encrypt`` checks a passive party's partial-score bound, which a residual need not meet)."""
    if protocol == "paillier_dp":
        from ..glm.paillier import PaillierScheme
        from ..glm.paillier_dp import PaillierDPKeyHolder, PaillierDPScheme, noise_units

        return PaillierDPScheme, PaillierDPKeyHolder, noise_units, PaillierScheme.encrypt
    from ..glm.taylor import PlaintextScheme
    from ..glm.taylor_dp import TaylorDPKeyHolder, TaylorDPScheme
    from ..glm.taylor_dp import noise_units as taylor_units

    return TaylorDPScheme, TaylorDPKeyHolder, taylor_units, PlaintextScheme.encrypt


def _he_dp_pair() -> Tuple[List[List[np.ndarray]], np.ndarray, np.ndarray]:
    """The blocks' rows of either world (row 0 changed) and each world's residual ``theta + s(y)``:
    with weights ``k e_1`` in every block, row 0 is ``(-a, +-sqrt(1 - a^2))`` at every party with label
    +1, ``a`` maximising ``(P k a + 2) sqrt(1 - a^2)`` (residual ``-(P k a + 2)`` in both worlds, the
    worlds' rows apart by ``2 sqrt(1 - a^2)`` per block: the largest change of ``X^T r`` a search over
    pairs of rows finds, tests/glm/test_he_dp.py)."""
    pk = len(HE_DP_PARTIES) * HE_DP_K
    a = (-2.0 + math.sqrt(4.0 + 8.0 * pk * pk)) / (4.0 * pk)
    rows = [[np.zeros((HE_DP_ROWS, HE_DP_WIDTH)) for _ in HE_DP_PARTIES] for _ in (0, 1)]
    for world, sign in ((0, 1.0), (1, -1.0)):
        for block in rows[world]:
            block[0] = (-a, sign * math.sqrt(1.0 - a * a))
    residual = np.zeros(HE_DP_ROWS)
    residual[0] = -(pk * a + 2.0)  # theta = -P k a, y = +1: s = -2
    return rows, residual, residual.copy()


def _he_dp_claim(protocol: str) -> Callable[[], Claim]:
    def claim() -> Claim:
        from ..glm.he_dp import he_dp_privacy_spent

        spent = he_dp_privacy_spent(_he_dp_job(protocol))
        return Claim(spent.epsilon, spent.delta, spent.neighbours,
                     "he_dp_privacy_spent(job) (one epoch: every row released once)")
    return claim


def _he_dp_runner(protocol: str) -> Callable[[int, int], Scores]:
    def run(runs: int, seed: int) -> Scores:
        from .._progress import progress
        from ..glm import he_dp

        scheme_class, holder_class, units, encrypt = _he_dp_classes(protocol)
        rows, r0, r1 = _he_dp_pair()
        residuals = (r0, r1)
        clean = [np.concatenate([block.T @ residuals[world] for block in rows[world]]) for world in (0, 1)]
        mechanism = he_dp.gradient_mechanism(_he_dp_job(protocol), units(_he_dp_job(protocol)))
        outs = []
        for world in (0, 1):
            job = _he_dp_job(protocol, noise_seed=case_seed(seed, protocol, world))
            with warnings.catch_warnings():  # a 2048-bit key keeps the runs short; its size is not audited
                warnings.simplefilter("ignore", UserWarning)
                holder = holder_class(job)  # one key and one noise stream per world
            scheme = scheme_class(holder.public_payload(), job)
            released = []
            for _ in progress(range(runs), desc=f"{protocol} world {world}", unit="run", leave=False,
                              disable=runs < 500):
                values = []
                for block in rows[world]:
                    payload, state = scheme.masked_dot(encrypt(scheme, residuals[world]), block, 1.0)
                    values.append(scheme.unmask(holder.answer_gradient(payload, HE_DP_WIDTH), state, HE_DP_WIDTH))
                released.append(np.concatenate(values))
            outs.append(np.stack(released))
        scores = project(outs[0], outs[1], clean[1] - clean[0])
        gap = float(np.linalg.norm(clean[1] - clean[0]))
        return Scores(scores.world0, scores.world1, gap / mechanism.sensitivity,
                      {"clean distance": gap, "stated sensitivity": mechanism.sensitivity,
                       "sigma": mechanism.sigma}, stated_mu=gap / mechanism.sigma)
    return run


for _protocol, _full, _quick in (("taylor_dp", 20_000, 2_000), ("paillier_dp", 4_000, 400)):
    register_case(AuditCase(
        name=f"he_dp_gradient[{_protocol}]", mechanism="he_dp_gradient",
        pair=f"two parties, two columns each, weights k e_1 (k = {HE_DP_K:g}); row 0 = (-a, +-sqrt(1 - a^2)) at "
             "every party with label +1, a maximising (P k a + 2) sqrt(1 - a^2), the other rows 0; one step's "
             "masked gradients through the party scheme and the key holder",
        claim=_he_dp_claim(_protocol), run=_he_dp_runner(_protocol), runs_full=_full, runs_quick=_quick))
