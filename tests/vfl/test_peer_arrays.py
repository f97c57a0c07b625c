"""Peers checked on receipt (issue 24, item 5).

An outside audit sent 32 hostile arrays as a peer (NaN, inf, 1e308,
int/bool/float32, wrong shapes): 16 were accepted silently, 12 failed without
naming the sender, and NaN passed the HDP passive party's clip. Here a hostile
peer runs its real program but replaces one message (its second under the
tag, so the step is not 0) with a hostile payload; the victim runs its real
program over the real in-memory hub. Every case must fail the job with
:class:`PeerMessageRefused` raised by the victim, naming the sender, the tag
and the step. One case runs over gRPC on loopback with mutual TLS, where the
hostile peer then hears the refusal in the victim's abort notice.
"""
from __future__ import annotations

import struct
import threading
import warnings
from typing import Any, Callable, Dict, List

import numpy as np
import pytest

from vflsec.federation.channel import Channel, InMemoryHub
from vflsec.glm import GLMJob, PartyData, run_job
from vflsec.glm.hdp import hdp_noise_scales, hdp_sensitivities_for
from vflsec.glm.ir_exchange import TAG_IR_ACTIVE, TAG_IR_PASSIVE, release_limit
from vflsec.glm.job import PartyResult
from vflsec.glm.weights import RowWeights
from vflsec.runtime import deadlines
from vflsec.vfl import PeerMessageRefused, check_received_array, run_party_threads

N = 40


# -- hostile payloads -------------------------------------------------------------

def _with(value):
    def make(a):
        out = np.array(a, copy=True)
        out.flat[out.size // 2] = value
        return out
    return make


def _other_float(a):
    return a.astype(np.float32 if a.dtype == np.float64 else np.float64)


ARRAY_CASES: Dict[str, Callable[[np.ndarray], Any]] = {
    "nan": _with(np.nan),
    "+inf": _with(np.inf),
    "-inf": _with(-np.inf),
    "int64": lambda a: np.round(a).astype(np.int64),
    "bool": lambda a: a > 0,
    "other-float": _other_float,  # float32 where float64 is due, and vice versa
    "big-endian": lambda a: a.astype(a.dtype.newbyteorder(">")),
    "extra-dim": lambda a: a[None],
    "rows-1": lambda a: a[:-1],
    "empty": lambda a: a[:0],
    "bytes": lambda a: a.tobytes(),
    "list": lambda a: [a.tobytes()],
    "dict": lambda a: {"values": a},
}
WIDTH_CASES = {"width-1": lambda a: a[:, :-1], "width+1": lambda a: np.concatenate([a, a[:, :1]], axis=1)}
BOUND_CASES = {"1e308": _with(1e308), "-1e308": _with(-1e308)}


@pytest.fixture
def job_refusal(exception_chain):
    """``job_refusal(run, hub, receiver=..., step=...)``: run the job on ``hub``; it must fail
    with the victim ``receiver``'s refusal of the hostile message, naming the sender, the tag
    and ``step``."""
    def refusal_of(run: Callable[[InMemoryHub], Any], hub: InMemoryHub, *, receiver: str,
                   step) -> PeerMessageRefused:
        with pytest.raises(Exception) as info:
            run(hub)
        tampered = hub.tampered
        assert tampered.sent is not None, "the hostile message was never sent"
        refusals = [e for e in exception_chain(info.value) if isinstance(e, PeerMessageRefused)]
        assert refusals, f"expected a PeerMessageRefused, the job failed with {info.value!r}"
        refusal = refusals[0]
        assert (refusal.receiver, refusal.sender, refusal.tag, refusal.step) == (receiver, hub.sender, tampered.tag,
                                                                                  step), refusal
        message = str(info.value)  # what the job's caller sees names the sender and the tag
        assert f"peer {hub.sender!r}" in message and repr(tampered.tag) in message, message
        assert getattr(info.value, "party", receiver) == receiver  # the job failed at the victim
        return refusal

    return refusal_of


# -- the check itself -------------------------------------------------------------

def test_check_received_array_returns_the_honest_array_unchanged():
    honest = np.linspace(-1.0, 1.0, 6)
    args = dict(receiver="a", sender="b", tag="t", step=3, dtype=np.float64, shape=(6,), bound=1.0)
    assert check_received_array(honest, **args) is honest
    assert check_received_array(honest.reshape(2, 3), **{**args, "shape": (2, None)}).shape == (2, 3)


@pytest.mark.parametrize("case", sorted({**ARRAY_CASES, **BOUND_CASES}))
def test_check_received_array_refuses_and_names_sender_tag_step(case):
    honest = np.linspace(-1.0, 1.0, 6)
    with pytest.raises(PeerMessageRefused) as info:
        check_received_array({**ARRAY_CASES, **BOUND_CASES}[case](honest), receiver="active", sender="passive_0",
                             tag="ir_passive", step=7, dtype=np.float64, shape=(6,), bound=1.0, what="IR")
    message = str(info.value)
    assert message.startswith("party 'active' refused the message tagged 'ir_passive' from peer 'passive_0' at "
                              "step 7: IR: "), message


def test_non_finite_is_refused_even_without_a_bound_and_in_a_named_phase():
    with pytest.raises(PeerMessageRefused, match=r"at the held-out evaluation: .*non-finite .*never clipped"):
        check_received_array(np.array([0.0, np.nan]), receiver="a", sender="b", tag="t",
                             step="the held-out evaluation", dtype=np.float64, shape=(2,))


def test_any_extent_still_refuses_empty():
    with pytest.raises(PeerMessageRefused, match=r"shape \(3, 0\)"):
        check_received_array(np.zeros((3, 0), np.float32), receiver="a", sender="b", tag="t", step=0,
                             dtype=np.float32, shape=(3, None))


def test_release_limit_covers_the_samplers_support():
    # |noise| < 130.25 sigma' (cpp/lattice_gaussian.cpp), sigma' <= 1.004 sigma
    assert release_limit(2.0, None) == pytest.approx(2.0, rel=1e-5)
    assert release_limit(2.0, 0.5) >= 2.0 + 130.25 * 0.5
    assert release_limit(2.0, 0.5) < 2.0 + 140 * 0.5  # still refuses what no release can be


# -- GLM: plain and HDP-VFL (ir_exchange, both directions) -----------------------

def _glm_data(d_a=3, d_b=2, seed=0):
    rng = np.random.default_rng(seed)
    Xa, Xb = rng.normal(size=(N, d_a)), rng.normal(size=(N, d_b))
    Xa /= np.maximum(1.0, np.linalg.norm(Xa, axis=1, keepdims=True))
    Xb /= np.maximum(1.0, np.linalg.norm(Xb, axis=1, keepdims=True))
    y = np.where(rng.random(N) < 0.5, 1.0, -1.0)
    return {"active": PartyData(Xa, y), "passive": PartyData(Xb)}


def _glm_job(protocol, **kw):
    base = dict(n_samples=N, batch_size=10, epochs=1, lr=0.5, passives=("passive",))
    if protocol == "hdp":
        base.update(k=1.0, epsilon=4.0, delta=1e-5, noise_seed=3)
    return GLMJob(protocol, **{**base, **kw})


IR_SITES = [("active", "passive", TAG_IR_ACTIVE), ("passive", "active", TAG_IR_PASSIVE)]
IR_CASES = [(protocol, sender, receiver, tag, case)
            for protocol in ("plain", "hdp") for sender, receiver, tag in IR_SITES
            # plain: an unweighted logistic IR_A is in [-1, 1]; a passive IR has no bound (only overflow is refused)
            for case in sorted(ARRAY_CASES) + (sorted(BOUND_CASES) if protocol == "hdp" or sender == "active" else [])]


@pytest.mark.parametrize("protocol,sender,receiver,tag,case", IR_CASES)
def test_hostile_ir_fails_the_job_naming_the_sender(hostile_hub, protocol, sender, receiver, tag, case, job_refusal):
    job, data = _glm_job(protocol), _glm_data()
    hub = hostile_hub(sender, receiver, tag, {**ARRAY_CASES, **BOUND_CASES}[case])
    job_refusal(lambda h: run_job(job, data, h, timeout=120), hub, receiver=receiver, step=1)


def test_hdp_passive_still_clips_in_range_noise(hostile_hub):
    # The clip stays for what an honest release can be: a value beyond L but within
    # the release's support is taken (and clipped to L), not refused.
    job, data = _glm_job("hdp"), _glm_data()
    L = hdp_sensitivities_for(job).constants.L
    limit = release_limit(L, hdp_noise_scales(job)["sigma_active"])
    hub = hostile_hub("active", "passive", TAG_IR_ACTIVE, lambda a: np.full_like(a, (L + limit) / 2))
    result = run_job(job, data, hub, timeout=120)
    assert hub.tampered.sent is not None and np.all(np.isfinite(result.results["passive"].coef))


def test_plain_ir_whose_sum_overflows_names_the_sender(hostile_hub, job_refusal):
    # Each IR is finite, but theta = X_A w_A + the sum of the passive IRs is not:
    # the one whose addition overflows is refused.
    data = _glm_data()
    data["passive_1"] = PartyData(np.random.default_rng(1).normal(size=(N, 2)) / 4)
    job = _glm_job("plain", passives=("passive", "passive_1"))
    hub = hostile_hub("passive_1", "active", TAG_IR_PASSIVE, lambda a: np.full_like(a, 1.7e308),
                     accomplices=("passive",))
    refusal = job_refusal(lambda h: run_job(job, data, h, timeout=120), hub, receiver="active", step=1)
    assert "overflows" in str(refusal)


@pytest.mark.parametrize("value", [1e308, -1e308, 1e300])
def test_a_finite_ir_that_overflows_the_passive_update_names_the_active_party(hostile_hub, value, job_refusal):
    """Issue 39: least squares has no IR bound a passive party knows; a finite 1e308 used to pass, and the honest
    passive party's next message (non-finite) was refused naming it. Now the passive refuses it naming the sender."""
    job, data = _glm_job("plain", loss="least_squares", lr=1e10), _glm_data()
    data["active"] = PartyData(data["active"].X, np.random.default_rng(2).normal(size=N))
    hub = hostile_hub("active", "passive", TAG_IR_ACTIVE, lambda a: np.full_like(a, value))
    refusal = job_refusal(lambda h: run_job(job, data, h, timeout=120), hub, receiver="passive", step=1)
    assert "overflows" in str(refusal)


def test_a_weighted_plain_job_takes_residuals_beyond_one(hostile_hub):
    """A weighted job's IR is the residual times the active party's private row weight: no [-1, 1] bound."""
    job, data = _glm_job("plain", weighted=True), _glm_data()
    data["active"] = PartyData(data["active"].X, data["active"].y, weights=RowWeights(negative=4.0, positive=3.0))
    hub = hostile_hub("active", "passive", TAG_IR_ACTIVE, lambda a: a)  # honest, with weights up to 4
    result = run_job(job, data, hub, timeout=120)
    assert np.all(np.isfinite(result.results["passive"].coef))


# -- HE-VFL: ciphertexts, the key holder's replies, the loss ----------------------

def _paillier_resized(data: bytes, change: int) -> bytes:
    """A well-formed Paillier vector (vflsec.he.paillier's wire format) with
    ``change`` ciphertexts fewer (< 0) or more (> 0, repeating the last)."""
    header = struct.Struct(">3shII")  # magic, exponent, count, ciphertext size
    magic, exponent, count, size = header.unpack_from(data)
    body = data[header.size:]
    body = body[:len(body) + change * size] if change < 0 else body + body[-size:] * change
    return header.pack(magic, exponent, count + change, size) + body


CIPHERTEXT_CASES: Dict[str, Callable[[Any], Any]] = {
    "one-value-fewer": lambda b: _paillier_resized(b, -1),
    "one-value-more": lambda b: _paillier_resized(b, +1),
    "truncated": lambda b: b[:-7],
    "garbage": lambda b: b"\x00" * len(b),
    "array": lambda b: np.zeros(4),
    "list": lambda b: [b],
    "dict": lambda b: {"ciphertext": b},
}
PAILLIER_REPLY_CASES: Dict[str, Callable[[Any], Any]] = {
    "truncated": lambda b: b[:-1],
    "one-value-more": lambda b: b + b[-len(b) // 3:],  # the party's block has 3 columns
    "out-of-range": lambda b: b"\xff" * len(b),
    # plaintexts in [0, n) that do not unmask to a representable gradient
    "in-range-garbage": lambda b: (b"\x00" * (len(b) // 3 - 1) + b"\x01") * 3,
    "array": lambda b: np.zeros(3),
    "list": lambda b: [b],
    "dict": lambda b: {"values": b},
}
# the loss the key holder returns (one float64 value)
LOSS_CASES = {k: v for k, v in ARRAY_CASES.items() if k != "rows-1"}
LOSS_CASES["two-values"] = lambda a: np.concatenate([a, a])

HE_CASES = (
    [("passive", "active", "he_u_passive", 1, 1, case, f) for case, f in CIPHERTEXT_CASES.items()]
    + [("passive", "active", "he_u_passive_sq", 1, 1, case, f) for case, f in CIPHERTEXT_CASES.items()
       if case != "one-value-fewer"]
    + [("active", "passive", "he_residual", 1, 1, case, f) for case, f in CIPHERTEXT_CASES.items()]
    + [("coordinator", "active", "he_gradient", 1, 1, case, f) for case, f in PAILLIER_REPLY_CASES.items()]
    + [("coordinator", "active", "he_loss_value", 0, 1, case, f) for case, f in LOSS_CASES.items()]
)


def _he_run(protocol, **options):
    job = GLMJob(protocol=protocol, n_samples=N, batch_size=20, epochs=1, lr=0.5, passives=("passive",),
                 coordinator="coordinator", key_bits=2048, options=options)
    data = _glm_data(d_a=3, d_b=2)

    def run(hub):
        from vflsec.he import WeakKeyWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakKeyWarning)
            return run_job(job, data, hub, timeout=300)

    return run


@pytest.mark.slow  # end to end: an HE job per case (40)
@pytest.mark.parametrize("sender,receiver,tag,at,step,case,hostile", HE_CASES,
                         ids=[f"{c[2]}-{c[5]}" for c in HE_CASES])
def test_hostile_he_message_fails_the_job_naming_the_sender(hostile_hub, sender, receiver, tag, at, step, case, hostile,
                                                            job_refusal):
    pytest.importorskip("phe")
    hub = hostile_hub(sender, receiver, tag, hostile, at=at)
    job_refusal(_he_run("paillier", encrypted_loss=True), hub, receiver=receiver, step=step)


CKKS_REPLY_CASES = {k: v for k, v in ARRAY_CASES.items() if k != "rows-1"}
CKKS_REPLY_CASES.update({"one-value-fewer": lambda a: a[:-1], "one-value-more": lambda a: np.concatenate([a, a])})


@pytest.mark.slow  # end to end: a CKKS job per case (14)
@pytest.mark.parametrize("case", sorted(CKKS_REPLY_CASES))
def test_hostile_ckks_gradient_reply_fails_the_job_naming_the_key_holder(hostile_hub, case, job_refusal):
    pytest.importorskip("tenseal")
    hub = hostile_hub("coordinator", "passive", "he_gradient", CKKS_REPLY_CASES[case])
    job_refusal(_he_run("ckks"), hub, receiver="passive", step=1)


# -- split learning: embeddings and gradients -------------------------------------

def _split_setup(embedding_dims: bool = True):
    pytest.importorskip("torch")
    from vflsec.runtime.splitnn_kind import build_party_data
    from vflsec.splitnn.job import SplitJob

    rng = np.random.default_rng(0)
    X = rng.normal(size=(24, 5)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    job = SplitJob(n_samples=24, batch_size=8, epochs=1, passives=("passive",), seed=0)
    fields = {"bottom_hidden": [8], "embedding_dim": 4}
    data = {"passive": build_party_data(job, fields, "passive", X[:, :3], None),
            "active": build_party_data(job, fields, "active", X[:, 3:], y)}
    if not embedding_dims:  # a defense set up without the widths: the first embedding fixes them
        from vflsec.splitnn.defenses.base import DefenseContext, NoDefense

        for party in data.values():
            party.defense = NoDefense()
            party.defense.setup(DefenseContext(n_classes=2, passive_parties=("passive",), n_samples=24,
                                               batch_size=8, epochs=1))
    return job, data


SPLIT_CASES = [(sender, receiver, tag, case)
               for sender, receiver, tag in (("passive", "active", "sl_embedding"),
                                             ("active", "passive", "sl_gradient"))
               for case in sorted({**ARRAY_CASES, **WIDTH_CASES})]


@pytest.mark.parametrize("sender,receiver,tag,case", SPLIT_CASES)
def test_hostile_split_message_fails_the_job_naming_the_sender(hostile_hub, sender, receiver, tag, case, job_refusal):
    from vflsec.splitnn import run_split_job

    job, data = _split_setup()
    hub = hostile_hub(sender, receiver, tag, {**ARRAY_CASES, **WIDTH_CASES}[case])
    job_refusal(lambda h: run_split_job(job, data, h, timeout=120), hub, receiver=receiver, step=1)


@pytest.mark.parametrize("case", sorted(WIDTH_CASES))
def test_embedding_width_is_fixed_by_the_first_batch_when_not_told(hostile_hub, case, job_refusal):
    from vflsec.splitnn import run_split_job

    job, data = _split_setup(embedding_dims=False)
    hub = hostile_hub("passive", "active", "sl_embedding", WIDTH_CASES[case])
    job_refusal(lambda h: run_split_job(job, data, h, timeout=120), hub, receiver="active", step=1)


# -- `vflsec party`'s held-out evaluation -----------------------------------------

EVALUATION = deadlines.PHASE_EVALUATION


def _evaluate_on(hub: InMemoryHub, kind, job, results: Dict[str, Any], X: Dict[str, np.ndarray], y: np.ndarray):
    def run_party(party: str, channel: Channel):
        return kind.evaluate(channel, job, job.role_of(party), results[party], X[party],
                             y if party == job.active else None)

    return run_party_threads(hub, job.parties, run_party, timeout=120, label="evaluation")


@pytest.mark.parametrize("case", sorted(ARRAY_CASES))
def test_hostile_held_out_glm_scores_name_the_sender(hostile_hub, case, job_refusal):
    from vflsec.runtime.glm_kind import TAG_EVAL_SCORES, GLMJobKind

    job = _glm_job("plain")
    data = _glm_data()
    results = {"active": PartyResult("active", "active", np.ones(3)),
               "passive": PartyResult("passive", "passive", np.ones(2))}
    X = {p: d.X for p, d in data.items()}
    hub = hostile_hub("passive", "active", TAG_EVAL_SCORES, ARRAY_CASES[case], at=0)
    job_refusal(lambda h: _evaluate_on(h, GLMJobKind(), job, results, X, data["active"].y), hub, receiver="active",
                step=EVALUATION)


@pytest.mark.parametrize("case", sorted({**ARRAY_CASES, **WIDTH_CASES}))
def test_hostile_held_out_embeddings_name_the_sender(hostile_hub, case, job_refusal):
    from vflsec.runtime.splitnn_kind import TAG_EVAL_EMBEDDING, SplitJobKind
    from vflsec.splitnn.job import SplitPartyResult

    job, data = _split_setup()
    results = {p: SplitPartyResult(party=p, role=job.role_of(p), bottom=d.bottom, head=d.head, defense=d.defense)
               for p, d in data.items()}
    X = {p: d.X for p, d in data.items()}
    y = np.asarray(data["active"].y)
    hub = hostile_hub("passive", "active", TAG_EVAL_EMBEDDING, {**ARRAY_CASES, **WIDTH_CASES}[case], at=0)
    job_refusal(lambda h: _evaluate_on(h, SplitJobKind(), job, results, X, y), hub, receiver="active", step=EVALUATION)


# -- over gRPC: the refusal fails the job and every peer hears it ------------------

@pytest.mark.network
def test_hostile_ir_over_grpc_fails_the_job_and_the_sender_hears_it(hostile_hub, tmp_path, loopback_channels):
    pytest.importorskip("grpc")
    pytest.importorskip("cryptography")
    from vflsec.federation.grpc_channel import NetworkSettings, PeerFailed
    from vflsec.federation.tls import init_certificates
    from vflsec.glm.registry import get_protocol
    from vflsec.runtime.kinds import get_job_kind

    init_certificates(tmp_path, ["active", "passive"])
    job, data = _glm_job("hdp"), _glm_data()
    roles = get_protocol("hdp").roles
    tags = deadlines.expected_tags(get_job_kind("glm"), job)
    names = ["active", "passive"]
    outcome: Dict[str, BaseException] = {}
    settings = NetworkSettings(peer_timeout=2.0, heartbeat_interval=0.25, connect_timeout=10.0)
    with loopback_channels(tmp_path, names, settings, expected_tags={n: tags for n in names}) as ch:
        hostile = hostile_hub.Tampered(ch["passive"], "active", TAG_IR_PASSIVE, _with(np.nan))
        endpoints: Dict[str, Channel] = {"active": ch["active"], "passive": hostile}

        def run(name):
            ch[name].set_recv_timeout(60.0, "training")
            try:
                roles[name](endpoints[name], job, data[name])
            except BaseException as exc:  # noqa: BLE001 - inspected below
                outcome[name] = exc
                ch[name].notify_abort(f"{type(exc).__name__}: {exc}")  # as `vflsec party` does

        threads: List[threading.Thread] = [threading.Thread(target=run, args=(n,)) for n in names]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
    assert not any(t.is_alive() for t in threads)
    refusal = outcome.get("active")
    assert isinstance(refusal, PeerMessageRefused), outcome
    assert (refusal.sender, refusal.tag, refusal.step) == ("passive", TAG_IR_PASSIVE, 1)
    heard = outcome.get("passive")
    assert isinstance(heard, PeerFailed) and heard.peer == "active", outcome
    assert "PeerMessageRefused" in str(heard) and "from peer 'passive'" in str(heard)
