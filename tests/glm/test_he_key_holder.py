"""HE-VFL's key holder answers each party for the width the job agreed on (issue 24, item 4).

The audit: an active party that registered 20 columns instead of its 3
recovered all 20 values of the passive party's [[u_B]] per batch (Paillier
error 4e-13, CKKS 3e-4) and the job finished. Every block width now comes
from the job every party agrees on (``GLMJob.widths``; ``vflsec party``
agrees them in its handshake), never from the party it describes: the key
holder refuses a registration or a request of another width, before any key
is made where it can, and applies the width < batch rule to the active party
too. The older oracle attacks (a forwarded [[u_B]] at the agreed width, other
steps and purposes) are in tests/glm/test_he_vfl_oracle.py.
"""
from __future__ import annotations

import dataclasses
import json
import secrets
import threading
import warnings
from typing import Any, Callable, Dict, Iterator

import numpy as np
import pytest

pytest.importorskip("phe")

from vflsec.federation.channel import InMemoryHub  # noqa: E402
from vflsec.glm import GLMJob, PartyData, he_vfl, run_job  # noqa: E402
from vflsec.glm.registry import get_protocol  # noqa: E402
from vflsec.he import WeakKeyWarning  # noqa: E402
from vflsec.vfl.runner import PartyError, run_programs  # noqa: E402

D_A, D_B, LIE = 3, 2, 20
WIDTHS = {"active": D_A, "passive": D_B}


def _blocks(n: int, widths: Dict[str, int], seed: int = 0):
    """Every party's block (rows of norm <= 1, as CKKS needs) and labels."""
    rng = np.random.default_rng(seed)
    blocks = {}
    for party, width in widths.items():
        X = rng.normal(size=(n, width))
        blocks[party] = X / np.maximum(1.0, np.linalg.norm(X, axis=1, keepdims=True))
    return blocks, np.where(rng.random(n) < 0.5, 1.0, -1.0)


def _data(blocks, y):
    return {"active": PartyData(blocks["active"], y), "passive": PartyData(blocks["passive"])}


def _job(protocol: str, n: int, batch: int, widths) -> GLMJob:
    return GLMJob(protocol=protocol, n_samples=n, batch_size=batch, epochs=1, lr=0.5, passives=("passive",),
                  coordinator="coordinator", key_bits=2048, options={"encrypted_loss": False}, widths=widths)


def _failed_run(job: GLMJob, roles, data):
    """The exception the in-memory run fails with, and the hub (its message log)."""
    hub = InMemoryHub()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        with pytest.raises(Exception) as info:
            run_programs(job, roles, data, hub, timeout=300)
    return info.value, hub


def _sent(hub: InMemoryHub, tag: str, receiver: str = ""):
    return [r for r in hub.records if r.tag == tag and receiver in ("", r.receiver)]


@pytest.fixture
def key_holder_refusal(exception_chain) -> Callable[[BaseException], he_vfl.DecryptionRefused]:
    """``key_holder_refusal(exc)``: the refusal the job failed with, raised by the key holder,
    first (the root cause)."""
    def refusal(exc: BaseException) -> he_vfl.DecryptionRefused:
        assert isinstance(exc, PartyError) and exc.party == "coordinator", repr(exc)
        refusals = [e for e in exception_chain(exc) if isinstance(e, he_vfl.DecryptionRefused)]
        assert refusals, repr(exc)
        return refusals[0]

    return refusal


# -- the lying-width attack -------------------------------------------------------

class _ConfirmingAs:
    """The lying party's endpoint: it confirms ``width`` to the key holder,
    whatever width its program registers; everything else passes through."""

    def __init__(self, endpoint, width: int):
        self._endpoint, self._width = endpoint, width

    def __getattr__(self, name: str) -> Any:
        return getattr(self._endpoint, name)

    def send(self, receiver: str, tag: str, payload: Any) -> None:
        if tag == he_vfl.TAG_REGISTER:
            payload = {"n_features": self._width}
        self._endpoint.send(receiver, tag, payload)


def _lying_active(protocol: str, lie: int, confirm=None) -> Callable:
    """The real active program, run on a block of ``lie`` columns under the job
    it would like (``widths['active'] = lie``): every step's gradient request is
    ``lie`` linear combinations of values it holds encrypted. ``confirm``: the
    width its endpoint confirms to the key holder instead."""
    real = get_protocol(protocol).roles["active"]

    def program(endpoint, job, data):
        wide, _ = _blocks(job.n_samples, {"active": lie}, seed=1)
        wished = dataclasses.replace(job, widths={**job.widths, job.active: lie})
        return real(endpoint if confirm is None else _ConfirmingAs(endpoint, confirm), wished,
                    PartyData(wide["active"], data.y))

    return program


# 20 lying columns pass the lying program's own width rule only with a batch of more than 20 rows.
N_WIDE, BATCH_WIDE = 42, 21


def test_a_lying_registration_fails_the_job_at_the_key_holder_before_any_key(he_protocol, key_holder_refusal):
    blocks, y = _blocks(N_WIDE, WIDTHS)
    roles = dict(get_protocol(he_protocol).roles, active=_lying_active(he_protocol, LIE))
    exc, hub = _failed_run(_job(he_protocol, N_WIDE, BATCH_WIDE, WIDTHS), roles, _data(blocks, y))
    refusal = key_holder_refusal(exc)
    assert (refusal.party, refusal.step, refusal.purpose) == ("active", -1, he_vfl.PURPOSE_REGISTRATION)
    assert f"'active' before any key is made: it registered {LIE} feature columns, the job agreed on {D_A}" \
        in str(refusal)
    assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY), "the key holder made and sent a key before refusing"
    assert not _sent(hub, he_vfl.TAG_GRADIENT)


def test_a_request_wider_than_the_agreed_width_fails_the_job_at_the_key_holder(he_protocol, key_holder_refusal):
    # The lying program confirms the agreed width, then asks for 20 values at step 0.
    blocks, y = _blocks(N_WIDE, WIDTHS)
    roles = dict(get_protocol(he_protocol).roles, active=_lying_active(he_protocol, LIE, confirm=D_A))
    exc, hub = _failed_run(_job(he_protocol, N_WIDE, BATCH_WIDE, WIDTHS), roles, _data(blocks, y))
    refusal = key_holder_refusal(exc)
    assert (refusal.party, refusal.step, refusal.purpose) == ("active", 0, he_vfl.PURPOSE_GRADIENT)
    assert "refused the gradient decryption request of 'active' at step 0" in str(refusal)
    assert _sent(hub, he_vfl.TAG_PUBLIC_KEY)  # it got as far as a request
    assert not _sent(hub, he_vfl.TAG_GRADIENT, receiver="active"), "the key holder answered the lying party"


def _as_gradient(protocol: str, scheme, enc_u) -> bytes:
    """The passive party's [[u_B]] dressed as a gradient of len(u_B) values
    (the audit's request): Paillier, its ciphertexts relabelled to the product
    level; CKKS, [[u_B]] times the identity, a genuine product layout."""
    if protocol == "paillier":
        from vflsec.he import paillier as he_paillier

        return he_paillier.EncryptedVector(scheme.public_key, enc_u.ciphertexts, level=2).to_bytes()
    return enc_u.dot(np.eye(len(enc_u))).to_bytes()


def _schemes(protocol: str):
    module = __import__(f"vflsec.glm.{protocol}", fromlist=["x"])
    if protocol == "paillier":
        return module.PaillierScheme, module.PaillierKeyHolder
    return module.CKKSScheme, module.CKKSKeyHolder


def _forwarding_active(protocol: str, register: int, leaked: list) -> Callable:
    """The audit's attacker: registers ``register`` columns and asks the key
    holder to decrypt the passive party's [[u_B]] (20 values) as its gradient."""
    make_scheme, _ = _schemes(protocol)

    def program(endpoint, job, data):
        endpoint.send(job.coordinator, he_vfl.TAG_REGISTER, {"n_features": register})
        scheme = make_scheme(endpoint.recv(job.coordinator, he_vfl.TAG_PUBLIC_KEY), job)
        enc_u = scheme.loads(endpoint.recv(job.passives[0], he_vfl.TAG_U_PASSIVE))
        request = he_vfl._request(0, he_vfl.PURPOSE_GRADIENT, _as_gradient(protocol, scheme, enc_u))
        endpoint.send(job.coordinator, he_vfl.TAG_MASKED_GRADIENT, request)
        leaked.append(endpoint.recv(job.coordinator, he_vfl.TAG_GRADIENT))
        raise AssertionError("the key holder decrypted the forwarded [[u_B]]")

    return program


@pytest.mark.parametrize("register", [LIE, D_A])
def test_the_audits_forwarded_u_b_is_refused_at_any_registered_width(he_protocol, register, key_holder_refusal):
    n, batch = 40, LIE  # a batch of 20 rows: [[u_B]] is 20 values, all of them requested
    blocks, y = _blocks(n, WIDTHS)
    leaked: list = []
    roles = dict(get_protocol(he_protocol).roles, active=_forwarding_active(he_protocol, register, leaked))
    exc, hub = _failed_run(_job(he_protocol, n, batch, WIDTHS), roles, _data(blocks, y))
    assert not leaked, "the key holder decrypted the passive party's [[u_B]] for the active party"
    refusal = key_holder_refusal(exc)
    assert refusal.party == "active"
    if register == LIE:
        assert (refusal.step, refusal.purpose) == (-1, he_vfl.PURPOSE_REGISTRATION)
        assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY)
    else:
        assert (refusal.step, refusal.purpose) == (0, he_vfl.PURPOSE_GRADIENT)


def test_the_forged_request_is_the_audits_attack_at_the_claimed_width(he_protocol):
    # Control for the test above: answered for the 20 columns the attacker
    # claimed, the forged request gives back every value of u_B. Only the agreed
    # width stands between the attacker and u_B.
    job = _job(he_protocol, 40, LIE, WIDTHS)
    make_scheme, make_holder = _schemes(he_protocol)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WeakKeyWarning)
        holder = make_holder(job)
    scheme = make_scheme(holder.public_payload(), job)
    u_b = np.random.default_rng(2).uniform(-1.0, 1.0, LIE)
    forged = _as_gradient(he_protocol, scheme, scheme.encrypt(u_b))
    reply = holder.answer_gradient(forged, LIE)
    if he_protocol == "paillier":
        recovered = scheme.public_key.decode(scheme.public_key.plaintexts_from_bytes(reply), level=1)
        assert np.abs(recovered - u_b).max() < 1e-9
    else:
        assert np.abs(np.asarray(reply) - u_b).max() < 1e-2
    with pytest.raises(ValueError):
        holder.answer_gradient(forged, D_A)


# -- agreed widths against the data ---------------------------------------------

@pytest.mark.parametrize("party", ["active", "passive"])
def test_agreed_widths_that_differ_from_a_partys_data_fail_before_any_key(he_protocol, party):
    blocks, y = _blocks(40, WIDTHS)
    job = _job(he_protocol, 40, 20, {**WIDTHS, party: WIDTHS[party] + 1})
    message = f"party {party!r} holds {WIDTHS[party]} feature columns, the job agreed on widths[{party!r}] = " \
              f"{WIDTHS[party] + 1}"
    # The party programs: the party itself refuses, before it confirms a width (so before any key).
    exc, hub = _failed_run(job, get_protocol(he_protocol).roles, _data(blocks, y))
    assert type(exc) is ValueError and message in str(exc), repr(exc)
    assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY)
    assert not [r for r in _sent(hub, he_vfl.TAG_REGISTER) if r.sender == party]
    # run_job: before any party starts.
    hub = InMemoryHub()
    with pytest.raises(ValueError) as info:
        run_job(job, _data(blocks, y), hub=hub, timeout=300)
    assert message in str(info.value) and not hub.records


def test_an_he_job_without_agreed_widths_is_refused(he_protocol, exception_chain):
    blocks, y = _blocks(40, WIDTHS)
    job = _job(he_protocol, 40, 20, None)
    exc, hub = _failed_run(job, get_protocol(he_protocol).roles, _data(blocks, y))
    assert any("needs every data party's block width" in str(e) for e in exception_chain(exc)), repr(exc)
    assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY)


@pytest.mark.parametrize("widths, error, match", [
    ({"active": 3}, ValueError, r"exactly the data parties \['active', 'passive'\]"),
    ({"active": 3, "passive": 2, "coordinator": 1}, ValueError, "exactly the data parties"),
    ({"active": 0, "passive": 2}, ValueError, r"widths\['active'\] must be >= 1"),
    ({"active": 3, "passive": True}, TypeError, r"widths\['passive'\] must be an integer"),
    ({"active": 3.0, "passive": 2}, TypeError, r"widths\['active'\] must be an integer"),
    ([3, 2], TypeError, "widths must be a mapping"),
])
def test_job_widths_are_checked(widths, error, match):
    with pytest.raises(error, match=match):
        _job("paillier", 40, 20, widths)


def test_job_widths_are_plain_ints():
    job = _job("paillier", 40, 20, {"passive": np.int64(2), "active": 3})
    assert job.widths == WIDTHS and all(type(v) is int for v in job.widths.values())


# -- the width rule for the active party ------------------------------------------

def _reckless_active(width: int) -> Callable:
    """An active party that skips its own width rule and confirms ``width``."""
    def program(endpoint, job, data):
        endpoint.send(job.coordinator, he_vfl.TAG_REGISTER, {"n_features": width})
        endpoint.recv(job.coordinator, he_vfl.TAG_PUBLIC_KEY)
        raise AssertionError("the key holder made a key for an active block as wide as a batch")
    return program


def test_the_width_rule_holds_for_the_active_party(he_protocol, key_holder_refusal, exception_chain):
    # With d_A >= |S| the active party's gradient X_A^T d determines d, and
    # with it u_B = d / alpha - u_A - s(y).
    n, batch = 40, 20
    widths = {"active": batch, "passive": D_B}
    job = _job(he_protocol, n, batch, widths)
    rule = f"party 'active' has {batch} features but a batch has only {batch} rows"
    with pytest.raises(ValueError, match="reveal the residuals d \\(and the passive parties' partial scores\\)"):
        he_vfl.check_block_width(job, "active", batch)
    he_vfl.check_block_width(job, "active", batch - 1)  # narrower: accepted
    blocks, y = _blocks(n, widths)
    # The key holder refuses the agreed job itself, before any key is made.
    roles = dict(get_protocol(he_protocol).roles, active=_reckless_active(batch))
    exc, hub = _failed_run(job, roles, _data(blocks, y))
    refusal = key_holder_refusal(exc)
    assert (refusal.party, refusal.step, refusal.purpose) == ("active", -1, he_vfl.PURPOSE_WIDTH)
    assert rule in str(refusal)
    assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY)
    # An honest active party refuses its own block (as the key holder does: either fails the job first).
    exc, hub = _failed_run(job, get_protocol(he_protocol).roles, _data(blocks, y))
    assert any(rule in str(e) for e in exception_chain(exc)), repr(exc)
    assert not _sent(hub, he_vfl.TAG_PUBLIC_KEY)


# -- `vflsec party`: the widths agreed in the handshake -----------------------------

NAMES = ("active", "passive", "coordinator")
JOB_TABLE = dict(protocol="paillier", lr=0.5, epochs=1, batch_size=20, seed=0, active="active",
                 passives=["passive"], coordinator="coordinator", key_bits=2048)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    pytest.importorskip("grpc")
    from vflsec.federation.tls import init_certificates

    root = tmp_path_factory.mktemp("certs")
    init_certificates(root, list(NAMES))
    return root


def _spec(tmp_path, **extra):
    from vflsec.runtime.job_spec import load_job_spec
    from vflsec.runtime.launch import to_toml

    path = tmp_path / "job.toml"
    path.write_text(to_toml({"job": {**JOB_TABLE, **extra}}))
    return load_job_spec(path)


@pytest.fixture
def handshake_channels(certs, loopback_channels) -> Iterator[Dict[str, Any]]:
    """The three parties connected on loopback (mutual TLS), in the handshake's session."""
    from vflsec.federation.grpc_channel import NetworkSettings

    settings = NetworkSettings(peer_timeout=4.0, heartbeat_interval=0.5, connect_timeout=20.0)
    with loopback_channels(certs, list(NAMES), settings, session="handshake") as channels:
        for channel in channels.values():
            channel.set_recv_timeout(20.0, "the start-up handshake")
        yield channels


def _handshake(channels, programs: Dict[str, Callable[[Any], Any]]) -> Dict[str, Any]:
    """Every party's handshake in its own thread: its result or its exception
    (a failing party tells its peers, as `vflsec party` does)."""
    outcome: Dict[str, Any] = {}

    def run(name):
        try:
            outcome[name] = programs[name](channels[name])
        except BaseException as exc:  # noqa: BLE001 - inspected by the test
            outcome[name] = exc
            channels[name].notify_abort(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(name,)) for name in NAMES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    return outcome


@pytest.mark.parametrize("widths, message", [
    ({"active": D_A}, "exactly the data parties"),
    ({**WIDTHS, "coordinator": 1}, "exactly the data parties"),
    ({**WIDTHS, "passive": 0}, "widths['passive'] must be >= 1"),
])
def test_a_job_file_that_pins_bad_widths_is_refused(tmp_path, widths, message):
    with pytest.raises((ValueError, TypeError)) as info:
        _spec(tmp_path, widths=widths)
    assert message in str(info.value)


def test_the_pinned_widths_enter_the_job_digest(tmp_path):
    assert _spec(tmp_path, widths=WIDTHS).digest != _spec(tmp_path, widths={**WIDTHS, "active": LIE}).digest
    assert _spec(tmp_path).digest != _spec(tmp_path, widths=WIDTHS).digest


def _honest(spec, widths):
    from vflsec.runtime.handshake import agree_on_job

    return {name: (lambda ch, name=name: agree_on_job(ch, spec, "active", ["passive", "coordinator"],
                                                      widths.get(name)))
            for name in NAMES}


@pytest.mark.network
@pytest.mark.parametrize("pinned", [False, True])
def test_the_handshake_agrees_every_partys_width(tmp_path, handshake_channels, pinned):
    spec = _spec(tmp_path, **({"widths": WIDTHS} if pinned else {}))
    outcome = _handshake(handshake_channels, _honest(spec, WIDTHS))
    assert outcome == {name: WIDTHS for name in NAMES}, outcome
    job = spec.job(n_samples=40, widths=outcome["coordinator"])
    # The handshake agrees the CSVs' feature columns; the job adds the active party's intercept column
    # (fit_intercept defaults to true, vflsec.glm.model), which the key holder then counts too.
    intercept = 1 if spec.fields.get("fit_intercept", True) else 0
    assert job.widths == {"active": WIDTHS["active"] + intercept, "passive": WIDTHS["passive"]}


@pytest.mark.network
def test_a_width_other_than_the_job_file_pins_stops_the_job(tmp_path, handshake_channels):
    spec = _spec(tmp_path, widths=WIDTHS)
    outcome = _handshake(handshake_channels, _honest(spec, {"active": LIE, "passive": D_B}))
    pinned = f"party 'active' holds {LIE} feature columns, the job file pins widths.active = {D_A}"
    assert isinstance(outcome["active"], ValueError) and pinned in str(outcome["active"]), outcome
    # The followers: the leader's refusal (or its abort, which carries the same reason).
    assert all(isinstance(outcome[name], Exception) and pinned in str(outcome[name]) for name in NAMES), outcome


def _equivocating_leader(told: Dict[str, Any]) -> Callable[[Any], Any]:
    """The active party as leader, telling each follower other widths."""
    from vflsec.runtime import handshake

    def program(channel):
        for follower in told:
            channel.recv(follower, handshake.TAG_HELLO)
        session = f"lie-{secrets.token_hex(8)}"
        channel.accept_session(session)
        for follower, widths in told.items():
            channel.send(follower, handshake.TAG_SESSION, {"session": session, "widths": json.dumps(widths)})
        channel.begin_session(session)
        for follower in told:
            channel.recv(follower, handshake.TAG_READY)
        for follower in told:
            channel.send(follower, handshake.TAG_GO, b"")
        return told

    return program


@pytest.mark.network
def test_a_leader_that_tells_parties_different_widths_stops_the_job(tmp_path, handshake_channels):
    spec = _spec(tmp_path)
    programs = _honest(spec, WIDTHS)
    programs["active"] = _equivocating_leader({"passive": WIDTHS, "coordinator": {**WIDTHS, "active": LIE}})
    outcome = _handshake(handshake_channels, programs)
    # Each follower finds the other's digest differs (or first hears the other's abort, which says so).
    assert all(isinstance(outcome[name], Exception) and "was told other block widths" in str(outcome[name])
               and "the leader 'active' announced different widths" in str(outcome[name])
               for name in ("passive", "coordinator")), outcome
    assert any(isinstance(outcome[name], ValueError) and f"party {other!r} was told other block widths than this "
               f"party {name!r}" in str(outcome[name])
               for name, other in (("passive", "coordinator"), ("coordinator", "passive"))), outcome


@pytest.mark.network
@pytest.mark.parametrize("told, message", [
    ({**WIDTHS, "passive": LIE}, f"the leader 'active' announced {LIE} feature columns for this party 'passive', "
                                 f"which holds {D_B}"),
    ({"active": D_A}, "not a map of the data parties ['active', 'passive'] to ints >= 1"),
    ({**WIDTHS, "active": 0}, "not a map of the data parties"),
    ("3 columns", "not a map of the data parties"),
])
def test_a_follower_refuses_widths_it_did_not_announce_or_that_are_no_map(tmp_path, handshake_channels, told,
                                                                          message):
    spec = _spec(tmp_path)
    programs = _honest(spec, WIDTHS)
    programs["active"] = _equivocating_leader({"passive": told, "coordinator": told})
    outcome = _handshake(handshake_channels, programs)
    assert isinstance(outcome["passive"], ValueError), outcome
    assert message in str(outcome["passive"]), outcome


@pytest.mark.network
def test_vflsec_party_stops_a_job_whose_pinned_widths_differ_from_a_partys_data(tmp_path, run_parties):
    # The job file pins the widths; passive's CSV has one column more. The job
    # stops before training (the passive party at its start-up check or in the
    # handshake), no party writes a model, and the passive party names the mismatch.
    pytest.importorskip("grpc")
    pytest.importorskip("private_set_intersection.python")
    from vflsec.runtime.launch import write_local_job

    blocks, y = _blocks(40, {"active": D_A, "passive": D_B + 1})
    ids = [f"id-{i:03d}" for i in range(40)]
    frames = {"active": (ids, blocks["active"], (y > 0).astype(float)), "passive": (ids, blocks["passive"], None)}
    local = write_local_job(tmp_path, {**JOB_TABLE, "widths": WIDTHS}, frames,
                            network=dict(peer_timeout=4.0, heartbeat_interval=0.5, connect_timeout=10.0))
    status = run_parties(local, 90.0)
    assert all(rc != 0 for rc, _ in status.values()), status
    assert not [path for path in local.outputs.values() if path.exists()]
    err = status["passive"][1]
    assert f"'passive' holds {D_B + 1} feature columns" in err and "widths" in err and f"= {D_B}" in err, err
