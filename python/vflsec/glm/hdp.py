"""Protocol "hdp": HDP-VFL (Algorithm 1), Gaussian noise on every released IR.

Every passive party releases ``X_B[s] w_B`` plus ``N(0, sigma_B^2)`` noise;
the active party releases ``IR_A`` plus ``N(0, sigma_A^2)`` (its own gradient
uses the un-noised ``IR_A``). Each party's whole sequence of IRs released
during training is one DP mechanism of :mod:`vflsec.dp.mechanisms`
(:func:`hdp_mechanisms`): ``GaussianMechanism.calibrated("hdp_passive_ir" /
"hdp_active_ir", epsilon=job.epsilon, delta=job.delta, sensitivity=<Lemma
3 / 4>, coordinates=<every value the party releases in the run>,
method=job.calibration)`` under the replace-one relation the lemmas bound
(one row's values change), with ``T = epochs * ceil(n / b)`` steps
("analytic" by default; "classic" reproduces the paper, is proved for
epsilon < 1 and beyond is kept only where the exact accounting of its sigma
meets the target; :func:`hdp_release_coordinates`). Every IR goes out through the
mechanism's lattice release (:meth:`~vflsec.dp.GaussianMechanism.release`:
a float ``x + noise`` would leak ``x`` through its rounding), and the
guarantee reported for a party (:func:`hdp_privacy_spent`, the estimator's
``privacy_spent_``, ``vflsec party``'s summary) is the mechanism's
:meth:`~vflsec.dp.GaussianMechanism.privacy_spent`, never the budget asked
for.

The schedule: the lemmas need only that every row is in exactly one batch per
epoch (:mod:`vflsec.dp.sensitivity`, step 2), on any order of the rows, and
the accounting claims no amplification by sampling or shuffling (the order is
public: every party computes it). So the shard-local order of a job with
``shard_rows`` (:mod:`vflsec.vfl.schedule`, a party streaming its rows from
Parquet shards, :mod:`.shards`) has the same sensitivities, sigmas and
guarantee as the global permutation.

Resuming (``job.start_epoch > 0``) repeats releases: the interrupted run
released its IRs up to some point past the resumed epoch. Each party keeps a
privacy ledger (a PLD accountant's ``state_dict``) in its checkpoint
(``save_accountant`` / ``load_accountant`` of
:class:`vflsec.federation.checkpoint.EpochCheckpoint`), written before the
run's first release: a run counts one release of the party's mechanism, and
a resumed run adds one more to the ledger it finds (none found: the resume
is refused). The epsilon reported is the accountant's composition of them
all, above the calibrated target. Why one more release covers a resume: the
lemmas bound every released entry's shift by per-entry terms that hold at
any step of any path on which the changed row is visited at most ``epochs``
times (the weight divergence ``D`` of :mod:`vflsec.dp.sensitivity`, step
2), and the resumed run continues the checkpointed path of the interrupted
one, so it visits the row at most ``epochs`` times too. The interrupted
run's releases are a prefix of one run's (squared shifts summing to at most
``Delta^2``), the resumed run's are the steps of one run from its resumed
epoch on (at most ``Delta^2``); given the transcript every party's
checkpoint is the same in both worlds except for the releasing party's own
recursion, so adaptive composition (step 5 there) gives ``sqrt(2) Delta /
sigma``: two releases of the mechanism, and one more per further resume.
That needs every party to resume from the same run's states: a run removes
its own epoch checkpoints from its start epoch on before it releases
anything (``discard_from``; they are an earlier run's, and a party that
had got further in it would otherwise continue from them at the next
resume while the others continue from this run's). A resumed seeded run
(``noise_seed``) draws from a stream of its own, never the interrupted run's
noise again.

Requirements enforced here because the guarantee depends on them: a finite
clip ``k``; every row of every party's block has ``||x_i||_2 <= 1``; labels
within the loss's bounds (least squares: ``|y| <= 3``; Poisson: the public
``job.y_max``); a non-expansive joint step of the P coupled data parties
(``lr <= 2 / (P beta_theta + lam)`` with the L2 penalty, ``2 / (P beta_theta)``
with L1 / elastic net; derivation in :mod:`vflsec.dp.sensitivity`). Each
passive party clips every received ``Sec[IR_A]`` entry to ``[-L, L]``
before its gradient (without the clip the noisy value is unbounded and so
is the per-step sensitivity of its next IRs; the clip is for in-range noise:
a NaN/inf entry, or one beyond what any honest release can be,
:func:`.ir_exchange.release_limit`, is refused and fails the job naming the
sender, as is such a passive IR at the active party), and the active party clips
``IR_A = h`` itself to ``[-L, L]`` (a no-op for the logistic loss and for
Poisson with its theta clip; for the L2-loss SVM and least squares
``|h| <= L`` is otherwise not guaranteed, and the lemmas assume it). For Poisson the active party clips ``theta`` to
``+-(number of parties) * k`` before the loss derivative, as the Poisson
constants require. ``job.noise=False`` is a testing aid that turns
the noise off (the run then equals "plain"); it gives no privacy.

Time spent sampling noise is reported as the "crypto" phase (the cost of
the protection mechanism).
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Dict, cast

import numpy as np

from ..dp.gaussian import PrivacyWarning
from ..dp.sensitivity import ROW_NORM_TOLERANCE  # re-exported (older imports)
from ..dp.sensitivity import check_row_norms as check_unit_rows
from . import ir_exchange
from .ir_exchange import active_program, passive_program, release_limit
from .job import GLMJob, PhaseClock
from .registry import register_protocol
from .shards import value_chunks
from .weights import DP_WEIGHT_REFUSAL

__all__ = [
    "PROTOCOL",
    "ROW_NORM_TOLERANCE",
    "check_labels",
    "check_party_rows",
    "check_row_norms",
    "hdp_mechanisms",
    "hdp_noise_scales",
    "hdp_privacy_spent",
    "hdp_release_coordinates",
    "hdp_sensitivities_for",
    "noise_generator",
]



def hdp_sensitivities_for(job: GLMJob):
    """Lemma 3/4 sensitivities (``vflsec.dp.HDPSensitivities``) of ``job``'s
    IR sequences, after checking the conditions the lemmas assume."""
    from ..dp import hdp_sensitivities

    if job.k is None:
        raise ValueError("protocol 'hdp' needs a finite weight clip k > 0 (the sensitivity depends on it)")
    n_parties = 1 + len(job.passives)
    extra = {}
    if job.loss == "poisson":
        if job.y_max is None:
            raise ValueError("protocol 'hdp' with loss 'poisson' needs the public label bound y_max")
        extra = dict(y_max=job.y_max)
    # Refuses an lr above 2 / (n_parties * beta_theta [+ lam]): the coupled
    # joint step must be non-expansive (derivation in vflsec.dp.sensitivity).
    sens = hdp_sensitivities(
        loss=job.loss,
        lr=job.lr,
        epochs=job.epochs,
        steps=job.total_steps,
        batch_size=job.batch_size,
        k=job.k,
        n_parties=n_parties,
        penalty=job.penalty,
        lam=job.lam,
        **extra,
    )
    return sens


def hdp_release_coordinates(job: GLMJob) -> int:
    """How many released values of one party the sensitivity covers: every
    IR entry of the run, ``epochs * n_samples`` (each epoch releases one value
    per row, batches of ``batch_size`` and a smaller last one).

    The Lemma 3/4 bound is on the L2 distance of the *whole* IR sequence (one
    Gaussian mechanism for all of training), and once the changed row has been
    seen every later IR entry can differ, so all of them count towards the
    sampler's per-draw error bound (:mod:`vflsec.dp.lattice`), not just one
    batch."""
    return job.epochs * job.n_samples


def hdp_mechanisms(job: GLMJob) -> Dict[str, Any]:
    """The DP mechanisms of ``job``, by role: ``{"active": GaussianMechanism
    "hdp_active_ir", "passive": GaussianMechanism "hdp_passive_ir"}`` (every
    passive party runs its own copy of the passive one). Each is calibrated
    to ``(job.epsilon, job.delta)`` for the party's whole IR sequence:
    sensitivity from Lemma 4 / Lemma 3 (after the checks of
    :func:`hdp_sensitivities_for`), replace-one neighbours,
    :func:`hdp_release_coordinates` noise draws, ``job.calibration``. Built
    also when ``job.noise`` is False (nothing is then released through them)."""
    from ..dp import GaussianMechanism

    sens = hdp_sensitivities_for(job)
    d = hdp_release_coordinates(job)
    return {role: GaussianMechanism.calibrated(f"hdp_{role}_ir", epsilon=job.epsilon, delta=job.delta,
                                               sensitivity=float(sensitivity), coordinates=d,
                                               method=job.calibration, neighbours="replace_one")
            for role, sensitivity in (("active", sens.active), ("passive", sens.passive))}


def _scales(mechanisms: Dict[str, Any]) -> Dict[str, Any]:
    active, passive = mechanisms["active"], mechanisms["passive"]
    return {
        "sensitivity_active": float(active.sensitivity),
        "sensitivity_passive": float(passive.sensitivity),
        "sigma_active": float(active.sigma),
        "sigma_passive": float(passive.sigma),
        "coordinates": int(active.coordinates),
    }


def hdp_noise_scales(job: GLMJob) -> Dict[str, Any]:
    """Public noise parameters of ``job``, from :func:`hdp_mechanisms`:
    ``sensitivity_active``, ``sensitivity_passive``, ``sigma_active``,
    ``sigma_passive`` (sigmas are reported even when ``job.noise`` is False)
    and ``coordinates`` (see :func:`hdp_release_coordinates`; the sigmas are
    calibrated for the lattice release of that many values)."""
    return _scales(hdp_mechanisms(job))


@functools.lru_cache(maxsize=64)
def _spent(mechanism: Any, releases: int) -> Any:
    # A PLD evaluation takes tens of ms; the auditor runs one program per sample.
    caveat = None
    if releases > 1:
        caveat = (f"the job was resumed or run again: {releases} releases of the {mechanism.name} mechanism counted "
                  "(each resume repeats the releases from the resumed epoch on; each new run of the job on the same "
                  "rows repeats them all)")
    return mechanism.privacy_spent(count=releases, caveat=caveat)


def hdp_privacy_spent(job: GLMJob, role: str, *, releases: int = 1) -> Any:
    """The guarantee of ``role``'s ("active" or "passive") IR sequence in ``job``:
    :meth:`~vflsec.dp.GaussianMechanism.privacy_spent` of its mechanism for
    ``releases`` releases (1: an uninterrupted run, at most the calibrated
    epsilon; one more per resume, see the module docstring). None when
    ``job.noise`` is False (no guarantee: the IRs go out in the clear)."""
    from .._arrays import check_positive_int

    if role not in ("active", "passive"):
        raise ValueError(f"role must be 'active' or 'passive', got {role!r}")
    releases = check_positive_int(releases, "releases")
    if not job.noise:
        return None
    return _spent(hdp_mechanisms(job)[role], releases)


def check_labels(job: GLMJob, y: Any, constants) -> None:
    """ValueError unless the labels respect the bound the loss constants assume. ``y``: a 1-D
    array, or labels in Parquet shards (:class:`~vflsec.glm.shards.ShardedLabels`, read shard by
    shard)."""
    if job.loss not in ("least_squares", "poisson"):
        return
    parts = [(float(np.max(np.abs(part))), float(np.max(part))) for part in value_chunks(y) if part.size]
    if job.loss == "least_squares" and parts and max(a for a, _ in parts) > constants.k_y:
        raise ValueError(
            f"HDP-VFL least squares assumes standardized targets with |y| <= k_y = {constants.k_y:g}; "
            f"got max |y| = {max(a for a, _ in parts):.6g} (standardize and clip the targets)"
        )
    # hdp_sensitivities_for refuses loss "poisson" without y_max, so it is set here.
    if job.loss == "poisson" and parts and max(m for _, m in parts) > cast(float, job.y_max):
        raise ValueError(f"labels exceed the public bound y_max={job.y_max:g} (max y = "
                         f"{max(m for _, m in parts):g})")


def check_row_norms(X: np.ndarray, party: str) -> None:
    """ValueError unless every row of ``X`` has L2 norm <= 1."""
    check_unit_rows(X, what="HDP-VFL", party=party, remedy="Scale each party's rows first")


def check_party_rows(job: GLMJob, party: str, X: np.ndarray, y) -> None:
    """What the role programs check of ``party``'s own rows before training
    (registered as the protocol's ``check_rows``, so ``vflsec party`` checks
    them before connecting): unit rows, and the active party's labels
    (``y``; None for a passive party) within the loss's bounds."""
    check_row_norms(X, party)
    if y is not None:
        check_labels(job, y, hdp_sensitivities_for(job).constants)


def noise_generator(job: GLMJob, party: str, run: int = 0):
    """The DP noise generator of ``party`` in ``job``: the OS-entropy CSPRNG, or
    with ``job.noise_seed`` a reproducible stream of its own (testing).
    ``run``: how many runs of the job released before this one (resumes get
    a stream of their own: noise reused on other values would reveal their
    difference)."""
    from ..kernels import NoiseGenerator

    if job.noise_seed is None:
        return NoiseGenerator()  # OS-entropy CSPRNG
    # Distinct, reproducible stream per party (and per resumed run) from one public test seed.
    entropy = [int(job.noise_seed), job.parties.index(party)] + ([int(run)] if run else [])
    state = np.random.SeedSequence(entropy).generate_state(1, np.uint64)
    return NoiseGenerator(int(state[0]) & ((1 << 63) - 1))


def _release(job: GLMJob, party: str, mechanism: Any, clock: PhaseClock, run: int = 0):
    """What ``party`` sends for one IR: ``mechanism``'s lattice release (the
    identity when ``job.noise`` is False)."""
    if not job.noise:
        return lambda ir: ir
    generator = noise_generator(job, party, run)

    def release(ir: np.ndarray) -> np.ndarray:
        # The lattice release (never ir + float noise: its rounding leaks ir).
        with clock.crypto():
            return mechanism.release(ir, generator=generator)

    return release


def _accountant(job: GLMJob, data: Any, mechanism: Any):
    """The party's privacy ledger for this run (a PLD accountant), saved to
    ``data.checkpoint`` before the first release: the ledger its checkpoint holds for this
    job on these rows plus one release of ``mechanism``. A resume needs the interrupted run's
    ledger (refused without it); a fresh run of a job that already ran on these rows finds the
    earlier runs' ledger and composes with it (the same rows released again), and says so."""
    from ..dp import make_accountant

    accountant = make_accountant("pld", neighbours=mechanism.neighbours)
    checkpoint = getattr(data, "checkpoint", None)
    load = getattr(checkpoint, "load_accountant", None)
    state = load() if load is not None else None
    what = "resuming protocol 'hdp'" if job.start_epoch > 0 else "protocol 'hdp'"
    fix = "start the job again (without --resume)" if job.start_epoch > 0 else \
        "remove the ledger file only if these rows were never released (it records what this job spent on them)"
    if job.start_epoch > 0 and state is None:
        raise ValueError(f"resuming protocol 'hdp' at epoch {job.start_epoch}: this party's checkpoint holds no "
                         "privacy ledger of the interrupted run, so the releases it made cannot be counted; "
                         "start the job again (without --resume)")
    if state is not None:
        try:
            accountant.load_state_dict(state)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{what}: the privacy ledger in this party's checkpoint is unusable ({exc}); {fix}"
                             ) from exc
        own = mechanism.accounting()
        if any((r.noise_multiplier, r.sampling_rate, r.coordinates) != (own.noise_multiplier, own.sampling_rate,
                                                                       own.coordinates)
               for r in accountant.history):
            raise ValueError(f"{what}: the privacy ledger in this party's checkpoint records releases of another "
                             f"mechanism than this job's {mechanism.name!r}; {fix}")
        if job.start_epoch == 0:
            where = getattr(checkpoint, "accountant_path", lambda: "its checkpoint")()
            warnings.warn(f"protocol 'hdp': this job already ran on these rows ({len(accountant)} release(s) of "
                          f"its IR sequence in the ledger {where}); this run releases them again, and the "
                          "epsilon it reports composes every run", PrivacyWarning, stacklevel=2)
    accountant.step(mechanism.accounting())
    save = getattr(checkpoint, "save_accountant", None)
    if save is not None:
        save(accountant.state_dict())
    return accountant


def _program_setup(job: GLMJob, party: str, role: str, data: Any, clock: PhaseClock):
    """``(mechanisms, release, info)`` of a role program: the job's mechanisms,
    ``party``'s release function and the public ``info`` it returns (the
    noise scales; with noise, ``releases`` of its mechanism counted so far and
    ``epsilon_spent``, their composed epsilon at ``job.delta``)."""
    mechanisms = hdp_mechanisms(job)
    info: Dict[str, Any] = _scales(mechanisms)
    # Epoch checkpoints from the start epoch on are an earlier run's (module docstring).
    discard = getattr(getattr(data, "checkpoint", None), "discard_from", None)
    if discard is not None:
        discard(job.start_epoch)
    run = 0
    if job.noise:
        releases = len(_accountant(job, data, mechanisms[role]))
        # The ledger holds `releases` releases of this mechanism only (checked), so its
        # composed epsilon is the mechanism's privacy_spent(count=releases).
        info.update(releases=releases, epsilon_spent=float(_spent(mechanisms[role], releases).epsilon))
        ledger = getattr(getattr(data, "checkpoint", None), "accountant_path", None)
        # which file the count covers (none: no checkpoint_dir, so no other run of this job is counted)
        info["ledger"] = str(ledger()) if ledger is not None else None
        run = releases - 1
    return mechanisms, _release(job, party, mechanisms[role], clock, run), info


def hdp_active(endpoint, job, data):
    clock = PhaseClock()
    X, y = data.checked_by_batch(job, endpoint.name, needs_labels=True)
    check_row_norms(X, endpoint.name)
    constants = hdp_sensitivities_for(job).constants
    check_labels(job, y, constants)
    mechanisms, release, info = _program_setup(job, endpoint.name, "active", data, clock)
    # A passive release is X_B w_B (|.| <= k: unit rows, ||w_B|| <= k) plus noise of bounded support.
    limit = release_limit(job.k, mechanisms["passive"].sigma if job.noise else None)
    return active_program(
        endpoint, job, data, release=release, clock=clock, info=info, X=X, y=y,
        theta_bound=constants.theta_bound, ir_bound=constants.L, received_limit=limit,
    )


def hdp_passive(endpoint, job, data):
    clock = PhaseClock()
    X, _ = data.checked_by_batch(job, endpoint.name, needs_labels=False)
    check_row_norms(X, endpoint.name)
    mechanisms, release, info = _program_setup(job, endpoint.name, "passive", data, clock)
    bound = hdp_sensitivities_for(job).constants.L
    # Sec[IR_A] is IR_A clipped to [-L, L] plus noise of bounded support: the clip below is for
    # in-range noise; a value no honest release can have (or NaN/inf) is refused.
    limit = release_limit(bound, mechanisms["active"].sigma if job.noise else None)
    return passive_program(endpoint, job, data, release=release, clock=clock, info=info, X=X,
                           received_bound=bound, received_limit=limit)


PROTOCOL = {"active": hdp_active, "passive": hdp_passive}
# check: the Lemma 3/4 conditions (finite k, the lr bound, y_max) and the calibration, before any party connects.
# Resumable: a resume's repeated releases are counted in each party's privacy ledger (module docstring).
# shard_schedule: the programs read their rows by the job's batches only; the accounting needs every row once
# per epoch, in any order (module docstring), so the shard-local schedule is allowed.
# weight_refusal: row weights would scale a row's influence past the sensitivity bounds.
register_protocol("hdp", PROTOCOL, replace=True, tags=ir_exchange.TAGS, check=hdp_noise_scales,
                  check_rows=check_party_rows, shard_schedule=True, weight_refusal=DP_WEIGHT_REFUSAL)
