"""One vertical GLM for every path (vflsec.glm.model): the estimator in one process and ``vflsec party``
processes over loopback gRPC train the same model from the same rows, and a message's size is the same
number in the in-memory hub and on the gRPC wire."""
from __future__ import annotations

import dataclasses
import math
import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("grpc")
pytest.importorskip("private_set_intersection.python")

from vflsec.federation.envelope import FRAME_HEADER_BYTES  # noqa: E402
from vflsec.federation.grpc_channel import GrpcChannel, InsecureTransportWarning, NetworkSettings  # noqa: E402
from vflsec.glm import VerticalLogisticRegression, get_protocol  # noqa: E402
from vflsec.glm import estimator as estimator_module  # noqa: E402
from vflsec.glm.job import PartyData  # noqa: E402
from vflsec.glm.runner import run_job  # noqa: E402
from vflsec.runtime.launch import free_ports, write_local_job  # noqa: E402

pytestmark = [pytest.mark.network, pytest.mark.slow]

NAMES = ("active", "passive1", "passive2")
WIDTHS = (3, 2, 2)


def _split(loss, n=260, n_test=90, seed=0):
    """Training and held-out rows of 3 parties. Rows of norm around 1 (so the unit-ball projection and
    the active party's smaller ball both bite), labels that are no {-1, +1}: classes 2 and 4 with a base
    rate an intercept must carry, or targets far from standardised."""
    rng = np.random.default_rng(seed)
    total = n + n_test
    blocks = [0.65 * rng.normal(size=(total, d)) for d in WIDTHS]
    theta = (blocks[0] @ np.array([1.5, -1.0, 0.5]) + blocks[1] @ np.array([0.8, 0.0])
             + blocks[2] @ np.array([0.0, -1.2]))
    if loss == "least_squares":
        y = 10.0 + 3.0 * theta + rng.normal(size=total)
    else:
        y = np.where(theta + 0.5 * rng.normal(size=total) > 0.8, 4.0, 2.0)
    train = [X[:n] for X in blocks], y[:n]
    test = [X[n:] for X in blocks], y[n:]
    return train, test


def _frames(parts, y, prefix, seed):
    """Per-party CSV rows: IDs whose sorted order is the row order (so PSI's aligned order is the
    estimator's), each party's file in its own random order."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"{prefix}{i:05d}" for i in range(len(y))])
    frames = {}
    for p, name in enumerate(NAMES):
        order = rng.permutation(len(y))
        frames[name] = (ids[order].tolist(), parts[p][order], y[order] if p == 0 else None)
    return frames


@pytest.fixture
def party_processes(tmp_path, fast_network, run_parties, party_outputs):
    """``party_processes(job_table, frames, test_frames) -> outputs``: one ``vflsec party``
    process per party, every one exiting 0."""
    def run(job_table, frames, test_frames, timeout=120.0):
        local = write_local_job(tmp_path, job_table, frames, network=fast_network, test_data=test_frames)
        return party_outputs(local, run_parties(local, timeout))

    return run


COMMON = dict(penalty="l2", lam=0.001, epochs=3, batch_size=32, k=2.0, seed=3)
CASES = {
    # (estimator parameters, extra [job] fields); the job file leaves the design at its defaults unless set here
    "plain-logistic": (dict(protection="plain", loss="logistic", lr=0.5), {}),
    "hdp-logistic": (dict(protection="hdp", loss="logistic", lr=0.5, epsilon=4.0, delta=0.01, noise_seed=11,
                          intercept_scaling=0.3), dict(intercept_scaling=0.3)),
    "plain-least-squares-no-intercept": (dict(protection="plain", loss="least_squares", lr=0.3, fit_intercept=False),
                                         dict(fit_intercept=False)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_party_processes_train_the_estimators_model(party_processes, case):
    params, design_fields = CASES[case]
    (parts, y), (test_parts, y_test) = _split(params["loss"])
    model = VerticalLogisticRegression(**COMMON, **params).fit(parts, y)

    job = dict(protocol=params["protection"], loss=params["loss"], lr=params["lr"], **COMMON,
               active=NAMES[0], passives=list(NAMES[1:]), evaluate=True, **design_fields)
    if params["protection"] == "hdp":
        job.update(epsilon=params["epsilon"], delta=params["delta"], noise_seed=params["noise_seed"])
    outputs = party_processes(job, _frames(parts, y, "r", 1), _frames(test_parts, y_test, "t", 2))

    # The same model: every party's feature weights, the intercept, the label encoding, bit for bit.
    for p, name in enumerate(NAMES):
        assert outputs[name]["n_samples"] == len(y)
        np.testing.assert_array_equal(np.array(outputs[name]["coef"]), model.coef_[p])
        if p == 0:
            assert outputs[name]["intercept"] == model.intercept_
        else:
            assert "intercept" not in outputs[name]
    if params.get("fit_intercept", True):
        assert model.intercept_ != 0.0
    else:
        assert model.intercept_ == 0.0
    active = outputs["active"]
    if params["loss"] == "least_squares":
        assert active["labels"] == {"mean": model.y_mean_, "scale": model.y_scale_} and model.y_scale_ > 2
    else:
        assert active["labels"] == {"classes": [2.0, 4.0]}
    assert active["history"]["loss"] == model.history_["loss"]
    # The same metric on the same held-out rows.
    evaluation = active["evaluation"]
    assert evaluation["n"] == len(y_test)
    assert evaluation["value"] == pytest.approx(model.score(test_parts, y_test), rel=1e-12, abs=1e-12)
    if params["loss"] == "logistic":
        assert evaluation["baseline"] == pytest.approx(max(np.mean(y_test == 2.0), np.mean(y_test == 4.0)))
    # The same privacy report per party.
    for p, name in enumerate(NAMES):
        spent = model.privacy_spent_["active" if p == 0 else f"passive_{p - 1}"]
        assert outputs[name]["privacy_spent"] == (None if spent is None else str(spent))
    if params["protection"] == "hdp":
        assert "epsilon" in active["privacy_spent"]
    # The same training bytes, per tag: the estimator's accounting is what the parties sent over gRPC.
    for tag, nbytes in model.history_["bytes_by_tag"].items():
        assert sum(out["bytes_sent_by_tag"].get(tag, 0) for out in outputs.values()) == nbytes, tag


def _capture_estimator_run(monkeypatch, protection):
    """Fit the estimator, keeping the job, the party data and the in-memory run it made."""
    captured = []

    def spy(job, data, **kw):
        out = run_job(job, data, **kw)
        captured.append((job, data, out))
        return out

    monkeypatch.setattr(estimator_module, "run_job", spy)
    (parts, y), _ = _split("logistic")
    extra = dict(epsilon=4.0, delta=0.01, noise_seed=5) if protection == "hdp" else {}
    model = VerticalLogisticRegression(protection, **COMMON, lr=0.5, **extra).fit(parts, y)
    (job, data, out), = captured
    return model, job, data, out


def _grpc_run(job, data):
    """The job's role programs, one thread per party, each over its own GrpcChannel on loopback."""
    parties = job.parties
    ports = dict(zip(parties, free_ports(len(parties))))
    settings = NetworkSettings(peer_timeout=10.0, heartbeat_interval=0.5, connect_timeout=30.0, recv_timeout=60.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureTransportWarning)
        channels = {p: GrpcChannel(p, f"127.0.0.1:{ports[p]}", {q: f"127.0.0.1:{ports[q]}" for q in parties if q != p},
                                   insecure=True, settings=settings) for p in parties}
    results, errors = {}, []

    def run(party):
        try:
            channels[party].wait_for_peers()
            results[party] = get_protocol(job.protocol).roles[job.role_of(party)](channels[party], job, data[party])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append((party, exc))
            for channel in channels.values():
                channel.fail(party, repr(exc))

    try:
        for channel in channels.values():
            channel.start()
        threads = [threading.Thread(target=run, args=(p,)) for p in parties]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not errors, errors
        return results, {p: (c.records, c.wire_bytes_sent, c.session) for p, c in channels.items()}
    finally:
        for channel in channels.values():
            channel.close(grace=0.1)


def _head_bytes(session, sender, receiver, tag):
    """Envelope head (federation/envelope.py): magic 4, version 1, kind 1, four str16 fields, seq 8."""
    return 4 + 1 + 1 + sum(2 + len(s.encode()) for s in (session, sender, receiver, tag)) + 8


@pytest.mark.parametrize("protection", ["plain", "hdp"])
def test_estimator_message_sizes_are_the_grpc_payload_bytes(monkeypatch, protection):
    model, job, data, memory = _capture_estimator_run(monkeypatch, protection)
    # The estimator's own run again over gRPC (party names a certificate can carry: passive_0 -> passive1).
    rename = {old: new for old, new in zip(job.parties, NAMES)}
    grpc_job = dataclasses.replace(job, passives=NAMES[1:], widths={rename[p]: w for p, w in job.widths.items()})
    grpc_data = {rename[p]: PartyData(d.X, d.y) for p, d in data.items()}
    results, sent = _grpc_run(grpc_job, grpc_data)
    for old, new in rename.items():
        np.testing.assert_array_equal(results[new].coef, memory.results[old].coef)

    n_checked = 0
    for old, new in rename.items():
        in_memory = [(rename[r.receiver], r.tag, r.nbytes) for r in memory.records if r.sender == old]
        records, wire_bytes, session = sent[new]
        # Per message, in order: what the estimator's hub counted is what the gRPC channel sent.
        assert [(r.receiver, r.tag, r.nbytes) for r in records] == in_memory
        # ... and it is the payload's share of the bytes that crossed gRPC: every frame is a frame header
        # and a piece of the envelope, the envelope its head and the encoded payload.
        chunk = NetworkSettings().chunk_bytes
        expected = 0
        for receiver, tag, nbytes in in_memory:
            message = _head_bytes(session, new, receiver, tag) + nbytes
            expected += max(1, math.ceil(message / chunk)) * FRAME_HEADER_BYTES + message
        assert wire_bytes == expected
        n_checked += len(in_memory)
    assert n_checked == model.history_["n_messages"] == len(memory.records) > 50
    assert sum(r.nbytes for r in memory.records) == model.history_["total_bytes"]
