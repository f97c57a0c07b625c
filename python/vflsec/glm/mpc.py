"""Protocol "mpc": the vertical GLM trained inside secret-sharing MPC (SPU).

Every data party is one party of the MPC engine (:mod:`vflsec.mpc.engine`; rank 0 the active
party, then the passive parties in the job's order). Per run:

1. **Agree** (vflsec Channel): each passive party sends the active party the address its
   engine link listens on (:mod:`vflsec.mpc.links`) and the digest of the program it compiled
   from the job's public shapes; the active party refuses a different digest, draws a random
   session name and sends every party the session and the addresses in rank order.
2. **Share** (Channel, tag ``mpc_input``): each party splits its designed block ``X_p`` (the
   same :mod:`vflsec.glm.model` rows as plain VFL: row norm, the active party's intercept
   column) and its initial weights into one secret share per rank and sends each rank its
   share; the active party shares its labels too. No party sees another's rows, labels or
   weights again: every later value is a share.
3. **Train** (engine link): one compiled run per epoch of the job's public mini-batch schedule
   (:meth:`GLMJob.batches`), each step the plain recursion on shares: ``theta = sum_p X_p[s]
   w_p``, ``IR = dl/dtheta`` (logistic with SPU's exact-form sigmoid, least squares, L2-SVM),
   ``g_p = IR^T X_p[s] / b``, the penalized step and each party's norm clip ``k``; a
   smaller last batch is padded with masked rows. The weights stay secret-shared between
   epochs (the program's outputs replace its inputs).
4. **Reveal** (Channel, tag ``mpc_reveal``): every rank sends its share of ``w_p`` to party
   ``p`` only, which reconstructs its own block; nobody else learns it.

What is revealed: each party its own weight block (as in plain VFL, where each party holds
its block), nothing per step: no ``theta``, no residual, no training loss (the active party's
history is empty). The result is plain VFL's model up to fixed-point rounding (2^-18 per value,
SPU's reciprocal and exp approximations), tested against the "plain" protocol. The threat
model is the engine protocol's (``job.options["mpc_protocol"]``, :data:`vflsec.mpc.MPC_PROTOCOLS`):
semi-honest parties; Cheetah (two parties) tolerates either one, ABY3 (three) any one,
semi2k trusts its first party as the dealer. A party that deviates can corrupt the model (no
protocol here is maliciously secure). Not supported: the Poisson loss (``exp(theta)``
leaves the fixed-point range), row weights, resuming (the state is shares in every party's
engine), the shard schedule.
"""
from __future__ import annotations

import secrets
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..federation.channel import Channel
from ..vfl.clock import PhaseClock
from ..vfl.received import PeerMessageRefused
from .job import GLMJob, GLMPartyResult, PartyData
from .registry import register_protocol

__all__ = ["MPC_LOSSES", "PROTOCOL", "TAGS", "EngineTraining", "engine_program", "epoch_schedule", "job_mpc_protocol"]

TAG_HELLO = "mpc_hello"
TAG_SESSION = "mpc_session"
TAG_INPUT = "mpc_input"
TAG_REVEAL = "mpc_reveal"
TAG_RUN_INPUT = "mpc_run_input"  # a training's per-run private inputs (mpc_dp: sampling draws, noise shares)
TAGS = (TAG_HELLO, TAG_SESSION, TAG_INPUT, TAG_REVEAL)

#: the losses the secret-shared recursion computes (Poisson's exp(theta) leaves the fixed-point range)
MPC_LOSSES = ("logistic", "least_squares", "svm")

#: the engine protocol for a job that names none, by its number of parties (semi2k, with its trusted
#: dealer, is never a default: it must be chosen)
DEFAULT_BY_PARTIES = {2: "cheetah", 3: "aby3"}


def job_mpc_protocol(job: GLMJob) -> Any:
    """The job's engine protocol (:class:`vflsec.mpc.MPCProtocol`), checked against its party count."""
    from ..mpc.engine import get_mpc_protocol

    parties = 1 + len(job.passives)
    name = job.options.get("mpc_protocol")
    if name is None:
        if parties not in DEFAULT_BY_PARTIES:
            raise ValueError(f"a job of {parties} parties needs mpc_protocol 'semi2k' (a trusted dealer: the "
                             "active party), chosen explicitly -- set mpc_protocol = \"semi2k\"")
        name = DEFAULT_BY_PARTIES[parties]
    protocol = get_mpc_protocol(name)
    protocol.check_parties(parties)
    return protocol


def _check_job(job: GLMJob) -> None:
    if job.loss not in MPC_LOSSES:
        raise ValueError(f"protocol 'mpc' trains the losses {MPC_LOSSES}, not {job.loss!r} (exp(theta) leaves the "
                         "engine's fixed-point range) -- use loss 'logistic' or 'least_squares', or protocol 'plain'")
    unknown = set(job.options) - {"mpc_protocol", "fraction_bits"}
    if unknown:
        raise ValueError(f"protocol 'mpc' has no option(s) {sorted(unknown)} -- its options are mpc_protocol and "
                         "fraction_bits")
    job_mpc_protocol(job)


def epoch_schedule(job: GLMJob, epoch: int) -> Tuple[np.ndarray, np.ndarray]:
    """``(rows, mask)``, both ``(steps, batch_size)``: the epoch's batches of the public schedule
    (:meth:`GLMJob.batches`), a smaller last batch padded with row 0 under mask 0."""
    steps, b = job.steps_per_epoch, job.batch_size
    rows = np.zeros((steps, b), dtype=np.int32)  # JAX traces 32-bit integers
    mask = np.zeros((steps, b), dtype=np.float64)
    for step, idx in enumerate(batch for e, _, batch in job.batches() if e == epoch):
        rows[step, :len(idx)] = idx
        mask[step, :len(idx)] = 1.0
    return rows, mask


def _epoch_function(job: GLMJob, parties: int) -> Callable[..., Tuple[Any, ...]]:
    """The JAX function of one epoch on every party's block (module docstring, step 3)."""
    import jax
    import jax.numpy as jnp

    lr, lam, mu, b, k, loss, penalty = job.lr, job.lam, job.mu, job.batch_size, job.k, job.loss, job.penalty

    def gradient(theta: Any, y: Any) -> Any:
        if loss == "logistic":
            return -y * jax.nn.sigmoid(-y * theta)
        if loss == "least_squares":
            return -2.0 * (y - theta)
        return -2.0 * y * jnp.maximum(0.0, 1.0 - y * theta)  # svm (L2 loss)

    def step(w: Any, g: Any) -> Any:
        if penalty == "l2":
            w = w - lr * (g + lam * w)
        else:
            v = w - lr * g
            w = jnp.sign(v) * jnp.maximum(jnp.abs(v) - lr * lam, 0.0)
            if penalty == "elasticnet":
                w = w / (1.0 + lr * lam * mu)
        if k is None or not np.isfinite(k):
            return w
        return w / jnp.maximum(1.0, jnp.sqrt(jnp.sum(w * w)) / k)

    def epoch(*args: Any) -> Tuple[Any, ...]:
        blocks, y, weights, rows, mask = args[:parties], args[parties], args[parties + 1:2 * parties + 1], \
            args[2 * parties + 1], args[2 * parties + 2]

        def body(s: Any, ws: Tuple[Any, ...]) -> Tuple[Any, ...]:
            at, keep = rows[s], mask[s]
            batch = [X[at] for X in blocks]
            theta = batch[0] @ ws[0]
            for Xs, w in zip(batch[1:], ws[1:]):
                theta = theta + Xs @ w
            ir = gradient(theta, y[at]) * keep
            return tuple(step(w, (ir @ Xs) / b) for Xs, w in zip(batch, ws))

        return tuple(jax.lax.fori_loop(0, rows.shape[0], body, tuple(weights)))

    return epoch


class EngineTraining:
    """What one protocol trains inside the engine (:func:`engine_program` runs it): "mpc" here,
    "mpc_dp" in :mod:`vflsec.glm.mpc_dp`. The skeleton (agree, share, train, reveal) is the same;
    a training names its program, the per-party values shared once, the runs and each run's
    public and private inputs."""

    name = "mpc"
    #: per-party state shared once beside X and w (names; each a vector of the party's block width)
    extra_state: Tuple[str, ...] = ()
    #: the per-run private inputs every party contributes (names; shared with every rank each run)
    private_inputs: Tuple[str, ...] = ()

    def config(self, job: GLMJob, protocol: Any) -> Any:
        from ..mpc.engine import runtime_config

        return runtime_config(protocol, **({"fraction_bits": job.options["fraction_bits"]}
                                           if "fraction_bits" in job.options else {}))

    def compile(self, job: GLMJob, widths: Sequence[int]) -> Any:
        from ..mpc.engine import compile_program

        parties = len(widths)
        n, steps, b = job.n_samples, job.steps_per_epoch, job.batch_size
        shapes = ([(f"X{r}", (n, width), "float64", True) for r, width in enumerate(widths)]
                  + [("y", (n,), "float64", True)]
                  + [(f"w{r}", (width,), "float64", True) for r, width in enumerate(widths)]
                  + [("rows", (steps, b), "int32", False), ("mask", (steps, b), "float64", False)])
        return compile_program(_epoch_function(job, parties), shapes, [f"w{r}" for r in range(parties)])

    def outputs(self, parties: int) -> List[str]:
        """The program's outputs, which replace its inputs of the same names for the next run."""
        return [f"w{r}" for r in range(parties)]

    def runs(self, job: GLMJob) -> range:
        return range(job.start_epoch, job.epochs)

    def public_inputs(self, job: GLMJob, run: int) -> Dict[str, np.ndarray]:
        rows, mask = epoch_schedule(job, run)
        return {"rows": rows, "mask": mask}

    def run_private(self, job: GLMJob, run: int, rank: int, generator: Any) -> Dict[str, np.ndarray]:
        """This party's private inputs of ``run`` (``private_inputs``; none for "mpc")."""
        return {}

    def generator(self, job: GLMJob, party: str) -> Any:
        """The source of this party's private run inputs (None when it has none)."""
        return None

    def info(self, job: GLMJob) -> Dict[str, Any]:
        """Public facts the party's result carries beside the engine's."""
        return {}


TRAINING = EngineTraining()


def _refused(endpoint: Channel, sender: str, tag: str, reason: str) -> PeerMessageRefused:
    return PeerMessageRefused(endpoint.name, sender, tag, "set-up" if tag != TAG_REVEAL else "the reveal", reason)


def _share(endpoint: Channel, sender: str, tag: str, parts: Any) -> Any:
    from ..mpc.engine import share_from_wire

    try:
        return share_from_wire(parts)
    except (ValueError, RuntimeError) as exc:
        raise _refused(endpoint, sender, tag, f"not a share: {exc}") from exc


def engine_program(endpoint: Channel, job: GLMJob, data: PartyData, role: str, training: EngineTraining,
                   clock: Optional[PhaseClock] = None) -> GLMPartyResult:
    """One party's run of ``training`` inside the engine (module docstring: agree, share, train, reveal)."""
    import spu

    from ..mpc.engine import make_shares, reconstruct, share_to_wire
    from ..mpc.links import current_links

    clock = PhaseClock() if clock is None else clock
    names = [job.active, *job.passives]
    rank = names.index(endpoint.name)
    protocol = job_mpc_protocol(job)
    config = training.config(job, protocol)
    X, y = data.checked(job, endpoint.name, needs_labels=role == "active")
    widths = [job.widths[name] for name in names] if job.widths else None
    if widths is None or widths[rank] != X.shape[1]:
        raise ValueError(f"protocol {training.name!r} needs every party's block width in the job (job.widths), got "
                         f"{job.widths!r}")
    with clock.crypto():
        program = training.compile(job, widths)
    links = current_links()
    # 1. agree on the program and the link
    if role == "active":
        addresses = [links.address(endpoint.name)]
        for passive in job.passives:
            hello = endpoint.recv(passive, TAG_HELLO)
            if not isinstance(hello, dict) or not isinstance(hello.get("address"), str) \
                    or not isinstance(hello.get("program"), str):
                raise _refused(endpoint, passive, TAG_HELLO, "expected {address, program}")
            if hello["program"] != program.digest:
                raise _refused(endpoint, passive, TAG_HELLO, "its compiled program differs from this party's "
                               "(different vflsec or SPU versions, or a different job)")
            addresses.append(hello["address"])
        session = f"vflsec-{secrets.token_hex(16)}"
        for passive in job.passives:
            endpoint.send(passive, TAG_SESSION, {"session": session,
                                                 "addresses": [a.encode("utf-8") for a in addresses]})
    else:
        endpoint.send(job.active, TAG_HELLO, {"address": links.address(endpoint.name), "program": program.digest})
        agreed = endpoint.recv(job.active, TAG_SESSION)
        if not isinstance(agreed, dict) or not isinstance(agreed.get("session"), str) \
                or not isinstance(agreed.get("addresses"), list) or len(agreed["addresses"]) != len(names) \
                or not all(isinstance(a, bytes) for a in agreed["addresses"]):
            raise _refused(endpoint, job.active, TAG_SESSION, "expected {session, addresses} for every party")
        session = agreed["session"]
        addresses = [a.decode("utf-8") for a in agreed["addresses"]]
    io = spu.Io(len(names), config)
    # 2. share this party's block, initial weights (and labels) with every rank
    own = {"X": X, "w": data.initial_coef(job, X.shape[1], {})}
    own.update({key: np.zeros(X.shape[1]) for key in training.extra_state})
    if role == "active":
        own["y"] = np.asarray(y, dtype=np.float64)
    with clock.crypto():
        shares = {key: make_shares(io, value) for key, value in own.items()}
    for other, name in enumerate(names):
        if other != rank:
            endpoint.send(name, TAG_INPUT, {key: share_to_wire(s[other]) for key, s in shares.items()})
    inputs: Dict[str, Any] = {f"{key}{rank}": s[rank] for key, s in shares.items() if key != "y"}
    if role == "active":
        inputs["y"] = shares["y"][rank]
    for other, name in enumerate(names):
        if other == rank:
            continue
        got = endpoint.recv(name, TAG_INPUT)
        expected = {"X", "w", *training.extra_state} | ({"y"} if other == 0 else set())
        if not isinstance(got, dict) or set(got) != expected:
            raise _refused(endpoint, name, TAG_INPUT, f"expected the shares {sorted(expected)}")
        for key in expected:
            inputs[key if key == "y" else f"{key}{other}"] = _share(endpoint, name, TAG_INPUT, got[key])
    # 3. train: one run per epoch, the weights secret-shared in between (the engine's time is "crypto")
    history: Dict[str, List[float]] = {}
    try:
        link = links.open(session, list(zip(names, addresses)), rank)
        runtime = spu.Runtime(link, config)
        for name_, share in inputs.items():
            runtime.set_var(name_, share)
        generator = training.generator(job, endpoint.name)
        for run in training.runs(job):
            if training.private_inputs:  # this party's secret inputs of the run, one share per rank
                with clock.crypto():
                    mine_now = training.run_private(job, run, rank, generator)
                    private = {key: make_shares(io, value) for key, value in mine_now.items()}
                for other, name in enumerate(names):
                    if other != rank:
                        endpoint.send(name, TAG_RUN_INPUT, {key: share_to_wire(s[other]) for key, s in private.items()})
                for key, s in private.items():
                    runtime.set_var(f"{key}{rank}", s[rank])
                for other, name in enumerate(names):
                    if other == rank:
                        continue
                    got = endpoint.recv(name, TAG_RUN_INPUT)
                    if not isinstance(got, dict) or set(got) != set(training.private_inputs):
                        raise _refused(endpoint, name, TAG_RUN_INPUT,
                                       f"expected the shares {sorted(training.private_inputs)}")
                    for key in training.private_inputs:
                        runtime.set_var(f"{key}{other}", _share(endpoint, name, TAG_RUN_INPUT, got[key]))
            with clock.crypto():
                for key, value in training.public_inputs(job, run).items():
                    runtime.set_var(key, make_shares(io, value, secret=False)[rank])
                runtime.run(program.executable)
            if data.progress is not None:
                data.progress(run, history)
        with clock.crypto():
            final = [runtime.get_var(f"w{r}") for r in range(len(names))]
        link.stop_link()
        # 4. reveal each block to its owner only. A peer sends its shares after leaving the engine, so once
        # every share is here no peer still talks to this party's link (a metering relay may stop then).
        for other, name in enumerate(names):
            if other != rank:
                endpoint.send(name, TAG_REVEAL, share_to_wire(final[other]))
        mine: List[Any] = [None] * len(names)
        mine[rank] = final[rank]
        for other, name in enumerate(names):
            if other != rank:
                mine[other] = _share(endpoint, name, TAG_REVEAL, endpoint.recv(name, TAG_REVEAL))
    finally:
        traffic = links.release(addresses[rank])  # also after a failure: a metering relay is stopped
    with clock.crypto():
        coef = reconstruct(io, mine)
    if coef.shape != (X.shape[1],) or not np.all(np.isfinite(coef)):
        raise ValueError(f"party {endpoint.name!r}: the reconstructed weights are not {X.shape[1]} finite values")
    info: Dict[str, Any] = {"mpc_protocol": protocol.name, "threat_model": protocol.threat_model,
                            "fraction_bits": int(config.fxp_fraction_bits), **training.info(job)}
    if traffic is not None:  # the engine's own bytes on the wire, where the link provider measured them
        info["engine_bytes_in"], info["engine_bytes_out"] = int(traffic["bytes_in"]), int(traffic["bytes_out"])
    return GLMPartyResult(endpoint.name, role, coef, history=history, timings=clock.timings(endpoint), info=info)


def mpc_active(endpoint: Channel, job: GLMJob, data: PartyData) -> GLMPartyResult:
    return engine_program(endpoint, job, data, "active", TRAINING)


def mpc_passive(endpoint: Channel, job: GLMJob, data: PartyData) -> GLMPartyResult:
    return engine_program(endpoint, job, data, "passive", TRAINING)


PROTOCOL = {"active": mpc_active, "passive": mpc_passive}
register_protocol("mpc", PROTOCOL, replace=True, tags=TAGS, check=_check_job,
                  resume_refusal="its weights are secret shares held in every party's engine between epochs; "
                                 "no party's checkpoint can hold them")
